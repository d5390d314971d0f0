//! Acceptor connection request: incremental decoding never panics, a complete request
//! re-encodes to bytes that decode to the same request, and every prefix of those bytes
//! is reported incomplete.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnet::acceptor::{AcceptorRequest, Decoded};

fuzz_target!(|data: &[u8]| {
    let Ok(Decoded::Complete { request, consumed }) = AcceptorRequest::decode(data) else {
        return;
    };
    assert!(consumed <= data.len());
    let Ok(bytes) = request.encode() else {
        return;
    };
    assert_eq!(
        AcceptorRequest::decode(&bytes),
        Ok(Decoded::Complete {
            request,
            consumed: bytes.len()
        })
    );
    for cut in 0..bytes.len() {
        let prefix = bytes.get(..cut).unwrap_or_default();
        assert!(matches!(
            AcceptorRequest::decode(prefix),
            Ok(Decoded::Incomplete { .. })
        ));
    }
});
