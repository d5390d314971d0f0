//! The configuration model: the YAML that `lnetctl export [--backup]` writes and
//! `lnetctl import` reads (health reference 4.9), plus one section of our own,
//! `lnet-router:`, for what lnetctl has no key for.
//!
//! [`parse`] reads the text into a typed [`Config`] (NIDs and nets are [`Nid`](crate::Nid)
//! and [`Net`](crate::Net) values, global tunables are range-checked with the rules of
//! [`crate::tunables`]); [`Config::to_yaml`] prints it back with lnetctl's keys, key order
//! and layout: the netlink/libyaml layout (`-     key`, indent 6) for `net:`, `route:` and
//! `peer:`, the cYAML layout (indent 4) for `routing:`, `buffers:`, `global:` and `udsp:`
//! (reference 4.0). [`validate`] is a separate pure check of the parsed model (duplicate
//! peer NIDs, routes to local nets, gateways off the local nets, hop ranges, tunables).
//!
//! Unknown keys are errors, and every error names the key or field and its line and
//! column ([`ConfigError`], [`ValidationError`]).
//!
//! # The YAML crate
//!
//! Parsing goes through serde with [`serde-saphyr`](https://crates.io/crates/serde-saphyr):
//! it is actively maintained, written in safe Rust on a pure-Rust parser and fuzzed not to
//! panic on malformed input, its errors are a typed enum with locations (unknown field,
//! missing field, duplicate key, wrong type are separate variants, so no error text is
//! parsed here), and its `Spanned<T>` wrapper gives the line and column of each value, which
//! our own checks (NIDs, nets, tunables) put in their errors. The alternatives were the
//! deprecated `serde_yaml`, its forks `serde_yaml_ng` (still on the unmaintained
//! `unsafe-libyaml`) and `serde_norway` (a maintained libyaml translation in unsafe code, no
//! per-value spans), and `yaml-rust2` (a parser without serde support). It is used with
//! only its `deserialize` feature. Note that it declares Rust 1.89 as its minimum, above the
//! workspace's declared 1.85. No serde serializer reproduces lnetctl's layout, so printing is
//! done by a small writer in this module.

mod error;
mod exec;
mod global;
mod net;
mod peer;
pub(crate) mod print;
pub(crate) mod raw;
mod route;
mod router;
mod stats;
mod udsp;
mod validate;
pub(crate) mod yaml;

#[cfg(test)]
mod tests;

pub use error::{ConfigError, Position, ValidationError};
pub use exec::{parse_exec, ExecCommand, DEFAULT_PING_TIMEOUT_MS};
pub use global::{BufferPool, Buffers, CptBuffers, Global, Routing, RoutingState};
pub use net::{Cpts, LndTunables, LocalNi, NetConfig, NiHealthStats, NiStatus, NiTunables};
pub use peer::{Peer, PeerNi, PeerNiCredits, PeerNiHealthStats, PeerNiState};
pub use route::{Route, RouteState, RouteType, HOP_UNDEFINED};
pub use router::{NetCheckSetting, RouterSection};
pub use stats::{LatencyStats, MsgStats, NiStatistics};
pub use udsp::UdspRule;
pub use validate::validate;

use crate::tunables::{TunableError, TunableName, Tunables};

/// One `lnetctl export` document (with or without `--backup`), plus the `lnet-router:`
/// section. Empty lists and `None` sections are not printed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// `net:`: the local nets and their NIs.
    pub nets: Vec<NetConfig>,
    /// `route:`: the remote nets and their gateways.
    pub routes: Vec<Route>,
    /// `peer:`: configured peers and their NIDs.
    pub peers: Vec<Peer>,
    /// `routing:`: whether this node forwards, and (in the `routing show` form) its pools.
    pub routing: Option<Routing>,
    /// `buffers:`: the router buffer counts.
    pub buffers: Option<Buffers>,
    /// `global:`: the global tunables.
    pub global: Option<Global>,
    /// `udsp:`: selection policy rules, in list order.
    pub udsp: Vec<UdspRule>,
    /// `lnet-router:`: settings lnetctl has no key for.
    pub router: Option<RouterSection>,
}

/// Parses an `lnetctl export` / `import` YAML document.
///
/// Checks the shape (no unknown keys, right types), NIDs, nets and the range of each global
/// tunable on its own; relations between values are checked by [`validate`].
pub fn parse(text: &str) -> Result<Config, ConfigError> {
    raw::parse(text)
}

impl Config {
    /// The document in lnetctl's layout, key order and spelling.
    pub fn to_yaml(&self) -> String {
        print::to_yaml(self)
    }

    /// The global tunables this document sets, applied over the kernel defaults with the
    /// rules of `lnetctl set` (reference 2.10): `global:`, `buffers:` and `routing:`.
    ///
    /// `lnd_timeout` is derived by LNet and ignored, as `lnetctl import` does.
    pub fn tunables(&self) -> Result<Tunables, TunableError> {
        let mut t = Tunables::default();
        if let Some(global) = &self.global {
            global.apply(&mut t)?;
        }
        if let Some(b) = &self.buffers {
            for (name, v) in [
                (TunableName::TinyBuffers, b.tiny),
                (TunableName::SmallBuffers, b.small),
                (TunableName::LargeBuffers, b.large),
            ] {
                if let Some(v) = v {
                    t.set(name, i64::from(v))?;
                }
            }
        }
        if let Some(r) = &self.routing {
            t.set(TunableName::Routing, i64::from(r.enable.forwards()))?;
        }
        Ok(t)
    }
}
