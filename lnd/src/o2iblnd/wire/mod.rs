//! The o2iblnd wire format, as pure byte codecs.
//!
//! Every o2iblnd message is a `kib_msg`: a 48-byte header ([`msg`]) in the *sender's* byte
//! order followed by a type-specific body. Three bodies embed the 72-byte LNet header, which
//! is always little-endian. Bulk data never travels in a message: the sink advertises an
//! RDMA descriptor ([`rdma`]) and the source RDMA-WRITEs into it. Connections are set up
//! through RDMA-CM with a CONNREQ/CONNACK as private data ([`handshake`]); a refused
//! connection carries a `kib_rej` ([`rej`]). An optional checksum covers a whole message
//! ([`cksum`]).
//!
//! Decoders accept both byte orders ([`ByteOrder`], told by [`endian::of_o2ib`]); encoders
//! write little-endian, as every x86 and ARM kernel does. Layouts and constants come from
//! the project's protocol reference (`spec/lnet-o2ib-health-lnetctl.md`, part 1) and the
//! kernel captures in `spec/kernel-observations.md`.

pub mod cksum;
pub mod endian;
pub mod handshake;
pub mod msg;
pub mod params;
pub mod rdma;
pub mod rej;

pub use cksum::CksumError;
pub use handshake::{race_loser, RdmaCmParams};
pub use lnet::ByteOrder;
pub use msg::{Body, Completion, Cookie, KibMsg, MsgError, MsgType, Unpacked};
pub use params::{ConnParams, Version, CONN_PARAMS_BYTES};
pub use rdma::{RdmaDesc, RdmaError, RdmaFrag};
pub use rej::{Rej, RejError, RejMagic, RejParams, RejWhy};

/// `IBLND_MSG_MAGIC` (`LNET_PROTO_IB_MAGIC`): the first word of every `kib_msg` and
/// `kib_rej`, in the sender's byte order.
pub const IBLND_MSG_MAGIC: u32 = 0x0be9_1b91;
/// `LNET_PROTO_MAGIC`: the magic of a future "unified" LNet protocol. A passive kernel
/// refuses a CONNREQ that starts with it (FATAL); an active kernel accepts it in a reject.
pub use lnet::LNET_PROTO_MAGIC;

/// `IBLND_MSG_VERSION_1`: protocol v1 (queue depth fixed at 8, NOOPs cost a credit).
pub const IBLND_MSG_VERSION_1: u16 = 0x11;
/// `IBLND_MSG_VERSION`: protocol v2, the current one. There is no o2ib v3.
pub const IBLND_MSG_VERSION_2: u16 = 0x12;

/// Message type code of CONNREQ (connection request, RDMA-CM private data only).
pub const IBLND_MSG_CONNREQ: u8 = 0xc0;
/// Message type code of CONNACK (connection accepted, RDMA-CM private data only).
pub const IBLND_MSG_CONNACK: u8 = 0xc1;
/// Message type code of NOOP (returns credits, keepalive).
pub const IBLND_MSG_NOOP: u8 = 0xd0;
/// Message type code of IMMEDIATE (LNet header and payload inline).
pub const IBLND_MSG_IMMEDIATE: u8 = 0xd1;
/// Message type code of PUT_REQ (LNet header; the sink answers with PUT_ACK or PUT_NAK).
pub const IBLND_MSG_PUT_REQ: u8 = 0xd2;
/// Message type code of PUT_NAK (the sink wants no data, or failed).
pub const IBLND_MSG_PUT_NAK: u8 = 0xd3;
/// Message type code of PUT_ACK (the sink's RDMA descriptor).
pub const IBLND_MSG_PUT_ACK: u8 = 0xd4;
/// Message type code of PUT_DONE (the source finished its RDMA writes).
pub const IBLND_MSG_PUT_DONE: u8 = 0xd5;
/// Message type code of GET_REQ (optimised GET with the reply buffer's descriptor).
pub const IBLND_MSG_GET_REQ: u8 = 0xd6;
/// Message type code of GET_DONE (the responder finished writing the reply).
pub const IBLND_MSG_GET_DONE: u8 = 0xd7;

/// `IBLND_MSG_SIZE`: the largest message, and the size of each receive buffer.
pub const IBLND_MSG_SIZE: usize = 4096;
/// Bytes of the `kib_msg` header, before the body.
pub const KIB_MSG_HEADER_BYTES: usize = 48;
/// Offset of an IMMEDIATE payload: the header plus the 72-byte LNet header.
pub const IBLND_IMMEDIATE_PAYLOAD_OFFSET: usize = KIB_MSG_HEADER_BYTES + 72;
/// The largest IMMEDIATE payload: 4096 − 120 = 3976 bytes. Larger PUTs and REPLYs go by RDMA.
pub const IBLND_MAX_IMMEDIATE: usize = IBLND_MSG_SIZE - IBLND_IMMEDIATE_PAYLOAD_OFFSET;
/// `IBLND_MAX_RDMA_FRAGS` (`LNET_MAX_IOV + 1`): most fragments in an RDMA descriptor, and
/// the `max_frags` every kernel offers.
pub const IBLND_MAX_RDMA_FRAGS: u16 = 257;
/// Default RDMA-CM port (module parameter `service`).
pub const IBLND_DEFAULT_SERVICE_PORT: u16 = 987;
/// Default queue depth (module parameter `peer_credits`; also the only v1 depth).
pub const IBLND_DEFAULT_QUEUE_DEPTH: u16 = 8;
/// Bytes of CONNREQ and CONNACK private data: the header plus the 8-byte connparams. It
/// exactly fills what an IB-CM REQ can carry through rdma_cm, so the format cannot grow.
pub const IBLND_CONN_PRIVATE_DATA_BYTES: usize = KIB_MSG_HEADER_BYTES + 8;
/// How many times a passive side refuses one peer with CONN_RACE before it lets the lower
/// NID through (`MAX_CONN_RACES_BEFORE_ABORT`).
pub const MAX_CONN_RACES_BEFORE_ABORT: u32 = 20;
