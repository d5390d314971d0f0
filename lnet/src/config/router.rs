//! `lnet-router:`: settings of this router that lnetctl has no key for.

use std::net::IpAddr;

use crate::acceptor::ACCEPTOR_PORT;

/// The `lnet-router:` section, printed in cYAML layout after the lnetctl sections:
///
/// ```yaml
/// lnet-router:
///     acceptor_address: 0.0.0.0
///     acceptor_port: 988
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouterSection {
    /// `acceptor_address`: the address the acceptor listens on.
    pub acceptor_address: Option<IpAddr>,
    /// `acceptor_port`: the TCP port the acceptor listens on.
    pub acceptor_port: Option<u16>,
}

impl RouterSection {
    /// The acceptor port, [`ACCEPTOR_PORT`] (988) when not given.
    pub fn acceptor_port_or_default(&self) -> u16 {
        self.acceptor_port.unwrap_or(ACCEPTOR_PORT)
    }
}
