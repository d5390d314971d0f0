//! Whether the router was left draining (schema 5): `lnet-router drain` takes a router
//! out of service without stopping it, and a drained router that restarts comes back
//! drained until `lnetctl set routing 1` brings it back. Kept as the `draining` key of the
//! `meta` tree, present (`true`) only while draining, so that a store of an older schema
//! reads as not draining.

use crate::engine::{TreeId, WriteSet};
use crate::error::StoreError;
use crate::Store;

/// The key of the drain in the `meta` tree.
pub(crate) const DRAINING_KEY: &[u8] = b"draining";

impl Store {
    /// Whether the router was left draining.
    pub fn draining(&self) -> Result<bool, StoreError> {
        let _guard = self.lock();
        Ok(self
            .trees
            .get::<bool>(TreeId::Meta, DRAINING_KEY)?
            .unwrap_or(false))
    }

    /// Keeps whether the router is draining.
    pub fn set_draining(&self, draining: bool) -> Result<(), StoreError> {
        let _guard = self.lock();
        let mut set = WriteSet::new();
        if draining {
            set.put(TreeId::Meta, DRAINING_KEY, &true)?;
        } else {
            set.remove(TreeId::Meta, DRAINING_KEY);
        }
        self.trees.commit(set)
    }
}
