//! The sender's byte order.
//!
//! o2iblnd sends the `kib_msg` header, RDMA descriptors, completion status, connparams and
//! `kib_rej` in the sender's native byte order; the receiver tells which from the magic.
//! The embedded LNet header is always little-endian and cookies are never swapped.

use super::IBLND_MSG_MAGIC;

/// The byte order a message was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ByteOrder {
    /// Little-endian (x86, ARM): what this codec writes.
    #[default]
    Little,
    /// Big-endian (for example POWER in big-endian mode): the magic reads byte-swapped.
    Big,
}

impl ByteOrder {
    /// The byte order a message starting with `magic_bytes` was written in, if the bytes
    /// are `magic` in either order.
    pub fn detect(magic_bytes: [u8; 4], magic: u32) -> Option<ByteOrder> {
        if u32::from_le_bytes(magic_bytes) == magic {
            Some(ByteOrder::Little)
        } else if u32::from_be_bytes(magic_bytes) == magic {
            Some(ByteOrder::Big)
        } else {
            None
        }
    }

    /// The byte order of an o2ib message or reject, from its first four bytes.
    pub fn of_o2ib(magic_bytes: [u8; 4]) -> Option<ByteOrder> {
        ByteOrder::detect(magic_bytes, IBLND_MSG_MAGIC)
    }

    /// Reads a `u16` at `at`, if the buffer holds it.
    pub(crate) fn u16_at(self, buf: &[u8], at: usize) -> Option<u16> {
        let b: [u8; 2] = buf.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(match self {
            ByteOrder::Little => u16::from_le_bytes(b),
            ByteOrder::Big => u16::from_be_bytes(b),
        })
    }

    /// Reads a `u32` at `at`, if the buffer holds it.
    pub(crate) fn u32_at(self, buf: &[u8], at: usize) -> Option<u32> {
        let b: [u8; 4] = buf.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(match self {
            ByteOrder::Little => u32::from_le_bytes(b),
            ByteOrder::Big => u32::from_be_bytes(b),
        })
    }

    /// Reads a `u64` at `at`, if the buffer holds it.
    pub(crate) fn u64_at(self, buf: &[u8], at: usize) -> Option<u64> {
        let b: [u8; 8] = buf.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(match self {
            ByteOrder::Little => u64::from_le_bytes(b),
            ByteOrder::Big => u64::from_be_bytes(b),
        })
    }

    /// Writes a `u32` at `at` if the buffer holds it; returns whether it did.
    pub(crate) fn put_u32_at(self, buf: &mut [u8], at: usize, v: u32) -> bool {
        let bytes = match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        };
        match at.checked_add(4).and_then(|end| buf.get_mut(at..end)) {
            Some(dst) => {
                dst.copy_from_slice(&bytes);
                true
            }
            None => false,
        }
    }
}

/// The first four bytes of `buf`, if it has them.
pub(crate) fn first_word(buf: &[u8]) -> Option<[u8; 4]> {
    buf.get(..4)?.try_into().ok()
}

/// Reads a little-endian `u64` at `at` (cookies, which are never swapped).
pub(crate) fn le_u64_at(buf: &[u8], at: usize) -> Option<u64> {
    ByteOrder::Little.u64_at(buf, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_both_orders() {
        assert_eq!(
            ByteOrder::of_o2ib([0x91, 0x1b, 0xe9, 0x0b]),
            Some(ByteOrder::Little)
        );
        assert_eq!(
            ByteOrder::of_o2ib([0x0b, 0xe9, 0x1b, 0x91]),
            Some(ByteOrder::Big)
        );
        assert_eq!(ByteOrder::of_o2ib([0x63, 0x69, 0x72, 0x45]), None);
    }

    #[test]
    fn reads_and_writes_without_panicking() {
        let buf = [1u8, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(ByteOrder::Little.u16_at(&buf, 0), Some(0x0201));
        assert_eq!(ByteOrder::Big.u16_at(&buf, 0), Some(0x0102));
        assert_eq!(ByteOrder::Big.u32_at(&buf, 4), Some(0x0506_0708));
        assert_eq!(ByteOrder::Big.u64_at(&buf, 0), Some(0x0102_0304_0506_0708));
        assert_eq!(ByteOrder::Little.u64_at(&buf, 1), None);
        assert_eq!(ByteOrder::Little.u32_at(&buf, usize::MAX - 1), None);
        let mut out = [0u8; 6];
        assert!(ByteOrder::Big.put_u32_at(&mut out, 2, 0x0a0b_0c0d));
        assert_eq!(out, [0, 0, 0x0a, 0x0b, 0x0c, 0x0d]);
        assert!(!ByteOrder::Little.put_u32_at(&mut out, 3, 1));
    }
}
