//! The seal: a small file beside the engine's files that records how many changes the
//! store has acknowledged, so that a database file that lost some of them (truncated,
//! overwritten, or damaged so that the engine's recovery stops early) is refused at open
//! instead of being served as an older or empty state.
//!
//! Every commit bumps a generation counter in the `meta` tree, in the same transaction as
//! its writes, flushes, and then replaces the seal file (write, fsync, rename, fsync of the
//! directory) with the new generation. A crash between the flush and the seal leaves the
//! database one generation ahead of the seal, which is accepted; a database behind its
//! seal lost acknowledged changes and is refused ([`StoreError::Damaged`]). A commit never
//! starts while the seal lags the database (a seal write failed, on a full disk say): it
//! first flushes and seals what is there, so the database is never more than one
//! generation ahead.
//!
//! A store without a seal file (one written before the seal existed) is accepted as it is
//! and sealed at open.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// The seal's file name inside the store directory.
pub const SEAL_FILE: &str = "lnet-router.seal";
/// The `meta` key of the generation counter.
pub(crate) const GENERATION_KEY: &[u8] = b"generation";
/// The first line of a seal file.
const HEADER: &str = "lnet-router store seal";

/// The seal file of the store at `dir`.
pub(crate) fn path(dir: &Path) -> PathBuf {
    dir.join(SEAL_FILE)
}

/// The generation in the seal, `None` when there is no seal file.
pub(crate) fn read(dir: &Path) -> Result<Option<u64>, StoreError> {
    let file = path(dir);
    let text = match std::fs::read(&file) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(StoreError::SealIo { path: file, source }),
    };
    parse(&text).map(Some).ok_or(StoreError::Damaged {
        path: dir.to_owned(),
        reason: format!("the seal file {SEAL_FILE} is not one"),
    })
}

/// The generation of a seal file's bytes.
fn parse(bytes: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    let n = lines.next()?.strip_prefix("generation ")?.parse().ok()?;
    lines.next().is_none().then_some(n)
}

/// Replaces the seal with `generation`, durably.
pub(crate) fn write(dir: &Path, generation: u64) -> Result<(), StoreError> {
    let file = path(dir);
    let tmp = dir.join(format!("{SEAL_FILE}.tmp"));
    let io = |source| StoreError::SealIo {
        path: file.clone(),
        source,
    };
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(format!("{HEADER}\ngeneration {generation}\n").as_bytes())
        .map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, &file).map_err(io)?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io)
}

/// Checks the database's generation against the seal at open: `Ok` when the database
/// holds every change the seal acknowledged.
pub(crate) fn check(dir: &Path, in_db: u64, sealed: Option<u64>) -> Result<(), StoreError> {
    let Some(sealed) = sealed else {
        return Ok(());
    };
    if in_db < sealed {
        return Err(StoreError::Damaged {
            path: dir.to_owned(),
            reason: format!(
                "the database holds {in_db} of the {sealed} changes the store acknowledged: \
                 its files were truncated or damaged; restore a backup of the whole store \
                 directory, seal file included"
            ),
        });
    }
    if in_db > sealed.saturating_add(1) {
        return Err(StoreError::Damaged {
            path: dir.to_owned(),
            reason: format!(
                "the database is at change {in_db} but its seal at {sealed}: the seal file \
                 is not this database's"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn seal_text_round_trips_and_anything_else_is_refused() {
        assert_eq!(parse(b"lnet-router store seal\ngeneration 42\n"), Some(42));
        for bad in [
            &b""[..],
            b"lnet-router store seal\n",
            b"lnet-router store seal\ngeneration x\n",
            b"lnet-router store seal\ngeneration 1\nmore\n",
            b"other\ngeneration 1\n",
            b"\xff\xfe",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        let d = Path::new("/s");
        assert!(check(d, 5, None).is_ok());
        assert!(check(d, 5, Some(5)).is_ok());
        assert!(check(d, 6, Some(5)).is_ok());
        assert!(check(d, 4, Some(5))
            .unwrap_err()
            .to_string()
            .contains("4 of the 5"));
        assert!(check(d, 7, Some(5)).is_err());
    }
}
