//! Local NIs added and deleted on the running daemon (`net add|del` through the API): the
//! new NI is checked as a start from the store would check it ([`crate::plan`]), started by
//! the code that starts the configured NIs ([`crate::tcp_ni`]), on the system thread, and kept
//! in the store, so that a restart from the store alone brings it back.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};

use actors::{Node, NodeError};
use lnet::config::{LndTunables, LocalNi, NetConfig, NiTunables};
use lnet::Nid;
use store::{LocalNiId, Store};
use web::{NiControl, NiControlError, NiFuture, NiSpec};

use crate::plan::{HostInterfaces, Interfaces, PlanError};

/// Starts and stops the socklnd NIs of a running node, and keeps them in its store.
#[derive(Debug, Clone)]
pub struct RuntimeNis {
    node: Node,
    store: Arc<Store>,
    incarnation: u64,
    cpts: lnd::socklnd::Cpts,
    system: actix::ArbiterHandle,
    /// Held while an NI is added or deleted, so that two changes do not check against the
    /// same state.
    changing: Arc<tokio::sync::Mutex<()>>,
    /// The link watches of the NIs added here, ended when the NI is deleted.
    watches: Arc<Mutex<HashMap<Nid, tokio::task::AbortHandle>>>,
}

impl RuntimeNis {
    /// For `node`, kept in `store`; new NIs share this run's `incarnation` and `cpts`, and
    /// start on `system`, the thread the configured NIs started on.
    pub fn new(
        node: Node,
        store: Arc<Store>,
        incarnation: u64,
        cpts: lnd::socklnd::Cpts,
        system: actix::ArbiterHandle,
    ) -> RuntimeNis {
        RuntimeNis {
            node,
            store,
            incarnation,
            cpts,
            system,
            changing: Arc::default(),
            watches: Arc::default(),
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

    /// Ends the link watch of NI `nid`, if it was added here.
    fn end_watch(&self, nid: Nid) {
        if let Some(w) = self.watches.lock().ok().and_then(|mut w| w.remove(&nid)) {
            w.abort();
        }
    }

    async fn add(self, spec: NiSpec) -> Result<Nid, NiControlError> {
        let _changing = self.changing.lock().await;
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
        let local = local_ni(&spec, nid);
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
                        field: first.as_ref().map_or("net".to_owned(), |p| p.key.clone()),
                        message: first.map_or_else(String::new, |p| p.message),
                    }
                }
                other => NiControlError::Invalid {
                    field: "net".to_owned(),
                    message: other.to_string(),
                },
            },
        )?;
        let Some(ni) = plan.nis.into_iter().find(|n| n.nid == nid) else {
            return Err(NiControlError::Invalid {
                field: "net".to_owned(),
                message: format!("net {} does not run on socklnd", spec.net),
            });
        };
        let (node, incarnation, cpts) = (self.node.clone(), self.incarnation, self.cpts.clone());
        let link = ni.interface.clone();
        let watch = self
            .on_system(async move {
                crate::tcp_ni::start(&node, &ni, incarnation, &cpts).await?;
                let addr = ni.nid.addr_u32().map(Ipv4Addr::from);
                let watch = crate::link::interface_of(link.as_deref(), addr).map(|name| {
                    actix::spawn(crate::link::watch(node, vec![(ni.nid, name)])).abort_handle()
                });
                Ok::<_, crate::tcp_ni::NiStartError>(watch)
            })
            .await?
            .map_err(|e| NiControlError::Start {
                message: std::error::Error::source(&e)
                    .map_or_else(|| e.to_string(), ToString::to_string),
            })?;
        if let (Some(w), Ok(mut watches)) = (watch, self.watches.lock()) {
            watches.insert(nid, w);
        }
        if let Err(e) = self.store.add_local_ni(spec.net, &local) {
            self.end_watch(nid);
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
        self.end_watch(nid);
        let keep_err = |e: store::StoreError| NiControlError::Keep {
            message: format!("NI {nid} was stopped but its deletion could not be kept: {e}"),
        };
        let Some(net) = self.store.net(nid.net).map_err(keep_err)? else {
            return Ok(());
        };
        let id = net.local_nis.iter().find_map(|n| {
            if n.nid == Some(nid) {
                return Some(LocalNiId::Nid(nid));
            }
            let name = n.interfaces.first()?;
            let ip = name
                .parse::<Ipv4Addr>()
                .ok()
                .or_else(|| HostInterfaces.ipv4(name))?;
            (n.nid.is_none() && Nid::from_ipv4(nid.net, ip) == nid)
                .then(|| LocalNiId::Interface(name.clone()))
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

impl NiControl for RuntimeNis {
    fn add_ni(&self, spec: NiSpec) -> NiFuture<Nid> {
        Box::pin(self.clone().add(spec))
    }

    fn remove_ni(&self, nid: Nid) -> NiFuture<()> {
        Box::pin(self.clone().remove(nid))
    }
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

/// The NI as the store keeps it: its NID, its interface, and the tunables given.
fn local_ni(spec: &NiSpec, nid: Nid) -> LocalNi {
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
    let lnd_tunables = spec.conns_per_peer.map(|cpp| LndTunables {
        conns_per_peer: Some(u16::try_from(cpp).unwrap_or(u16::MAX)),
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
