//! The schema-1 records of the configuration trees: serde structs owned by this crate (so
//! the on-disk form changes only with the schema version, never with a field renamed in
//! `lnet`), and their conversions from and to the `lnet::config` model.
//!
//! Only configured state is kept: what `lnetctl export --backup` prints and `lnetctl
//! import` applies. Counters, health, status and credits of a full export are the live
//! state of the actors and are not stored.

use std::fmt::Display;
use std::str::FromStr;

use lnet::config::{
    Cpts, LndTunables, LocalNi, NetConfig, NiTunables, Peer, PeerNi, Route, UdspRule,
};
use lnet::{Net, Nid};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A NID or net kept in lnet's text form (`10.0.0.1@tcp`, `o2ib1`). Writing one whose text
/// does not read back as the same value fails, so what is stored always decodes to what
/// was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub(crate) struct Stored<T>(pub(crate) T);

impl<T: Serialize + Display + FromStr + PartialEq> Serialize for Stored<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.0.to_string();
        if text.parse::<T>().ok().as_ref() != Some(&self.0) {
            return Err(serde::ser::Error::custom(format!(
                "{text} does not read back from its text form"
            )));
        }
        self.0.serialize(s)
    }
}

/// `#[serde(with = "text_serde")]` for a [`Nid`] or [`Net`] field: its text form, as
/// [`Stored`].
pub(crate) mod text_serde {
    use super::*;

    pub(crate) fn serialize<T, S>(value: &T, s: S) -> Result<S::Ok, S::Error>
    where
        T: Serialize + Display + FromStr + PartialEq + Copy,
        S: Serializer,
    {
        Stored(*value).serialize(s)
    }

    pub(crate) fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<T, D::Error> {
        T::deserialize(d)
    }
}

/// A configured net (the key is the net): its local NIs in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NetRecord {
    pub(crate) local_nis: Vec<LocalNiRecord>,
}

/// A local NI: `nid`, `interfaces`, `tunables`, `lnd tunables`, `CPT`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LocalNiRecord {
    pub(crate) nid: Option<Stored<Nid>>,
    pub(crate) interfaces: Vec<String>,
    pub(crate) tunables: Option<NiTunablesRecord>,
    pub(crate) lnd_tunables: Option<LndTunablesRecord>,
    pub(crate) cpt: Option<Vec<u32>>,
}

/// `tunables:` of a local NI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NiTunablesRecord {
    pub(crate) peer_timeout: i32,
    pub(crate) peer_credits: i32,
    pub(crate) peer_buffer_credits: i32,
    pub(crate) credits: i32,
}

/// `lnd tunables:` of a local NI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LndTunablesRecord {
    pub(crate) peercredits_hiw: Option<u32>,
    pub(crate) concurrent_sends: Option<u32>,
    pub(crate) map_on_demand: Option<bool>,
    pub(crate) fmr_pool_size: Option<u32>,
    pub(crate) fmr_flush_trigger: Option<u32>,
    pub(crate) fmr_cache: Option<u32>,
    pub(crate) ntx: Option<u16>,
    pub(crate) conns_per_peer: Option<u16>,
    pub(crate) timeout: Option<u32>,
    pub(crate) tos: Option<i16>,
}

/// A configured peer (the key is its primary NID).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PeerRecord {
    pub(crate) multi_rail: bool,
    pub(crate) peer_nis: Vec<Stored<Nid>>,
}

/// A route (the key is its net and gateway).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RouteRecord {
    pub(crate) hop: Option<i64>,
    pub(crate) priority: Option<u32>,
    pub(crate) health_sensitivity: Option<u32>,
}

/// A UDSP rule (the key is its position, which is its `idx`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UdspRecord {
    pub(crate) src: Option<String>,
    pub(crate) dst: Option<String>,
    pub(crate) rte: Option<String>,
    pub(crate) priority: Option<u32>,
}

impl NetRecord {
    pub(crate) fn from_model(net: &NetConfig) -> NetRecord {
        NetRecord {
            local_nis: net
                .local_nis
                .iter()
                .map(LocalNiRecord::from_model)
                .collect(),
        }
    }

    pub(crate) fn into_model(self, net: Net) -> NetConfig {
        NetConfig {
            net_type: net,
            local_nis: self
                .local_nis
                .into_iter()
                .map(LocalNiRecord::into_model)
                .collect(),
        }
    }
}

impl LocalNiRecord {
    pub(crate) fn from_model(ni: &LocalNi) -> LocalNiRecord {
        LocalNiRecord {
            nid: ni.nid.map(Stored),
            interfaces: ni.interfaces.clone(),
            tunables: ni.tunables.as_ref().map(|t| NiTunablesRecord {
                peer_timeout: t.peer_timeout,
                peer_credits: t.peer_credits,
                peer_buffer_credits: t.peer_buffer_credits,
                credits: t.credits,
            }),
            lnd_tunables: ni.lnd_tunables.as_ref().map(|t| LndTunablesRecord {
                peercredits_hiw: t.peercredits_hiw,
                concurrent_sends: t.concurrent_sends,
                map_on_demand: t.map_on_demand,
                fmr_pool_size: t.fmr_pool_size,
                fmr_flush_trigger: t.fmr_flush_trigger,
                fmr_cache: t.fmr_cache,
                ntx: t.ntx,
                conns_per_peer: t.conns_per_peer,
                timeout: t.timeout,
                tos: t.tos,
            }),
            cpt: ni.cpt.as_ref().map(|c| c.0.clone()),
        }
    }

    pub(crate) fn into_model(self) -> LocalNi {
        LocalNi {
            nid: self.nid.map(|n| n.0),
            interfaces: self.interfaces,
            tunables: self.tunables.map(|t| NiTunables {
                peer_timeout: t.peer_timeout,
                peer_credits: t.peer_credits,
                peer_buffer_credits: t.peer_buffer_credits,
                credits: t.credits,
            }),
            lnd_tunables: self.lnd_tunables.map(|t| LndTunables {
                peercredits_hiw: t.peercredits_hiw,
                concurrent_sends: t.concurrent_sends,
                map_on_demand: t.map_on_demand,
                fmr_pool_size: t.fmr_pool_size,
                fmr_flush_trigger: t.fmr_flush_trigger,
                fmr_cache: t.fmr_cache,
                ntx: t.ntx,
                conns_per_peer: t.conns_per_peer,
                timeout: t.timeout,
                tos: t.tos,
            }),
            cpt: self.cpt.map(Cpts),
            ..LocalNi::default()
        }
    }
}

impl PeerRecord {
    pub(crate) fn from_model(peer: &Peer) -> PeerRecord {
        PeerRecord {
            multi_rail: peer.multi_rail,
            peer_nis: peer.peer_nis.iter().map(|p| Stored(p.nid)).collect(),
        }
    }

    pub(crate) fn into_model(self, primary_nid: Nid) -> Peer {
        Peer {
            primary_nid,
            multi_rail: self.multi_rail,
            peer_state: None,
            peer_nis: self
                .peer_nis
                .into_iter()
                .map(|n| PeerNi::new(n.0))
                .collect(),
        }
    }
}

impl RouteRecord {
    pub(crate) fn from_model(route: &Route) -> RouteRecord {
        RouteRecord {
            hop: route.hop,
            priority: route.priority,
            health_sensitivity: route.health_sensitivity,
        }
    }

    pub(crate) fn into_model(self, net: Net, gateway: Nid) -> Route {
        Route {
            net,
            gateway,
            hop: self.hop,
            priority: self.priority,
            health_sensitivity: self.health_sensitivity,
            state: None,
            route_type: None,
        }
    }
}

impl UdspRecord {
    pub(crate) fn from_model(rule: &UdspRule) -> UdspRecord {
        UdspRecord {
            src: rule.src.clone(),
            dst: rule.dst.clone(),
            rte: rule.rte.clone(),
            priority: rule.priority,
        }
    }

    pub(crate) fn into_model(self, idx: u32) -> UdspRule {
        UdspRule {
            idx: Some(idx),
            src: self.src,
            dst: self.dst,
            rte: self.rte,
            priority: self.priority,
        }
    }
}
