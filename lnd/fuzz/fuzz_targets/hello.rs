//! socklnd HELLO: incremental decoding never panics, and a complete HELLO re-encodes in
//! the byte order it came in to bytes that decode to the same HELLO.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnd::socklnd::wire::{Hello, HelloDecoded};

fuzz_target!(|data: &[u8]| {
    let Ok(HelloDecoded::Complete { hello, order, .. }) = Hello::decode(data) else {
        return;
    };
    let _ = hello.check_request();
    let mut out = Vec::new();
    if hello.encode_in(order, &mut out).is_ok() {
        match Hello::decode(&out) {
            Ok(HelloDecoded::Complete {
                hello: again,
                order: again_order,
                consumed,
            }) => {
                assert_eq!(again, hello);
                assert_eq!(again_order, order);
                assert_eq!(consumed, out.len());
            }
            other => panic!("re-encoded HELLO did not decode: {other:?}"),
        }
    }
});
