//! `net:`: local nets, their NIs, NI and LND tunables (reference 4.1, 4.9).

use std::fmt;

use super::stats::{MsgStats, NiStatistics};
use crate::nid::{Net, Nid};

/// One item of `net:`: a local net and its NIs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetConfig {
    /// `net type`.
    pub net_type: Net,
    /// `local NI(s)`.
    pub local_nis: Vec<LocalNi>,
}

/// `up` / `down`, as `net show` prints an NI's `status`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NiStatus {
    /// `up`.
    Up,
    /// `down`.
    Down,
}

impl NiStatus {
    /// The lnetctl spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            NiStatus::Up => "up",
            NiStatus::Down => "down",
        }
    }
}

impl fmt::Display for NiStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One item of `local NI(s):`. `--backup` prints only `interfaces`, `tunables`,
/// `lnd tunables` and `CPT`; the other fields come from a full export.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LocalNi {
    /// `nid`.
    pub nid: Option<Nid>,
    /// `status`.
    pub status: Option<NiStatus>,
    /// `interfaces:`, `0: IFNAME` ...; empty when absent.
    pub interfaces: Vec<String>,
    /// `statistics:`.
    pub statistics: Option<NiStatistics>,
    /// `sent_stats:`.
    pub sent_stats: Option<MsgStats>,
    /// `received_stats:`.
    pub received_stats: Option<MsgStats>,
    /// `dropped_stats:`.
    pub dropped_stats: Option<MsgStats>,
    /// `health stats:`.
    pub health_stats: Option<NiHealthStats>,
    /// `tunables:`.
    pub tunables: Option<NiTunables>,
    /// `lnd tunables:`.
    pub lnd_tunables: Option<LndTunables>,
    /// `dev cpt`.
    pub dev_cpt: Option<i32>,
    /// `CPT`.
    pub cpt: Option<Cpts>,
}

/// `health stats:` of a local NI.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct NiHealthStats {
    /// `fatal_error`.
    pub fatal_error: i32,
    /// `health value`.
    #[serde(rename = "health value")]
    pub health_value: i32,
    /// `interrupts`.
    pub interrupts: u32,
    /// `dropped`.
    pub dropped: u32,
    /// `aborted`.
    pub aborted: u32,
    /// `no route`.
    #[serde(rename = "no route")]
    pub no_route: u32,
    /// `timeouts`.
    pub timeouts: u32,
    /// `error`.
    pub error: u32,
    /// `ping_count` (newer builds).
    pub ping_count: Option<u32>,
    /// `next_ping`, seconds (newer builds).
    pub next_ping: Option<u64>,
}

/// `tunables:` of a local NI.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct NiTunables {
    /// `peer_timeout`, seconds.
    pub peer_timeout: i32,
    /// `peer_credits`.
    pub peer_credits: i32,
    /// `peer_buffer_credits`.
    pub peer_buffer_credits: i32,
    /// `credits`.
    pub credits: i32,
}

/// `lnd tunables:`, each key optional (socklnd has only `conns_per_peer` and `tos`),
/// printed in this order.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct LndTunables {
    /// `peercredits_hiw` (o2ib).
    pub peercredits_hiw: Option<u32>,
    /// `concurrent_sends` (o2ib).
    pub concurrent_sends: Option<u32>,
    /// `map_on_demand` (o2ib), a flag.
    pub map_on_demand: Option<bool>,
    /// `fmr_pool_size` (o2ib).
    pub fmr_pool_size: Option<u32>,
    /// `fmr_flush_trigger` (o2ib).
    pub fmr_flush_trigger: Option<u32>,
    /// `fmr_cache` (o2ib).
    pub fmr_cache: Option<u32>,
    /// `ntx` (o2ib).
    pub ntx: Option<u16>,
    /// `conns_per_peer`.
    pub conns_per_peer: Option<u16>,
    /// `timeout` (o2ib; not in `--backup`).
    pub timeout: Option<u32>,
    /// `tos` (-1: unset).
    pub tos: Option<i16>,
}

/// `CPT: "[0,1]"`: the CPU partitions of an NI.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Cpts(pub Vec<u32>);

impl fmt::Display for Cpts {
    /// `[0,1]`, without the quotes the YAML adds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, c) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{c}")?;
        }
        f.write_str("]")
    }
}

impl Cpts {
    /// Parses `[0,1]` (spaces allowed after commas); `None` if malformed.
    pub fn parse(text: &str) -> Option<Cpts> {
        let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?.trim();
        if inner.is_empty() {
            return Some(Cpts(Vec::new()));
        }
        inner
            .split(',')
            .map(|p| {
                let p = p.trim();
                if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                    None
                } else {
                    p.parse().ok()
                }
            })
            .collect::<Option<Vec<u32>>>()
            .map(Cpts)
    }
}
