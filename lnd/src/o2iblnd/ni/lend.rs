//! Sink buffers lent to the layer above with the PUT written into them.
//!
//! A PUT's payload is written by the peer's RDMA into one of the NI's registered sink
//! buffers. Rather than copy it out, the NI hands the layer above a [`Bytes`] over that
//! very memory ([`lent_payload`]): a router forwards it from there (socklnd writes it to the
//! next hop's socket), so the payload crosses user space without a copy. The sink buffer
//! stays out of use until the last reference to the payload is dropped; the drop gives
//! the slot back ([`SinkReturns`]) and wakes the NI task, which tells the exchanges
//! ([`super::Exchanges::sink_returned`]). The exchanges lend at most half the sink
//! buffers at once and copy the rest, so a holder that keeps a payload long never
//! starves the PUTs to come.
//!
//! The sink region is shared ([`SinkMemory`]): a lent payload keeps its memory (and its
//! registration) alive. When the NI stops while payloads are still lent, the region is
//! left registered and allocated for good rather than freed under them.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use tokio::sync::Notify;

use super::Region;

/// The sink slots given back by the layer above, for the NI task to take.
#[derive(Debug, Default)]
pub(super) struct SinkReturns {
    slots: Mutex<Vec<usize>>,
    /// Wakes the NI task (a permit is kept when it is not waiting).
    pub(super) wake: Notify,
}

impl SinkReturns {
    /// The slots given back since the last call.
    pub(super) fn take(&self) -> Vec<usize> {
        std::mem::take(&mut *self.slots.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn give_back(&self, slot: usize) {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(slot);
        self.wake.notify_one();
    }
}

/// The registered sink region, shared with the payloads lent from it.
#[derive(Debug)]
pub(super) struct SinkMemory(Arc<Region>);

impl SinkMemory {
    pub(super) fn new(region: Region) -> SinkMemory {
        SinkMemory(Arc::new(region))
    }

    /// The region.
    pub(super) fn region(&self) -> &Region {
        &self.0
    }

    /// Whether payloads lent from it are still held.
    pub(super) fn lent(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }
}

impl Drop for SinkMemory {
    fn drop(&mut self) {
        if self.lent() {
            // The PD and the device go with the NI: a payload still held must never see
            // its memory deregistered or freed, so the region stays, for good.
            tracing::warn!("o2iblnd: NI stopped with PUT payloads still lent: sink buffers kept");
            std::mem::forget(Arc::clone(&self.0));
        }
    }
}

/// `len` bytes at `offset` of the sink region, as a payload that gives sink slot `slot`
/// back to `returns` when its last reference is dropped; `None` if out of bounds.
pub(super) fn lent_payload(
    sink: &SinkMemory,
    offset: usize,
    len: usize,
    slot: usize,
    returns: &Arc<SinkReturns>,
) -> Option<Bytes> {
    sink.region().read(offset, len)?;
    Some(Bytes::from_owner(Lent {
        region: Arc::clone(&sink.0),
        offset,
        len,
        slot,
        returns: Arc::clone(returns),
    }))
}

/// The owner of a lent payload's memory.
struct Lent {
    region: Arc<Region>,
    offset: usize,
    len: usize,
    slot: usize,
    returns: Arc<SinkReturns>,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        // In bounds: checked when lent. No work request writes a lent slot.
        self.region.read(self.offset, self.len).unwrap_or_default()
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.returns.give_back(self.slot);
    }
}
