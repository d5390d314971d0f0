//! The socklnd V2 frame checksum.
//!
//! Only V2 senders with `enable_csum=1` set it; V3/V4 kernels always send 0, and so does
//! this router. It is CRC-32 (reflected, polynomial `0xEDB88320`, Linux `crc32_le`) seeded
//! with `0xFFFFFFFF` and **without** the final inversion, i.e. the bitwise NOT of the usual
//! zlib/IEEE CRC-32, over the frame as it is on the wire: the 24-byte ksock header with its
//! csum field read as zero, then the LNet header, then the payload. A csum of 0 means "not
//! checksummed" and is not verified.

use lnet::ByteOrder;

use super::ksock::KSOCK_HEADER_BYTES;

/// Byte range of the csum field in the ksock header.
const CSUM_FIELD: std::ops::Range<usize> = 4..8;

/// Errors from checking a frame's checksum.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CsumError {
    /// The frame's csum field does not match its contents: the kernel closes the
    /// connection.
    #[error(
        "ksock checksum mismatch: frame says {received:#010x}, contents give {computed:#010x}"
    )]
    Mismatch {
        /// The csum field of the frame.
        received: u32,
        /// The checksum of the frame's bytes.
        computed: u32,
    },
}

/// A running socklnd checksum, for data that arrives in pieces.
#[derive(Debug, Clone, Default)]
pub struct Csum {
    hasher: crc32fast::Hasher,
}

impl Csum {
    /// A checksum of nothing yet.
    pub fn new() -> Csum {
        Csum::default()
    }

    /// Adds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
    }

    /// The checksum of everything added: `crc32_le(~0, data)` with no final inversion.
    pub fn finish(self) -> u32 {
        !self.hasher.finalize()
    }

    /// The checksum of `bytes` in one go.
    pub fn of(bytes: &[u8]) -> u32 {
        let mut c = Csum::new();
        c.update(bytes);
        c.finish()
    }
}

/// The checksum of a whole frame as on the wire (ksock header, LNet header, payload), with
/// the ksock header's csum field (bytes 4..8) counted as zero whatever it holds.
pub fn frame_csum(frame: &[u8]) -> u32 {
    let mut c = Csum::new();
    let head = frame.get(..CSUM_FIELD.start).unwrap_or(frame);
    c.update(head);
    let field_len = frame
        .len()
        .min(CSUM_FIELD.end)
        .saturating_sub(CSUM_FIELD.start);
    c.update([0u8; 4].get(..field_len).unwrap_or_default());
    c.update(frame.get(CSUM_FIELD.end..).unwrap_or_default());
    c.finish()
}

/// Checks a whole frame against the csum its header carries (`received`, already read in
/// the connection's byte order). A `received` of 0 means "not checksummed" and passes.
pub fn verify_frame(frame: &[u8], received: u32) -> Result<(), CsumError> {
    if received == 0 {
        return Ok(());
    }
    let computed = frame_csum(frame);
    if computed == received {
        Ok(())
    } else {
        Err(CsumError::Mismatch { received, computed })
    }
}

/// Computes the checksum of a whole encoded frame and writes it into the frame's csum
/// field in `order`, as a V2 sender with `enable_csum=1` does. Returns the checksum. A
/// frame shorter than a ksock header is left as it is.
pub fn seal_frame(frame: &mut [u8], order: ByteOrder) -> u32 {
    let csum = frame_csum(frame);
    if frame.len() >= KSOCK_HEADER_BYTES {
        // The csum field is inside the header: the write fits.
        let _ = order.put_u32_at(frame, CSUM_FIELD.start, csum);
    }
    csum
}

#[cfg(test)]
mod tests {
    use super::super::ksock::KsockHeader;
    use super::super::testutil::*;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn is_crc32_le_without_final_inversion() {
        // The standard CRC-32 check value of "123456789" is 0xCBF43926; Linux
        // crc32_le(~0, ...) gives its complement.
        assert_eq!(Csum::of(b"123456789"), 0x340B_C6D9);
        assert_eq!(Csum::of(b""), 0xFFFF_FFFF);
        let mut c = Csum::new();
        c.update(b"1234");
        c.update(b"56789");
        assert_eq!(c.finish(), 0x340B_C6D9);
    }

    #[test]
    fn csum_field_counts_as_zero() {
        let frame = unhex(SPEC_7_3_REPLY);
        let plain = frame_csum(&frame);
        assert_eq!(plain, Csum::of(&frame));
        let mut sealed = frame.clone();
        assert_eq!(seal_frame(&mut sealed, ByteOrder::Little), plain);
        assert_eq!(&sealed[4..8], &plain.to_le_bytes());
        assert_eq!(frame_csum(&sealed), plain);
        assert_eq!(verify_frame(&sealed, plain), Ok(()));
        let mut be = frame.clone();
        seal_frame(&mut be, ByteOrder::Big);
        assert_eq!(&be[4..8], &plain.to_be_bytes());

        let mut corrupt = sealed;
        corrupt[0x70] ^= 1;
        assert!(matches!(
            verify_frame(&corrupt, plain),
            Err(CsumError::Mismatch { received, .. }) if received == plain
        ));
        // 0 means "not checksummed".
        assert_eq!(verify_frame(&corrupt, 0), Ok(()));
    }

    #[test]
    fn noop_csum_covers_the_header_only() {
        let mut noop = KsockHeader::zc_ack(0x2A).encode();
        let csum = seal_frame(&mut noop, ByteOrder::Little);
        let mut zeroed = noop;
        zeroed[4..8].fill(0);
        assert_eq!(csum, Csum::of(&zeroed));
        assert_eq!(verify_frame(&noop, csum), Ok(()));
    }

    #[test]
    fn short_input_does_not_panic() {
        for n in 0..10 {
            let mut b = vec![0xAB; n];
            let _ = frame_csum(&b);
            let _ = seal_frame(&mut b, ByteOrder::Little);
            assert_eq!(b, vec![0xAB; n]);
        }
        assert_eq!(
            frame_csum(&[1, 2, 3, 4, 5, 6]),
            Csum::of(&[1, 2, 3, 4, 0, 0])
        );
    }

    proptest! {
        #[test]
        fn sealed_frames_verify(mut frame in proptest::collection::vec(any::<u8>(), 24..300), order in order_strategy()) {
            let csum = seal_frame(&mut frame, order);
            prop_assert_eq!(verify_frame(&frame, csum), Ok(()));
        }
    }
}
