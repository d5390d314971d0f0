//! NID, net and process id text: parsing never panics, and whatever parses prints back
//! to text that parses to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnet::{Net, Nid, ProcessId};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(nid) = text.parse::<Nid>() {
        assert_eq!(nid.to_string().parse::<Nid>(), Ok(nid));
    }
    if let Ok(net) = text.parse::<Net>() {
        assert_eq!(net.to_string().parse::<Net>(), Ok(net));
    }
    if let Ok(id) = text.parse::<ProcessId>() {
        assert_eq!(id.to_string().parse::<ProcessId>(), Ok(id));
    }
});
