//! Connection set-up facts: the connparams carried by CONNREQ, CONNACK and rejects, the
//! RDMA-CM connect parameters, and the connection-race tie-break.
//!
//! The active side sends a 56-byte CONNREQ as the private data of `rdma_connect`; the
//! passive side answers with a CONNACK as the private data of `rdma_accept`, or refuses with
//! a `kib_rej` (see [`super::rej`]).

use lnet::{ByteOrder, Nid};

use super::{IBLND_DEFAULT_QUEUE_DEPTH, IBLND_MAX_RDMA_FRAGS, IBLND_MSG_SIZE};

/// Bytes of `kib_connparams` on the wire.
pub const CONN_PARAMS_BYTES: usize = 8;

/// `kib_connparams`: what one side offers or accepts for a connection. Packed: queue_depth
/// u16 @0, max_frags u16 @2, max_msg_size u32 @4, in the sender's byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnParams {
    /// Receive queue depth: the credits each side starts with.
    pub queue_depth: u16,
    /// Most RDMA fragments (and RDMA WRs per transfer) the side handles.
    pub max_frags: u16,
    /// Largest message the side receives.
    pub max_msg_size: u32,
}

impl ConnParams {
    /// What a kernel with default tunables offers: queue depth 8, 257 fragments, 4096 bytes.
    pub const DEFAULT: ConnParams = ConnParams {
        queue_depth: IBLND_DEFAULT_QUEUE_DEPTH,
        max_frags: IBLND_MAX_RDMA_FRAGS,
        // 4096 fits in a u32.
        max_msg_size: IBLND_MSG_SIZE as u32,
    };

    /// Decodes the 8 bytes of a connparams written in `order`.
    pub fn from_bytes(bytes: [u8; CONN_PARAMS_BYTES], order: ByteOrder) -> ConnParams {
        ConnParams {
            queue_depth: order.u16_at(&bytes, 0).unwrap_or_default(),
            max_frags: order.u16_at(&bytes, 2).unwrap_or_default(),
            max_msg_size: order.u32_at(&bytes, 4).unwrap_or_default(),
        }
    }

    /// The 8 bytes of this connparams, little-endian.
    pub fn to_le_bytes(&self) -> [u8; CONN_PARAMS_BYTES] {
        let mut out = [0u8; CONN_PARAMS_BYTES];
        let (qd, rest) = out.split_at_mut(2);
        let (mf, ms) = rest.split_at_mut(2);
        qd.copy_from_slice(&self.queue_depth.to_le_bytes());
        mf.copy_from_slice(&self.max_frags.to_le_bytes());
        ms.copy_from_slice(&self.max_msg_size.to_le_bytes());
        out
    }
}

impl Default for ConnParams {
    fn default() -> ConnParams {
        ConnParams::DEFAULT
    }
}

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
    fn connparams_layout_both_orders() {
        let cp = ConnParams {
            queue_depth: 0x0102,
            max_frags: 0x0304,
            max_msg_size: 0x0506_0708,
        };
        let le = cp.to_le_bytes();
        assert_eq!(le, [2, 1, 4, 3, 8, 7, 6, 5]);
        assert_eq!(ConnParams::from_bytes(le, ByteOrder::Little), cp);
        assert_eq!(
            ConnParams::from_bytes([1, 2, 3, 4, 5, 6, 7, 8], ByteOrder::Big),
            cp
        );
        assert_eq!(
            ConnParams::default().to_le_bytes(),
            [8, 0, 0x01, 0x01, 0, 0x10, 0, 0]
        );
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
