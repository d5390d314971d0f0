//! Byte order of a socklnd connection.
//!
//! The HELLO and the ksock message header are written in the *sender's* byte order; the
//! receiver learns it from the HELLO magic and applies it to every later ksock header on
//! that connection (the kernel calls such a connection "flipped"). The LNet header inside a
//! frame is always little-endian and large NIDs are always big-endian: neither is affected.

/// The byte order a peer writes its HELLO and ksock headers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ByteOrder {
    /// Little-endian: every production Lustre platform, and what this codec sends.
    #[default]
    Little,
    /// Big-endian: the HELLO magic arrived byte-swapped and the connection is "flipped".
    Big,
}

impl ByteOrder {
    /// Whether a little-endian receiver must swap this peer's scalars (the kernel's "flip").
    pub const fn is_flipped(self) -> bool {
        matches!(self, ByteOrder::Big)
    }

    pub(crate) fn u32_from(self, b: [u8; 4]) -> u32 {
        match self {
            ByteOrder::Little => u32::from_le_bytes(b),
            ByteOrder::Big => u32::from_be_bytes(b),
        }
    }

    pub(crate) fn u64_from(self, b: [u8; 8]) -> u64 {
        match self {
            ByteOrder::Little => u64::from_le_bytes(b),
            ByteOrder::Big => u64::from_be_bytes(b),
        }
    }

    pub(crate) fn u32_bytes(self, v: u32) -> [u8; 4] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }

    pub(crate) fn u64_bytes(self, v: u64) -> [u8; 8] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }
}

/// The u32 at `at` in `order`, or `None` past the end.
pub(crate) fn read_u32(buf: &[u8], at: usize, order: ByteOrder) -> Option<u32> {
    let b: [u8; 4] = buf.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(order.u32_from(b))
}

/// The u64 at `at` in `order`, or `None` past the end.
pub(crate) fn read_u64(buf: &[u8], at: usize, order: ByteOrder) -> Option<u64> {
    let b: [u8; 8] = buf.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(order.u64_from(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_in_either_order_and_stops_at_the_end() {
        let b = [1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(read_u32(&b, 0, ByteOrder::Little), Some(0x0403_0201));
        assert_eq!(read_u32(&b, 0, ByteOrder::Big), Some(0x0102_0304));
        assert_eq!(read_u64(&b, 0, ByteOrder::Big), Some(0x0102_0304_0506_0708));
        assert_eq!(read_u32(&b, 5, ByteOrder::Little), None);
        assert_eq!(read_u64(&b, 1, ByteOrder::Little), None);
        assert_eq!(read_u32(&b, usize::MAX, ByteOrder::Little), None);
        assert!(ByteOrder::Big.is_flipped());
        assert!(!ByteOrder::default().is_flipped());
    }
}
