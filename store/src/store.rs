//! [`Store`]: opening the database (schema check and migrations) and the lock that
//! serialises its writers.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::engine::Trees;
use crate::error::StoreError;
use crate::schema;

/// Events kept by default.
pub const DEFAULT_EVENT_CAPACITY: u64 = 10_000;

/// Bytes of the engine's page cache.
const CACHE_BYTES: u64 = 16 * 1024 * 1024;

/// How a store is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// How many events the log keeps: appending one more drops the oldest. At least 1.
    pub event_capacity: u64,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            event_capacity: DEFAULT_EVENT_CAPACITY,
        }
    }
}

/// The persistent state of a router node.
///
/// Every mutation returns only once it is durable on disk, and a mutation that touches
/// several keys is one transaction: after a crash, the store holds the state after some
/// prefix of the completed mutations, plus possibly the one in flight, never part of one.
/// Reads take the same lock as writes, so a multi-key read ([`Store::export`]) sees one
/// state. A `Store` is `Send + Sync`; share it behind an `Arc`. One process opens a store
/// at a time (the engine locks the directory).
#[derive(Debug)]
pub struct Store {
    pub(crate) trees: Trees,
    lock: Mutex<()>,
    path: PathBuf,
    pub(crate) event_capacity: u64,
}

impl Store {
    /// Opens the store at `path` with the default options, creating it if the directory
    /// does not exist or is empty. See [`Store::open_with`].
    pub fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        Store::open_with(path, StoreOptions::default())
    }

    /// Opens the store at `path`, creating it if the directory does not exist or is
    /// empty, checking its schema version and migrating an older one (see
    /// [`crate::schema`]).
    ///
    /// Refuses a path that holds something else ([`StoreError::NotAStore`]) and a store
    /// written by a newer version of this program ([`StoreError::NewerSchema`]).
    pub fn open_with(path: impl AsRef<Path>, options: StoreOptions) -> Result<Store, StoreError> {
        let path = path.as_ref().to_owned();
        if options.event_capacity == 0 {
            return Err(StoreError::InvalidArgument {
                what: "event_capacity",
                reason: "the event log keeps at least one event".to_owned(),
            });
        }
        check_path(&path)?;
        let db = open_engine(&path)?;
        let version = schema::read_version(&db, &path)?;
        let trees = Trees::open(db, &path)?;
        match version {
            None => trees.commit(schema::stamp(schema::SCHEMA_VERSION))?,
            Some(found) => {
                schema::migrate(&trees, found, &schema::MIGRATIONS)?;
            }
        }
        let store = Store {
            trees,
            lock: Mutex::new(()),
            path,
            event_capacity: options.event_capacity,
        };
        store.trim_events()?;
        Ok(store)
    }

    /// The directory the store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open store: always [`schema::SCHEMA_VERSION`], since
    /// opening migrates older stores.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        let _guard = self.lock();
        schema::read_version(&self.trees.db, &self.path)?.ok_or_else(|| StoreError::MissingKey {
            tree: crate::engine::TreeId::Meta.name(),
            key: String::from_utf8_lossy(schema::VERSION_KEY).into_owned(),
        })
    }

    /// Takes the writers' lock. A thread that panicked while holding it cannot have left
    /// a torn state (every change is one transaction), so a poisoned lock is taken over.
    pub(crate) fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How many times [`open_engine`] tries to take the directory's lock.
const LOCK_ATTEMPTS: u32 = 10_000;

/// Opens the engine. The engine locks the directory, and releases that lock some moments
/// after its last handle is dropped (background I/O threads and deferred reclamation
/// close its files), so a store dropped and reopened at once in one process can find
/// its own lock still held: the lock is tried again, yielding the CPU in between, a
/// bounded number of times (well under a second in all), before the error is reported
/// (as it is when another process has the store open).
fn open_engine(path: &Path) -> Result<sled::Db, StoreError> {
    let config = sled::Config::new()
        .path(path)
        .cache_capacity(CACHE_BYTES)
        .flush_every_ms(None);
    let mut attempt = 1;
    loop {
        match config.open() {
            Ok(db) => return Ok(db),
            Err(e) if is_lock_held(&e) && attempt < LOCK_ATTEMPTS => {
                attempt += 1;
                std::thread::yield_now();
            }
            Err(e) => return Err(StoreError::engine("opening the database", e)),
        }
    }
}

/// Whether the engine could not open because the directory's lock is held.
fn is_lock_held(e: &sled::Error) -> bool {
    matches!(e, sled::Error::Io(io) if io.to_string().starts_with("could not acquire lock"))
}

/// Refuses a path that is a file, or a non-empty directory without the engine's files.
fn check_path(path: &Path) -> Result<(), StoreError> {
    let not_ours = |reason: String| StoreError::NotAStore {
        path: path.to_owned(),
        reason,
    };
    let Ok(meta) = std::fs::metadata(path) else {
        // Absent: the engine creates it (and reports what stops it from doing so).
        return Ok(());
    };
    if !meta.is_dir() {
        return Err(not_ours("it is not a directory".to_owned()));
    }
    let unreadable = |source| StoreError::Unreadable {
        path: path.to_owned(),
        source,
    };
    let entries = std::fs::read_dir(path).map_err(unreadable)?;
    let mut empty = true;
    for entry in entries {
        let entry = entry.map_err(unreadable)?;
        empty = false;
        if entry.file_name() == "conf" {
            return Ok(());
        }
    }
    if empty {
        Ok(())
    } else {
        Err(not_ours(
            "the directory holds files but no database".to_owned(),
        ))
    }
}
