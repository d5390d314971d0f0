//! The NI's protection domain as a [`Domain`] of the layer above's registered buffers
//! ([`crate::registered`]): the router's large buffers are registered with it, so that a
//! payload read into one goes out by RDMA from where it lies, not copied into a source
//! bulk buffer first.

use std::sync::Arc;

use super::Pd;
use crate::o2iblnd::sys::PdDomain;
use crate::registered::{DomainId, RegisteredMemory};

/// The NI's place among the domains of the registered buffers: ends its registrations
/// when dropped (a field of the NI's state before its PD).
pub(super) struct DomainGuard {
    pub(super) memory: Arc<RegisteredMemory>,
    pub(super) id: DomainId,
}

impl DomainGuard {
    /// Adds the NI's PD to `memory`'s domains.
    pub(super) fn join(memory: Arc<RegisteredMemory>, pd: &Arc<Pd>) -> DomainGuard {
        let id = memory.add_domain(Arc::new(PdDomain(Arc::clone(pd))));
        DomainGuard { memory, id }
    }

    /// The local key of the `len` bytes at `addr`, if they lie in a registered buffer.
    pub(super) fn key(&self, addr: usize, len: usize) -> Option<u32> {
        self.memory.key(self.id, addr, len)
    }
}

impl Drop for DomainGuard {
    fn drop(&mut self) {
        self.memory.remove_domain(self.id);
    }
}
