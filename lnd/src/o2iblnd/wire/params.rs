//! Values shared by every o2iblnd codec: the protocol version and the connparams that
//! CONNREQ, CONNACK and rejects carry. A leaf: it depends on no other wire module.

use lnet::ByteOrder;

use super::{
    IBLND_DEFAULT_QUEUE_DEPTH, IBLND_MAX_RDMA_FRAGS, IBLND_MSG_SIZE, IBLND_MSG_VERSION_1,
    IBLND_MSG_VERSION_2,
};

/// The o2iblnd protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum Version {
    /// 0x11: queue depth fixed at 8, NOOPs cost a credit.
    V1 = IBLND_MSG_VERSION_1,
    /// 0x12: the current version, with out-of-band NOOPs and negotiated queue depth.
    V2 = IBLND_MSG_VERSION_2,
}

impl Version {
    /// The version with this wire value, if it is 0x11 or 0x12.
    pub fn from_u16(v: u16) -> Option<Version> {
        match v {
            IBLND_MSG_VERSION_1 => Some(Version::V1),
            IBLND_MSG_VERSION_2 => Some(Version::V2),
            _ => None,
        }
    }

    /// The wire value.
    pub fn to_u16(self) -> u16 {
        self as u16
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
