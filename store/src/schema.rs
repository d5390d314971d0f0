//! The schema version and its migrations.
//!
//! The `meta` tree holds `magic` (the bytes [`MAGIC`], which mark a store of this
//! program), `schema_version` (the schema version, a big-endian `u32`), counters, and
//! (from version 3) `lnet_router`, the daemon's `lnet-router:` section, and (from version
//! 5) `draining`, present while the router is left draining. Opening a store:
//!
//! - a new, empty database is stamped with the magic and [`SCHEMA_VERSION`];
//! - a database without the magic, or with other bytes there, is refused
//!   ([`StoreError::NotAStore`]);
//! - a version newer than [`SCHEMA_VERSION`] is refused, naming both
//!   ([`StoreError::NewerSchema`]);
//! - an older version is brought forward one step at a time by `MIGRATIONS`.
//!
//! # Changing the schema
//!
//! Version 1 is the first release. A change of the on-disk form (a tree, a key layout, a
//! record's fields) bumps [`SCHEMA_VERSION`] and appends one `Step` to `MIGRATIONS`:
//! `MIGRATIONS[n - 1]` turns a version-`n` store into a version-`n + 1` one. A step reads
//! the store and returns the writes that convert it; the runner commits them together with
//! the new version number in one transaction, so a crash during a migration leaves the
//! store at either the old version or the new one.
//!
//! Every future version must keep opening the version-1 fixture committed under
//! `store/tests/fixtures/v1/store/` (the engine's files of a store written by schema 1)
//! and read back exactly the contents that `store/tests/schema_fixtures.rs` lists
//! (`schema_v1_fixture_opens_and_reads_back_exactly_its_contents`): that is what proves a
//! router upgraded in place keeps its state. A new schema version adds its own fixture
//! beside it and keeps the old ones; a change of engine converts these files in a
//! migration rather than dropping the test.

use std::path::Path;

use crate::engine::{decode_value_with, TreeId, Trees, WriteSet};
use crate::error::StoreError;

/// The schema version this program writes and reads.
pub const SCHEMA_VERSION: u32 = 5;

/// The bytes under the `magic` key of the `meta` tree that mark a store of this program.
pub const MAGIC: &[u8] = b"lnet-router store";

/// The key of the magic in the `meta` tree.
pub(crate) const MAGIC_KEY: &[u8] = b"magic";
/// The key of the schema version in the `meta` tree.
pub(crate) const VERSION_KEY: &[u8] = b"schema_version";
/// The name of the engine's default tree, which the store does not use.
const DEFAULT_TREE: &[u8] = b"__sled__default";

/// One migration step: reads a store of version `n` and returns the writes that make it
/// a store of version `n + 1` (the runner adds the version key).
pub(crate) type Step = fn(&Trees) -> Result<WriteSet, StoreError>;

/// The migration steps, `MIGRATIONS[n - 1]` from version `n` to `n + 1`: 1 to 2 stores
/// fault rules in the lnet form; 2 to 3 adds the `lnet-router:` section (`lnet_router` in
/// `meta`), which a version-2 store never held, so it writes nothing but the version; 3 to
/// 4 adds a token's creation time (`created_ms`), which a version-3 token never had, so it
/// writes nothing but the version either; 4 to 5 adds the drain (`draining` in `meta`),
/// which a version-4 store never held (its router was never left draining), so it writes
/// nothing but the version too.
pub(crate) const MIGRATIONS: [Step; 4] = [crate::fault::v1::migrate, v2_to_v3, v3_to_v4, v4_to_v5];

/// Version 2 to 3: the `lnet-router:` section is new; a version-2 store has none (its
/// daemon took the section from the configuration file at every start).
fn v2_to_v3(_: &Trees) -> Result<WriteSet, StoreError> {
    Ok(WriteSet::new())
}

/// Version 3 to 4: a token record may carry `created_ms`; the tokens of a version-3 store
/// have none and read as made at an unknown time. (A version-3 program reading a
/// version-4 token would refuse the field; the version bump makes it refuse the store by
/// its version instead.)
fn v3_to_v4(_: &Trees) -> Result<WriteSet, StoreError> {
    Ok(WriteSet::new())
}

/// Version 4 to 5: the drain is new; a version-4 store's router was not left draining
/// (absent means not draining). (A version-4 program does not read the `draining` key and
/// would put a drained router back in service; the version bump makes it refuse the store
/// by its version instead.)
fn v4_to_v5(_: &Trees) -> Result<WriteSet, StoreError> {
    Ok(WriteSet::new())
}

// One step per version after the first, no more, no fewer.
const _: () = assert!(MIGRATIONS.len() as u32 + 1 == SCHEMA_VERSION);

/// The version-key bytes of `version`.
pub(crate) fn version_bytes(version: u32) -> [u8; 4] {
    version.to_be_bytes()
}

/// The writes that stamp a new store with the magic and `version`.
pub(crate) fn stamp(version: u32) -> WriteSet {
    let mut set = WriteSet::new();
    set.put_raw(TreeId::Meta, MAGIC_KEY, MAGIC.to_vec());
    set.put_raw(TreeId::Meta, VERSION_KEY, version_bytes(version).to_vec());
    set
}

/// The schema version of an open database, or `None` for a new, empty one (or one whose
/// creation stopped before it was stamped: only our trees, all empty). Refuses a database
/// that is not a store of this program. Reads only: a database that is not ours is left
/// as it was found.
pub(crate) fn read_version(db: &sled::Db, path: &Path) -> Result<Option<u32>, StoreError> {
    let not_ours = |reason: &str| StoreError::NotAStore {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    let engine = |e| StoreError::engine("reading the schema version", e);
    let names = db.tree_names();
    let meta_name = TreeId::Meta.name().as_bytes();
    let magic = if names.iter().any(|n| n.as_ref() == meta_name) {
        db.open_tree(meta_name)
            .and_then(|meta| meta.get(MAGIC_KEY))
            .map_err(engine)?
    } else {
        None
    };
    let Some(magic) = magic else {
        return if holds_data(db, &names)? {
            Err(not_ours("the database holds data but no lnet-router magic"))
        } else {
            Ok(None)
        };
    };
    if magic != MAGIC {
        return Err(not_ours("the database has another program's magic"));
    }
    let meta = db.open_tree(meta_name).map_err(engine)?;
    let raw = meta
        .get(VERSION_KEY)
        .map_err(engine)?
        .ok_or_else(|| StoreError::MissingKey {
            tree: TreeId::Meta.name(),
            key: String::from_utf8_lossy(VERSION_KEY).into_owned(),
        })?;
    decode_value_with(TreeId::Meta, VERSION_KEY, &raw, crate::keys::decode_u32).map(Some)
}

/// Whether the database holds anything: a tree that is not one of ours, or a key in any
/// tree, the engine's default tree included.
fn holds_data(db: &sled::Db, names: &[sled::IVec]) -> Result<bool, StoreError> {
    let ours = |n: &[u8]| n == DEFAULT_TREE || TreeId::ALL.iter().any(|t| t.name().as_bytes() == n);
    if names.iter().any(|n| !ours(n)) || !db.is_empty() {
        return Ok(true);
    }
    for name in names.iter().filter(|n| n.as_ref() != DEFAULT_TREE) {
        let tree = db
            .open_tree(name)
            .map_err(|e| StoreError::engine("reading the schema version", e))?;
        if !tree.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Brings a store of version `found` to version `steps.len() + 1`, one step at a time,
/// each committed with its new version number. Returns the final version.
pub(crate) fn migrate(trees: &Trees, found: u32, steps: &[Step]) -> Result<u32, StoreError> {
    let target = u32::try_from(steps.len()).map_or(u32::MAX, |n| n.saturating_add(1));
    if found == 0 {
        return Err(StoreError::InvalidSchema { found });
    }
    if found > target {
        return Err(StoreError::NewerSchema {
            found,
            supported: target,
        });
    }
    let mut version = found;
    for step in steps
        .iter()
        .skip(usize::try_from(found - 1).unwrap_or(usize::MAX))
    {
        let mut set = step(trees)?;
        let next = version.saturating_add(1);
        set.put_raw(TreeId::Meta, VERSION_KEY, version_bytes(next).to_vec());
        trees.commit(set)?;
        version = next;
    }
    Ok(version)
}

/// Decodes a big-endian counter stored in `meta`, 0 when absent.
pub(crate) fn read_counter(trees: &Trees, key: &[u8]) -> Result<u64, StoreError> {
    match trees.get_raw(TreeId::Meta, key)? {
        None => Ok(0),
        Some(raw) => decode_value_with(TreeId::Meta, key, &raw, crate::keys::decode_u64),
    }
}
