//! RDMA-CM objects: the event channel and its events, and the CM id that carries a
//! connection's QP (connect, accept, reject, disconnect, and posting work requests).

use std::ffi::c_int;
use std::io;
use std::net::SocketAddrV4;
use std::ptr;

use ibverbs_sys as ffi;

use super::*;

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
    /// The QP number a connect announces when the id has no QP of its own (0 otherwise:
    /// the id's QP is announced).
    pub qp_num: u32,
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

    /// The remote address of the id: for an id from a connect request, the requester's
    /// (librdmacm fills `route.addr` before it reports the request). `None` when it is
    /// not an IPv4 address.
    pub fn peer_addr(&self) -> Option<SocketAddrV4> {
        // SAFETY: `id` is live; `dst_addr` is a sockaddr_storage inside it, read as the
        // sockaddr_in it holds when its family is AF_INET (both are plain data).
        unsafe {
            let dst = ptr::addr_of!((*self.id).dst_addr);
            if i32::from((*dst).ss_family) != libc::AF_INET {
                return None;
            }
            let sin = dst.cast::<libc::sockaddr_in>().read_unaligned();
            Some(SocketAddrV4::new(
                u32::from_be(sin.sin_addr.s_addr).into(),
                u16::from_be(sin.sin_port),
            ))
        }
    }

    /// Whether the id is bound to an RDMA device (after bind or resolution).
    pub fn has_device(&self) -> bool {
        // SAFETY: `id` is live; reading its first field.
        !unsafe { (*self.id).verbs }.is_null()
    }

    pub(super) fn verbs(&self) -> *mut ffi::ibv_context {
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
            qp_num: p.qp_num,
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
