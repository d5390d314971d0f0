//! RDMA descriptors (`kib_rdma_desc`): where the peer may RDMA-WRITE.
//!
//! A sink advertises its buffer in PUT_ACK (for a PUT) or GET_REQ (for the reply of an
//! optimised GET): a memory key (the MR's rkey) and up to [`IBLND_MAX_RDMA_FRAGS`]
//! fragments. The layout is packed: key u32 @0, nfrags u32 @4, then 12-byte fragments
//! {nob u32 @0, addr u64 @4} whose addresses are deliberately misaligned. All fields are in
//! the sender's byte order.

use lnet::ByteOrder;

use super::IBLND_MAX_RDMA_FRAGS;

/// Bytes of the descriptor before its fragments (key and nfrags).
pub const RDMA_DESC_HEADER_BYTES: usize = 8;
/// Bytes of one fragment.
pub const RDMA_FRAG_BYTES: usize = 12;

/// Errors from decoding or encoding an RDMA descriptor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RdmaError {
    /// A descriptor with no fragments.
    #[error("RDMA descriptor has 0 fragments: expected 1..={max}")]
    NoFrags {
        /// The most fragments allowed.
        max: u16,
    },
    /// More fragments than `IBLND_MAX_RDMA_FRAGS`.
    #[error("RDMA descriptor has {got} fragments: expected at most {max}")]
    TooManyFrags {
        /// The most fragments allowed.
        max: u16,
        /// The fragment count given.
        got: u64,
    },
    /// The message ends before the last fragment.
    #[error("RDMA descriptor with {nfrags} fragments needs {expected} bytes, message has {got}")]
    FragsNotCovered {
        /// The fragment count.
        nfrags: u32,
        /// Bytes the descriptor needs, from its start.
        expected: usize,
        /// Bytes the message has from the descriptor's start.
        got: usize,
    },
}

/// One fragment of the sink's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RdmaFrag {
    /// Bytes in the fragment.
    pub nob: u32,
    /// The fragment's address in the key's address space (the virtual address for an
    /// ordinary MR, a zero-based offset for FMR with gaps).
    pub addr: u64,
}

/// An RDMA descriptor: a memory key and its fragments.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RdmaDesc {
    /// The memory key: the rkey when sent to the peer.
    pub key: u32,
    /// The fragments, 1..=257 of them on the wire.
    pub frags: Vec<RdmaFrag>,
}

impl RdmaDesc {
    /// A one-fragment descriptor, what an ordinary `ibv_reg_mr` region advertises.
    pub fn single(key: u32, addr: u64, nob: u32) -> RdmaDesc {
        RdmaDesc {
            key,
            frags: vec![RdmaFrag { nob, addr }],
        }
    }

    /// Total bytes over all fragments.
    pub fn total_nob(&self) -> u64 {
        self.frags.iter().map(|f| u64::from(f.nob)).sum()
    }

    /// Bytes of the encoded descriptor.
    pub fn wire_len(&self) -> usize {
        RDMA_DESC_HEADER_BYTES + RDMA_FRAG_BYTES * self.frags.len()
    }

    /// Checks the fragment count is 1..=[`IBLND_MAX_RDMA_FRAGS`].
    fn check_count(nfrags: u64) -> Result<(), RdmaError> {
        if nfrags == 0 {
            Err(RdmaError::NoFrags {
                max: IBLND_MAX_RDMA_FRAGS,
            })
        } else if nfrags > u64::from(IBLND_MAX_RDMA_FRAGS) {
            Err(RdmaError::TooManyFrags {
                max: IBLND_MAX_RDMA_FRAGS,
                got: nfrags,
            })
        } else {
            Ok(())
        }
    }

    /// Decodes a descriptor from `buf`, which runs from the descriptor's start to the end of
    /// the message (`ibm_nob`), written in `order`. Bytes after the last fragment are
    /// ignored.
    pub fn decode(buf: &[u8], order: ByteOrder) -> Result<RdmaDesc, RdmaError> {
        let not_covered = |nfrags: u32, expected: usize| RdmaError::FragsNotCovered {
            nfrags,
            expected,
            got: buf.len(),
        };
        let (Some(key), Some(nfrags)) = (order.u32_at(buf, 0), order.u32_at(buf, 4)) else {
            return Err(not_covered(0, RDMA_DESC_HEADER_BYTES));
        };
        Self::check_count(u64::from(nfrags))?;
        // At most 257 fragments, so this cannot overflow.
        let n = usize::try_from(nfrags).unwrap_or(usize::MAX);
        let expected = n
            .saturating_mul(RDMA_FRAG_BYTES)
            .saturating_add(RDMA_DESC_HEADER_BYTES);
        let body = buf
            .get(RDMA_DESC_HEADER_BYTES..expected)
            .ok_or_else(|| not_covered(nfrags, expected))?;
        let frags = body
            .chunks_exact(RDMA_FRAG_BYTES)
            .map(|f| RdmaFrag {
                nob: order.u32_at(f, 0).unwrap_or_default(),
                addr: order.u64_at(f, 4).unwrap_or_default(),
            })
            .collect();
        Ok(RdmaDesc { key, frags })
    }

    /// Appends the descriptor, little-endian, to `out`. Fails on 0 or more than 257
    /// fragments, which no receiver accepts.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), RdmaError> {
        let n = self.frags.len();
        Self::check_count(u64::try_from(n).unwrap_or(u64::MAX))?;
        // 1..=257 after the check.
        let nfrags = u32::try_from(n).unwrap_or(u32::MAX);
        out.reserve(self.wire_len());
        out.extend_from_slice(&self.key.to_le_bytes());
        out.extend_from_slice(&nfrags.to_le_bytes());
        for f in &self.frags {
            out.extend_from_slice(&f.nob.to_le_bytes());
            out.extend_from_slice(&f.addr.to_le_bytes());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_misaligned_layout() {
        let rd = RdmaDesc {
            key: 0x1122_3344,
            frags: vec![
                RdmaFrag {
                    nob: 0x1000,
                    addr: 0x0102_0304_0506_0708,
                },
                RdmaFrag {
                    nob: 0x20,
                    addr: 0xa0b0,
                },
            ],
        };
        let mut out = Vec::new();
        rd.encode_into(&mut out).unwrap();
        assert_eq!(out.len(), 32);
        assert_eq!(rd.wire_len(), 32);
        assert_eq!(&out[0..4], &[0x44, 0x33, 0x22, 0x11]);
        assert_eq!(&out[4..8], &[2, 0, 0, 0]);
        assert_eq!(&out[8..12], &[0, 0x10, 0, 0]);
        assert_eq!(&out[12..20], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&out[20..24], &[0x20, 0, 0, 0]);
        assert_eq!(&out[24..32], &[0xb0, 0xa0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(RdmaDesc::decode(&out, ByteOrder::Little), Ok(rd.clone()));
        assert_eq!(rd.total_nob(), 0x1020);
    }

    #[test]
    fn big_endian_decode() {
        let mut buf = Vec::new();
        buf.extend_from_slice(&7u32.to_be_bytes());
        buf.extend_from_slice(&1u32.to_be_bytes());
        buf.extend_from_slice(&4096u32.to_be_bytes());
        buf.extend_from_slice(&0xdead_beefu64.to_be_bytes());
        buf.extend_from_slice(&[0xee; 5]); // trailing bytes ignored
        assert_eq!(
            RdmaDesc::decode(&buf, ByteOrder::Big),
            Ok(RdmaDesc::single(7, 0xdead_beef, 4096))
        );
    }

    #[test]
    fn count_and_coverage_checks() {
        let hdr = |n: u32| {
            let mut b = 9u32.to_le_bytes().to_vec();
            b.extend_from_slice(&n.to_le_bytes());
            b
        };
        assert_eq!(
            RdmaDesc::decode(&hdr(0), ByteOrder::Little),
            Err(RdmaError::NoFrags { max: 257 })
        );
        assert_eq!(
            RdmaDesc::decode(&hdr(258), ByteOrder::Little),
            Err(RdmaError::TooManyFrags { max: 257, got: 258 })
        );
        assert_eq!(
            RdmaDesc::decode(&hdr(u32::MAX), ByteOrder::Little),
            Err(RdmaError::TooManyFrags {
                max: 257,
                got: u64::from(u32::MAX)
            })
        );
        let mut two = hdr(2);
        two.extend_from_slice(&[0; 23]);
        assert_eq!(
            RdmaDesc::decode(&two, ByteOrder::Little),
            Err(RdmaError::FragsNotCovered {
                nfrags: 2,
                expected: 32,
                got: 31
            })
        );
        assert_eq!(
            RdmaDesc::decode(&[1, 2, 3], ByteOrder::Little),
            Err(RdmaError::FragsNotCovered {
                nfrags: 0,
                expected: 8,
                got: 3
            })
        );
        let mut out = Vec::new();
        assert_eq!(
            RdmaDesc::default().encode_into(&mut out),
            Err(RdmaError::NoFrags { max: 257 })
        );
        let big = RdmaDesc {
            key: 1,
            frags: vec![RdmaFrag::default(); 258],
        };
        assert_eq!(
            big.encode_into(&mut out),
            Err(RdmaError::TooManyFrags { max: 257, got: 258 })
        );
        assert!(out.is_empty());
        let max = RdmaDesc {
            key: 1,
            frags: vec![RdmaFrag::default(); 257],
        };
        max.encode_into(&mut out).unwrap();
        assert_eq!(RdmaDesc::decode(&out, ByteOrder::Little), Ok(max));
    }
}
