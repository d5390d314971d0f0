//! NID wire forms: decoding never panics, and a decoded NID encodes back to bytes that
//! decode to the same NID.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnet::Nid;

fuzz_target!(|data: &[u8]| {
    if let Some(raw) = data.get(..8).and_then(|b| b.try_into().ok()) {
        if let Ok(nid) = Nid::from_nid4(u64::from_le_bytes(raw)) {
            assert_eq!(nid.to_nid4().map(Nid::from_nid4), Ok(Ok(nid)));
        }
    }
    if let Ok(nid) = Nid::from_large_bytes(data) {
        assert_eq!(Nid::from_large_bytes(&nid.to_large_bytes()), Ok(nid));
    }
});
