//! The one module of the o2iblnd that calls C: librdmacm (declared here) and libibverbs
//! (through `ibverbs-sys`, the binding the `ibverbs` crate is built on), wrapped in owned
//! Rust types that free what they hold when dropped.
//!
//! Why this shape: the QP that RDMA-CM connects must be the QP the LND posts on, and
//! RDMA-CM moves its QP through INIT/RTR/RTS itself with the path, PSNs and QP numbers it
//! negotiated. The `ibverbs` 0.9 crate cannot adopt a QP created by `rdma_create_qp` (it
//! creates its own from its own device context, sets the PSNs to 0 and connects through a
//! hand-made handshake), and its `QueuePair` posts only signalled SENDs of one region, with
//! no RDMA WRITE, no chained work requests and no access to the local key. So every verbs
//! object here lives on the device context RDMA-CM opened (`cm_id->verbs`): protection
//! domain, completion queue and channel, memory regions, and the QP from `rdma_create_qp`.
//! The `ibverbs` crate supplies the work completion type and its accessors
//! ([`ibverbs::ibv_wc`]) and the device list used to check that an RDMA device exists.
//! librdmacm has no maintained Rust binding that exposes `rdma_cm_id` with its QP on a
//! context of one's own choosing, hence the few declarations below.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::io;
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, RawFd};

use ibverbs_sys as ffi;

mod cm;
mod verbs;

pub use cm::{CmEvent, CmEventKind, CmId, ConnectParams, EventChannel, QpCaps, SendWr};
pub use verbs::{Cq, DeviceLimits, Pd, PdDomain, Region};

/// `RDMA_PS_TCP`: the port space of o2iblnd listeners and connections.
const RDMA_PS_TCP: c_int = 0x0106;

#[repr(C)]
struct RdmaEventChannel {
    fd: c_int,
}

/// The leading fields of `struct rdma_cm_id`; only these are read. After the four pointers
/// comes `route.addr`, whose first two members are the source and destination addresses,
/// each a union as large as `struct sockaddr_storage`.
#[repr(C)]
struct RdmaCmIdHead {
    verbs: *mut ffi::ibv_context,
    channel: *mut RdmaEventChannel,
    context: *mut c_void,
    qp: *mut ffi::ibv_qp,
    src_addr: libc::sockaddr_storage,
    dst_addr: libc::sockaddr_storage,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct RdmaConnParam {
    private_data: *const c_void,
    private_data_len: u8,
    responder_resources: u8,
    initiator_depth: u8,
    flow_control: u8,
    retry_count: u8,
    rnr_retry_count: u8,
    srq: u8,
    qp_num: u32,
}

/// The leading fields of `struct rdma_cm_event` (the union's first member is the
/// connection parameters).
#[repr(C)]
struct RdmaCmEventHead {
    id: *mut RdmaCmIdHead,
    listen_id: *mut RdmaCmIdHead,
    event: c_int,
    status: c_int,
    conn: RdmaConnParam,
}

#[link(name = "rdmacm")]
extern "C" {
    fn rdma_create_event_channel() -> *mut RdmaEventChannel;
    fn rdma_destroy_event_channel(channel: *mut RdmaEventChannel);
    fn rdma_create_id(
        channel: *mut RdmaEventChannel,
        id: *mut *mut RdmaCmIdHead,
        context: *mut c_void,
        ps: c_int,
    ) -> c_int;
    fn rdma_destroy_id(id: *mut RdmaCmIdHead) -> c_int;
    fn rdma_bind_addr(id: *mut RdmaCmIdHead, addr: *mut libc::sockaddr) -> c_int;
    fn rdma_listen(id: *mut RdmaCmIdHead, backlog: c_int) -> c_int;
    fn rdma_resolve_addr(
        id: *mut RdmaCmIdHead,
        src: *mut libc::sockaddr,
        dst: *mut libc::sockaddr,
        timeout_ms: c_int,
    ) -> c_int;
    fn rdma_resolve_route(id: *mut RdmaCmIdHead, timeout_ms: c_int) -> c_int;
    fn rdma_create_qp(
        id: *mut RdmaCmIdHead,
        pd: *mut ffi::ibv_pd,
        attr: *mut ffi::ibv_qp_init_attr,
    ) -> c_int;
    fn rdma_destroy_qp(id: *mut RdmaCmIdHead);
    fn rdma_connect(id: *mut RdmaCmIdHead, param: *mut RdmaConnParam) -> c_int;
    fn rdma_accept(id: *mut RdmaCmIdHead, param: *mut RdmaConnParam) -> c_int;
    fn rdma_reject(id: *mut RdmaCmIdHead, private_data: *const c_void, len: u8) -> c_int;
    fn rdma_disconnect(id: *mut RdmaCmIdHead) -> c_int;
    fn rdma_get_cm_event(channel: *mut RdmaEventChannel, event: *mut *mut RdmaCmEventHead)
        -> c_int;
    fn rdma_ack_cm_event(event: *mut RdmaCmEventHead) -> c_int;
}

fn check(rc: c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor this process owns, with integer arguments only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    let rc = unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn sockaddr(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// A file descriptor to wait on with tokio's `AsyncFd` (it stays owned by its object).
#[derive(Debug, Clone, Copy)]
pub struct Fd(RawFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Registers `fd` with tokio's reactor for readability.
pub fn async_fd(fd: Fd) -> io::Result<tokio::io::unix::AsyncFd<Fd>> {
    // SAFETY: the descriptor belongs to an event or completion channel that its owner keeps
    // open until after the returned AsyncFd is dropped (the NI task drops it first).
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .map_err(|e| e.into_parts().1)
}

/// Whether the host has at least one RDMA device (through the `ibverbs` crate).
pub fn rdma_device_count() -> io::Result<usize> {
    ibverbs::devices().map(|l| l.len())
}
