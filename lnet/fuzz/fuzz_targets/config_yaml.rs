//! The `lnetctl export` / `import` YAML: parsing any text never panics, a parsed document
//! prints in lnetctl's layout to text that parses back to the same document, and the
//! relational checks and the tunables never panic on it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnet::config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(c) = config::parse(text) else {
        return;
    };
    let _ = config::validate(&c);
    let _ = c.tunables();
    let printed = c.to_yaml();
    match config::parse(&printed) {
        Ok(again) => assert_eq!(again, c, "printed:\n{printed}"),
        Err(e) => panic!("printed document does not parse: {e}\n{printed}"),
    }
});
