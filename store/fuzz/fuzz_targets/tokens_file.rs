//! The tokens file: parsing any text never panics, every line it accepts is a token line
//! with a name the store takes and a long enough secret, and a refusal names a line of
//! the text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count();
    match store::parse_tokens_file(text) {
        Ok(tokens) => {
            for t in &tokens {
                assert!((1..=lines).contains(&t.line));
                assert!(!t.name.is_empty() && t.name.len() <= store::MAX_TOKEN_NAME);
                assert!(t.secret.len() >= store::MIN_SECRET_BYTES);
            }
        }
        Err(e) => {
            assert!((1..=lines).contains(&e.line()), "{e}");
            assert!(!e.to_string().is_empty());
        }
    }
});
