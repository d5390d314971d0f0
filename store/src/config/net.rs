//! Configured nets and their local NIs, keyed by the net's 32-bit id.

use lnet::config::{LocalNi, NetConfig};
use lnet::{Net, Nid};

use crate::engine::{TreeId, WriteSet};
use crate::error::StoreError;
use crate::keys;
use crate::records::{LocalNiRecord, NetRecord};
use crate::Store;

/// Names one local NI of a net: by its NID, or, for an NI configured without one (the
/// `--backup` form), by its first interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalNiId {
    /// The NI with this NID.
    Nid(Nid),
    /// The NI without a NID whose first interface is this one.
    Interface(String),
}

impl LocalNiId {
    /// How `ni` is named: its NID if it has one, else its first interface; `None` for an
    /// NI with neither.
    pub fn of(ni: &LocalNi) -> Option<LocalNiId> {
        match (ni.nid, ni.interfaces.first()) {
            (Some(nid), _) => Some(LocalNiId::Nid(nid)),
            (None, Some(i)) => Some(LocalNiId::Interface(i.clone())),
            (None, None) => None,
        }
    }

    /// Whether `ni` is the NI this names: by NID when it has one, else by its first
    /// interface.
    fn names(&self, ni: &LocalNiRecord) -> bool {
        match self {
            LocalNiId::Nid(nid) => ni.nid.map(|n| n.0) == Some(*nid),
            LocalNiId::Interface(name) => ni.nid.is_none() && ni.interfaces.first() == Some(name),
        }
    }
}

impl std::fmt::Display for LocalNiId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LocalNiId::Nid(nid) => nid.fmt(f),
            LocalNiId::Interface(i) => write!(f, "interface {i}"),
        }
    }
}

impl Store {
    pub(super) fn read_nets(&self) -> Result<Vec<NetConfig>, StoreError> {
        Ok(self
            .trees
            .scan::<Net, NetRecord>(TreeId::Nets, keys::decode_net)?
            .into_iter()
            .map(|(net, r)| r.into_model(net))
            .collect())
    }

    fn read_net_record(&self, net: Net) -> Result<Option<NetRecord>, StoreError> {
        self.trees.get(TreeId::Nets, &keys::net_key(net))
    }

    /// The configured nets and their local NIs, by net id.
    pub fn nets(&self) -> Result<Vec<NetConfig>, StoreError> {
        let _guard = self.lock();
        self.read_nets()
    }

    /// One configured net.
    pub fn net(&self, net: Net) -> Result<Option<NetConfig>, StoreError> {
        let _guard = self.lock();
        Ok(self.read_net_record(net)?.map(|r| r.into_model(net)))
    }

    /// Adds a net with its local NIs, or replaces the net of that type.
    pub fn put_net(&self, net: &NetConfig) -> Result<(), StoreError> {
        let _guard = self.lock();
        let mut set = WriteSet::new();
        set.put(
            TreeId::Nets,
            &keys::net_key(net.net_type),
            &NetRecord::from_model(net),
        )?;
        self.trees.commit(set)
    }

    /// Adds a local NI to `net` (`lnetctl net add`), creating the net if it has none.
    /// Refuses an NI without a NID or interface, and one the net has already.
    pub fn add_local_ni(&self, net: Net, ni: &LocalNi) -> Result<(), StoreError> {
        let id = LocalNiId::of(ni).ok_or_else(|| StoreError::InvalidArgument {
            what: "local NI",
            reason: "it has neither a NID nor an interface".to_owned(),
        })?;
        let _guard = self.lock();
        let mut record = self.read_net_record(net)?.unwrap_or(NetRecord {
            local_nis: Vec::new(),
        });
        if record.local_nis.iter().any(|r| id.names(r)) {
            return Err(StoreError::AlreadyExists {
                what: "local NI",
                key: format!("{id} on {net}"),
            });
        }
        record.local_nis.push(LocalNiRecord::from_model(ni));
        let mut set = WriteSet::new();
        set.put(TreeId::Nets, &keys::net_key(net), &record)?;
        self.trees.commit(set)
    }

    /// Deletes one local NI of `net` (`lnetctl net del --nid`); the net stays, with the
    /// NIs it has left.
    pub fn delete_local_ni(&self, net: Net, ni: &LocalNiId) -> Result<(), StoreError> {
        let _guard = self.lock();
        let not_found = || StoreError::NotFound {
            what: "local NI",
            key: format!("{ni} on {net}"),
        };
        let mut record = self.read_net_record(net)?.ok_or_else(not_found)?;
        let before = record.local_nis.len();
        record.local_nis.retain(|r| !ni.names(r));
        if record.local_nis.len() == before {
            return Err(not_found());
        }
        let mut set = WriteSet::new();
        set.put(TreeId::Nets, &keys::net_key(net), &record)?;
        self.trees.commit(set)
    }

    /// Deletes a net and all its local NIs (`lnetctl net del --net`).
    pub fn delete_net(&self, net: Net) -> Result<(), StoreError> {
        let _guard = self.lock();
        let key = keys::net_key(net);
        if self.trees.get_raw(TreeId::Nets, &key)?.is_none() {
            return Err(StoreError::NotFound {
                what: "net",
                key: net.to_string(),
            });
        }
        let mut set = WriteSet::new();
        set.remove(TreeId::Nets, &key);
        self.trees.commit(set)
    }
}
