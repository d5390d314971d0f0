//! The store's `Meta` record decoder: any key and value bytes decode to a record or to a
//! typed error naming the tree, never a panic. The first byte is the key's length (at
//! most the bytes that follow); the key, then the value, follow it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use store::{decode_record, RecordKind, StoreError};

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let (key, value) = rest.split_at(usize::from(n).min(rest.len()));
    match decode_record(RecordKind::Meta, key, value) {
        Ok(())
        | Err(StoreError::CorruptKey { .. })
        | Err(StoreError::CorruptValue { .. })
        | Err(StoreError::InvalidSchema { .. })
        | Err(StoreError::NewerSchema { .. }) => {}
        Err(e) => panic!("unexpected error kind: {e}"),
    }
});
