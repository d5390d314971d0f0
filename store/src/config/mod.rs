//! The configured state: nets and their local NIs, peers and their peer NIs, routes,
//! global tunables and UDSP rules, read and written as `lnet::config` types, one item at
//! a time or as a whole `lnetctl export` document ([`Store::import`], [`Store::export`]).
//!
//! Keys (see `keys`): nets by their 32-bit id, peers by primary NID, routes by net then
//! gateway (NIDs in their 20-byte form), tunables by their `lnetctl set` name, UDSP rules
//! by position. Lists therefore come back in that order, whatever order they were added
//! in; the local NIs of a net and the peer NIs of a peer keep their own order.
//!
//! The store does not judge a configuration (that is [`lnet::config::validate`] and
//! [`lnet::tunables::Tunables`], which the caller applies first); it refuses only what
//! it could not keep faithfully: the same key twice in one document, an item added twice,
//! a deleted item that is not there.
//!
//! Tunables: the twelve settable keys of `global:`, `tiny_buffers`, `small_buffers` and
//! `large_buffers` (`buffers:`) and `routing` (`routing: enable`, 0 to 3). `lnd_timeout`
//! is derived by LNet and not stored, as `lnetctl import` ignores it.
//!
//! The `lnet-router:` section (the daemon's own settings, schema 3) is kept beside them
//! (`router`) and goes in and out with the document.

mod net;
mod peer;
mod route;
pub(crate) mod router;
mod tunable;
mod udsp;

pub use net::LocalNiId;

pub(crate) use tunable::decode_tunable_entry;
use tunable::{document_tunables, global_field, tunable_key};

use std::collections::HashSet;

use lnet::config::{Buffers, Config, Global, Routing, RoutingState};
use lnet::tunables::TunableName;

use crate::engine::{TreeId, WriteSet};
use crate::error::{DecodeError, StoreError};
use crate::keys;
use crate::records::{NetRecord, PeerRecord, RouteRecord, UdspRecord};
use crate::Store;

fn check_unique<K: std::hash::Hash + Eq>(
    what: &'static str,
    items: impl Iterator<Item = (K, String)>,
) -> Result<(), StoreError> {
    let mut seen = HashSet::new();
    for (k, printed) in items {
        if !seen.insert(k) {
            return Err(StoreError::Duplicate { what, key: printed });
        }
    }
    Ok(())
}

impl Store {
    /// Replaces the configured nets, peers, routes, tunables (`global:`, `buffers:`,
    /// `routing:`), UDSP rules and the `lnet-router:` section with the document's, in one transaction: after a crash
    /// the store holds either the old configuration or the new one.
    ///
    /// Refuses a document that names the same net, peer or route twice.
    pub fn import(&self, config: &Config) -> Result<(), StoreError> {
        check_unique(
            "net",
            config
                .nets
                .iter()
                .map(|n| (n.net_type, n.net_type.to_string())),
        )?;
        check_unique(
            "peer",
            config
                .peers
                .iter()
                .map(|p| (p.primary_nid, p.primary_nid.to_string())),
        )?;
        check_unique(
            "route",
            config
                .routes
                .iter()
                .map(|r| ((r.net, r.gateway), format!("{} via {}", r.net, r.gateway))),
        )?;
        let _guard = self.lock();
        let mut set = WriteSet::new();
        for id in [
            TreeId::Nets,
            TreeId::Peers,
            TreeId::Routes,
            TreeId::Tunables,
            TreeId::Udsp,
        ] {
            for (k, _) in self.trees.scan_raw(id)? {
                set.remove(id, &k);
            }
        }
        for net in &config.nets {
            set.put(
                TreeId::Nets,
                &keys::net_key(net.net_type),
                &NetRecord::from_model(net),
            )?;
        }
        for peer in &config.peers {
            set.put(
                TreeId::Peers,
                &keys::nid_key(&peer.primary_nid),
                &PeerRecord::from_model(peer),
            )?;
        }
        for route in &config.routes {
            set.put(
                TreeId::Routes,
                &keys::route_key(route.net, &route.gateway),
                &RouteRecord::from_model(route),
            )?;
        }
        for (name, value) in document_tunables(config) {
            set.put_raw(
                TreeId::Tunables,
                tunable_key(name),
                value.to_be_bytes().to_vec(),
            );
        }
        for (i, rule) in config.udsp.iter().enumerate() {
            let idx = u32::try_from(i).map_err(|_| StoreError::InvalidArgument {
                what: "udsp",
                reason: "more than 2^32 rules".to_owned(),
            })?;
            set.put(
                TreeId::Udsp,
                &keys::u32_key(idx),
                &UdspRecord::from_model(rule),
            )?;
        }
        router::put_router(&mut set, config.router.as_ref())?;
        self.trees.commit(set)
    }

    /// The configured state as an `lnetctl export --backup` document: `net:`, `route:`,
    /// `peer:`, `routing:`, `buffers:`, `global:` and `udsp:`, then `lnet-router:`
    /// (sections with nothing set are absent). Importing it into an empty store and exporting again gives the same
    /// document.
    pub fn export(&self) -> Result<Config, StoreError> {
        let _guard = self.lock();
        let nets = self.read_nets()?;
        let peers = self.read_peers()?;
        let routes = self.read_routes()?;
        let udsp = self.read_udsp()?;
        let tunables = self.read_tunables()?;
        let router = self.read_router()?;
        let mut global = Global::default();
        let mut any_global = false;
        let mut buffers = Buffers::default();
        let mut any_buffers = false;
        let mut routing = None;
        for (name, value) in tunables {
            if let Some(field) = global_field(&mut global, name) {
                *field = Some(value);
                any_global = true;
                continue;
            }
            match name {
                TunableName::TinyBuffers => buffers.tiny = Some(value),
                TunableName::SmallBuffers => buffers.small = Some(value),
                TunableName::LargeBuffers => buffers.large = Some(value),
                TunableName::Routing => {
                    let enable =
                        RoutingState::from_u32(value).ok_or_else(|| StoreError::CorruptValue {
                            tree: TreeId::Tunables.name(),
                            key: name.as_str().to_owned(),
                            source: DecodeError::Record {
                                message: format!("routing state {value} is not 0 to 3"),
                            },
                        })?;
                    routing = Some(Routing {
                        enable,
                        cpts: Vec::new(),
                    });
                    continue;
                }
                _ => continue,
            }
            any_buffers = true;
        }
        Ok(Config {
            nets,
            routes,
            peers,
            routing,
            buffers: any_buffers.then_some(buffers),
            global: any_global.then_some(global),
            udsp,
            router,
        })
    }
}
