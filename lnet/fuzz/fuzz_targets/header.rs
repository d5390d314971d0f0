//! LNet header, both forms: decoding never panics, a decoded header re-encodes to bytes
//! that decode to the same header, and the receive checks never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnet::{Header, HeaderForm, Nid};

fuzz_target!(|data: &[u8]| {
    for form in [HeaderForm::Nid4, HeaderForm::Large] {
        let Ok(h) = Header::decode(data, form) else {
            continue;
        };
        let mut out = Vec::new();
        if h.encode_into(form, &mut out).is_ok() {
            assert_eq!(Header::decode(&out, form), Ok(h));
        }
        let _ = h.check_lnet();
        let _ = h.classify(Nid::LO_0, |n| n.is_any(), true);
    }
});
