//! Local NIs added and deleted on the running daemon (`net add|del` through the API): the
//! new NI is checked as a start from the store would check it ([`crate::plan`]), started by
//! the code that starts the configured NIs ([`crate::tcp_ni`], [`crate::o2ib_ni`] in a build
//! with the `o2ib` feature), on the system thread, and kept in the store, so that a restart
//! from the store alone brings it back. The LND settings `net set` changes (the socklnd and
//! o2iblnd NIs' `conns_per_peer`, the two LNDs' timeouts) are kept in the NIs' `lnd
//! tunables` in the store and set on the running LNDs, whose `net show` says so at once.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use actors::{Node, NodeError};
use lnet::config::{LndTunables, LocalNi, NetConfig, NiTunables};
use lnet::{LndType, Nid};
use store::{LocalNiId, Store};
use web::{NiControl, NiControlError, NiFuture, NiSpec};

use crate::plan::{HostInterfaces, Interfaces, PlanError};

/// What the daemon keeps of its running NIs (configured and added at run time) beside the
/// node: their live settings, by LND, and the watches of their links.
#[derive(Debug, Clone, Default)]
pub struct RunningNis {
    /// The running socklnd NIs, whose settings `net set` changes.
    pub socklnd: crate::tcp_ni::SockNis,
    /// The running o2ib NIs, likewise.
    pub o2ib: crate::o2ib_ni::O2ibNis,
    /// The watches of their links.
    pub links: crate::link::LinkWatches,
}

/// Starts and stops the NIs of a running node, and keeps them in its store.
#[derive(Debug, Clone)]
pub struct RuntimeNis {
    node: Node,
    store: Arc<Store>,
    incarnation: u64,
    cpts: lnd::socklnd::Cpts,
    /// The running NIs (configured and added here): their settings, which `net set`
    /// changes, and their link watches, which end when the NI is deleted.
    nis: RunningNis,
    system: actix::ArbiterHandle,
    /// Held while an NI is added or deleted, so that two changes do not check against the
    /// same state.
    changing: Arc<tokio::sync::Mutex<()>>,
}

impl RuntimeNis {
    /// For `node`, kept in `store`; new NIs share this run's `incarnation` and `cpts`, and
    /// start on `system`, the thread the configured NIs started on; `nis`: the running NIs'
    /// settings and link watches.
    pub fn new(
        node: Node,
        store: Arc<Store>,
        incarnation: u64,
        cpts: lnd::socklnd::Cpts,
        nis: RunningNis,
        system: actix::ArbiterHandle,
    ) -> RuntimeNis {
        RuntimeNis {
            node,
            store,
            incarnation,
            cpts,
            nis,
            system,
            changing: Arc::default(),
        }
    }

    /// Runs `work` on the system thread and waits for its answer.
    async fn on_system<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T, NiControlError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let spawned = self.system.spawn(async move {
            let _ = tx.send(work.await);
        });
        let stopped = || NiControlError::Start {
            message: "the node is stopping".to_owned(),
        };
        if !spawned {
            return Err(stopped());
        }
        rx.await.map_err(|_| stopped())
    }

    async fn add(self, spec: NiSpec) -> Result<Nid, NiControlError> {
        let _changing = self.changing.lock().await;
        let lnd = spec.net.lnd;
        let nid = resolve_nid(&spec, &HostInterfaces)?;
        let node_err = |e: NodeError| NiControlError::Start {
            message: e.to_string(),
        };
        if self
            .node
            .local_nis()
            .await
            .map_err(node_err)?
            .iter()
            .any(|n| n.nid == nid)
        {
            return Err(NiControlError::Exists { nid });
        }
        let local = local_ni(&spec, nid, self.lnd_timeout(lnd));
        let keep_err = |e: store::StoreError| NiControlError::Keep {
            message: format!("the store cannot be read or written: {e}"),
        };
        // The store with the new NI, checked as a start from it would check it.
        let mut config = self.store.export().map_err(keep_err)?;
        match config.nets.iter_mut().find(|n| n.net_type == spec.net) {
            Some(net) => {
                if net.local_nis.iter().any(|n| n.nid == Some(nid)) {
                    return Err(NiControlError::Exists { nid });
                }
                net.local_nis.push(local.clone());
            }
            None => config.nets.push(NetConfig {
                net_type: spec.net,
                local_nis: vec![local.clone()],
            }),
        }
        let plan = crate::plan::plan("the store", &config.to_yaml(), &HostInterfaces).map_err(
            |e| match e {
                PlanError::Refused { problems, .. } => {
                    let first = problems.into_iter().next();
                    NiControlError::Invalid {
                        field: first.as_ref().map_or("net".to_owned(), |p| {
                            // A net this build cannot run: the request's `net`.
                            if p.key.ends_with(".net type") {
                                "net".to_owned()
                            } else {
                                p.key.clone()
                            }
                        }),
                        message: first.map_or_else(String::new, |p| p.message),
                    }
                }
                other => NiControlError::Invalid {
                    field: "net".to_owned(),
                    message: other.to_string(),
                },
            },
        )?;
        self.start(plan, nid).await?;
        if let Err(e) = self.store.add_local_ni(spec.net, &local) {
            self.nis.links.end(nid);
            self.forget(nid);
            let node = self.node.clone();
            let _ = self
                .on_system(async move { node.remove_ni(nid).await })
                .await;
            return Err(NiControlError::Keep {
                message: format!("NI {nid} was not kept, so it was stopped again: {e}"),
            });
        }
        Ok(nid)
    }

    /// Starts NI `nid` of `plan` (the store with it) on the system thread, with the code
    /// that starts the configured NIs of its LND, and records its live settings.
    async fn start(&self, plan: crate::plan::Plan, nid: Nid) -> Result<(), NiControlError> {
        let start_err = |e: crate::tcp_ni::NiStartError| NiControlError::Start {
            message: std::error::Error::source(&e)
                .map_or_else(|| e.to_string(), ToString::to_string),
        };
        if let Some(ni) = plan.nis.into_iter().find(|n| n.nid == nid) {
            let (node, incarnation, cpts) =
                (self.node.clone(), self.incarnation, self.cpts.clone());
            let links = self.nis.links.clone();
            let started = self
                .on_system(async move {
                    let started = crate::tcp_ni::start(&node, &ni, incarnation, &cpts).await?;
                    links.start(&node, ni.nid, started.interface.clone());
                    Ok::<_, crate::tcp_ni::NiStartError>(started)
                })
                .await?
                .map_err(start_err)?;
            if let Ok(mut nis) = self.nis.socklnd.lock() {
                nis.insert(nid, started);
            }
            return Ok(());
        }
        #[cfg(feature = "o2ib")]
        if let Some(ni) = plan.o2ib_nis.into_iter().find(|n| n.nid == nid) {
            let (node, incarnation) = (self.node.clone(), self.incarnation);
            let links = self.nis.links.clone();
            let started = self
                .on_system(async move {
                    let started = crate::o2ib_ni::start(&node, &ni, incarnation).await?;
                    links.start(&node, ni.nid, started.interface.clone());
                    Ok::<_, crate::tcp_ni::NiStartError>(started)
                })
                .await?
                .map_err(start_err)?;
            if let Ok(mut nis) = self.nis.o2ib.lock() {
                nis.insert(nid, started);
            }
            return Ok(());
        }
        Err(NiControlError::Invalid {
            field: "net".to_owned(),
            message: format!("net {} cannot run in this build", nid.net),
        })
    }

    async fn remove(self, nid: Nid) -> Result<(), NiControlError> {
        let _changing = self.changing.lock().await;
        let node = self.node.clone();
        let removed = self
            .on_system(async move { node.remove_ni(nid).await })
            .await?;
        match removed {
            Ok(_) => {}
            Err(NodeError::NoSuchNi { .. }) => return Err(NiControlError::NotFound { nid }),
            Err(e) => {
                return Err(NiControlError::Start {
                    message: e.to_string(),
                })
            }
        }
        self.nis.links.end(nid);
        self.forget(nid);
        let keep_err = |e: store::StoreError| NiControlError::Keep {
            message: format!("NI {nid} was stopped but its deletion could not be kept: {e}"),
        };
        let Some(net) = self.store.net(nid.net).map_err(keep_err)? else {
            return Ok(());
        };
        let id = stored_ni(&net, nid).and_then(|i| {
            let n = net.local_nis.get(i)?;
            if n.nid == Some(nid) {
                return Some(LocalNiId::Nid(nid));
            }
            n.interfaces.first().cloned().map(LocalNiId::Interface)
        });
        if let Some(id) = id {
            self.store.delete_local_ni(nid.net, &id).map_err(keep_err)?;
            if net.local_nis.len() == 1 {
                self.store.delete_net(nid.net).map_err(keep_err)?;
            }
        }
        Ok(())
    }
}

impl RuntimeNis {
    /// Forgets the live settings of NI `nid`, which stopped.
    fn forget(&self, nid: Nid) {
        if let Ok(mut nis) = self.nis.socklnd.lock() {
            nis.remove(&nid);
        }
        if let Ok(mut nis) = self.nis.o2ib.lock() {
            nis.remove(&nid);
        }
    }

    /// The running socklnd NIs, in NID order.
    fn socklnd_nis(&self) -> Vec<(Nid, crate::tcp_ni::SockNi)> {
        let mut nis: Vec<_> = self
            .nis
            .socklnd
            .lock()
            .map(|n| n.iter().map(|(k, v)| (*k, v.clone())).collect())
            .unwrap_or_default();
        nis.sort_by_key(|(nid, _)| *nid);
        nis
    }

    /// The running o2ib NIs, in NID order.
    fn o2ib_nis(&self) -> Vec<(Nid, crate::o2ib_ni::O2ibRunning)> {
        let mut nis: Vec<_> = self
            .nis
            .o2ib
            .lock()
            .map(|n| n.iter().map(|(k, v)| (*k, v.clone())).collect())
            .unwrap_or_default();
        nis.sort_by_key(|(nid, _)| *nid);
        nis
    }

    /// The timeout (seconds) an NI of LND `lnd` added now runs with when it is not the
    /// LND's default: the one its running NIs share after `net set --lnd-timeout` (that of
    /// the first, in NID order), as the kernel's module parameter is the whole LND's.
    fn lnd_timeout(&self, lnd: LndType) -> Option<u32> {
        let (t, default) = if lnd == LndType::SOCKLND {
            let (_, first) = self.socklnd_nis().into_iter().next()?;
            (
                first.tunables.timeout(),
                lnd::socklnd::config::DEFAULT_SOCK_TIMEOUT,
            )
        } else if lnd == LndType::O2IBLND {
            let (_, first) = self.o2ib_nis().into_iter().next()?;
            (
                first.tunables.timeout(),
                lnd::o2iblnd::config::DEFAULT_TIMEOUT,
            )
        } else {
            return None;
        };
        (t != default).then(|| u32::try_from(t.as_secs()).unwrap_or(u32::MAX))
    }

    /// Changes the store's record of each NI of `nids` with `change`, net by net: all of
    /// them or, when one cannot be found or written, none after it.
    fn keep_lnd_tunables(
        &self,
        nids: &[Nid],
        change: impl Fn(&mut LndTunables),
    ) -> Result<(), NiControlError> {
        let keep_err = |e: String| NiControlError::Keep {
            message: format!("the setting could not be kept, so it was not made: {e}"),
        };
        let mut nets: Vec<lnet::Net> = nids.iter().map(|n| n.net).collect();
        nets.sort();
        nets.dedup();
        for net in nets {
            let mut config = self
                .store
                .net(net)
                .map_err(|e| keep_err(e.to_string()))?
                .ok_or_else(|| keep_err(format!("the store has no net {net}")))?;
            for nid in nids.iter().filter(|n| n.net == net) {
                let ni = stored_ni(&config, *nid)
                    .and_then(|i| config.local_nis.get_mut(i))
                    .ok_or_else(|| keep_err(format!("the store has no NI {nid}")))?;
                change(ni.lnd_tunables.get_or_insert_with(LndTunables::default));
            }
            self.store
                .put_net(&config)
                .map_err(|e| keep_err(e.to_string()))?;
        }
        Ok(())
    }

    async fn set_conns_per_peer(
        self,
        nid: Option<Nid>,
        value: u32,
    ) -> Result<Vec<Nid>, NiControlError> {
        let _changing = self.changing.lock().await;
        // Every NI of an LND with the setting (socklnd and o2iblnd), as the kernel's
        // `lnet_ni_set_conns_per_peer`.
        let mut all: Vec<(Nid, CppTarget)> = self
            .socklnd_nis()
            .into_iter()
            .map(|(n, ni)| (n, CppTarget::Sock(ni)))
            .chain(
                self.o2ib_nis()
                    .into_iter()
                    .map(|(n, ni)| (n, CppTarget::O2ib(ni))),
            )
            .collect();
        all.sort_by_key(|(n, _)| *n);
        let targets: Vec<_> = match nid {
            None => all,
            Some(nid) => {
                let found: Vec<_> = all.into_iter().filter(|(n, _)| *n == nid).collect();
                if found.is_empty() {
                    let local = self
                        .node
                        .local_nis()
                        .await
                        .map_err(|e| NiControlError::Start {
                            message: e.to_string(),
                        })?;
                    if local.iter().any(|n| n.nid == nid) {
                        return Err(NiControlError::Unsupported {
                            field: "nid".to_owned(),
                            message: format!(
                                "NI {nid} runs neither socklnd nor o2iblnd: its LND has no \
                                 conns_per_peer"
                            ),
                        });
                    }
                    return Err(NiControlError::NotFound { nid });
                }
                found
            }
        };
        let nids: Vec<Nid> = targets.iter().map(|(n, _)| *n).collect();
        let cpp = u16::try_from(value).unwrap_or(u16::MAX);
        self.keep_lnd_tunables(&nids, |t| t.conns_per_peer = Some(cpp))?;
        for (nid, ni) in &targets {
            match ni {
                CppTarget::Sock(ni) => {
                    ni.tunables.set_conns_per_peer(value);
                    ni.describe(&self.node, *nid);
                }
                CppTarget::O2ib(ni) => {
                    ni.tunables
                        .set_conns_per_peer(value)
                        .map_err(|e| NiControlError::Invalid {
                            field: "value".to_owned(),
                            message: e.to_string(),
                        })?;
                    ni.describe(&self.node, *nid);
                }
            }
        }
        Ok(nids)
    }

    async fn set_lnd_timeout(self, lnd: LndType, seconds: u32) -> Result<Vec<Nid>, NiControlError> {
        let unsupported = |message: String| NiControlError::Unsupported {
            field: "net".to_owned(),
            message,
        };
        if seconds == 0 {
            return Err(unsupported(
                "an LND timeout of 0 is not supported: give seconds".to_owned(),
            ));
        }
        if lnd == LndType::O2IBLND && !cfg!(feature = "o2ib") {
            return Err(NiControlError::Invalid {
                field: "net".to_owned(),
                message: "o2ib nets need the o2ib LND, which this build leaves out \
                          (feature `o2ib`)"
                    .to_owned(),
            });
        }
        if lnd != LndType::SOCKLND && lnd != LndType::O2IBLND {
            return Err(unsupported(
                "only the socklnd and o2iblnd timeouts can be set while they run".to_owned(),
            ));
        }
        let _changing = self.changing.lock().await;
        let timeout = std::time::Duration::from_secs(u64::from(seconds));
        let invalid = |e: &dyn std::error::Error| NiControlError::Invalid {
            field: "value".to_owned(),
            message: e.to_string(),
        };
        if lnd == LndType::SOCKLND {
            let targets = self.socklnd_nis();
            let nids: Vec<Nid> = targets.iter().map(|(n, _)| *n).collect();
            self.keep_lnd_tunables(&nids, |t| t.timeout = Some(seconds))?;
            for (nid, ni) in &targets {
                ni.tunables.set_timeout(timeout).map_err(|e| invalid(&e))?;
                ni.describe(&self.node, *nid);
            }
            return Ok(nids);
        }
        let targets = self.o2ib_nis();
        let nids: Vec<Nid> = targets.iter().map(|(n, _)| *n).collect();
        self.keep_lnd_tunables(&nids, |t| t.timeout = Some(seconds))?;
        for (nid, ni) in &targets {
            ni.tunables.set_timeout(timeout).map_err(|e| invalid(&e))?;
            ni.describe(&self.node, *nid);
        }
        Ok(nids)
    }
}

/// A running NI whose `conns_per_peer` `net set` changes.
enum CppTarget {
    Sock(crate::tcp_ni::SockNi),
    O2ib(crate::o2ib_ni::O2ibRunning),
}

impl NiControl for RuntimeNis {
    fn add_ni(&self, spec: NiSpec) -> NiFuture<Nid> {
        Box::pin(self.clone().add(spec))
    }

    fn remove_ni(&self, nid: Nid) -> NiFuture<()> {
        Box::pin(self.clone().remove(nid))
    }

    fn set_conns_per_peer(&self, nid: Option<Nid>, conns_per_peer: u32) -> NiFuture<Vec<Nid>> {
        Box::pin(self.clone().set_conns_per_peer(nid, conns_per_peer))
    }

    fn set_lnd_timeout(&self, lnd: LndType, seconds: u32) -> NiFuture<Vec<Nid>> {
        Box::pin(self.clone().set_lnd_timeout(lnd, seconds))
    }
}

/// Where NI `nid` is in the store's record of its net: by its NID, or by the interface that
/// carries its address (an NI kept without a NID).
fn stored_ni(net: &NetConfig, nid: Nid) -> Option<usize> {
    net.local_nis.iter().position(|n| {
        if n.nid == Some(nid) {
            return true;
        }
        let ip = n.interfaces.first().and_then(|name| {
            name.parse::<Ipv4Addr>()
                .ok()
                .or_else(|| HostInterfaces.ipv4(name))
        });
        n.nid.is_none() && ip.is_some_and(|ip| Nid::from_ipv4(nid.net, ip) == nid)
    })
}

/// The NID of NI `spec`: `nid` when given (on an interface that carries its address, when
/// one is named), else the IPv4 address of its interface.
fn resolve_nid(spec: &NiSpec, ifs: &dyn Interfaces) -> Result<Nid, NiControlError> {
    let invalid = |message: String| NiControlError::Invalid {
        field: "interface".to_owned(),
        message,
    };
    match (spec.nid, spec.interface.as_deref()) {
        (Some(nid), None) => Ok(nid),
        (Some(nid), Some(name)) => {
            let want = nid.addr_u32().map(Ipv4Addr::from);
            let carries = if_addrs::get_if_addrs()
                .unwrap_or_default()
                .into_iter()
                .any(|i| i.name == name && Some(i.ip()) == want.map(IpAddr::V4));
            if carries {
                Ok(nid)
            } else {
                Err(invalid(format!(
                    "interface {name:?} does not have the address of {nid}"
                )))
            }
        }
        (None, Some(name)) => ifs
            .ipv4(name)
            .map(|ip| Nid::from_ipv4(spec.net, ip))
            .ok_or_else(|| {
                invalid(format!(
                    "interface {name:?} has no IPv4 address on this host"
                ))
            }),
        (None, None) => Err(invalid(
            "creating a local NI needs at least one interface".to_owned(),
        )),
    }
}

/// The NI as the store keeps it: its NID, its interface, the tunables given (with
/// `conns_per_peer`, socklnd's and o2iblnd's), and the LND `timeout` (seconds) the running
/// NIs of its LND have, when not the default.
fn local_ni(spec: &NiSpec, nid: Nid, timeout: Option<u32>) -> LocalNi {
    let conns_per_peer = spec
        .conns_per_peer
        .filter(|_| matches!(spec.net.lnd, LndType::SOCKLND | LndType::O2IBLND));
    let given =
        spec.credits.is_some() || spec.peer_credits.is_some() || spec.peer_timeout.is_some();
    let tunables = given.then(|| NiTunables {
        // -1: the LND's default, as lnetctl writes a timeout not given.
        peer_timeout: spec
            .peer_timeout
            .map_or(-1, |v| i32::try_from(v).unwrap_or(i32::MAX)),
        peer_credits: spec
            .peer_credits
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(0),
        peer_buffer_credits: 0,
        credits: spec
            .credits
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(0),
    });
    let lnd_tunables = (conns_per_peer.is_some() || timeout.is_some()).then(|| LndTunables {
        conns_per_peer: conns_per_peer.map(|cpp| u16::try_from(cpp).unwrap_or(u16::MAX)),
        timeout,
        ..LndTunables::default()
    });
    LocalNi {
        nid: Some(nid),
        status: None,
        interfaces: spec.interface.iter().cloned().collect(),
        statistics: None,
        sent_stats: None,
        received_stats: None,
        dropped_stats: None,
        health_stats: None,
        tunables,
        lnd_tunables,
        dev_cpt: None,
        cpt: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

    use super::*;

    fn spec(net: &str, conns_per_peer: Option<u32>) -> NiSpec {
        NiSpec {
            net: net.parse().unwrap(),
            interface: Some("ib0".to_owned()),
            nid: None,
            credits: None,
            peer_credits: Some(16),
            peer_timeout: None,
            conns_per_peer,
        }
    }

    /// An o2ib NI added at run time, as the store keeps it and as a start from the store
    /// alone reads it back: its interface and tunables, the o2iblnd timeout the running
    /// o2ib NIs have, and its `conns_per_peer`. A build without the o2ib LND refuses it,
    /// naming the net.
    #[test]
    fn an_o2ib_ni_is_kept_with_the_lnd_timeout_and_read_back_from_the_store() {
        let nid: Nid = "10.9.0.1@o2ib2".parse().unwrap();
        let local = local_ni(&spec("o2ib2", Some(3)), nid, Some(7));
        let t = local.lnd_tunables.clone().unwrap();
        assert_eq!((t.timeout, t.conns_per_peer), (Some(7), Some(3)));
        // A tcp NI keeps its conns_per_peer.
        let tcp = local_ni(
            &spec("tcp2", Some(2)),
            "10.9.0.1@tcp2".parse().unwrap(),
            None,
        );
        assert_eq!(tcp.lnd_tunables.unwrap().conns_per_peer, Some(2));

        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("data")).unwrap();
        store.add_local_ni(nid.net, &local).unwrap();
        let config = store.export().unwrap();
        let net = config.nets.iter().find(|n| n.net_type == nid.net).unwrap();
        assert_eq!(stored_ni(net, nid), Some(0));
        let planned = crate::plan::plan("the store", &config.to_yaml(), &HostInterfaces);
        if cfg!(feature = "o2ib") {
            let plan = planned.unwrap();
            let ni = &plan.o2ib_nis[0];
            assert_eq!(
                (ni.nid, ni.timeout, ni.peer_credits, ni.conns_per_peer),
                (nid, Some(7), Some(16), Some(3))
            );
            assert_eq!(ni.interface.as_deref(), Some("ib0"));
            let c = crate::o2ib_ni::o2iblnd_config(ni, 1);
            assert_eq!(c.timeout, std::time::Duration::from_secs(7));
            assert_eq!((c.peer_credits, c.conns_per_peer), (16, 3));
        } else {
            let Err(PlanError::Refused { problems, .. }) = planned else {
                panic!("an o2ib net runs in a build without the o2ib LND: {planned:?}");
            };
            assert_eq!(problems[0].key, "net[0].net type", "{problems:?}");
            assert!(problems[0].message.contains("leaves out"), "{problems:?}");
        }
    }
}
