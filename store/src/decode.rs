//! One stored record decoded on its own, exactly as the store's reads decode it, without
//! an open database: what the fuzz targets drive (`store/fuzz`), and a way to check a
//! key and value copied out of a damaged store.
//!
//! Every decoder returns a typed [`StoreError`] (`CorruptKey`, `CorruptValue`,
//! `MissingKey`) naming the tree and the key for bytes that are not a record; none panics.

use crate::engine::{decode_entry, decode_value_with, TreeId};
use crate::error::{DecodeError, StoreError};
use crate::records::{NetRecord, PeerRecord, RouteRecord, UdspRecord};
use crate::{keys, schema};

/// The record decoders of the schema, one per kind of stored value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordKind {
    /// `meta`: the magic, the schema version and the id counters.
    Meta,
    /// `nets`: a configured net and its local NIs, by net.
    Net,
    /// `peers`: a configured peer, by primary NID.
    Peer,
    /// `routes`: a route, by net and gateway.
    Route,
    /// `tunables`: a global tunable, by name.
    Tunable,
    /// `udsp`: a UDSP rule, by position.
    Udsp,
    /// `faults`: a fault rule in the current (schema 2) form, by NI and id.
    Fault,
    /// `faults`: a fault rule in the schema-1 form, as the migration reads it.
    FaultV1,
    /// `tokens`: an API token, by name.
    Token,
    /// `events`: an event of the log, by id.
    Event,
}

impl RecordKind {
    /// Every kind.
    pub const ALL: [RecordKind; 10] = [
        RecordKind::Meta,
        RecordKind::Net,
        RecordKind::Peer,
        RecordKind::Route,
        RecordKind::Tunable,
        RecordKind::Udsp,
        RecordKind::Fault,
        RecordKind::FaultV1,
        RecordKind::Token,
        RecordKind::Event,
    ];
}

/// Decodes `key` and `value` as a record of `kind`, as reading the store would: `Ok` when
/// a read would return it, the read's typed error otherwise.
pub fn decode_record(kind: RecordKind, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
    match kind {
        RecordKind::Meta => decode_meta(key, value),
        RecordKind::Net => {
            let (net, r): (_, NetRecord) =
                decode_entry(TreeId::Nets, key, value, keys::decode_net)?;
            drop(r.into_model(net));
            Ok(())
        }
        RecordKind::Peer => {
            let (nid, r): (_, PeerRecord) =
                decode_entry(TreeId::Peers, key, value, keys::decode_nid)?;
            drop(r.into_model(nid));
            Ok(())
        }
        RecordKind::Route => {
            let ((net, gw), r): (_, RouteRecord) =
                decode_entry(TreeId::Routes, key, value, keys::decode_route)?;
            let _route = r.into_model(net, gw);
            Ok(())
        }
        RecordKind::Tunable => crate::config::decode_tunable_entry(key, value).map(drop),
        RecordKind::Udsp => {
            let (idx, r): (_, UdspRecord) =
                decode_entry(TreeId::Udsp, key, value, keys::decode_u32)?;
            drop(r.into_model(idx));
            Ok(())
        }
        RecordKind::Fault => crate::fault::decode_fault_entry(key, value).map(drop),
        RecordKind::FaultV1 => crate::fault::v1::decode_v1(key, value).map(drop),
        RecordKind::Token => crate::token::decode_token_entry(key, value).map(drop),
        RecordKind::Event => crate::events::decode_event_entry(key, value).map(drop),
    }
}

/// A `meta` entry: the magic must be ours, the version a big-endian `u32` the program
/// knows, the counters big-endian `u64`s, the drain a JSON boolean.
fn decode_meta(key: &[u8], value: &[u8]) -> Result<(), StoreError> {
    let meta = TreeId::Meta;
    if key == schema::MAGIC_KEY {
        return decode_value_with(meta, key, value, |v| {
            if v == schema::MAGIC {
                Ok(())
            } else {
                Err(DecodeError::Record {
                    message: "not the lnet-router magic".to_owned(),
                })
            }
        });
    }
    if key == schema::VERSION_KEY {
        let version = decode_value_with(meta, key, value, keys::decode_u32)?;
        if version == 0 {
            return Err(StoreError::InvalidSchema { found: version });
        }
        if version > schema::SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                found: version,
                supported: schema::SCHEMA_VERSION,
            });
        }
        return Ok(());
    }
    if key == crate::events::NEXT_EVENT_ID_KEY
        || key == crate::fault::NEXT_RULE_ID_KEY
        || key == crate::seal::GENERATION_KEY
    {
        return decode_value_with(meta, key, value, keys::decode_u64).map(drop);
    }
    if key == crate::config::router::ROUTER_KEY {
        let record: crate::config::router::RouterRecord = crate::engine::decode(meta, key, value)?;
        return record.into_model().map(drop);
    }
    if key == crate::drain::DRAINING_KEY {
        return decode_value_with(meta, key, value, |v| {
            serde_json::from_slice::<bool>(v)
                .map(drop)
                .map_err(|e| DecodeError::Record {
                    message: format!("draining: {e}"),
                })
        });
    }
    Err(StoreError::CorruptKey {
        tree: meta.name(),
        key: keys::hex(key),
        source: DecodeError::Name {
            text: String::from_utf8_lossy(key).into_owned(),
            reason: "not a key of the meta tree",
        },
    })
}
