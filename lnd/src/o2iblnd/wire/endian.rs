//! The sender's byte order of an o2iblnd message.
//!
//! o2iblnd sends the `kib_msg` header, RDMA descriptors, completion status, connparams and
//! `kib_rej` in the sender's native byte order ([`ByteOrder`]); the receiver tells which
//! from the magic. The embedded LNet header is always little-endian and cookies are never
//! swapped.

use lnet::ByteOrder;

use super::IBLND_MSG_MAGIC;

/// The byte order of an o2ib message or reject, from its first four bytes: `None` unless
/// they are [`IBLND_MSG_MAGIC`] in either order.
pub fn of_o2ib(magic_bytes: [u8; 4]) -> Option<ByteOrder> {
    ByteOrder::detect(magic_bytes, IBLND_MSG_MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_both_orders() {
        assert_eq!(of_o2ib([0x91, 0x1b, 0xe9, 0x0b]), Some(ByteOrder::Little));
        assert_eq!(of_o2ib([0x0b, 0xe9, 0x1b, 0x91]), Some(ByteOrder::Big));
        assert_eq!(of_o2ib([0x63, 0x69, 0x72, 0x45]), None);
    }
}
