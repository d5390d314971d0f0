//! UDSP NID and net expressions: parsing never panics, and whatever parses prints to text
//! that parses again and prints the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnet::nidexpr::NidExpr;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(expr) = NidExpr::parse(text) {
        let printed = expr.to_string();
        let again = NidExpr::parse(&printed).expect("printed expressions parse");
        assert_eq!(again.to_string(), printed);
    }
});
