//! The mailbox capacities of the actors (every mailbox is bounded).

/// Mailbox capacity of the NI actors and of the recovery actors.
pub(crate) const NI_MAILBOX: usize = 256;
