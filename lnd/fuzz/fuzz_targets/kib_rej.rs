//! o2iblnd connection reject: decoding never panics, and a decoded reject re-encodes to
//! bytes that decode to the same reject.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnd::o2iblnd::wire::Rej;

fuzz_target!(|data: &[u8]| {
    let Ok(rej) = Rej::decode(data) else {
        return;
    };
    assert_eq!(Rej::decode(&rej.encode()), Ok(rej));
});
