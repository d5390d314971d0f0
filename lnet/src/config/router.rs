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
    /// `alive_router_check_interval`: seconds between pings of each gateway (the lnet
    /// module parameter; 0 disables the router checker).
    pub alive_router_check_interval: Option<u32>,
    /// `router_ping_timeout`: seconds a gateway ping waits for its reply.
    pub router_ping_timeout: Option<u32>,
    /// `avoid_asym_router_failure`: 0 or 1.
    pub avoid_asym_router_failure: Option<u32>,
    /// `check_routers_before_use`: 0 or 1.
    pub check_routers_before_use: Option<u32>,
    /// `net_check`: how this router decides a local net went silent.
    pub net_check: Option<NetCheckSetting>,
    /// `net_probe_interval_ms`: silence before an active probe of a net, milliseconds.
    pub net_probe_interval_ms: Option<u64>,
    /// `net_down_after_ms`: silence after which a net is advertised DOWN, milliseconds
    /// (active mode; the passive mode uses interval + ping timeout, as the kernel).
    pub net_down_after_ms: Option<u64>,
}

/// `net_check:` of the `lnet-router:` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetCheckSetting {
    /// `active`: probe silent nets (the default).
    Active,
    /// `passive`: the kernel's rule (DOWN after interval + ping timeout without a ping).
    Passive,
    /// `off`: never DOWN for silence.
    Off,
}

impl NetCheckSetting {
    /// The spelling in the file.
    pub const fn as_str(self) -> &'static str {
        match self {
            NetCheckSetting::Active => "active",
            NetCheckSetting::Passive => "passive",
            NetCheckSetting::Off => "off",
        }
    }

    /// The setting for a spelling.
    pub fn parse(s: &str) -> Option<NetCheckSetting> {
        match s {
            "active" => Some(NetCheckSetting::Active),
            "passive" => Some(NetCheckSetting::Passive),
            "off" => Some(NetCheckSetting::Off),
            _ => None,
        }
    }
}

impl std::fmt::Display for NetCheckSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RouterSection {
    /// The acceptor port, [`ACCEPTOR_PORT`] (988) when not given.
    pub fn acceptor_port_or_default(&self) -> u16 {
        self.acceptor_port.unwrap_or(ACCEPTOR_PORT)
    }
}
