//! `debug nidlist`: any nidlist and NID text gives a report without panicking, and a list
//! that prints prints to text that parses and prints the same entries again (maybe in
//! another order: a /32 netmask prints as an address, which prints after the netmasks).
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnet::nidlist::{debug_nidlist, NidList};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The list and the NID to match, separated by a 0x01 byte.
    let args: Vec<&str> = text.split('\u{1}').collect();
    let _ = debug_nidlist(&args);
    let Some(list) = args.first() else {
        return;
    };
    let entries = |text: &str| {
        let mut words: Vec<String> = text.split(' ').map(str::to_owned).collect();
        words.sort();
        words
    };
    if let Ok(Ok(printed)) = NidList::parse(list).map(|l| l.normalized()) {
        let again = NidList::parse(&printed).map(|l| l.normalized());
        let Ok(Ok(again)) = again else {
            panic!("{list:?} printed as {printed:?}, which gives {again:?}");
        };
        assert_eq!(entries(&again), entries(&printed), "{list:?}");
    }
});
