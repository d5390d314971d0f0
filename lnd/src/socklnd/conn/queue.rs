//! A connection's send queue as the peer's send side sees it.

use super::item::WriteItem;

/// Where the peer's send side queues frames for one connection: the connection's
/// [`super::outbox::Outbox`], behind its writer.
pub(crate) trait ConnQueue: Send + Sync {
    /// Queues `item`, to be written after everything queued before it; false (and the
    /// item dropped) if the queue is full or the connection closed.
    fn push(&self, item: WriteItem) -> bool;
    /// Places left on the queue.
    fn room(&self) -> usize;
    /// Stops the connection's writing: nothing queued is written any more.
    fn close(&self);
}
