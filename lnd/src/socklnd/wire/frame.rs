//! Writing whole ksock frames: a NOOP is its 24-byte header; an LNET frame is the ksock
//! header, the LNet header (72 bytes for V2/V3, 96 for V4) and `payload_length` bytes.
//!
//! The ksock header goes out in the given byte order (this router always uses
//! little-endian); the LNet header is always little-endian. To checksum a frame as a V2
//! sender with `enable_csum=1` would, pass the encoded bytes to [`super::csum::seal_frame`].

use lnet::header::HEADER_LARGE_BYTES;
use lnet::{ByteOrder, Header, HeaderError, HeaderForm, LNET_MTU};

use super::ksock::{KsockHeader, KsockType, KSOCK_HEADER_BYTES};

/// The largest frame on any connection: ksock header, 96-byte LNet header, `LNET_MTU` of
/// payload. A deframer never holds more than one frame.
pub const MAX_FRAME_BYTES: usize = KSOCK_HEADER_BYTES + HEADER_LARGE_BYTES + LNET_MTU as usize;

/// Errors from encoding a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The ksock header's type does not fit the frame asked for.
    #[error("ksock header of type {got:?} for a {expected:?} frame")]
    WrongType {
        /// The frame's type.
        expected: KsockType,
        /// The header's type.
        got: KsockType,
    },
    /// The payload given is not as long as the LNet header says.
    #[error("LNet header says payload_length {header}, payload has {actual} bytes")]
    PayloadLength {
        /// `payload_length` in the header.
        header: u32,
        /// Bytes given.
        actual: usize,
    },
    /// The LNet header cannot be written in this form.
    #[error(transparent)]
    Header(#[from] HeaderError),
}

/// Bytes of an LNET frame with `payload_len` bytes of payload.
pub const fn lnet_frame_len(form: HeaderForm, payload_len: usize) -> usize {
    KSOCK_HEADER_BYTES + form.size() + payload_len
}

/// Appends a NOOP frame to `out`.
pub fn encode_noop(
    ksock: &KsockHeader,
    order: ByteOrder,
    out: &mut Vec<u8>,
) -> Result<(), FrameError> {
    if ksock.msg_type != KsockType::Noop {
        return Err(FrameError::WrongType {
            expected: KsockType::Noop,
            got: ksock.msg_type,
        });
    }
    out.extend_from_slice(&ksock.encode_in(order));
    Ok(())
}

/// Appends an LNET frame to `out`: `ksock` in `order`, `header` in `form`, then `payload`,
/// whose length must be `header.payload_length`. On error nothing is appended.
pub fn encode_lnet(
    ksock: &KsockHeader,
    header: &Header,
    form: HeaderForm,
    payload: &[u8],
    order: ByteOrder,
    out: &mut Vec<u8>,
) -> Result<(), FrameError> {
    if ksock.msg_type != KsockType::Lnet {
        return Err(FrameError::WrongType {
            expected: KsockType::Lnet,
            got: ksock.msg_type,
        });
    }
    if usize::try_from(header.payload_length).ok() != Some(payload.len()) {
        return Err(FrameError::PayloadLength {
            header: header.payload_length,
            actual: payload.len(),
        });
    }
    let start = out.len();
    out.reserve(lnet_frame_len(form, payload.len()));
    out.extend_from_slice(&ksock.encode_in(order));
    if let Err(e) = header.encode_into(form, out) {
        out.truncate(start);
        return Err(e.into());
    }
    out.extend_from_slice(payload);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use lnet::nid::PID_LUSTRE;
    use lnet::{Message, WireHandle};

    fn get() -> Header {
        Header {
            dest_nid: nid("192.168.1.1@tcp"),
            src_nid: nid("192.168.1.2@tcp"),
            dest_pid: PID_LUSTRE,
            src_pid: PID_LUSTRE,
            payload_length: 0,
            msg: Message::Get {
                return_wmd: WireHandle {
                    interface_cookie: 0x17D6_F0A0_B1C2_D3E4,
                    object_cookie: 0x405,
                },
                match_bits: 1 << 63,
                ptl_index: 0,
                src_offset: 0,
                sink_length: 272,
            },
        }
    }

    #[test]
    fn spec_7_2_encodes_byte_for_byte() {
        let mut out = Vec::new();
        encode_lnet(
            &KsockHeader::lnet(),
            &get(),
            HeaderForm::Nid4,
            &[],
            ByteOrder::Little,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, unhex(SPEC_7_2_GET));
        assert_eq!(lnet_frame_len(HeaderForm::Nid4, 0), 96);
        assert_eq!(lnet_frame_len(HeaderForm::Large, 10), 130);
        assert_eq!(MAX_FRAME_BYTES, 24 + 96 + (1 << 20));
    }

    #[test]
    fn refuses_inconsistent_frames_and_appends_nothing() {
        let mut out = vec![1];
        assert_eq!(
            encode_lnet(
                &KsockHeader::keepalive(),
                &get(),
                HeaderForm::Nid4,
                &[],
                ByteOrder::Little,
                &mut out
            ),
            Err(FrameError::WrongType {
                expected: KsockType::Lnet,
                got: KsockType::Noop
            })
        );
        assert_eq!(
            encode_noop(&KsockHeader::lnet(), ByteOrder::Little, &mut out),
            Err(FrameError::WrongType {
                expected: KsockType::Noop,
                got: KsockType::Lnet
            })
        );
        assert_eq!(
            encode_lnet(
                &KsockHeader::lnet(),
                &get(),
                HeaderForm::Nid4,
                &[1, 2],
                ByteOrder::Little,
                &mut out
            ),
            Err(FrameError::PayloadLength {
                header: 0,
                actual: 2
            })
        );
        let v6 = Header {
            dest_nid: nid("fe80::1@tcp"),
            ..get()
        };
        assert!(matches!(
            encode_lnet(
                &KsockHeader::lnet(),
                &v6,
                HeaderForm::Nid4,
                &[],
                ByteOrder::Little,
                &mut out
            ),
            Err(FrameError::Header(HeaderError::BadNid { .. }))
        ));
        assert_eq!(out, vec![1]);
        encode_noop(&KsockHeader::keepalive(), ByteOrder::Little, &mut out).unwrap();
        assert_eq!(out[1..], unhex(SPEC_7_4_KEEPALIVE)[..]);
    }
}
