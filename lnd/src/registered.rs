//! Buffers of the layer above that an LND can send from in place ([`RegisteredMemory`]).
//!
//! o2iblnd moves a large payload by RDMA, which reads memory registered with the NI's
//! protection domain. A router's large buffers are kept here, registered with every such
//! domain ([`Domain`]), so that a payload read into one from a socket goes out by RDMA
//! from where it lies, with no copy into the LND's own registered buffers.
//!
//! A buffer's memory must outlive its registrations whoever drops the payload, and the
//! payload's [`BytesMut`] may be dropped anywhere (a closed connection, a refused
//! forward). So each buffer is one allocation one byte longer than the buffer, split in
//! two: the buffer handed out, and its last byte, the keeper, which stays here. The
//! allocation lives while the keeper does; it is handed out again only once every other
//! reference to it is gone ([`BytesMut::try_reclaim`]), and deregistered and freed only
//! then. A payload that does not lie in one of these buffers is simply not found
//! ([`RegisteredMemory::key`]) and the LND copies it, as before.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::BytesMut;

/// A protection domain that memory can be registered with (an o2iblnd NI's).
pub trait Domain: Send + Sync {
    /// Registers the `len` bytes at `addr` for local access (the source of RDMA
    /// writes); the registration ends when the returned value is dropped.
    fn register(&self, addr: usize, len: usize) -> io::Result<Box<dyn Registration>>;
}

/// A registration of memory with a [`Domain`]; dropping it deregisters the memory.
pub trait Registration: Send {
    /// The local key work requests name the memory by.
    fn lkey(&self) -> u32;
}

/// Names a [`Domain`] added to a [`RegisteredMemory`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DomainId(u64);

/// One buffer: the keeper of its allocation, and its registrations.
/// Field order is drop order: the registrations end before the memory can go.
struct Buffer {
    len: usize,
    keys: Vec<(DomainId, Box<dyn Registration>)>,
    /// The allocation's last byte: it keeps the allocation alive, and becomes the whole
    /// buffer again once nobody else holds a part of it.
    keeper: BytesMut,
    /// In [`Inner::back`].
    back: bool,
}

#[derive(Default)]
struct Inner {
    /// By the address of the first byte.
    buffers: BTreeMap<usize, Buffer>,
    domains: Vec<(DomainId, Arc<dyn Domain>)>,
    next_domain: u64,
    /// Buffers given back, most recent last: tried first, so that a buffer is found
    /// without a search while they come back in turn.
    back: Vec<usize>,
}

/// The registered buffers of one size, shared by the router's pools and the LNDs that
/// send from them. See the module documentation.
pub struct RegisteredMemory {
    size: usize,
    /// At most this many buffers at once.
    most: usize,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for RegisteredMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("RegisteredMemory")
            .field("size", &self.size)
            .field("buffers", &inner.buffers.len())
            .field("domains", &inner.domains.len())
            .finish()
    }
}

impl RegisteredMemory {
    /// Buffers of `size` bytes, at most `most` of them at once.
    pub fn new(size: usize, most: usize) -> RegisteredMemory {
        RegisteredMemory {
            size,
            most,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether any domain is registered: without one, buffers are plain memory.
    pub fn has_domains(&self) -> bool {
        !self.lock().domains.is_empty()
    }

    /// Adds `domain`: every buffer there is gets registered with it, and every buffer
    /// made from now on. A buffer that cannot be registered with it is dropped from the
    /// set once it is back (it stays usable, unregistered, meanwhile).
    pub fn add_domain(&self, domain: Arc<dyn Domain>) -> DomainId {
        let mut inner = self.lock();
        let id = DomainId(inner.next_domain);
        inner.next_domain += 1;
        for (base, b) in &mut inner.buffers {
            match domain.register(*base, b.len) {
                Ok(r) => b.keys.push((id, r)),
                Err(e) => tracing::warn!(%e, "cannot register a router buffer"),
            }
        }
        inner.domains.push((id, domain));
        id
    }

    /// Removes domain `id`: its registrations end. What it sent from them must be over.
    pub fn remove_domain(&self, id: DomainId) {
        let mut inner = self.lock();
        inner.domains.retain(|(d, _)| *d != id);
        for b in inner.buffers.values_mut() {
            b.keys.retain(|(d, _)| *d != id);
        }
    }

    /// A buffer of [`RegisteredMemory::new`]'s size, registered with every domain: one
    /// given back whose memory nobody holds any more, else a new one while there are
    /// fewer than the most; `None` otherwise (or without a domain).
    pub fn take(&self) -> Option<BytesMut> {
        let mut inner = self.lock();
        if inner.domains.is_empty() {
            return None;
        }
        let size = self.size;
        while let Some(base) = inner.back.pop() {
            let Some(b) = inner.buffers.get_mut(&base) else {
                continue;
            };
            b.back = false;
            if let Some(buf) = hand_out(b, size) {
                return Some(buf);
            }
        }
        // None given back is free: one may be free without having been given back (its
        // payload dropped elsewhere).
        for b in inner.buffers.values_mut() {
            if let Some(buf) = hand_out(b, size) {
                return Some(buf);
            }
        }
        if inner.buffers.len() >= self.most {
            return None;
        }
        let mut whole = BytesMut::with_capacity(size.checked_add(1)?);
        let keeper = whole.split_off(size);
        let base = whole.as_ptr() as usize;
        let mut keys = Vec::with_capacity(inner.domains.len());
        for (id, d) in &inner.domains {
            match d.register(base, size) {
                Ok(r) => keys.push((*id, r)),
                Err(e) => {
                    tracing::warn!(%e, "cannot register a router buffer");
                    return None;
                }
            }
        }
        inner.buffers.insert(
            base,
            Buffer {
                len: size,
                keys,
                keeper,
                back: false,
            },
        );
        Some(whole)
    }

    /// The memory at `addr` is back from the layer above (a forward completed): it is
    /// handed out again once nothing else holds it.
    pub fn give_back(&self, addr: usize) {
        let mut inner = self.lock();
        let Inner { buffers, back, .. } = &mut *inner;
        let Some((base, b)) = buffers.range_mut(..=addr).next_back() else {
            return;
        };
        if addr < base.saturating_add(b.len) && !b.back {
            b.back = true;
            back.push(*base);
        }
    }

    /// The local key of domain `id` for the `len` bytes at `addr`, if they lie in one
    /// buffer registered with it.
    pub fn key(&self, id: DomainId, addr: usize, len: usize) -> Option<u32> {
        let inner = self.lock();
        let (base, b) = inner.buffers.range(..=addr).next_back()?;
        let end = addr.checked_add(len)?;
        if end > base.checked_add(b.len)? {
            return None;
        }
        b.keys.iter().find(|(d, _)| *d == id).map(|(_, r)| r.lkey())
    }

    /// Keeps at most `most` buffers: those over it are freed once nothing holds them.
    pub fn set_most(&self, most: usize) -> usize {
        let mut inner = self.lock();
        let size = self.size;
        let over = inner.buffers.len().saturating_sub(most);
        let mut free: Vec<usize> = Vec::new();
        for (base, b) in &mut inner.buffers {
            if free.len() == over {
                break;
            }
            if b.keeper.try_reclaim(size) {
                free.push(*base);
            }
        }
        for base in free {
            inner.buffers.remove(&base);
        }
        let Inner { back, buffers, .. } = &mut *inner;
        back.retain(|base| buffers.contains_key(base));
        inner.buffers.len()
    }

    /// Buffers there are now.
    pub fn len(&self) -> usize {
        self.lock().buffers.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The buffer of `b` to hand out, if nothing else holds its memory.
fn hand_out(b: &mut Buffer, size: usize) -> Option<BytesMut> {
    // The keeper takes the whole allocation back when it is the only reference left.
    if !b.keeper.try_reclaim(size) {
        return None;
    }
    let mut whole = std::mem::take(&mut b.keeper);
    whole.clear();
    b.keeper = whole.split_off(size);
    Some(whole)
}

impl Drop for Inner {
    fn drop(&mut self) {
        // A buffer still held elsewhere may be under an RDMA that is not over: its
        // memory stays (the registrations still end with their domains).
        for (_, b) in std::mem::take(&mut self.buffers) {
            let Buffer {
                len,
                keys,
                mut keeper,
                ..
            } = b;
            drop(keys);
            if !keeper.try_reclaim(len) {
                std::mem::forget(keeper);
            }
        }
    }
}

#[cfg(test)]
mod tests;
