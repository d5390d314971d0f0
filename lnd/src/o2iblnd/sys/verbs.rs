//! Verbs objects on the device context RDMA-CM opened: protection domain, completion
//! queue with its channel, and registered memory regions.

use std::ffi::c_void;
use std::io;
use std::ptr;

use std::sync::Arc;

use ibverbs::ibv_wc;
use ibverbs_sys as ffi;

use crate::registered;

use super::*;

/// A protection domain on the device of an id.
#[derive(Debug)]
pub struct Pd {
    pub(super) ctx: *mut ffi::ibv_context,
    pub(super) pd: *mut ffi::ibv_pd,
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

/// A PD as a domain of the layer above's registered buffers ([`crate::registered`]).
#[derive(Debug)]
pub struct PdDomain(pub Arc<Pd>);

impl registered::Domain for PdDomain {
    fn register(&self, addr: usize, len: usize) -> io::Result<Box<dyn registered::Registration>> {
        let access = ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0;
        // SAFETY: a live PD (held); `RegisteredMemory` keeps a buffer's memory allocated
        // until the buffer's registrations are dropped (its contract).
        let mr = unsafe {
            ffi::ibv_reg_mr(
                self.0.pd,
                addr as *mut c_void,
                len,
                c_int::try_from(access).unwrap_or_default(),
            )
        };
        if mr.is_null() {
            return Err(io::Error::last_os_error());
        }
        Ok(Box::new(ForeignMr {
            mr,
            _pd: Arc::clone(&self.0),
        }))
    }
}

/// A registration of memory owned elsewhere ([`PdDomain`]); dropping it deregisters the
/// memory, before its PD can go (field order).
#[derive(Debug)]
struct ForeignMr {
    mr: *mut ffi::ibv_mr,
    _pd: Arc<Pd>,
}

// SAFETY: see `EventChannel`; the MR is only read (its key) and deregistered once.
unsafe impl Send for ForeignMr {}

impl registered::Registration for ForeignMr {
    fn lkey(&self) -> u32 {
        // SAFETY: a live MR.
        unsafe { (*self.mr).lkey }
    }
}

impl Drop for ForeignMr {
    fn drop(&mut self) {
        // SAFETY: a live MR, deregistered once, while its PD lives.
        unsafe { ffi::ibv_dereg_mr(self.mr) };
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
    pub(super) cq: *mut ffi::ibv_cq,
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
