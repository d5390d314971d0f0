//! The errors of the store: one enum for the API ([`StoreError`]), one for reading a
//! stored key or value back ([`DecodeError`]), and an opaque wrapper for the storage
//! engine's own errors ([`EngineError`]) so that no caller depends on the engine.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// An error of the storage engine (I/O, corruption the engine detected itself), kept
/// opaque: its text and its source chain are all a caller sees.
#[derive(Debug)]
pub struct EngineError(pub(crate) sled::Error);

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// A JSON value that does not decode as its record: the decoder's error, shared so that a
/// [`DecodeError`] stays cheap to clone; two are equal when they say the same.
#[derive(Debug, Clone)]
pub struct JsonError(pub(crate) Arc<serde_json::Error>);

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for JsonError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

impl PartialEq for JsonError {
    fn eq(&self, other: &JsonError) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for JsonError {}

/// Why a stored key or value could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A fixed-size key or value has the wrong number of bytes.
    #[error("expected {expected} bytes, found {found}")]
    Length {
        /// Bytes this key or value has in the schema.
        expected: usize,
        /// Bytes found.
        found: usize,
    },
    /// A NID or net in its binary form is not in its canonical form.
    #[error("invalid binary NID: {reason}")]
    Nid {
        /// What is wrong with it.
        reason: String,
    },
    /// A NID in its 20-byte binary form is not one.
    #[error("invalid binary NID: {source}")]
    NidBytes {
        /// lnet's reason.
        #[source]
        source: Box<lnet::NidError>,
    },
    /// A name key (tunable, token) is not one the schema allows.
    #[error("invalid name {text:?}: {reason}")]
    Name {
        /// The key as text (lossy UTF-8).
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A JSON value does not have the shape of its record.
    #[error("invalid record: {source}")]
    Json {
        /// The JSON decoder's error (with line and column).
        #[source]
        source: JsonError,
    },
    /// A record decodes but holds a value the schema does not allow.
    #[error("invalid record: {message}")]
    Record {
        /// What is wrong.
        message: String,
    },
}

/// The error of every store operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The storage engine failed (I/O error, or corruption it found in its own files).
    #[error("storage engine error while {context}")]
    Engine {
        /// What the store was doing.
        context: &'static str,
        /// The engine's error.
        #[source]
        source: EngineError,
    },
    /// The path holds something that is not a store of this program.
    #[error("{} is not an lnet-router store: {reason}", path.display())]
    NotAStore {
        /// The path given to [`Store::open`](crate::Store::open).
        path: PathBuf,
        /// What was found instead.
        reason: String,
    },
    /// The store was written by a newer version of this program.
    #[error(
        "the store has schema version {found}, newer than version {supported} that this \
         program reads; upgrade the program or restore a backup"
    )]
    NewerSchema {
        /// The store's schema version.
        found: u32,
        /// The newest version this program reads.
        supported: u32,
    },
    /// The path is a directory that cannot be listed.
    #[error("{} is not an lnet-router store: the directory cannot be read: {source}", path.display())]
    Unreadable {
        /// The path given to [`Store::open`](crate::Store::open).
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The store's schema version is older than the first release.
    #[error("the store has schema version {found}, and versions start at 1")]
    InvalidSchema {
        /// The version found.
        found: u32,
    },
    /// A key that the schema requires is absent.
    #[error("tree {tree}: required key {key} is missing")]
    MissingKey {
        /// The tree.
        tree: &'static str,
        /// The key, printed.
        key: String,
    },
    /// A stored key could not be decoded.
    #[error("tree {tree}: corrupt key {key}")]
    CorruptKey {
        /// The tree.
        tree: &'static str,
        /// The key bytes in hex.
        key: String,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// A stored value could not be decoded.
    #[error("tree {tree}: corrupt value at key {key}")]
    CorruptValue {
        /// The tree.
        tree: &'static str,
        /// The key, printed (text for name keys, hex for binary keys).
        key: String,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// A value cannot be written in the schema's form (for example a NID whose text form
    /// does not read back as the same NID).
    #[error("{what} cannot be stored: {source}")]
    Unrepresentable {
        /// What was being written.
        what: String,
        /// The JSON encoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// The item to change or delete does not exist.
    #[error("{what} {key} does not exist")]
    NotFound {
        /// The kind of item (`peer`, `route`, ...).
        what: &'static str,
        /// The item, printed as lnetctl prints it.
        key: String,
    },
    /// The item to add exists already.
    #[error("{what} {key} already exists")]
    AlreadyExists {
        /// The kind of item.
        what: &'static str,
        /// The item, printed as lnetctl prints it.
        key: String,
    },
    /// An imported document names the same item twice.
    #[error("the document has {what} {key} twice")]
    Duplicate {
        /// The kind of item.
        what: &'static str,
        /// The item, printed.
        key: String,
    },
    /// An argument is out of the range the store accepts.
    #[error("invalid {what}: {reason}")]
    InvalidArgument {
        /// The argument.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// A fault rule the LNet layer would refuse.
    #[error("invalid fault rule")]
    FaultRule(#[source] lnet::fault::FaultRuleError),
    /// The store's files lost changes it had acknowledged (truncated or damaged), or its
    /// seal is not its own: refused rather than served as an older state.
    #[error("{} is damaged: {reason}", path.display())]
    Damaged {
        /// The store's directory.
        path: PathBuf,
        /// What was found.
        reason: String,
    },
    /// The seal file could not be read or written (a full disk, say): the change, if one
    /// was being made, is not acknowledged.
    #[error("the store's seal {} could not be read or written: {source}", path.display())]
    SealIo {
        /// The seal file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    /// Wraps an engine error with what the store was doing.
    pub(crate) fn engine(context: &'static str, source: sled::Error) -> StoreError {
        StoreError::Engine {
            context,
            source: EngineError(source),
        }
    }
}
