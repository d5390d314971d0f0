//! The optional `kib_msg` checksum (module parameter `cksum`, off by default).
//!
//! The sender zeroes `ibm_cksum` and sums the `ibm_nob` bytes of the packed message: start
//! at 0 and, for each byte, rotate the 32-bit sum left by one and add the byte taken as a C
//! `char`, which is signed on x86 (bytes ≥ 0x80 add a negative value). A result of 0 is
//! sent as 1, so 0 on the wire always means "no checksum". The receiver verifies only a
//! non-zero field, over the bytes as received (before any byte swapping) with the field
//! zeroed.

use lnet::ByteOrder;

/// Offset of `ibm_cksum` in the `kib_msg` header.
pub const CKSUM_OFFSET: usize = 12;
/// Bytes of `ibm_cksum`.
const CKSUM_BYTES: usize = 4;

/// A checksum that does not match.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CksumError {
    /// The message's checksum field disagrees with the sum of its bytes.
    #[error("bad kib_msg checksum: expected {expected:#010x}, got {got:#010x}")]
    Mismatch {
        /// The checksum computed over the received bytes.
        expected: u32,
        /// The checksum the message carried.
        got: u32,
    },
    /// The buffer cannot hold a checksum field.
    #[error("kib_msg of {got} bytes has no checksum field: need at least {expected}")]
    Truncated {
        /// Bytes needed to reach the end of the field.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
}

/// The raw rotate-and-add sum over `bytes`, exactly as given (no field zeroed, no 0 → 1).
pub fn raw_sum(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0u32, |sum, &b| {
        // A C `char` on x86: sign-extend the byte.
        sum.rotate_left(1).wrapping_add(b as i8 as i32 as u32)
    })
}

/// The checksum of the packed message `msg` (exactly `ibm_nob` bytes), computed as if its
/// `ibm_cksum` field were zero, with 0 mapped to 1: the value a sender puts in the field.
pub fn compute(msg: &[u8]) -> u32 {
    let field_end = CKSUM_OFFSET + CKSUM_BYTES;
    let sum = msg.iter().enumerate().fold(0u32, |sum, (i, &b)| {
        let b = if (CKSUM_OFFSET..field_end).contains(&i) {
            0
        } else {
            b
        };
        sum.rotate_left(1).wrapping_add(b as i8 as i32 as u32)
    });
    if sum == 0 {
        1
    } else {
        sum
    }
}

/// Checks the packed message `msg` (exactly `ibm_nob` bytes) against `received`, the value
/// of its `ibm_cksum` field already read in the sender's byte order. A received 0 means
/// "no checksum" and always passes.
pub fn verify(msg: &[u8], received: u32) -> Result<(), CksumError> {
    if received == 0 {
        return Ok(());
    }
    let expected = compute(msg);
    if expected == received {
        Ok(())
    } else {
        Err(CksumError::Mismatch {
            expected,
            got: received,
        })
    }
}

/// Computes the checksum of the packed message `msg` (exactly `ibm_nob` bytes) and writes it
/// into its `ibm_cksum` field in `order`. Returns the value written.
pub fn fill(msg: &mut [u8], order: ByteOrder) -> Result<u32, CksumError> {
    let sum = compute(msg);
    if order.put_u32_at(msg, CKSUM_OFFSET, sum) {
        Ok(sum)
    } else {
        Err(CksumError::Truncated {
            expected: CKSUM_OFFSET + CKSUM_BYTES,
            got: msg.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_then_adds_signed_bytes() {
        assert_eq!(raw_sum(&[]), 0);
        assert_eq!(raw_sum(&[1]), 1);
        // (1 rol 1) + 2 = 4; (4 rol 1) + 3 = 11.
        assert_eq!(raw_sum(&[1, 2, 3]), 11);
        // 0xff is -1 as a signed char.
        assert_eq!(raw_sum(&[0xff]), u32::MAX);
        // (-1 rol 1) = 0xffffffff; + (-128) = 0xffffff7f.
        assert_eq!(raw_sum(&[0xff, 0x80]), 0xffff_ff7f);
        // The top bit comes round to bit 0.
        assert_eq!(0x8000_0000u32.rotate_left(1), 1);
    }

    #[test]
    fn zero_is_sent_as_one() {
        // Bytes 12..16 are treated as zero and all others are zero too.
        let mut msg = [0u8; 56];
        msg[12] = 0x55;
        assert_eq!(compute(&msg), 1);
        assert_eq!(fill(&mut msg, ByteOrder::Little), Ok(1));
        assert_eq!(&msg[12..16], &[1, 0, 0, 0]);
        assert_eq!(verify(&msg, 1), Ok(()));
    }

    #[test]
    fn ignores_the_field_itself() {
        let mut a = [7u8; 60];
        let mut b = a;
        a[13] = 1;
        b[13] = 2;
        assert_eq!(compute(&a), compute(&b));
        let sum = fill(&mut a, ByteOrder::Big).unwrap();
        assert_eq!(u32::from_be_bytes(a[12..16].try_into().unwrap()), sum);
        assert_eq!(verify(&a, sum), Ok(()));
    }

    #[test]
    fn mismatch_is_reported_and_zero_skips() {
        let mut msg = [3u8; 64];
        let sum = fill(&mut msg, ByteOrder::Little).unwrap();
        msg[40] ^= 0x80;
        assert_eq!(
            verify(&msg, sum),
            Err(CksumError::Mismatch {
                expected: compute(&msg),
                got: sum
            })
        );
        assert_eq!(verify(&msg, 0), Ok(()));
    }

    #[test]
    fn short_buffer_cannot_be_filled() {
        let mut msg = [0u8; 14];
        assert_eq!(
            fill(&mut msg, ByteOrder::Little),
            Err(CksumError::Truncated {
                expected: 16,
                got: 14
            })
        );
    }
}
