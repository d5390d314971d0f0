//! The JSON documents of the API, with their OpenAPI schemas.
//!
//! The `show` documents ([`NetShow`], [`PeerShow`], [`StatsShow`], [`GlobalShow`],
//! [`RecoveryShow`]) are the models of [`lnet::show`] exactly as they serialize: each type
//! here has the same fields under the same names, and [`from_model`] carries a model over
//! through its JSON form (unknown or missing fields are refused, so the schema and what is
//! served cannot drift apart unnoticed; the crate's tests compare the two JSON forms).

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ApiError;

/// Carries an [`lnet::show`] model over to its API document through its JSON form.
pub fn from_model<M: Serialize, D: DeserializeOwned>(model: &M) -> Result<D, ApiError> {
    let value = serde_json::to_value(model).map_err(|e| ApiError::Internal {
        message: format!("document does not serialize: {e}"),
    })?;
    serde_json::from_value(value).map_err(|e| ApiError::Internal {
        message: format!("document does not match its schema: {e}"),
    })
}

/// `lnetctl net show -v 4`: every net, `lo` first, with its local NIs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NetShow {
    /// The nets.
    pub nets: Vec<ShowNet>,
}

/// One net of `net show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowNet {
    /// `net type`: the net as lnetctl spells it (`tcp`, `o2ib1`, `lo`).
    pub net_type: String,
    /// `local NI(s)`.
    pub nis: Vec<ShowNi>,
}

/// Up or down, as `net show` prints a local NI's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum NiStatus {
    /// `up`.
    Up,
    /// `down`.
    Down,
}

/// One local NI of `net show -v 4`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowNi {
    /// `nid`.
    pub nid: String,
    /// `status`.
    pub status: NiStatus,
    /// `interfaces`, in index order.
    pub interfaces: Vec<String>,
    /// `statistics`.
    pub statistics: NiStatistics,
    /// `udsp info`.
    pub udsp: Option<UdspInfo>,
    /// `sent_stats`.
    pub sent_stats: MsgStats,
    /// `received_stats`.
    pub received_stats: MsgStats,
    /// `dropped_stats`.
    pub dropped_stats: MsgStats,
    /// `health stats`.
    pub health_stats: NiHealthStats,
    /// `tunables`.
    pub tunables: NiTunables,
    /// `lnd tunables` (none for `lo`).
    pub lnd_tunables: Option<LndTunables>,
    /// `dev cpt`.
    pub dev_cpt: i32,
    /// `CPT`: the CPTs of the NI.
    pub cpt: Vec<u32>,
}

/// `statistics:` of an NI or peer NI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NiStatistics {
    /// `send_count`.
    pub send_count: u32,
    /// `recv_count`.
    pub recv_count: u32,
    /// `drop_count`.
    pub drop_count: u32,
    /// The latency keys (newer lnetctl).
    pub latency: Option<LatencyStats>,
}

/// The latency keys of `statistics:`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the names are lnetctl's
pub struct LatencyStats {
    pub put_egress_samples: u32,
    pub put_egress_min_nsec: u64,
    pub put_egress_max_nsec: u64,
    pub put_egress_avg_nsec: u64,
    pub get_rtt_samples: u32,
    pub get_rtt_min_nsec: u64,
    pub get_rtt_max_nsec: u64,
    pub get_rtt_avg_nsec: u64,
    pub put_ack_samples: u32,
    pub put_ack_min_nsec: u64,
    pub put_ack_max_nsec: u64,
    pub put_ack_avg_nsec: u64,
}

/// `udsp info:`: the priorities selection rules gave (-1: no rule) and the preferred
/// lists, when not empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UdspInfo {
    /// `net priority`.
    pub net_priority: i32,
    /// `nid priority`.
    pub nid_priority: i32,
    /// `Preferred gateway NIDs` (left out when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_gateways: Vec<String>,
    /// `Preferred source NIDs` (left out when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_sources: Vec<String>,
}

/// `sent_stats:`, `received_stats:`, `dropped_stats:`: messages by type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the names are lnetctl's
pub struct MsgStats {
    pub put: u32,
    pub get: u32,
    pub reply: u32,
    pub ack: u32,
    pub hello: u32,
}

/// `health stats:` of a local NI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NiHealthStats {
    /// `fatal_error`.
    pub fatal_error: i32,
    /// `health value` (0..=1000).
    #[serde(rename = "health value")]
    pub health_value: i32,
    /// LOCAL_INTERRUPT failures.
    pub interrupts: u32,
    /// LOCAL_DROPPED failures.
    pub dropped: u32,
    /// LOCAL_ABORTED failures.
    pub aborted: u32,
    /// LOCAL_NO_ROUTE failures.
    #[serde(rename = "no route")]
    pub no_route: u32,
    /// LOCAL_TIMEOUT failures.
    pub timeouts: u32,
    /// LOCAL_ERROR failures.
    pub error: u32,
    /// `ping_count`.
    pub ping_count: Option<u32>,
    /// `next_ping` (seconds).
    pub next_ping: Option<u64>,
}

/// `tunables:` of a local NI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the names are lnetctl's
pub struct NiTunables {
    pub peer_timeout: i32,
    pub peer_credits: i32,
    pub peer_buffer_credits: i32,
    pub credits: i32,
}

/// `lnd tunables:` of a local NI (the keys its LND has).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the names are lnetctl's
pub struct LndTunables {
    pub peercredits_hiw: Option<u32>,
    pub concurrent_sends: Option<u32>,
    pub map_on_demand: Option<bool>,
    pub fmr_pool_size: Option<u32>,
    pub fmr_flush_trigger: Option<u32>,
    pub fmr_cache: Option<u32>,
    pub ntx: Option<u16>,
    pub conns_per_peer: Option<u16>,
    pub timeout: Option<u32>,
    pub tos: Option<i16>,
}

/// `lnetctl peer show -v 4`: every peer with its peer NIs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PeerShow {
    /// The peers.
    pub peers: Vec<ShowPeer>,
}

/// One peer of `peer show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowPeer {
    /// `primary nid`.
    pub primary_nid: String,
    /// `Multi-Rail`.
    pub multi_rail: bool,
    /// `peer state` (bitmask).
    pub peer_state: u32,
    /// `peer ni`.
    pub nis: Vec<ShowPeerNi>,
}

/// A peer NI's `state`: `up`, `down`, or `NA` (not a router).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum PeerNiState {
    /// `up`.
    #[serde(rename = "up")]
    Up,
    /// `down`.
    #[serde(rename = "down")]
    Down,
    /// `NA`.
    #[serde(rename = "NA")]
    NotApplicable,
}

/// One peer NI of `peer show -v 4`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowPeerNi {
    /// `nid`.
    pub nid: String,
    /// `udsp info`.
    pub udsp: Option<UdspInfo>,
    /// `state`.
    pub state: PeerNiState,
    /// The credit keys.
    pub credits: PeerNiCredits,
    /// `statistics`.
    pub statistics: NiStatistics,
    /// `sent_stats`.
    pub sent_stats: MsgStats,
    /// `received_stats`.
    pub received_stats: MsgStats,
    /// `dropped_stats`.
    pub dropped_stats: MsgStats,
    /// `health stats`.
    pub health_stats: PeerNiHealthStats,
}

/// The credit keys of a peer NI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the names are lnetctl's
pub struct PeerNiCredits {
    pub max_ni_tx_credits: u32,
    pub available_tx_credits: u32,
    pub min_tx_credits: u32,
    pub tx_q_num_of_buf: u32,
    pub available_rtr_credits: u32,
    pub min_rtr_credits: u32,
    pub refcount: u32,
}

/// `health stats:` of a peer NI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PeerNiHealthStats {
    /// `health value` (0..=1000).
    #[serde(rename = "health value")]
    pub health_value: i32,
    /// REMOTE_DROPPED failures.
    pub dropped: u32,
    /// REMOTE_TIMEOUT failures.
    pub timeout: u32,
    /// REMOTE_ERROR failures.
    pub error: u32,
    /// NETWORK_TIMEOUT failures.
    #[serde(rename = "network timeout")]
    pub network_timeout: u32,
    /// `ping_count`.
    pub ping_count: Option<u32>,
    /// `next_ping`.
    pub next_ping: Option<i64>,
}

/// `lnetctl stats show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the names are lnetctl's
pub struct StatsShow {
    pub msgs_alloc: u64,
    pub msgs_max: u64,
    pub rst_alloc: u64,
    pub errors: u64,
    pub send_count: u64,
    pub resend_count: u64,
    pub response_timeout_count: u64,
    pub local_interrupt_count: u64,
    pub local_dropped_count: u64,
    pub local_aborted_count: u64,
    pub local_no_route_count: u64,
    pub local_timeout_count: u64,
    pub local_error_count: u64,
    pub remote_dropped_count: u64,
    pub remote_error_count: u64,
    pub remote_timeout_count: u64,
    pub network_timeout_count: u64,
    pub failed_resends: Option<u64>,
    pub successful_resends: Option<u64>,
    pub recv_count: u64,
    pub route_count: u64,
    pub drop_count: u64,
    pub send_length: u64,
    pub recv_length: u64,
    pub route_length: u64,
    pub drop_length: u64,
}

/// `lnetctl global show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobalShow {
    /// `global:`.
    pub global: Global,
}

/// The 13 keys of `global:` (`lnd_timeout` is derived and cannot be set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the names are lnetctl's
pub struct Global {
    pub numa_range: Option<u32>,
    pub max_interfaces: Option<u32>,
    pub discovery: Option<u32>,
    pub drop_asym_route: Option<u32>,
    pub retry_count: Option<u32>,
    pub transaction_timeout: Option<u32>,
    pub health_sensitivity: Option<u32>,
    pub recovery_interval: Option<u32>,
    pub router_sensitivity: Option<u32>,
    pub lnd_timeout: Option<u32>,
    pub response_tracking: Option<u32>,
    pub recovery_limit: Option<u32>,
    pub max_recovery_ping_interval: Option<u32>,
}

/// Which recovery queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum RecoveryKind {
    /// Local NIs.
    Local,
    /// Peer NIs.
    Peer,
}

/// `lnetctl debug recovery --local|--peer`: the NIDs on a queue, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoveryShow {
    /// The queue.
    pub kind: RecoveryKind,
    /// Its NIDs in queue order (`nid-0`, `nid-1`, ...).
    pub nids: Vec<String>,
}
