//! UDSP NID and net expressions: parsing never panics, whatever parses prints to text
//! that parses back to the same expression, and matching a NID never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnet::nidexpr::NidExpr;
use lnet::Nid;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(expr) = NidExpr::parse(text) {
        let printed = expr.to_string();
        assert_eq!(
            NidExpr::parse(&printed),
            Ok(expr.clone()),
            "{text:?} printed as {printed:?}"
        );
        for nid in [
            "10.0.0.1@tcp",
            "192.168.1.255@o2ib3",
            "7@gni",
            "0@lo",
            "fd00::1@tcp",
        ] {
            if let Ok(nid) = nid.parse::<Nid>() {
                let _ = expr.matches_nid(&nid);
            }
        }
    }
});
