//! The schema-1 records of the configuration trees: serde structs owned by this crate (so
//! the on-disk form changes only with the schema version, never with a field renamed in
//! `lnet`), and their conversions from and to the `lnet::config` model.
//!
//! Only configured state is kept: what `lnetctl export --backup` prints and `lnetctl
//! import` applies. Counters, health, status and credits of a full export are the live
//! state of the actors and are not stored.

use std::fmt;
use std::str::FromStr;

use lnet::config::{
    Cpts, LndTunables, LocalNi, NetConfig, NiTunables, Peer, PeerNi, Route, UdspRule,
};
use lnet::{Net, Nid};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

/// A NID kept in its lnetctl text form (`10.0.0.1@tcp`). Writing a NID whose text does not
/// read back as the same NID fails, so what is stored always decodes to what was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NidText(pub(crate) Nid);

impl Serialize for NidText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.0.to_string();
        if Nid::from_str(&text).ok() != Some(self.0) {
            return Err(serde::ser::Error::custom(format!(
                "NID {text} does not read back from its text form"
            )));
        }
        s.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for NidText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NidText, D::Error> {
        let text = String::deserialize(d)?;
        Nid::from_str(&text)
            .map(NidText)
            .map_err(|e| de::Error::custom(format!("NID {text:?}: {e}")))
    }
}

/// A net kept in its lnetctl text form (`o2ib1`), with the same read-back check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NetText(pub(crate) Net);

impl Serialize for NetText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.0.to_string();
        if Net::from_str(&text).ok() != Some(self.0) {
            return Err(serde::ser::Error::custom(format!(
                "net {text} does not read back from its text form"
            )));
        }
        s.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for NetText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NetText, D::Error> {
        let text = String::deserialize(d)?;
        Net::from_str(&text)
            .map(NetText)
            .map_err(|e| de::Error::custom(format!("net {text:?}: {e}")))
    }
}

/// `#[serde(with = "nid_serde")]` for a [`Nid`] field: its text form, as [`NidText`].
pub(crate) mod nid_serde {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(nid: &Nid, s: S) -> Result<S::Ok, S::Error> {
        NidText(*nid).serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Nid, D::Error> {
        NidText::deserialize(d).map(|n| n.0)
    }
}

/// `#[serde(with = "net_serde")]` for a [`Net`] field: its text form, as [`NetText`].
pub(crate) mod net_serde {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(net: &Net, s: S) -> Result<S::Ok, S::Error> {
        NetText(*net).serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Net, D::Error> {
        NetText::deserialize(d).map(|n| n.0)
    }
}

impl fmt::Display for NidText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
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
    pub(crate) nid: Option<NidText>,
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
    pub(crate) peer_nis: Vec<NidText>,
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
            nid: ni.nid.map(NidText),
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
            peer_nis: peer.peer_nis.iter().map(|p| NidText(p.nid)).collect(),
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
