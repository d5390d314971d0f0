//! A connection's send queue as the peer's send side sees it.

use super::item::WriteItem;

/// Where the peer's send side queues frames for one connection: the connection's
/// [`super::outbox::Outbox`], behind its writer.
pub(crate) trait ConnQueue: Send + Sync {
    /// Queues `item`, to be written after everything queued before it, if the queue has
    /// more than `keep` places left; false (and the item dropped) if it has not, or the
    /// connection closed.
    fn push(&self, item: WriteItem, keep: usize) -> bool;
    /// Stops the connection's writing: nothing queued is written any more.
    fn close(&self);
}
