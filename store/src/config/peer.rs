//! Configured peers and their peer NIs, keyed by primary NID.

use lnet::config::Peer;
use lnet::Nid;

use crate::engine::{TreeId, WriteSet};
use crate::error::StoreError;
use crate::keys;
use crate::records::{PeerRecord, Stored};
use crate::Store;

impl Store {
    pub(super) fn read_peers(&self) -> Result<Vec<Peer>, StoreError> {
        Ok(self
            .trees
            .scan::<Nid, PeerRecord>(TreeId::Peers, keys::decode_nid)?
            .into_iter()
            .map(|(nid, r)| r.into_model(nid))
            .collect())
    }

    fn read_peer_record(&self, primary: &Nid) -> Result<Option<PeerRecord>, StoreError> {
        self.trees.get(TreeId::Peers, &keys::nid_key(primary))
    }

    /// The configured peers, by primary NID.
    pub fn peers(&self) -> Result<Vec<Peer>, StoreError> {
        let _guard = self.lock();
        self.read_peers()
    }

    /// One configured peer, by primary NID.
    pub fn peer(&self, primary: &Nid) -> Result<Option<Peer>, StoreError> {
        let _guard = self.lock();
        Ok(self
            .read_peer_record(primary)?
            .map(|r| r.into_model(*primary)))
    }

    /// Adds a peer with its Multi-Rail flag and peer NIs, or replaces the peer with that
    /// primary NID. Only the configured part is kept: primary NID, Multi-Rail, the NIDs.
    pub fn put_peer(&self, peer: &Peer) -> Result<(), StoreError> {
        let _guard = self.lock();
        let mut set = WriteSet::new();
        set.put(
            TreeId::Peers,
            &keys::nid_key(&peer.primary_nid),
            &PeerRecord::from_model(peer),
        )?;
        self.trees.commit(set)
    }

    /// Adds a peer NI to the peer with primary NID `primary` (`lnetctl peer add --nid`).
    pub fn add_peer_ni(&self, primary: &Nid, nid: &Nid) -> Result<(), StoreError> {
        let _guard = self.lock();
        let mut record = self
            .read_peer_record(primary)?
            .ok_or_else(|| StoreError::NotFound {
                what: "peer",
                key: primary.to_string(),
            })?;
        if record.peer_nis.iter().any(|n| n.0 == *nid) {
            return Err(StoreError::AlreadyExists {
                what: "peer NI",
                key: format!("{nid} of peer {primary}"),
            });
        }
        record.peer_nis.push(Stored(*nid));
        let mut set = WriteSet::new();
        set.put(TreeId::Peers, &keys::nid_key(primary), &record)?;
        self.trees.commit(set)
    }

    /// Deletes one peer NI of a peer (`lnetctl peer del --nid`); the peer stays.
    pub fn delete_peer_ni(&self, primary: &Nid, nid: &Nid) -> Result<(), StoreError> {
        let _guard = self.lock();
        let not_found = || StoreError::NotFound {
            what: "peer NI",
            key: format!("{nid} of peer {primary}"),
        };
        let mut record = self.read_peer_record(primary)?.ok_or_else(not_found)?;
        let before = record.peer_nis.len();
        record.peer_nis.retain(|n| n.0 != *nid);
        if record.peer_nis.len() == before {
            return Err(not_found());
        }
        let mut set = WriteSet::new();
        set.put(TreeId::Peers, &keys::nid_key(primary), &record)?;
        self.trees.commit(set)
    }

    /// Deletes a peer and all its peer NIs (`lnetctl peer del --prim_nid`).
    pub fn delete_peer(&self, primary: &Nid) -> Result<(), StoreError> {
        let _guard = self.lock();
        let key = keys::nid_key(primary);
        if self.trees.get_raw(TreeId::Peers, &key)?.is_none() {
            return Err(StoreError::NotFound {
                what: "peer",
                key: primary.to_string(),
            });
        }
        let mut set = WriteSet::new();
        set.remove(TreeId::Peers, &key);
        self.trees.commit(set)
    }
}
