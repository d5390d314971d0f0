//! `peer:`: configured peers, their primary NID and their NIDs (reference 4.2).

use std::fmt;

use super::stats::{MsgStats, NiStatistics};
use crate::nid::Nid;

/// One item of `peer:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// `primary nid`.
    pub primary_nid: Nid,
    /// `Multi-Rail`.
    pub multi_rail: bool,
    /// `peer state`: the `lp_state` bitmask (full export only).
    pub peer_state: Option<u32>,
    /// `peer ni:`.
    pub peer_nis: Vec<PeerNi>,
}

/// `state:` of a peer NI.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PeerNiState {
    /// `up`.
    #[serde(rename = "up")]
    Up,
    /// `down`.
    #[serde(rename = "down")]
    Down,
    /// `NA`: not tracked (not a router).
    #[serde(rename = "NA")]
    NotApplicable,
}

impl PeerNiState {
    /// The lnetctl spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            PeerNiState::Up => "up",
            PeerNiState::Down => "down",
            PeerNiState::NotApplicable => "NA",
        }
    }
}

impl fmt::Display for PeerNiState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One item of `peer ni:`. `--backup` prints only `nid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerNi {
    /// `nid`.
    pub nid: Nid,
    /// `state`.
    pub state: Option<PeerNiState>,
    /// The credit counters, all or none.
    pub credits: Option<PeerNiCredits>,
    /// `statistics:`.
    pub statistics: Option<NiStatistics>,
    /// `sent_stats:`.
    pub sent_stats: Option<MsgStats>,
    /// `received_stats:`.
    pub received_stats: Option<MsgStats>,
    /// `dropped_stats:`.
    pub dropped_stats: Option<MsgStats>,
    /// `health stats:`.
    pub health_stats: Option<PeerNiHealthStats>,
}

impl PeerNi {
    /// A peer NI with only its NID, as `--backup` prints it.
    pub const fn new(nid: Nid) -> PeerNi {
        PeerNi {
            nid,
            state: None,
            credits: None,
            statistics: None,
            sent_stats: None,
            received_stats: None,
            dropped_stats: None,
            health_stats: None,
        }
    }
}

/// The credit counters of a peer NI (`peer show -v`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct PeerNiCredits {
    /// `max_ni_tx_credits`.
    pub max_ni_tx_credits: u32,
    /// `available_tx_credits`.
    pub available_tx_credits: u32,
    /// `min_tx_credits`.
    pub min_tx_credits: u32,
    /// `tx_q_num_of_buf`.
    pub tx_q_num_of_buf: u32,
    /// `available_rtr_credits`.
    pub available_rtr_credits: u32,
    /// `min_rtr_credits`.
    pub min_rtr_credits: u32,
    /// `refcount`.
    pub refcount: u32,
}

/// `health stats:` of a peer NI.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PeerNiHealthStats {
    /// `health value`.
    #[serde(rename = "health value")]
    pub health_value: i32,
    /// `dropped`.
    pub dropped: u32,
    /// `timeout`.
    pub timeout: u32,
    /// `error`.
    pub error: u32,
    /// `network timeout`.
    #[serde(rename = "network timeout")]
    pub network_timeout: u32,
    /// `ping_count` (newer builds).
    pub ping_count: Option<u32>,
    /// `next_ping` (newer builds).
    pub next_ping: Option<i64>,
}
