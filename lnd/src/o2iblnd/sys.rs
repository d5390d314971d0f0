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
use std::ptr;

use ibverbs::ibv_wc;
use ibverbs_sys as ffi;

/// `RDMA_PS_TCP`: the port space of o2iblnd listeners and connections.
const RDMA_PS_TCP: c_int = 0x0106;

#[repr(C)]
struct RdmaEventChannel {
    fd: c_int,
}

/// The leading fields of `struct rdma_cm_id`; only these are read.
#[repr(C)]
struct RdmaCmIdHead {
    verbs: *mut ffi::ibv_context,
    channel: *mut RdmaEventChannel,
    context: *mut c_void,
    qp: *mut ffi::ibv_qp,
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

/// An RDMA-CM event channel (non-blocking).
#[derive(Debug)]
pub struct EventChannel {
    ch: *mut RdmaEventChannel,
}

// SAFETY: the channel is a kernel object behind a pointer librdmacm never touches from
// another thread on its own; it is used by one task at a time.
unsafe impl Send for EventChannel {}
// SAFETY: libibverbs and librdmacm calls are thread-safe; the Rust methods that change
// state take `&mut self`.
unsafe impl Sync for EventChannel {}

/// The kind of an RDMA-CM event (`enum rdma_cm_event_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CmEventKind {
    /// Address resolved.
    AddrResolved,
    /// Address resolution failed.
    AddrError,
    /// Route resolved.
    RouteResolved,
    /// Route resolution failed.
    RouteError,
    /// A connect request on a listener.
    ConnectRequest,
    /// A connect response (only with no QP on the id).
    ConnectResponse,
    /// The connection failed.
    ConnectError,
    /// The remote side is unreachable or did not answer.
    Unreachable,
    /// The remote side rejected the connection.
    Rejected,
    /// The connection is up.
    Established,
    /// The connection went down.
    Disconnected,
    /// The RDMA device went away.
    DeviceRemoval,
    /// The local address changed.
    AddrChange,
    /// Time-wait ended.
    TimewaitExit,
    /// Anything else, by number.
    Other(i32),
}

impl CmEventKind {
    fn from_raw(v: c_int) -> CmEventKind {
        match v {
            0 => CmEventKind::AddrResolved,
            1 => CmEventKind::AddrError,
            2 => CmEventKind::RouteResolved,
            3 => CmEventKind::RouteError,
            4 => CmEventKind::ConnectRequest,
            5 => CmEventKind::ConnectResponse,
            6 => CmEventKind::ConnectError,
            7 => CmEventKind::Unreachable,
            8 => CmEventKind::Rejected,
            9 => CmEventKind::Established,
            10 => CmEventKind::Disconnected,
            11 => CmEventKind::DeviceRemoval,
            14 => CmEventKind::AddrChange,
            15 => CmEventKind::TimewaitExit,
            other => CmEventKind::Other(other),
        }
    }
}

/// One RDMA-CM event, copied out and already acknowledged.
#[derive(Debug)]
pub struct CmEvent {
    /// The id it is about (its [`CmId::key`]); for a connect request, the listener's.
    pub id: usize,
    /// What happened.
    pub kind: CmEventKind,
    /// The event status (for REJECTED: the IB CM reject reason).
    pub status: i32,
    /// The private data it carried (CONNREQ, CONNACK or a reject), possibly padded.
    pub private_data: Vec<u8>,
    /// For a connect request: the new id, now owned by the caller.
    pub new_id: Option<CmId>,
}

impl EventChannel {
    /// Creates a non-blocking event channel.
    pub fn new() -> io::Result<EventChannel> {
        // SAFETY: no arguments; a null return is an error.
        let ch = unsafe { rdma_create_event_channel() };
        if ch.is_null() {
            return Err(io::Error::last_os_error());
        }
        let me = EventChannel { ch };
        set_nonblocking(me.fd().0)?;
        Ok(me)
    }

    /// The descriptor that becomes readable when an event is waiting.
    pub fn fd(&self) -> Fd {
        // SAFETY: `ch` is a live channel for the life of `self`.
        Fd(unsafe { (*self.ch).fd })
    }

    /// Takes the next event, if one is waiting: copies it out and acknowledges it, so that
    /// the id it names can be destroyed afterwards.
    pub fn next_event(&self) -> io::Result<Option<CmEvent>> {
        let mut ev: *mut RdmaCmEventHead = ptr::null_mut();
        // SAFETY: `ch` is live; `ev` receives an event owned by librdmacm until acked.
        let rc = unsafe { rdma_get_cm_event(self.ch, &mut ev) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(None)
            } else {
                Err(e)
            };
        }
        // SAFETY: on success `ev` points to a valid event until rdma_ack_cm_event.
        let (kind, status, id, listen_id, conn) = unsafe {
            let e = &*ev;
            (
                CmEventKind::from_raw(e.event),
                e.status,
                e.id,
                e.listen_id,
                e.conn,
            )
        };
        let private_data = if conn.private_data.is_null() || conn.private_data_len == 0 {
            Vec::new()
        } else {
            // SAFETY: librdmacm gives `private_data_len` readable bytes at `private_data`
            // for the life of the event.
            unsafe {
                std::slice::from_raw_parts(
                    conn.private_data.cast::<u8>(),
                    usize::from(conn.private_data_len),
                )
            }
            .to_vec()
        };
        // SAFETY: `ev` came from rdma_get_cm_event and is acked exactly once.
        unsafe { rdma_ack_cm_event(ev) };
        let (id, new_id) = if kind == CmEventKind::ConnectRequest {
            (listen_id as usize, Some(CmId { id }))
        } else {
            (id as usize, None)
        };
        Ok(Some(CmEvent {
            id,
            kind,
            status,
            private_data,
            new_id,
        }))
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // SAFETY: every id on the channel is destroyed before it (field order of owners).
        unsafe { rdma_destroy_event_channel(self.ch) };
    }
}

/// Connection parameters of `rdma_connect`/`rdma_accept`.
#[derive(Debug, Clone, Copy)]
pub struct ConnectParams {
    /// `responder_resources` (0: no RDMA READ).
    pub responder_resources: u8,
    /// `initiator_depth` (0).
    pub initiator_depth: u8,
    /// `flow_control` (1).
    pub flow_control: u8,
    /// `retry_count` (5).
    pub retry_count: u8,
    /// `rnr_retry_count` (6).
    pub rnr_retry_count: u8,
}

/// Sizes of a connection's QP.
#[derive(Debug, Clone, Copy)]
pub struct QpCaps {
    /// Send work requests.
    pub max_send_wr: u32,
    /// Receive work requests.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send.
    pub max_send_sge: u32,
}

/// One RDMA-CM id, with its QP once [`CmId::create_qp`] made one. Dropping it destroys
/// both.
#[derive(Debug)]
pub struct CmId {
    id: *mut RdmaCmIdHead,
}

// SAFETY: see `EventChannel`.
unsafe impl Send for CmId {}
// SAFETY: libibverbs and librdmacm calls are thread-safe; the Rust methods that change
// state take `&mut self`.
unsafe impl Sync for CmId {}

/// One send work request.
#[derive(Debug, Clone, Copy)]
pub struct SendWr {
    /// Local address of the bytes.
    pub addr: u64,
    /// Bytes.
    pub len: u32,
    /// Local key of the region holding them.
    pub lkey: u32,
    /// Name of the request in its completion.
    pub wr_id: u64,
    /// `Some((remote address, rkey))`: an RDMA WRITE; `None`: a SEND.
    pub rdma: Option<(u64, u32)>,
    /// Whether it makes a completion when it succeeds.
    pub signaled: bool,
}

impl CmId {
    /// A new id on `channel` in the TCP port space.
    pub fn new(channel: &EventChannel) -> io::Result<CmId> {
        let mut id: *mut RdmaCmIdHead = ptr::null_mut();
        // SAFETY: the channel is live; `id` receives a new id.
        check(unsafe { rdma_create_id(channel.ch, &mut id, ptr::null_mut(), RDMA_PS_TCP) })?;
        Ok(CmId { id })
    }

    /// The id's name in [`CmEvent::id`].
    pub fn key(&self) -> usize {
        self.id as usize
    }

    /// Binds to a local address.
    pub fn bind(&self, addr: SocketAddrV4) -> io::Result<()> {
        let mut sa = sockaddr(addr);
        // SAFETY: a valid sockaddr_in for the duration of the call.
        check(unsafe { rdma_bind_addr(self.id, ptr::addr_of_mut!(sa).cast()) })
    }

    /// Listens for connect requests.
    pub fn listen(&self, backlog: i32) -> io::Result<()> {
        // SAFETY: a bound id.
        check(unsafe { rdma_listen(self.id, backlog) })
    }

    /// Starts address resolution from `src` to `dst` (ADDR_RESOLVED or ADDR_ERROR follows).
    pub fn resolve_addr(
        &self,
        src: SocketAddrV4,
        dst: SocketAddrV4,
        timeout_ms: i32,
    ) -> io::Result<()> {
        let mut s = sockaddr(src);
        let mut d = sockaddr(dst);
        // SAFETY: valid sockaddrs for the duration of the call.
        check(unsafe {
            rdma_resolve_addr(
                self.id,
                ptr::addr_of_mut!(s).cast(),
                ptr::addr_of_mut!(d).cast(),
                timeout_ms,
            )
        })
    }

    /// Starts route resolution (ROUTE_RESOLVED or ROUTE_ERROR follows).
    pub fn resolve_route(&self, timeout_ms: i32) -> io::Result<()> {
        // SAFETY: an id with a resolved address.
        check(unsafe { rdma_resolve_route(self.id, timeout_ms) })
    }

    /// Whether the id is bound to an RDMA device (after bind or resolution).
    pub fn has_device(&self) -> bool {
        // SAFETY: `id` is live; reading its first field.
        !unsafe { (*self.id).verbs }.is_null()
    }

    fn verbs(&self) -> *mut ffi::ibv_context {
        // SAFETY: `id` is live.
        unsafe { (*self.id).verbs }
    }

    /// Creates the id's RC QP on `pd` with `cq` for sends and receives; only requested
    /// sends make completions.
    pub fn create_qp(&self, pd: &Pd, cq: &Cq, caps: QpCaps) -> io::Result<()> {
        if self.verbs() != pd.ctx {
            return Err(io::Error::other(
                "connection is on another RDMA device than the NI",
            ));
        }
        let mut attr = ffi::ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: cq.cq,
            recv_cq: cq.cq,
            srq: ptr::null_mut(),
            cap: ffi::ibv_qp_cap {
                max_send_wr: caps.max_send_wr,
                max_recv_wr: caps.max_recv_wr,
                max_send_sge: caps.max_send_sge,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: ffi::ibv_qp_type::IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: pd and cq are live objects of this id's device context.
        check(unsafe { rdma_create_qp(self.id, pd.pd, &mut attr) })
    }

    fn param(p: &ConnectParams, private_data: &[u8]) -> RdmaConnParam {
        RdmaConnParam {
            private_data: private_data.as_ptr().cast(),
            private_data_len: u8::try_from(private_data.len()).unwrap_or(u8::MAX),
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            flow_control: p.flow_control,
            retry_count: p.retry_count,
            rnr_retry_count: p.rnr_retry_count,
            srq: 0,
            qp_num: 0,
        }
    }

    /// Sends the connect request with `private_data` (at most 255 bytes).
    pub fn connect(&self, p: &ConnectParams, private_data: &[u8]) -> io::Result<()> {
        let mut param = Self::param(p, private_data);
        // SAFETY: the private data outlives the call (librdmacm copies it).
        check(unsafe { rdma_connect(self.id, &mut param) })
    }

    /// Accepts a connect request with `private_data`.
    pub fn accept(&self, p: &ConnectParams, private_data: &[u8]) -> io::Result<()> {
        let mut param = Self::param(p, private_data);
        // SAFETY: as for connect.
        check(unsafe { rdma_accept(self.id, &mut param) })
    }

    /// Rejects a connect request with `private_data` (consumer-defined reject).
    pub fn reject(&self, private_data: &[u8]) -> io::Result<()> {
        let len = u8::try_from(private_data.len()).unwrap_or(u8::MAX);
        // SAFETY: `len` bytes are readable at the pointer for the call.
        check(unsafe { rdma_reject(self.id, private_data.as_ptr().cast(), len) })
    }

    /// Starts a disconnect (the QP goes to the error state and flushes).
    pub fn disconnect(&self) -> io::Result<()> {
        // SAFETY: a live id.
        check(unsafe { rdma_disconnect(self.id) })
    }

    fn qp(&self) -> io::Result<*mut ffi::ibv_qp> {
        // SAFETY: a live id.
        let qp = unsafe { (*self.id).qp };
        if qp.is_null() {
            Err(io::Error::other("no QP on this id"))
        } else {
            Ok(qp)
        }
    }

    /// Posts one receive of `len` bytes at `addr`.
    pub fn post_recv(&self, wr_id: u64, addr: u64, len: u32, lkey: u32) -> io::Result<()> {
        let qp = self.qp()?;
        let mut sge = ffi::ibv_sge {
            addr,
            length: len,
            lkey,
        };
        let mut wr = ffi::ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad: *mut ffi::ibv_recv_wr = ptr::null_mut();
        // SAFETY: the QP is live; its context's ops table has post_recv; the WR and SGE
        // live across the call, and the buffer belongs to a registered region the caller
        // keeps until the completion.
        let rc = unsafe {
            let ctx = (*qp).context;
            match (*ctx).ops.post_recv {
                Some(f) => f(qp, &mut wr, &mut bad),
                None => libc::ENOSYS,
            }
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(rc))
        }
    }

    /// Posts a chain of send work requests in order.
    pub fn post_send(&self, wrs: &[SendWr]) -> io::Result<()> {
        let qp = self.qp()?;
        if wrs.is_empty() {
            return Ok(());
        }
        let mut sges: Vec<ffi::ibv_sge> = wrs
            .iter()
            .map(|w| ffi::ibv_sge {
                addr: w.addr,
                length: w.len,
                lkey: w.lkey,
            })
            .collect();
        let mut raw: Vec<ffi::ibv_send_wr> = Vec::with_capacity(wrs.len());
        for (w, sge) in wrs.iter().zip(sges.iter_mut()) {
            let mut r = ffi::ibv_send_wr {
                wr_id: w.wr_id,
                next: ptr::null_mut(),
                sg_list: sge,
                num_sge: 1,
                opcode: ffi::ibv_wr_opcode::IBV_WR_SEND,
                send_flags: if w.signaled {
                    ffi::ibv_send_flags::IBV_SEND_SIGNALED.0
                } else {
                    0
                },
                ..Default::default()
            };
            if let Some((remote_addr, rkey)) = w.rdma {
                r.opcode = ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE;
                r.wr.rdma = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr, rkey };
            }
            raw.push(r);
        }
        let base = raw.as_mut_ptr();
        for i in 1..raw.len() {
            // SAFETY: i-1 and i are in bounds of `raw`, which is not resized afterwards.
            unsafe { (*base.add(i - 1)).next = base.add(i) };
        }
        let mut bad: *mut ffi::ibv_send_wr = ptr::null_mut();
        // SAFETY: the QP is live; the WR chain and SGEs live across the call; buffers are in
        // registered regions the caller keeps until the completions.
        let rc = unsafe {
            let ctx = (*qp).context;
            match (*ctx).ops.post_send {
                Some(f) => f(qp, base, &mut bad),
                None => libc::ENOSYS,
            }
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(rc))
        }
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: the id is live and owned; its QP (if any) is destroyed first. Every event
        // about it was acked when it was read.
        unsafe {
            if !(*self.id).qp.is_null() {
                rdma_destroy_qp(self.id);
            }
            rdma_destroy_id(self.id);
        }
    }
}

/// A protection domain on the device of an id.
#[derive(Debug)]
pub struct Pd {
    ctx: *mut ffi::ibv_context,
    pd: *mut ffi::ibv_pd,
}

// SAFETY: see `EventChannel`.
unsafe impl Send for Pd {}
// SAFETY: libibverbs and librdmacm calls are thread-safe; the Rust methods that change
// state take `&mut self`.
unsafe impl Sync for Pd {}

impl Pd {
    /// A protection domain on the device `id` is bound to.
    pub fn on_device_of(id: &CmId) -> io::Result<Pd> {
        let ctx = id.verbs();
        if ctx.is_null() {
            return Err(io::Error::other(
                "the RDMA-CM id is bound to no RDMA device",
            ));
        }
        // SAFETY: a live device context from librdmacm.
        let pd = unsafe { ffi::ibv_alloc_pd(ctx) };
        if pd.is_null() {
            return Err(io::Error::last_os_error());
        }
        Ok(Pd { ctx, pd })
    }
}

/// Limits of an RDMA device that size the NI's queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Work requests per queue (`max_qp_wr`).
    pub max_qp_wr: u32,
    /// Entries per completion queue (`max_cqe`).
    pub max_cqe: u32,
}

impl Pd {
    /// The limits of the device the PD is on.
    pub fn device_limits(&self) -> io::Result<DeviceLimits> {
        let mut attr = ffi::ibv_device_attr::default();
        // SAFETY: a live context and an attribute struct to fill.
        let rc = unsafe { ffi::ibv_query_device(self.ctx, &mut attr) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(DeviceLimits {
            max_qp_wr: u32::try_from(attr.max_qp_wr).unwrap_or(0),
            max_cqe: u32::try_from(attr.max_cqe).unwrap_or(0),
        })
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: every MR and QP on it is dropped before (field order of owners).
        unsafe { ffi::ibv_dealloc_pd(self.pd) };
    }
}

/// A completion queue with its own non-blocking completion channel.
#[derive(Debug)]
pub struct Cq {
    channel: *mut ffi::ibv_comp_channel,
    cq: *mut ffi::ibv_cq,
    unacked: u32,
}

// SAFETY: see `EventChannel`.
unsafe impl Send for Cq {}
// SAFETY: libibverbs and librdmacm calls are thread-safe; the Rust methods that change
// state take `&mut self`.
unsafe impl Sync for Cq {}

impl Cq {
    /// A CQ of at least `entries` on the device of `pd`.
    pub fn new(pd: &Pd, entries: i32) -> io::Result<Cq> {
        // SAFETY: a live device context.
        let channel = unsafe { ffi::ibv_create_comp_channel(pd.ctx) };
        if channel.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a live context and channel.
        let cq = unsafe { ffi::ibv_create_cq(pd.ctx, entries, ptr::null_mut(), channel, 0) };
        if cq.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: the channel has no CQ.
            unsafe { ffi::ibv_destroy_comp_channel(channel) };
            return Err(e);
        }
        let me = Cq {
            channel,
            cq,
            unacked: 0,
        };
        set_nonblocking(me.fd().0)?;
        me.arm()?;
        Ok(me)
    }

    /// The completion channel's descriptor.
    pub fn fd(&self) -> Fd {
        // SAFETY: a live channel.
        Fd(unsafe { (*self.channel).fd })
    }

    /// Asks for an event on the next completion.
    pub fn arm(&self) -> io::Result<()> {
        // SAFETY: a live CQ; its context's ops table has req_notify_cq.
        let rc = unsafe {
            let ctx = (*self.cq).context;
            match (*ctx).ops.req_notify_cq {
                Some(f) => f(self.cq, 0),
                None => libc::ENOSYS,
            }
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(rc))
        }
    }

    /// Consumes the channel's pending events (non-blocking); returns how many.
    pub fn take_events(&mut self) -> usize {
        let mut n = 0;
        loop {
            let mut cq: *mut ffi::ibv_cq = ptr::null_mut();
            let mut ctx: *mut c_void = ptr::null_mut();
            // SAFETY: a live non-blocking channel.
            let rc = unsafe { ffi::ibv_get_cq_event(self.channel, &mut cq, &mut ctx) };
            if rc != 0 {
                break;
            }
            n += 1;
            self.unacked += 1;
        }
        if self.unacked >= 64 {
            // SAFETY: acks events this CQ received.
            unsafe { ffi::ibv_ack_cq_events(self.cq, self.unacked) };
            self.unacked = 0;
        }
        n
    }

    /// Polls up to `out.len()` completions; returns how many were written.
    pub fn poll(&self, out: &mut [ibv_wc]) -> io::Result<usize> {
        let max = c_int::try_from(out.len()).unwrap_or(c_int::MAX);
        // SAFETY: a live CQ; `out` has room for `max` completions.
        let n = unsafe {
            let ctx = (*self.cq).context;
            match (*ctx).ops.poll_cq {
                Some(f) => f(self.cq, max, out.as_mut_ptr().cast()),
                None => -libc::ENOSYS,
            }
        };
        usize::try_from(n).map_err(|_| io::Error::other("ibv_poll_cq failed"))
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: every QP using the CQ is destroyed before (field order of owners).
        unsafe {
            if self.unacked > 0 {
                ffi::ibv_ack_cq_events(self.cq, self.unacked);
            }
            ffi::ibv_destroy_cq(self.cq);
            ffi::ibv_destroy_comp_channel(self.channel);
        }
    }
}

/// A page-aligned memory area registered once for local and remote writes. The device
/// reads and writes it while work requests are posted; the LND touches a part of it only
/// when no posted request covers that part.
#[derive(Debug)]
pub struct Region {
    ptr: *mut u8,
    len: usize,
    layout: std::alloc::Layout,
    mr: *mut ffi::ibv_mr,
}

// SAFETY: see `EventChannel`.
unsafe impl Send for Region {}
// SAFETY: libibverbs and librdmacm calls are thread-safe; the Rust methods that change
// state take `&mut self`.
unsafe impl Sync for Region {}

impl Region {
    /// Allocates `len` zeroed bytes (page-aligned) and registers them on `pd`.
    pub fn new(pd: &Pd, len: usize) -> io::Result<Region> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 4096)
            .map_err(|e| io::Error::other(e.to_string()))?;
        // SAFETY: a non-zero-sized layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        let access = ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
            | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
        // SAFETY: `ptr` is valid for `len` bytes until dealloc in Drop, after dereg.
        let mr = unsafe {
            ffi::ibv_reg_mr(
                pd.pd,
                ptr.cast(),
                len,
                c_int::try_from(access).unwrap_or_default(),
            )
        };
        if mr.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: allocated above with `layout`.
            unsafe { std::alloc::dealloc(ptr, layout) };
            return Err(e);
        }
        Ok(Region {
            ptr,
            len,
            layout,
            mr,
        })
    }

    /// Bytes in the region.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The local key.
    pub fn lkey(&self) -> u32 {
        // SAFETY: a live MR.
        unsafe { (*self.mr).lkey }
    }

    /// The remote key (what a PUT_ACK or GET_REQ descriptor carries).
    pub fn rkey(&self) -> u32 {
        // SAFETY: a live MR.
        unsafe { (*self.mr).rkey }
    }

    /// The address of byte `off` (the IOVA of an ordinary MR is the virtual address).
    pub fn addr(&self, off: usize) -> u64 {
        (self.ptr as u64).wrapping_add(off as u64)
    }

    /// Copies `data` to `off`; `None` if it does not fit.
    pub fn write(&mut self, off: usize, data: &[u8]) -> Option<()> {
        let end = off.checked_add(data.len())?;
        if end > self.len {
            return None;
        }
        // SAFETY: in bounds (checked); no posted work request covers this part (caller).
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) };
        Some(())
    }

    /// The bytes at `off..off+len`; `None` if out of bounds.
    pub fn read(&self, off: usize, len: usize) -> Option<&[u8]> {
        let end = off.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: in bounds (checked); no posted work request writes this part (caller).
        Some(unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: no QP that could use the MR is left (field order of owners); dealloc
        // with the layout of the allocation.
        unsafe {
            ffi::ibv_dereg_mr(self.mr);
            std::alloc::dealloc(self.ptr, self.layout);
        }
    }
}
