//! Connection set-up facts: the connparams carried by CONNREQ, CONNACK and rejects, the
//! RDMA-CM connect parameters, and the connection-race tie-break.
//!
//! The active side sends a 56-byte CONNREQ as the private data of `rdma_connect`; the
//! passive side answers with a CONNACK as the private data of `rdma_accept`, or refuses with
//! a `kib_rej` (see [`super::rej`]).

use lnet::Nid;

/// The `rdma_conn_param` values ko2iblnd uses on both `rdma_connect` and `rdma_accept`
/// (besides the private data, which is the packed CONNREQ or CONNACK and whose length is
/// its `ibm_nob`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RdmaCmParams {
    /// Outstanding RDMA READ/atomic requests the peer may issue to us: 0, o2iblnd never
    /// uses RDMA READ.
    pub responder_resources: u8,
    /// Outstanding RDMA READ/atomic requests we issue: 0.
    pub initiator_depth: u8,
    /// Hardware end-to-end flow control: 1.
    pub flow_control: u8,
    /// Transport retries on timeout (module parameter `retry_count`, default 5).
    pub retry_count: u8,
    /// Retries after a receiver-not-ready NAK (module parameter `rnr_retry_count`,
    /// default 6). Peers should use 6 or more, since receive buffers are finite.
    pub rnr_retry_count: u8,
}

impl RdmaCmParams {
    /// The kernel defaults, as captured: responder_resources 0, initiator_depth 0,
    /// flow_control 1, retry_count 5, rnr_retry_count 6.
    pub const DEFAULT: RdmaCmParams = RdmaCmParams {
        responder_resources: 0,
        initiator_depth: 0,
        flow_control: 1,
        retry_count: 5,
        rnr_retry_count: 6,
    };
}

impl Default for RdmaCmParams {
    fn default() -> RdmaCmParams {
        RdmaCmParams::DEFAULT
    }
}

/// The connection-race tie-break of Lustre ≥ 2.16 (LU-17743).
///
/// When a CONNREQ arrives from `requester` while this node (`me`) is itself still
/// connecting to it, the passive side refuses the request with CONN_RACE if
/// `nidhash(requester) < nidhash(me)`; this returns `true` in exactly that case (the
/// requester loses). The caller applies the rest of the rule: only while its own connect is
/// in progress, and at most [`super::MAX_CONN_RACES_BEFORE_ABORT`] times per peer, after
/// which the lower NID is let through.
///
/// 2.15 compared plain 64-bit NIDs instead, so mixed 2.15 ↔ ≥ 2.16 pairs can disagree.
pub fn race_loser(requester: Nid, me: Nid) -> bool {
    requester.nidhash() < me.nidhash()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lnet::{LndType, Net};
    use std::net::Ipv4Addr;

    fn o2ib(ip: [u8; 4]) -> Nid {
        Nid::from_ipv4(Net::new(LndType::O2IBLND, 0), Ipv4Addr::from(ip))
    }

    #[test]
    fn rdma_cm_defaults() {
        let p = RdmaCmParams::default();
        assert_eq!(
            (
                p.responder_resources,
                p.initiator_depth,
                p.flow_control,
                p.retry_count,
                p.rnr_retry_count
            ),
            (0, 0, 1, 5, 6)
        );
    }

    #[test]
    fn race_uses_nidhash_not_nid4() {
        let a = o2ib([10, 0, 0, 1]);
        let b = o2ib([10, 0, 0, 2]);
        // nidhash = net id ^ byte-swapped address.
        assert_eq!(a.nidhash(), 0x0005_0000 ^ 0x0100_000a);
        assert_eq!(b.nidhash(), 0x0005_0000 ^ 0x0200_000a);
        assert!(race_loser(a, b));
        assert!(!race_loser(b, a));
        assert!(!race_loser(a, a));

        // 10.0.1.1 is the larger nid4 but the smaller nidhash: under the ≥2.16 rule it
        // loses against 10.0.0.2, where 2.15 would have let it win.
        let c = o2ib([10, 0, 1, 1]);
        assert!(c.to_nid4().unwrap() > b.to_nid4().unwrap());
        assert!(race_loser(c, b));
        assert!(!race_loser(b, c));
    }
}
