//! o2iblnd kib_msg: unpacking never panics, and an unpacked little-endian message
//! re-encodes to bytes that unpack to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnd::o2iblnd::wire::KibMsg;

fuzz_target!(|data: &[u8]| {
    let Ok(unpacked) = KibMsg::unpack(data) else {
        return;
    };
    let msg = unpacked.msg;
    if let Ok(bytes) = msg.encode() {
        assert_eq!(KibMsg::decode(&bytes), Ok(msg));
    }
});
