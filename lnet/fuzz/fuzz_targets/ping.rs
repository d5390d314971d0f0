//! Ping/push info: decoding (either byte order) never panics, validation never panics,
//! and a decoded info re-encodes to bytes that decode to the same info.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnet::ping::{PingInfo, INTERFACES_MAX_DEFAULT};

fuzz_target!(|data: &[u8]| {
    let Ok(info) = PingInfo::decode(data) else {
        return;
    };
    let _ = info.validate(INTERFACES_MAX_DEFAULT);
    if let Ok(bytes) = info.encode() {
        assert_eq!(PingInfo::decode(&bytes), Ok(info));
    }
});
