//! A store whose database file was truncated or damaged is refused at open with a typed
//! error, never served as an older or empty state and never a panic: a sealed store with
//! configuration, tokens, fault rules and events, its `db` file cut at points all along
//! its data and flipped byte by byte at others; each copy must either refuse to open or
//! read back exactly the original contents (a change in bytes no record uses).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;

use store::{Store, StoreError};

/// What a store holds, as text to compare.
fn contents(s: &Store) -> Result<String, StoreError> {
    Ok(format!(
        "{}\n{:?}\n{:?}\n{:?}",
        s.export()?.to_yaml(),
        s.tokens()?,
        s.fault_rules()?,
        s.events_after(0, 1000)?
    ))
}

/// Copies the files (not directories) of `from` into a new directory `to`.
fn copy_files(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Opens a damaged copy: `Err(text)` when refused, `Ok(contents)` when opened.
fn open_copy(dir: &Path) -> Result<String, String> {
    let outcome = std::panic::catch_unwind(|| match Store::open(dir) {
        Err(e) => Err(e.to_string()),
        Ok(s) => Ok(contents(&s).map_err(|e| format!("opened, then reading failed: {e}"))),
    });
    match outcome {
        Err(_) => panic!("opening {} panicked", dir.display()),
        Ok(Err(e)) => Err(e),
        Ok(Ok(Ok(c))) => Ok(c),
        Ok(Ok(Err(e))) => Err(e),
    }
}

#[test]
fn truncated_or_damaged_database_files_are_refused_at_open_never_served() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good");
    let original = {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v2/store");
        copy_files(&fixture, &good);
        let s = Store::open(&good).unwrap();
        s.create_token("late", store::Role::Reader, "0123456789abcdef0123")
            .unwrap();
        contents(&s).unwrap()
    };
    assert!(good.join(store::SEAL_FILE).exists());
    let bytes = std::fs::read(good.join("db")).unwrap();
    // The engine's file is preallocated with zeros after its data.
    let data_len = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    assert!(data_len > 1000, "{data_len} bytes of data");

    let mut refused = 0;
    let mut same = 0;
    let cuts = (0..40).map(|i| (data_len * i / 40, None));
    let flips = (0..120).map(|i| (data_len * i / 120 + 7, Some(0x5au8)));
    for (n, (at, flip)) in cuts.chain(flips).enumerate() {
        let dir = tmp.path().join(format!("copy{n}"));
        copy_files(&good, &dir);
        let mut damaged = bytes.clone();
        match flip {
            None => damaged.truncate(at),
            Some(x) => damaged[at.min(data_len - 1)] ^= x,
        }
        std::fs::write(dir.join("db"), &damaged).unwrap();
        match open_copy(&dir) {
            Err(e) => {
                refused += 1;
                assert!(
                    e.contains("damaged") || e.contains("storage engine error"),
                    "{e}"
                );
            }
            Ok(c) => {
                assert_eq!(
                    c, original,
                    "the copy damaged at byte {at} opened with other contents"
                );
                same += 1;
            }
        }
        if flip.is_none() {
            assert!(
                open_copy(&dir).is_err(),
                "cut at {at} opened the second time"
            );
        }
    }
    println!("damaged copies: {refused} refused, {same} read back whole");
    assert!(refused >= 40, "every cut is refused: {refused}");
}

#[test]
fn a_damaged_seal_file_is_refused_with_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    drop(Store::open(&dir).unwrap());
    std::fs::write(dir.join(store::SEAL_FILE), b"garbage").unwrap();
    let e = Store::open(&dir).unwrap_err();
    assert!(matches!(e, StoreError::Damaged { .. }), "{e:?}");
    assert!(e.to_string().contains(store::SEAL_FILE), "{e}");
}
