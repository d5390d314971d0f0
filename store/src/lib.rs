//! The persistent state of a router node: configured nets and local NIs, peers and their
//! NIDs, routes, global tunables, UDSP rules, fault injection rules, API tokens and a
//! bounded log of health events.
//!
//! The rest of the code sees [`Store`] and the types it takes and returns, never the
//! engine (sled) underneath, so the engine can change inside this crate alone.
//!
//! - Durability: every mutation returns after the engine flushed it to disk.
//! - Atomicity: a mutation that touches several keys (an import, a UDSP insert that moves
//!   the rules after it, an event append that drops the oldest one) is one transaction;
//!   a crash never leaves part of one.
//! - Versioning: the schema has a version, checked on open, with migrations step by step
//!   ([`schema`]).
//! - Bad bytes on disk are reported as [`StoreError::CorruptKey`] or
//!   [`StoreError::CorruptValue`], naming the tree and the key; nothing panics.
//! - Lost changes: a database file truncated or damaged so that it lost changes the
//!   store acknowledged is refused at open ([`StoreError::Damaged`], see `seal`).
//! - A full disk: a change that cannot be made durable fails with the engine's or the
//!   seal's I/O error and is not acknowledged.
//!
//! ```no_run
//! # fn main() -> Result<(), store::StoreError> {
//! let store = store::Store::open("/var/lib/lnet-router/store")?;
//! let config = lnet::config::parse("net:\n    - net type: tcp\n").unwrap_or_default();
//! store.import(&config)?;
//! print!("{}", store.export()?.to_yaml());
//! # Ok(())
//! # }
//! ```

mod config;
mod decode;
mod drain;
mod engine;
mod error;
mod events;
mod fault;
mod keys;
mod records;
pub mod schema;
mod seal;
mod store;
mod token;
mod tokens_file;

#[cfg(test)]
mod tests;

pub use config::LocalNiId;
pub use decode::{decode_record, RecordKind};
pub use error::{DecodeError, EngineError, JsonError, StoreError};
pub use events::{Event, EventRecord, RecoveryQueue};
pub use fault::StoredFaultRule;
pub use keys::MAX_TOKEN_NAME;
pub use seal::SEAL_FILE;
pub use store::{Store, StoreOptions, DEFAULT_EVENT_CAPACITY};
pub use token::{Role, TokenInfo, MIN_SECRET_BYTES};
pub use tokens_file::{parse_tokens_file, TokenLine, TokensFileError};
