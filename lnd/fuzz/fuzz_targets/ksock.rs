//! ksock message header: decoding in either byte order never panics and round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnd::socklnd::wire::{ByteOrder, KsockHeader};

fuzz_target!(|data: &[u8]| {
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let Ok(h) = KsockHeader::decode(data, order) else {
            continue;
        };
        let _ = h.acks();
        let _ = h.zc_request();
        assert_eq!(KsockHeader::decode(&h.encode_in(order), order), Ok(h));
    }
});
