//! `lnetctl export [--backup]` (reference 4.9): the node's state as the document
//! `lnetctl import` reads, built from the show documents.
//!
//! The full form is `net show -v 2` (every net, `lo` first), `route show -v`, `peer show
//! -v 3`, `routing show` with `buffers:`, `global show` and the UDSP rules. `--backup`
//! keeps only what `import` needs: no `lo`; per NI only `interfaces`, `tunables`, `lnd
//! tunables` (without the o2ib `timeout`) and `CPT`; routes without `state` and `type`;
//! peers with their primary NID, `Multi-Rail` and the NIDs alone; `routing:` as `enable:`
//! alone.

use super::{NetShow, PeerShow, ShowNi, ShowPeer};
use crate::config::{
    Buffers, Config, Global, LocalNi, NetConfig, Peer, PeerNi, Route, Routing, UdspRule,
};
use crate::nid::Net;

/// What the node knows, as its show documents give it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportSource {
    /// `net show` (every field; the form picks what is printed).
    pub nets: NetShow,
    /// The routes, with `state` and `type` (`route show -v`).
    pub routes: Vec<Route>,
    /// `peer show` (every field).
    pub peers: PeerShow,
    /// `routing show`: `enable` and the pools per CPT; `None` when the node has no
    /// router pools (then neither `routing:` nor `buffers:` is printed).
    pub routing: Option<Routing>,
    /// `buffers:`: the buffers of each size over all CPTs.
    pub buffers: Option<Buffers>,
    /// `global show`.
    pub global: Global,
    /// The UDSP rules, in list order.
    pub udsp: Vec<UdspRule>,
}

/// The `lnetctl export` document (`backup`: `lnetctl export --backup`).
pub fn export(src: &ExportSource, backup: bool) -> Config {
    let nets = src
        .nets
        .nets
        .iter()
        .filter(|n| !(backup && n.net_type == Net::LO))
        .map(|n| NetConfig {
            net_type: n.net_type,
            local_nis: n.nis.iter().map(|ni| local_ni(ni, backup)).collect(),
        })
        .collect();
    let routes = src
        .routes
        .iter()
        .map(|r| Route {
            hop: Some(r.hop.unwrap_or(crate::config::HOP_UNDEFINED)),
            priority: Some(r.priority.unwrap_or(0)),
            health_sensitivity: None,
            state: if backup { None } else { r.state },
            route_type: if backup { None } else { r.route_type },
            ..r.clone()
        })
        .collect();
    let routing = src.routing.as_ref().map(|r| Routing {
        enable: r.enable,
        cpts: if backup { Vec::new() } else { r.cpts.clone() },
    });
    Config {
        nets,
        routes,
        peers: src.peers.peers.iter().map(|p| peer(p, backup)).collect(),
        buffers: routing.as_ref().and(src.buffers.clone()),
        routing,
        global: Some(src.global.clone()),
        udsp: src.udsp.clone(),
        router: None,
    }
}

/// One NI: `net show -v 2`, or the `--backup` keys.
fn local_ni(ni: &ShowNi, backup: bool) -> LocalNi {
    if backup {
        return LocalNi {
            interfaces: ni.interfaces.clone(),
            tunables: Some(ni.tunables.clone()),
            lnd_tunables: ni.lnd_tunables.clone().map(|mut l| {
                l.timeout = None;
                l
            }),
            cpt: Some(ni.cpt.clone()),
            ..LocalNi::default()
        };
    }
    LocalNi {
        nid: Some(ni.nid),
        status: Some(ni.status),
        interfaces: ni.interfaces.clone(),
        statistics: Some(ni.statistics.clone()),
        sent_stats: Some(ni.sent_stats.clone()),
        received_stats: Some(ni.received_stats.clone()),
        dropped_stats: Some(ni.dropped_stats.clone()),
        health_stats: Some(ni.health_stats.clone()),
        tunables: Some(ni.tunables.clone()),
        lnd_tunables: ni.lnd_tunables.clone(),
        dev_cpt: Some(ni.dev_cpt),
        cpt: Some(ni.cpt.clone()),
    }
}

/// One peer: `peer show -v 3`, or the `--backup` keys.
fn peer(p: &ShowPeer, backup: bool) -> Peer {
    let peer_nis = p
        .nis
        .iter()
        .map(|ni| {
            if backup {
                return PeerNi::new(ni.nid);
            }
            PeerNi {
                nid: ni.nid,
                state: Some(ni.state),
                credits: Some(ni.credits.clone()),
                statistics: Some(ni.statistics.clone()),
                sent_stats: Some(ni.sent_stats.clone()),
                received_stats: Some(ni.received_stats.clone()),
                dropped_stats: Some(ni.dropped_stats.clone()),
                health_stats: Some(ni.health_stats.clone()),
            }
        })
        .collect();
    Peer {
        primary_nid: p.primary_nid,
        multi_rail: p.multi_rail,
        peer_state: (!backup).then_some(p.peer_state),
        peer_nis,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

    use super::*;
    use crate::config::{CptBuffers, NiStatus, PeerNiState, RouteState, RouteType, RoutingState};
    use crate::show::{GlobalShow, ShowNet, ShowPeerNi};

    const DIR: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/lnetctl/kernel-2.17.57/"
    );

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{DIR}{name}")).unwrap()
    }

    /// The top-level section `key:` of a document, with its lines.
    fn section(text: &str, key: &str) -> String {
        let head = format!("{key}:");
        let mut out = String::new();
        let mut inside = false;
        for line in text.lines() {
            if !line.starts_with(' ') && !line.starts_with('-') {
                inside = line == head;
            }
            if inside {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// `lnetctl export` of the o2ib node, from its net, peer and global sections read as
    /// show documents, prints back byte for byte.
    #[test]
    fn full_export_matches_the_kernel_capture() {
        let text = fixture("export-o2ib.yaml");
        let src = ExportSource {
            nets: NetShow::parse(&section(&text, "net")).unwrap(),
            peers: PeerShow::parse(&section(&text, "peer")).unwrap(),
            global: GlobalShow::parse(&section(&text, "global")).unwrap().global,
            ..ExportSource::default()
        };
        assert_eq!(export(&src, false).to_yaml(), text);
    }

    /// `lnetctl export --backup` of the router: its nets (and a `lo` it leaves out), NI
    /// statistics, route state and peer counters the backup form drops, print as the
    /// kernel's capture, byte for byte.
    #[test]
    fn backup_export_matches_the_kernel_capture() {
        let text = fixture("export-backup-router.yaml");
        let c = crate::config::parse(&text).unwrap();
        let mut nets = vec![ShowNet {
            net_type: Net::LO,
            nis: vec![ShowNi {
                nid: "0@lo".parse().unwrap(),
                status: NiStatus::Up,
                interfaces: Vec::new(),
                statistics: Default::default(),
                udsp: None,
                sent_stats: Default::default(),
                received_stats: Default::default(),
                dropped_stats: Default::default(),
                health_stats: Default::default(),
                tunables: Default::default(),
                lnd_tunables: None,
                dev_cpt: -1,
                cpt: crate::config::Cpts(vec![0]),
            }],
        }];
        for (i, n) in c.nets.iter().enumerate() {
            let ni = &n.local_nis[0];
            let mut lnd = ni.lnd_tunables.clone();
            if let Some(l) = lnd.as_mut() {
                l.timeout = Some(50);
            }
            nets.push(ShowNet {
                net_type: n.net_type,
                nis: vec![ShowNi {
                    nid: format!("10.0.0.{}@{}", i + 1, n.net_type).parse().unwrap(),
                    interfaces: ni.interfaces.clone(),
                    tunables: ni.tunables.clone().unwrap(),
                    lnd_tunables: lnd,
                    cpt: ni.cpt.clone().unwrap(),
                    health_stats: crate::config::NiHealthStats {
                        health_value: 1000,
                        ..Default::default()
                    },
                    ..nets[0].nis[0].clone()
                }],
            });
        }
        let routes = c
            .routes
            .iter()
            .map(|r| Route {
                state: Some(RouteState::Down),
                route_type: Some(RouteType::MultiHop),
                ..r.clone()
            })
            .collect();
        let peers = c
            .peers
            .iter()
            .map(|p| ShowPeer {
                primary_nid: p.primary_nid,
                multi_rail: p.multi_rail,
                peer_state: 8,
                nis: p
                    .peer_nis
                    .iter()
                    .map(|n| ShowPeerNi {
                        nid: n.nid,
                        udsp: None,
                        state: PeerNiState::Up,
                        credits: Default::default(),
                        statistics: Default::default(),
                        sent_stats: Default::default(),
                        received_stats: Default::default(),
                        dropped_stats: Default::default(),
                        health_stats: Default::default(),
                    })
                    .collect(),
            })
            .collect();
        let src = ExportSource {
            nets: NetShow { nets },
            routes,
            peers: PeerShow { peers },
            routing: Some(Routing {
                enable: RoutingState::Starting,
                cpts: vec![CptBuffers::default()],
            }),
            buffers: c.buffers.clone(),
            global: c.global.clone().unwrap(),
            udsp: Vec::new(),
        };
        assert_eq!(export(&src, true).to_yaml(), text);
        // The full form keeps what the backup leaves out.
        let full = export(&src, false).to_yaml();
        for key in [
            "net type: lo",
            "nid: 10.0.0.2@o2ib",
            "timeout: 50",
            "state: down",
        ] {
            assert!(full.contains(key), "{key}: {full}");
        }
        assert!(full.contains("- cpt[0]:"), "{full}");
    }
}
