//! Reading `show` documents back into the model, in either layout (it is YAML either way):
//! for tests against real captures and for tools that consume lnetctl output. Blocks that
//! the document's verbosity left out come back as their defaults (zero counters, no
//! `udsp info`, `dev cpt` -1, empty `CPT`), so printing at the same verbosity gives the
//! document back.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_saphyr::Spanned;

use super::{
    GlobalShow, NetShow, PeerShow, PingShow, ShowNet, ShowNi, ShowPeer, ShowPeerNi, StatsShow,
    UdspInfo,
};
use crate::config::raw::{at, from_yaml, RawStatistics};
use crate::config::{
    ConfigError, Cpts, LndTunables, MsgStats, NiHealthStats, NiStatistics, NiStatus, NiTunables,
    PeerNiCredits, PeerNiHealthStats, PeerNiState, Position,
};
use crate::nid::{Net, Nid};

type S<T> = Spanned<T>;

fn yaml<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    serde_saphyr::from_str(text).map_err(|e| from_yaml(&e))
}

fn nid(s: &S<String>, field: &str) -> Result<Nid, ConfigError> {
    s.value.parse().map_err(|e| ConfigError::InvalidNid {
        field: field.to_owned(),
        value: s.value.clone(),
        source: Box::new(e),
        at: at(s),
    })
}

fn net(s: &S<String>, field: &str) -> Result<Net, ConfigError> {
    s.value.parse().map_err(|e| ConfigError::InvalidNet {
        field: field.to_owned(),
        value: s.value.clone(),
        source: Box::new(e),
        at: at(s),
    })
}

fn invalid(s: &S<String>, field: &str, expected: &'static str) -> ConfigError {
    ConfigError::InvalidValue {
        field: field.to_owned(),
        value: s.value.clone(),
        expected,
        at: at(s),
    }
}

fn statistics(s: Option<S<RawStatistics>>, field: &str) -> Result<NiStatistics, ConfigError> {
    match s {
        Some(s) => {
            let pos = at(&s);
            s.value.into_model(field, pos)
        }
        None => Ok(NiStatistics::default()),
    }
}

/// A key that is present with an empty value (`lnd tunables:` on 2.14) is `Some(None)`.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUdsp {
    #[serde(rename = "net priority")]
    net_priority: i32,
    #[serde(rename = "nid priority")]
    nid_priority: i32,
    #[serde(rename = "Preferred gateway NIDs", default)]
    gateways: BTreeMap<String, S<String>>,
    #[serde(rename = "Preferred source NIDs", default)]
    sources: BTreeMap<String, S<String>>,
}

impl RawUdsp {
    fn into_model(self, path: &str) -> Result<UdspInfo, ConfigError> {
        Ok(UdspInfo {
            net_priority: self.net_priority,
            nid_priority: self.nid_priority,
            preferred_gateways: nid_list(self.gateways, &format!("{path}.Preferred gateway NIDs"))?,
            preferred_sources: nid_list(self.sources, &format!("{path}.Preferred source NIDs"))?,
        })
    }
}

/// A `NID-0: nid`, `NID-1: nid`, … map, in key order (`NID-10` after `NID-9`).
fn nid_list(map: BTreeMap<String, S<String>>, field: &str) -> Result<Vec<Nid>, ConfigError> {
    let mut items = Vec::with_capacity(map.len());
    for (key, value) in map {
        let Some(i) = key
            .strip_prefix("NID-")
            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|d| d.parse::<usize>().ok())
        else {
            return Err(ConfigError::InvalidValue {
                field: field.to_owned(),
                value: key,
                expected: "keys NID-0, NID-1, ...",
                at: at(&value),
            });
        };
        items.push((i, nid(&value, &format!("{field}.{key}"))?));
    }
    items.sort_by_key(|(i, _)| *i);
    Ok(items.into_iter().map(|(_, n)| n).collect())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetShow {
    net: Vec<RawNet>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNet {
    #[serde(rename = "net type")]
    net_type: S<String>,
    #[serde(rename = "local NI(s)")]
    nis: Vec<RawNi>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNi {
    nid: S<String>,
    status: S<String>,
    #[serde(default)]
    interfaces: BTreeMap<u32, String>,
    statistics: Option<S<RawStatistics>>,
    #[serde(rename = "udsp info")]
    udsp: Option<RawUdsp>,
    sent_stats: Option<MsgStats>,
    received_stats: Option<MsgStats>,
    dropped_stats: Option<MsgStats>,
    #[serde(rename = "health stats")]
    health_stats: Option<NiHealthStats>,
    tunables: Option<NiTunables>,
    #[serde(rename = "lnd tunables", default, deserialize_with = "present")]
    lnd_tunables: Option<Option<LndTunables>>,
    #[serde(rename = "dev cpt")]
    dev_cpt: Option<i32>,
    #[serde(rename = "CPT")]
    cpt: Option<S<String>>,
}

impl RawNi {
    fn into_model(self, path: &str) -> Result<ShowNi, ConfigError> {
        let status = match self.status.value.as_str() {
            "up" => NiStatus::Up,
            "down" => NiStatus::Down,
            _ => {
                return Err(invalid(
                    &self.status,
                    &format!("{path}.status"),
                    "up or down",
                ))
            }
        };
        let cpt = match &self.cpt {
            Some(c) => Cpts::parse(&c.value)
                .ok_or_else(|| invalid(c, &format!("{path}.CPT"), "a list such as [0,1]"))?,
            None => Cpts::default(),
        };
        Ok(ShowNi {
            nid: nid(&self.nid, &format!("{path}.nid"))?,
            status,
            interfaces: self.interfaces.into_values().collect(),
            statistics: statistics(self.statistics, &format!("{path}.statistics"))?,
            udsp: self
                .udsp
                .map(|u| u.into_model(&format!("{path}.udsp info")))
                .transpose()?,
            sent_stats: self.sent_stats.unwrap_or_default(),
            received_stats: self.received_stats.unwrap_or_default(),
            dropped_stats: self.dropped_stats.unwrap_or_default(),
            health_stats: self.health_stats.unwrap_or_default(),
            tunables: self.tunables.unwrap_or_default(),
            lnd_tunables: self.lnd_tunables.map(Option::unwrap_or_default),
            dev_cpt: self.dev_cpt.unwrap_or(-1),
            cpt,
        })
    }
}

impl NetShow {
    /// Reads a `net show [-v N]` document (netlink or ioctl layout).
    pub fn parse(text: &str) -> Result<NetShow, ConfigError> {
        let raw: RawNetShow = yaml(text)?;
        let nets = raw
            .net
            .into_iter()
            .enumerate()
            .map(|(i, n)| {
                let nis = n
                    .nis
                    .into_iter()
                    .enumerate()
                    .map(|(j, ni)| ni.into_model(&format!("net[{i}].local NI(s)[{j}]")))
                    .collect::<Result<_, _>>()?;
                Ok(ShowNet {
                    net_type: net(&n.net_type, &format!("net[{i}].net type"))?,
                    nis,
                })
            })
            .collect::<Result<_, ConfigError>>()?;
        Ok(NetShow { nets })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPeerShow {
    peer: Vec<RawPeer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPeer {
    #[serde(rename = "primary nid")]
    primary_nid: S<String>,
    #[serde(rename = "Multi-Rail")]
    multi_rail: bool,
    #[serde(rename = "peer state", default)]
    peer_state: u32,
    #[serde(rename = "peer ni")]
    nis: Vec<RawPeerNi>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPeerNi {
    nid: S<String>,
    #[serde(rename = "udsp info")]
    udsp: Option<RawUdsp>,
    state: S<String>,
    #[serde(default)]
    max_ni_tx_credits: u32,
    #[serde(default)]
    available_tx_credits: u32,
    #[serde(default)]
    min_tx_credits: u32,
    #[serde(default)]
    tx_q_num_of_buf: u32,
    #[serde(default)]
    available_rtr_credits: u32,
    #[serde(default)]
    min_rtr_credits: u32,
    #[serde(default)]
    refcount: u32,
    statistics: Option<S<RawStatistics>>,
    sent_stats: Option<MsgStats>,
    received_stats: Option<MsgStats>,
    dropped_stats: Option<MsgStats>,
    #[serde(rename = "health stats")]
    health_stats: Option<PeerNiHealthStats>,
}

impl RawPeerNi {
    fn into_model(self, path: &str) -> Result<ShowPeerNi, ConfigError> {
        let state = match self.state.value.as_str() {
            "up" => PeerNiState::Up,
            "down" => PeerNiState::Down,
            "NA" => PeerNiState::NotApplicable,
            _ => {
                return Err(invalid(
                    &self.state,
                    &format!("{path}.state"),
                    "up, down or NA",
                ))
            }
        };
        Ok(ShowPeerNi {
            nid: nid(&self.nid, &format!("{path}.nid"))?,
            udsp: self
                .udsp
                .map(|u| u.into_model(&format!("{path}.udsp info")))
                .transpose()?,
            state,
            credits: PeerNiCredits {
                max_ni_tx_credits: self.max_ni_tx_credits,
                available_tx_credits: self.available_tx_credits,
                min_tx_credits: self.min_tx_credits,
                tx_q_num_of_buf: self.tx_q_num_of_buf,
                available_rtr_credits: self.available_rtr_credits,
                min_rtr_credits: self.min_rtr_credits,
                refcount: self.refcount,
            },
            statistics: statistics(self.statistics, &format!("{path}.statistics"))?,
            sent_stats: self.sent_stats.unwrap_or_default(),
            received_stats: self.received_stats.unwrap_or_default(),
            dropped_stats: self.dropped_stats.unwrap_or_default(),
            health_stats: self.health_stats.unwrap_or_default(),
        })
    }
}

impl PeerShow {
    /// Reads a `peer show [-v N]` document.
    pub fn parse(text: &str) -> Result<PeerShow, ConfigError> {
        let raw: RawPeerShow = yaml(text)?;
        let peers = raw
            .peer
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let nis = p
                    .nis
                    .into_iter()
                    .enumerate()
                    .map(|(j, ni)| ni.into_model(&format!("peer[{i}].peer ni[{j}]")))
                    .collect::<Result<_, _>>()?;
                Ok(ShowPeer {
                    primary_nid: nid(&p.primary_nid, &format!("peer[{i}].primary nid"))?,
                    multi_rail: p.multi_rail,
                    peer_state: p.peer_state,
                    nis,
                })
            })
            .collect::<Result<_, ConfigError>>()?;
        Ok(PeerShow { peers })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStatsShow {
    statistics: StatsShow,
}

impl StatsShow {
    /// Reads a `stats show` document.
    pub fn parse(text: &str) -> Result<StatsShow, ConfigError> {
        yaml::<RawStatsShow>(text).map(|r| r.statistics)
    }
}

impl GlobalShow {
    /// Reads a `global show` document (a `global:` section alone).
    pub fn parse(text: &str) -> Result<GlobalShow, ConfigError> {
        let c = crate::config::parse(text)?;
        let other = [
            ("net", !c.nets.is_empty()),
            ("route", !c.routes.is_empty()),
            ("peer", !c.peers.is_empty()),
            ("routing", c.routing.is_some()),
            ("buffers", c.buffers.is_some()),
            ("udsp", !c.udsp.is_empty()),
            ("lnet-router", c.router.is_some()),
        ]
        .into_iter()
        .find_map(|(key, present)| present.then_some(key));
        if let Some(key) = other {
            return Err(ConfigError::UnknownKey {
                key: key.to_owned(),
                expected: vec!["global".to_owned()],
                at: Position::default(),
            });
        }
        c.global
            .map(|global| GlobalShow { global })
            .ok_or_else(|| ConfigError::MissingKey {
                key: "global".to_owned(),
                at: Position::default(),
            })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPingShow {
    ping: Vec<RawPing>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPing {
    #[serde(rename = "primary nid")]
    primary_nid: S<String>,
    #[serde(rename = "Multi-Rail")]
    multi_rail: bool,
    peer_ni: Vec<RawPingNi>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPingNi {
    nid: S<String>,
}

impl PingShow {
    /// Reads an `lnetctl ping` result: one item per pinged peer.
    pub fn parse(text: &str) -> Result<Vec<PingShow>, ConfigError> {
        let raw: RawPingShow = yaml(text)?;
        raw.ping
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let peer_nis = p
                    .peer_ni
                    .iter()
                    .enumerate()
                    .map(|(j, n)| nid(&n.nid, &format!("ping[{i}].peer_ni[{j}].nid")))
                    .collect::<Result<_, _>>()?;
                Ok(PingShow {
                    primary_nid: nid(&p.primary_nid, &format!("ping[{i}].primary nid"))?,
                    multi_rail: p.multi_rail,
                    peer_nis,
                })
            })
            .collect()
    }
}
