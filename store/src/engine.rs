//! The one place that speaks to sled: the trees of the schema, reads that turn engine
//! errors and undecodable bytes into [`StoreError`]s, and [`WriteSet`]s that are committed
//! as one multi-tree transaction and flushed before the call returns.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde::de::DeserializeOwned;
use serde::Serialize;
use sled::transaction::{ConflictableTransactionResult, TransactionError, TransactionalTree};
use sled::Transactional;

use crate::error::{DecodeError, JsonError, StoreError};
use crate::{keys, seal};

/// The trees of the schema. The names are part of the on-disk format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TreeId {
    /// Magic, schema version, counters.
    Meta,
    /// Configured nets and their local NIs, by net.
    Nets,
    /// Configured peers, by primary NID.
    Peers,
    /// Routes, by net then gateway.
    Routes,
    /// Global tunables, by `lnetctl set` name.
    Tunables,
    /// UDSP rules, by position.
    Udsp,
    /// Fault rules, by NI NID then id.
    Faults,
    /// API tokens, by name.
    Tokens,
    /// The event log, by id.
    Events,
}

impl TreeId {
    /// Every tree, in the order of [`Trees`]' fields.
    pub(crate) const ALL: [TreeId; 9] = [
        TreeId::Meta,
        TreeId::Nets,
        TreeId::Peers,
        TreeId::Routes,
        TreeId::Tunables,
        TreeId::Udsp,
        TreeId::Faults,
        TreeId::Tokens,
        TreeId::Events,
    ];

    /// The tree's name on disk.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            TreeId::Meta => "meta",
            TreeId::Nets => "nets",
            TreeId::Peers => "peers",
            TreeId::Routes => "routes",
            TreeId::Tunables => "tunables",
            TreeId::Udsp => "udsp",
            TreeId::Faults => "faults",
            TreeId::Tokens => "tokens",
            TreeId::Events => "events",
        }
    }

    /// A key of this tree, printed for an error: text for trees keyed by names, hex for
    /// binary keys.
    pub(crate) fn print_key(self, key: &[u8]) -> String {
        match self {
            TreeId::Meta | TreeId::Tunables | TreeId::Tokens => {
                String::from_utf8_lossy(key).into_owned()
            }
            _ => keys::hex(key),
        }
    }
}

/// The open database and its trees.
#[derive(Debug)]
pub(crate) struct Trees {
    pub(crate) db: sled::Db,
    /// The store's directory, where the seal is.
    dir: PathBuf,
    /// The generation in the database and in the seal.
    generation: Mutex<Generation>,
    meta: sled::Tree,
    nets: sled::Tree,
    peers: sled::Tree,
    routes: sled::Tree,
    tunables: sled::Tree,
    udsp: sled::Tree,
    faults: sled::Tree,
    tokens: sled::Tree,
    events: sled::Tree,
}

/// The change counter of the database (in memory: it may not be durable yet) and the
/// one in the seal file.
#[derive(Debug, Clone, Copy)]
struct Generation {
    in_db: u64,
    sealed: u64,
}

/// A key and its raw value, as read from a tree.
pub(crate) type Entry = (Vec<u8>, Vec<u8>);

/// The transactional views of all the trees, in [`TreeId::ALL`] order.
type Views = (
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
    TransactionalTree,
);

/// One change to one key: a value to write, or `None` to remove it.
pub(crate) type Write = (TreeId, Vec<u8>, Option<Vec<u8>>);

/// Writes that must land together or not at all.
#[derive(Debug, Default)]
pub(crate) struct WriteSet {
    writes: Vec<Write>,
}

impl WriteSet {
    /// An empty set.
    pub(crate) fn new() -> WriteSet {
        WriteSet::default()
    }

    /// Writes raw bytes.
    pub(crate) fn put_raw(&mut self, tree: TreeId, key: &[u8], value: Vec<u8>) {
        self.writes.push((tree, key.to_vec(), Some(value)));
    }

    /// Writes a record in the schema's JSON form.
    pub(crate) fn put<T: Serialize>(
        &mut self,
        tree: TreeId,
        key: &[u8],
        value: &T,
    ) -> Result<(), StoreError> {
        let bytes = encode(tree, key, value)?;
        self.put_raw(tree, key, bytes);
        Ok(())
    }

    /// Removes a key.
    pub(crate) fn remove(&mut self, tree: TreeId, key: &[u8]) {
        self.writes.push((tree, key.to_vec(), None));
    }

    /// Whether nothing is to be written.
    pub(crate) fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
}

/// A record in the schema's JSON form.
pub(crate) fn encode<T: Serialize>(
    tree: TreeId,
    key: &[u8],
    value: &T,
) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Unrepresentable {
        what: format!(
            "the value for key {} of tree {}",
            tree.print_key(key),
            tree.name()
        ),
        source: e,
    })
}

/// A record read back from its JSON form; a typed error naming the tree and key if the
/// bytes are not one.
pub(crate) fn decode<T: DeserializeOwned>(
    tree: TreeId,
    key: &[u8],
    bytes: &[u8],
) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::CorruptValue {
        tree: tree.name(),
        key: tree.print_key(key),
        source: DecodeError::Json {
            source: JsonError(Arc::new(e)),
        },
    })
}

/// A fixed-layout value read back with `f`; a typed error naming the tree and key if the
/// bytes are not one.
pub(crate) fn decode_value_with<T>(
    tree: TreeId,
    key: &[u8],
    bytes: &[u8],
    f: impl FnOnce(&[u8]) -> Result<T, DecodeError>,
) -> Result<T, StoreError> {
    f(bytes).map_err(|source| StoreError::CorruptValue {
        tree: tree.name(),
        key: tree.print_key(key),
        source,
    })
}

/// A key read back with `f`; a typed error naming the tree and key if it is not one.
pub(crate) fn decode_key<T>(
    tree: TreeId,
    key: &[u8],
    f: impl FnOnce(&[u8]) -> Result<T, DecodeError>,
) -> Result<T, StoreError> {
    f(key).map_err(|source| StoreError::CorruptKey {
        tree: tree.name(),
        key: keys::hex(key),
        source,
    })
}

/// A key and its JSON record, decoded as a scan of tree `id` decodes them.
pub(crate) fn decode_entry<K, T: DeserializeOwned>(
    id: TreeId,
    key: &[u8],
    value: &[u8],
    decode_k: impl FnOnce(&[u8]) -> Result<K, DecodeError>,
) -> Result<(K, T), StoreError> {
    Ok((decode_key(id, key, decode_k)?, decode(id, key, value)?))
}

fn pick(view: &Views, id: TreeId) -> &TransactionalTree {
    match id {
        TreeId::Meta => &view.0,
        TreeId::Nets => &view.1,
        TreeId::Peers => &view.2,
        TreeId::Routes => &view.3,
        TreeId::Tunables => &view.4,
        TreeId::Udsp => &view.5,
        TreeId::Faults => &view.6,
        TreeId::Tokens => &view.7,
        TreeId::Events => &view.8,
    }
}

/// The entries of a scan, copied out of the engine.
fn collect(
    iter: impl Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>,
) -> Result<Vec<Entry>, StoreError> {
    iter.map(|r| {
        r.map(|(k, v)| (k.to_vec(), v.to_vec()))
            .map_err(|e| StoreError::engine("scanning", e))
    })
    .collect()
}

impl Trees {
    /// Opens (or creates) every tree of the schema in `db`, the store at `dir`, and
    /// checks the database against its seal ([`crate::seal`]): refuses one that lost
    /// acknowledged changes.
    pub(crate) fn open(db: sled::Db, dir: &Path) -> Result<Trees, StoreError> {
        let t = |id: TreeId| {
            db.open_tree(id.name())
                .map_err(|e| StoreError::engine("opening a tree", e))
        };
        Trees {
            meta: t(TreeId::Meta)?,
            nets: t(TreeId::Nets)?,
            peers: t(TreeId::Peers)?,
            routes: t(TreeId::Routes)?,
            tunables: t(TreeId::Tunables)?,
            udsp: t(TreeId::Udsp)?,
            faults: t(TreeId::Faults)?,
            tokens: t(TreeId::Tokens)?,
            events: t(TreeId::Events)?,
            db,
            dir: dir.to_owned(),
            generation: Mutex::new(Generation {
                in_db: 0,
                sealed: 0,
            }),
        }
        .check_seal()
    }

    /// Reads the generation and the seal, refuses a database behind its seal, and seals
    /// an unsealed or lagging one (a failure to do so here is left to the next commit,
    /// which seals before it writes).
    fn check_seal(self) -> Result<Trees, StoreError> {
        let in_db = match self.get_raw(TreeId::Meta, seal::GENERATION_KEY)? {
            None => 0,
            Some(raw) => {
                decode_value_with(TreeId::Meta, seal::GENERATION_KEY, &raw, keys::decode_u64)?
            }
        };
        let sealed = seal::read(&self.dir)?;
        seal::check(&self.dir, in_db, sealed)?;
        let mut sealed = sealed.unwrap_or(u64::MAX);
        if sealed != in_db && seal::write(&self.dir, in_db).is_ok() {
            sealed = in_db;
        }
        *self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Generation { in_db, sealed };
        Ok(self)
    }

    /// The tree `id`.
    pub(crate) fn tree(&self, id: TreeId) -> &sled::Tree {
        match id {
            TreeId::Meta => &self.meta,
            TreeId::Nets => &self.nets,
            TreeId::Peers => &self.peers,
            TreeId::Routes => &self.routes,
            TreeId::Tunables => &self.tunables,
            TreeId::Udsp => &self.udsp,
            TreeId::Faults => &self.faults,
            TreeId::Tokens => &self.tokens,
            TreeId::Events => &self.events,
        }
    }

    /// The raw value at `key`.
    pub(crate) fn get_raw(&self, id: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.tree(id)
            .get(key)
            .map(|v| v.map(|v| v.to_vec()))
            .map_err(|e| StoreError::engine("reading", e))
    }

    /// The record at `key`, decoded.
    pub(crate) fn get<T: DeserializeOwned>(
        &self,
        id: TreeId,
        key: &[u8],
    ) -> Result<Option<T>, StoreError> {
        self.get_raw(id, key)?
            .map(|bytes| decode(id, key, &bytes))
            .transpose()
    }

    /// Every key and raw value of a tree, in key order.
    pub(crate) fn scan_raw(&self, id: TreeId) -> Result<Vec<Entry>, StoreError> {
        collect(self.tree(id).iter())
    }

    /// Keys and raw values of a tree from `start` on, at most `limit` of them.
    pub(crate) fn scan_from(
        &self,
        id: TreeId,
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        collect(self.tree(id).range(start.to_vec()..).take(limit))
    }

    /// Keys and raw values of a tree below `end`, the last `limit` of them, in key order.
    pub(crate) fn scan_before(
        &self,
        id: TreeId,
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        let mut entries = collect(self.tree(id).range(..end.to_vec()).rev().take(limit))?;
        entries.reverse();
        Ok(entries)
    }

    /// Every key and raw value of a tree whose key starts with `prefix`.
    pub(crate) fn scan_prefix(&self, id: TreeId, prefix: &[u8]) -> Result<Vec<Entry>, StoreError> {
        collect(self.tree(id).scan_prefix(prefix))
    }

    /// Every key and decoded record of a tree, in key order.
    pub(crate) fn scan<K, T: DeserializeOwned>(
        &self,
        id: TreeId,
        key: impl Fn(&[u8]) -> Result<K, DecodeError>,
    ) -> Result<Vec<(K, T)>, StoreError> {
        self.scan_raw(id)?
            .into_iter()
            .map(|(k, v)| decode_entry(id, &k, &v, &key))
            .collect()
    }

    /// Applies every write of `set` in one transaction over all trees, then flushes: when
    /// this returns `Ok`, all of the writes are durable; after a crash at any point, either
    /// all of them or none are found.
    ///
    /// The commit also bumps the generation and, once flushed, writes it to the seal; an
    /// `Ok` means both are durable. A commit whose flush or seal fails (a full disk) is
    /// undone before the error returns, where the engine still takes writes: what the
    /// store holds, and what a later flush makes durable, is only what it acknowledged,
    /// and the same change can be made again once there is room. A commit after the open
    /// left the seal lagging first flushes and seals what the database holds, and writes
    /// nothing if that fails.
    pub(crate) fn commit(&self, mut set: WriteSet) -> Result<(), StoreError> {
        if set.is_empty() {
            return Ok(());
        }
        let mut generation = self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if generation.sealed != generation.in_db {
            self.flush()?;
            seal::write(&self.dir, generation.in_db)?;
            generation.sealed = generation.in_db;
        }
        let next = generation.in_db.saturating_add(1);
        set.put_raw(
            TreeId::Meta,
            seal::GENERATION_KEY,
            keys::u64_key(next).to_vec(),
        );
        // What the writes replace, to put back if they cannot be made durable: the store
        // then holds, in memory as on disk once flushed, only what it acknowledged.
        let mut undo = Vec::with_capacity(set.writes.len());
        for (id, key, _) in &set.writes {
            undo.push((*id, key.clone(), self.get_raw(*id, key)?));
        }
        self.apply(&set.writes)
            .map_err(|e| StoreError::engine("committing a transaction", e))?;
        let durable = self.flush().and_then(|()| seal::write(&self.dir, next));
        if let Err(e) = durable {
            undo.reverse();
            // When the engine itself failed it refuses every write from then on, this one
            // too: the store is then refused until it is opened again, and the change
            // was not acknowledged either way.
            let _ = self.apply(&undo);
            return Err(e);
        }
        generation.in_db = next;
        generation.sealed = next;
        Ok(())
    }

    /// Applies `writes` (a value, or `None` for a removal) in one transaction.
    fn apply(&self, writes: &[Write]) -> Result<(), sled::Error> {
        let trees = (
            &self.meta,
            &self.nets,
            &self.peers,
            &self.routes,
            &self.tunables,
            &self.udsp,
            &self.faults,
            &self.tokens,
            &self.events,
        );
        let result: Result<(), TransactionError<std::convert::Infallible>> = trees.transaction(
            |view| -> ConflictableTransactionResult<(), std::convert::Infallible> {
                for (id, key, value) in writes {
                    let tree = pick(view, *id);
                    match value {
                        Some(v) => {
                            tree.insert(key.as_slice(), v.as_slice())?;
                        }
                        None => {
                            tree.remove(key.as_slice())?;
                        }
                    }
                }
                Ok(())
            },
        );
        match result {
            Ok(()) => Ok(()),
            Err(TransactionError::Storage(e)) => Err(e),
            Err(TransactionError::Abort(never)) => match never {},
        }
    }

    /// Makes everything written so far durable.
    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        self.db
            .flush()
            .map(|_| ())
            .map_err(|e| StoreError::engine("flushing to disk", e))
    }
}
