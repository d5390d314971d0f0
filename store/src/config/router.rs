//! The `lnet-router:` section (schema 3): the daemon's own settings, kept as one record
//! under the `lnet_router` key of the `meta` tree, so that a node run from its store
//! alone listens where it was configured to.

use std::net::IpAddr;

use lnet::config::{NetCheckSetting, RouterSection};
use serde::{Deserialize, Serialize};

use crate::engine::{TreeId, WriteSet};
use crate::error::{DecodeError, StoreError};
use crate::Store;

/// The key of the section in the `meta` tree.
pub(crate) const ROUTER_KEY: &[u8] = b"lnet_router";

/// The stored form of [`RouterSection`]: every setting optional, as in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RouterRecord {
    acceptor_address: Option<IpAddr>,
    acceptor_port: Option<u16>,
    alive_router_check_interval: Option<u32>,
    router_ping_timeout: Option<u32>,
    avoid_asym_router_failure: Option<u32>,
    check_routers_before_use: Option<u32>,
    net_check: Option<String>,
    net_probe_interval_ms: Option<u64>,
    net_down_after_ms: Option<u64>,
}

impl RouterRecord {
    pub(crate) fn from_model(s: &RouterSection) -> RouterRecord {
        RouterRecord {
            acceptor_address: s.acceptor_address,
            acceptor_port: s.acceptor_port,
            alive_router_check_interval: s.alive_router_check_interval,
            router_ping_timeout: s.router_ping_timeout,
            avoid_asym_router_failure: s.avoid_asym_router_failure,
            check_routers_before_use: s.check_routers_before_use,
            net_check: s.net_check.map(|c| c.as_str().to_owned()),
            net_probe_interval_ms: s.net_probe_interval_ms,
            net_down_after_ms: s.net_down_after_ms,
        }
    }

    pub(crate) fn into_model(self) -> Result<RouterSection, StoreError> {
        let net_check = match self.net_check.as_deref() {
            None => None,
            Some(text) => {
                Some(
                    NetCheckSetting::parse(text).ok_or_else(|| StoreError::CorruptValue {
                        tree: TreeId::Meta.name(),
                        key: String::from_utf8_lossy(ROUTER_KEY).into_owned(),
                        source: DecodeError::Record {
                            message: format!("net_check `{text}` is not active, passive or off"),
                        },
                    })?,
                )
            }
        };
        Ok(RouterSection {
            acceptor_address: self.acceptor_address,
            acceptor_port: self.acceptor_port,
            alive_router_check_interval: self.alive_router_check_interval,
            router_ping_timeout: self.router_ping_timeout,
            avoid_asym_router_failure: self.avoid_asym_router_failure,
            check_routers_before_use: self.check_routers_before_use,
            net_check,
            net_probe_interval_ms: self.net_probe_interval_ms,
            net_down_after_ms: self.net_down_after_ms,
        })
    }
}

/// Adds to `set` the writes that make the stored section `section` (removed for `None`).
pub(super) fn put_router(
    set: &mut WriteSet,
    section: Option<&RouterSection>,
) -> Result<(), StoreError> {
    match section {
        Some(s) => set.put(TreeId::Meta, ROUTER_KEY, &RouterRecord::from_model(s)),
        None => {
            set.remove(TreeId::Meta, ROUTER_KEY);
            Ok(())
        }
    }
}

impl Store {
    pub(super) fn read_router(&self) -> Result<Option<RouterSection>, StoreError> {
        self.trees
            .get::<RouterRecord>(TreeId::Meta, ROUTER_KEY)?
            .map(RouterRecord::into_model)
            .transpose()
    }

    /// The stored `lnet-router:` section, if any.
    pub fn router_section(&self) -> Result<Option<RouterSection>, StoreError> {
        let _guard = self.lock();
        self.read_router()
    }

    /// Replaces the stored `lnet-router:` section (`None` removes it).
    pub fn set_router_section(&self, section: Option<&RouterSection>) -> Result<(), StoreError> {
        let _guard = self.lock();
        let mut set = WriteSet::new();
        put_router(&mut set, section)?;
        self.trees.commit(set)
    }
}
