//! Routes, keyed by remote net then gateway.

use lnet::config::Route;
use lnet::{Net, Nid};

use crate::engine::{TreeId, WriteSet};
use crate::error::StoreError;
use crate::keys;
use crate::records::RouteRecord;
use crate::Store;

impl Store {
    pub(super) fn read_routes(&self) -> Result<Vec<Route>, StoreError> {
        Ok(self
            .trees
            .scan::<(Net, Nid), RouteRecord>(TreeId::Routes, keys::decode_route)?
            .into_iter()
            .map(|((net, gw), r)| r.into_model(net, gw))
            .collect())
    }

    /// The routes, by net then gateway.
    pub fn routes(&self) -> Result<Vec<Route>, StoreError> {
        let _guard = self.lock();
        self.read_routes()
    }

    /// Adds a route (`lnetctl route add`): net, gateway, hop count, priority, health
    /// sensitivity. Refuses a second route to the same net through the same gateway.
    pub fn add_route(&self, route: &Route) -> Result<(), StoreError> {
        let _guard = self.lock();
        let key = keys::route_key(route.net, &route.gateway);
        if self.trees.get_raw(TreeId::Routes, &key)?.is_some() {
            return Err(StoreError::AlreadyExists {
                what: "route",
                key: format!("{} via {}", route.net, route.gateway),
            });
        }
        let mut set = WriteSet::new();
        set.put(TreeId::Routes, &key, &RouteRecord::from_model(route))?;
        self.trees.commit(set)
    }

    /// Deletes the route to `net` through `gateway` (`lnetctl route del`).
    pub fn delete_route(&self, net: Net, gateway: &Nid) -> Result<(), StoreError> {
        let _guard = self.lock();
        let key = keys::route_key(net, gateway);
        if self.trees.get_raw(TreeId::Routes, &key)?.is_none() {
            return Err(StoreError::NotFound {
                what: "route",
                key: format!("{net} via {gateway}"),
            });
        }
        let mut set = WriteSet::new();
        set.remove(TreeId::Routes, &key);
        self.trees.commit(set)
    }
}
