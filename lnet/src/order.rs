//! The sender's byte order, and bounds-checked scalar readers and writers that apply it.
//!
//! Several LNet structures are written in the *sender's* native byte order and carry a
//! magic that tells the receiver which one it was: the acceptor request, ping and push
//! info, the socklnd HELLO and ksock header, the o2iblnd `kib_msg` and `kib_rej`. A
//! receiver that reads the magic byte-swapped swaps every scalar after it (the kernel
//! calls such a peer "flipped"). [`ByteOrder::detect`] tells the order from the first four
//! bytes; the readers and writers here then apply it.
//!
//! Two things are never in sender order and are not affected: the LNet header is always
//! little-endian, and large (20-byte) NIDs are always big-endian (network order).
//!
//! Nothing here panics: a read or write that does not fit in the buffer (including an
//! offset so large that it overflows) gives `None` or `false`.

/// The byte order a sender wrote its scalars in, as told by a magic.
///
/// The LNet header (always little-endian) and large NIDs (always big-endian) do not follow
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ByteOrder {
    /// Little-endian: every production Lustre platform (x86, ARM), and what this project's
    /// encoders write.
    #[default]
    Little,
    /// Big-endian (for example POWER in big-endian mode): the magic arrived byte-swapped
    /// and the peer is "flipped".
    Big,
}

impl ByteOrder {
    /// The byte order of a structure whose first four bytes are `first4`, if they are
    /// `magic` in either order. Little-endian wins if `magic` reads the same both ways.
    pub const fn detect(first4: [u8; 4], magic: u32) -> Option<ByteOrder> {
        if u32::from_le_bytes(first4) == magic {
            Some(ByteOrder::Little)
        } else if u32::from_be_bytes(first4) == magic {
            Some(ByteOrder::Big)
        } else {
            None
        }
    }

    /// Whether a little-endian receiver must swap this sender's scalars (the kernel's
    /// "flip").
    pub const fn is_flipped(self) -> bool {
        matches!(self, ByteOrder::Big)
    }

    /// The `u16` that `b` encodes in this order.
    pub const fn u16_from_bytes(self, b: [u8; 2]) -> u16 {
        match self {
            ByteOrder::Little => u16::from_le_bytes(b),
            ByteOrder::Big => u16::from_be_bytes(b),
        }
    }

    /// The `u32` that `b` encodes in this order.
    pub const fn u32_from_bytes(self, b: [u8; 4]) -> u32 {
        match self {
            ByteOrder::Little => u32::from_le_bytes(b),
            ByteOrder::Big => u32::from_be_bytes(b),
        }
    }

    /// The `u64` that `b` encodes in this order.
    pub const fn u64_from_bytes(self, b: [u8; 8]) -> u64 {
        match self {
            ByteOrder::Little => u64::from_le_bytes(b),
            ByteOrder::Big => u64::from_be_bytes(b),
        }
    }

    /// The bytes of `v` in this order.
    pub const fn u16_to_bytes(self, v: u16) -> [u8; 2] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }

    /// The bytes of `v` in this order.
    pub const fn u32_to_bytes(self, v: u32) -> [u8; 4] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }

    /// The bytes of `v` in this order.
    pub const fn u64_to_bytes(self, v: u64) -> [u8; 8] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }

    /// The `u16` at offset `at` of `buf` in this order, or `None` if `buf` does not hold it.
    pub fn u16_at(self, buf: &[u8], at: usize) -> Option<u16> {
        bytes_at(buf, at).map(|b| self.u16_from_bytes(b))
    }

    /// The `u32` at offset `at` of `buf` in this order, or `None` if `buf` does not hold it.
    pub fn u32_at(self, buf: &[u8], at: usize) -> Option<u32> {
        bytes_at(buf, at).map(|b| self.u32_from_bytes(b))
    }

    /// The `u64` at offset `at` of `buf` in this order, or `None` if `buf` does not hold it.
    pub fn u64_at(self, buf: &[u8], at: usize) -> Option<u64> {
        bytes_at(buf, at).map(|b| self.u64_from_bytes(b))
    }

    /// Writes `v` in this order at offset `at` of `buf` if `buf` holds it; returns whether
    /// it did (`buf` is unchanged otherwise).
    pub fn put_u32_at(self, buf: &mut [u8], at: usize, v: u32) -> bool {
        put_bytes_at(buf, at, self.u32_to_bytes(v))
    }

    /// Writes `v` in this order at offset `at` of `buf` if `buf` holds it; returns whether
    /// it did (`buf` is unchanged otherwise).
    pub fn put_u64_at(self, buf: &mut [u8], at: usize, v: u64) -> bool {
        put_bytes_at(buf, at, self.u64_to_bytes(v))
    }

    /// Appends `v` in this order to `out`.
    pub fn push_u32(self, out: &mut Vec<u8>, v: u32) {
        out.extend_from_slice(&self.u32_to_bytes(v));
    }

    /// Appends `v` in this order to `out`.
    pub fn push_u64(self, out: &mut Vec<u8>, v: u64) {
        out.extend_from_slice(&self.u64_to_bytes(v));
    }
}

/// The `N` bytes at offset `at` of `buf`, or `None` if `buf` does not hold them.
///
/// `bytes_at::<4>(buf, 0)` is the first word, the input of [`ByteOrder::detect`].
pub fn bytes_at<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    buf.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// Copies `bytes` to offset `at` of `buf` if they fit; returns whether they did.
fn put_bytes_at<const N: usize>(buf: &mut [u8], at: usize, bytes: [u8; N]) -> bool {
    match at.checked_add(N).and_then(|end| buf.get_mut(at..end)) {
        Some(dst) => {
            dst.copy_from_slice(&bytes);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_either_order_of_a_magic() {
        const MAGIC: u32 = 0x0be9_1b91;
        assert_eq!(
            ByteOrder::detect([0x91, 0x1b, 0xe9, 0x0b], MAGIC),
            Some(ByteOrder::Little)
        );
        assert_eq!(
            ByteOrder::detect([0x0b, 0xe9, 0x1b, 0x91], MAGIC),
            Some(ByteOrder::Big)
        );
        assert_eq!(ByteOrder::detect([0x63, 0x69, 0x72, 0x45], MAGIC), None);
        // A magic that reads the same both ways is little-endian.
        assert_eq!(
            ByteOrder::detect([1, 2, 2, 1], 0x0102_0201),
            Some(ByteOrder::Little)
        );
    }

    // From the socklnd codec's former `order` module.
    #[test]
    fn reads_in_either_order_and_stops_at_the_end() {
        let b = [1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(ByteOrder::Little.u32_at(&b, 0), Some(0x0403_0201));
        assert_eq!(ByteOrder::Big.u32_at(&b, 0), Some(0x0102_0304));
        assert_eq!(ByteOrder::Big.u64_at(&b, 0), Some(0x0102_0304_0506_0708));
        assert_eq!(ByteOrder::Little.u32_at(&b, 5), None);
        assert_eq!(ByteOrder::Little.u64_at(&b, 1), None);
        assert_eq!(ByteOrder::Little.u32_at(&b, usize::MAX), None);
        assert!(ByteOrder::Big.is_flipped());
        assert!(!ByteOrder::default().is_flipped());
    }

    // From the o2iblnd codec's former `endian` module.
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

    #[test]
    fn writes_round_trip_and_refuse_what_does_not_fit() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let mut buf = [0u8; 12];
            assert!(order.put_u64_at(&mut buf, 4, 0x0102_0304_0506_0708));
            assert_eq!(order.u64_at(&buf, 4), Some(0x0102_0304_0506_0708));
            assert!(!order.put_u64_at(&mut buf, 5, 1));
            assert!(!order.put_u64_at(&mut buf, usize::MAX, 1));
            assert!(!order.put_u32_at(&mut buf, usize::MAX - 2, 1));
            assert_eq!(order.u64_at(&buf, 4), Some(0x0102_0304_0506_0708));

            let mut out = Vec::new();
            order.push_u32(&mut out, 0x1122_3344);
            order.push_u64(&mut out, 0x5566_7788_99aa_bbcc);
            assert_eq!(out.len(), 12);
            assert_eq!(order.u32_at(&out, 0), Some(0x1122_3344));
            assert_eq!(order.u64_at(&out, 4), Some(0x5566_7788_99aa_bbcc));
            assert_eq!(order.u16_from_bytes(order.u16_to_bytes(0xabcd)), 0xabcd);
        }
        assert_eq!(ByteOrder::Big.u32_to_bytes(0x0102_0304), [1, 2, 3, 4]);
        assert_eq!(ByteOrder::Little.u32_to_bytes(0x0102_0304), [4, 3, 2, 1]);
        assert_eq!(ByteOrder::Big.u16_to_bytes(0x0102), [1, 2]);
    }

    #[test]
    fn bytes_at_is_bounds_checked() {
        let b = [1u8, 2, 3, 4, 5];
        assert_eq!(bytes_at::<4>(&b, 0), Some([1, 2, 3, 4]));
        assert_eq!(bytes_at::<4>(&b, 1), Some([2, 3, 4, 5]));
        assert_eq!(bytes_at::<4>(&b, 2), None);
        assert_eq!(bytes_at::<4>(&b[..3], 0), None);
        assert_eq!(bytes_at::<1>(&b, usize::MAX), None);
        assert_eq!(bytes_at::<0>(&b, 5), Some([]));
    }
}
