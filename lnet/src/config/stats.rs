//! Counter blocks that `lnetctl export` (without `--backup`) prints for NIs and peer NIs
//! (reference 4.1, 4.2). They are read back so that a full export parses, but `import`
//! ignores them.

/// `statistics:` of an NI or a peer NI.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct NiStatistics {
    /// `send_count`.
    pub send_count: u32,
    /// `recv_count`.
    pub recv_count: u32,
    /// `drop_count`.
    pub drop_count: u32,
    /// The latency keys that builds after 2.17.0 add (LU-20426), all or none.
    pub latency: Option<LatencyStats>,
}

/// The latency keys of `statistics:` on post-2.17.0 builds, in output order.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct LatencyStats {
    /// `put_egress_samples`.
    pub put_egress_samples: u32,
    /// `put_egress_min_nsec`.
    pub put_egress_min_nsec: u64,
    /// `put_egress_max_nsec`.
    pub put_egress_max_nsec: u64,
    /// `put_egress_avg_nsec`.
    pub put_egress_avg_nsec: u64,
    /// `get_rtt_samples`.
    pub get_rtt_samples: u32,
    /// `get_rtt_min_nsec`.
    pub get_rtt_min_nsec: u64,
    /// `get_rtt_max_nsec`.
    pub get_rtt_max_nsec: u64,
    /// `get_rtt_avg_nsec`.
    pub get_rtt_avg_nsec: u64,
    /// `put_ack_samples`.
    pub put_ack_samples: u32,
    /// `put_ack_min_nsec`.
    pub put_ack_min_nsec: u64,
    /// `put_ack_max_nsec`.
    pub put_ack_max_nsec: u64,
    /// `put_ack_avg_nsec`.
    pub put_ack_avg_nsec: u64,
}

/// `sent_stats:`, `received_stats:` or `dropped_stats:`: counts per message type.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct MsgStats {
    /// `put`.
    pub put: u32,
    /// `get`.
    pub get: u32,
    /// `reply`.
    pub reply: u32,
    /// `ack`.
    pub ack: u32,
    /// `hello`.
    pub hello: u32,
}
