//! The management messages of the LNet actor and their handlers: adding and removing
//! NIs, listing NIs, their drivers and recovery queues, setting health, tunables, UDSP
//! rules and NUMA nodes, the show settings and the counters.

use std::collections::BTreeMap;
use std::sync::Arc;

use actix::prelude::*;
use lnet::health::HealthValue;
use lnet::recovery::{RecoveryConfig, RecoveryEntry, RecoveryKind};
use lnet::tunables::Tunables;
use lnet::udsp::UdspPolicy;
use lnet::{Net, Nid};

use super::config::{NetCredits, NiCredits};
use super::discovery::NiStatusChanged;
use super::error::NodeError;
use super::{LnetActor, LocalNiEntry};
use crate::driver::Driver;
use crate::ni::{tell, LocalNiActor, LocalNiView, SetHealth};
use crate::recovery::{Configure, Forget, List};

#[derive(Message)]
#[rtype(result = "Result<(), NodeError>")]
pub(super) struct AddNi {
    pub(super) driver: Arc<dyn Driver>,
    pub(super) credits: NiCredits,
}

/// Takes NI `0` out of the node; answers its driver, to be stopped.
#[derive(Message)]
#[rtype(result = "Result<Arc<dyn Driver>, NodeError>")]
pub(super) struct RemoveNi(pub(super) Nid);

#[derive(Message)]
#[rtype(result = "Vec<LocalNiView>")]
pub(super) struct ListNis;

/// The drivers of the local NIs, in NI order.
#[derive(Message)]
#[rtype(result = "Vec<Arc<dyn Driver>>")]
pub(super) struct ListDrivers;

#[derive(Message)]
#[rtype(result = "Result<Vec<RecoveryEntry<Nid>>, NodeError>")]
pub(super) struct ListRecovery(pub(super) RecoveryKind);

#[derive(Message)]
#[rtype(result = "Result<(), NodeError>")]
pub(super) struct SetNiHealth {
    pub(super) local: bool,
    pub(super) nid: Nid,
    pub(super) value: HealthValue,
}

#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct SetTunables {
    pub(super) tunables: Tunables,
    /// `lnetctl set routing`: routing on also ends a drain.
    pub(super) set_routing: bool,
}

#[derive(Message)]
#[rtype(result = "BTreeMap<&'static str, u64>")]
pub(super) struct Counters;

/// The settings the show documents print: each local net's credits for its peer NIs,
/// and the number of CPTs.
#[derive(Message)]
#[rtype(result = "(BTreeMap<Net, NetCredits>, usize)")]
pub(super) struct ShowSettings;

/// Replaces the UDSP rules.
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct SetUdsp(pub(super) UdspPolicy);

/// The UDSP rules in force.
#[derive(Message)]
#[rtype(result = "UdspPolicy")]
pub(super) struct GetUdsp;

/// Sets the NUMA node of a local NI's device.
#[derive(Message)]
#[rtype(result = "Result<(), NodeError>")]
pub(super) struct SetNiNumaNode(pub(super) Nid, pub(super) Option<u32>);

impl Handler<AddNi> for LnetActor {
    type Result = Result<(), NodeError>;

    fn handle(&mut self, m: AddNi, ctx: &mut Context<Self>) -> Result<(), NodeError> {
        let nid = m.driver.nid();
        if self.nis.contains_key(&nid) {
            return Err(NodeError::NiExists { nid });
        }
        let recovery = self.local_recovery.clone().ok_or(NodeError::Stopped)?;
        let driver = Arc::clone(&m.driver);
        // The net's tunables, as its first NI brings them.
        if !self.has_net(nid.net) {
            let credits = self.config.net_credits(&m.credits);
            self.net_credits.insert(nid.net, credits);
            self.path
                .pools
                .set_net_credits(nid.net, Some(credits.router_credits()));
        }
        let (actor, view, cell) = LocalNiActor::new(
            m.driver,
            m.credits.credits,
            self.clock,
            self.events.clone(),
            recovery,
            self.completions.clone(),
            self.faults.clone(),
        );
        let addr = self.place(&nid, actor);
        // Watch the NI's status: a flip patches the ping info in place (same seqno) and
        // is pushed to the discovered peers.
        let mut status = view.clone();
        // A weak address: the NI actor must not keep the node alive.
        let me = ctx.address().downgrade();
        actix::spawn(async move {
            let mut last = status.borrow_and_update().state;
            while status.changed().await.is_ok() {
                let state = status.borrow_and_update().state;
                if state != last {
                    last = state;
                    let Some(addr) = me.upgrade() else {
                        break;
                    };
                    if addr.send(NiStatusChanged).await.is_err() {
                        break;
                    }
                }
            }
        });
        self.nis.insert(
            nid,
            LocalNiEntry {
                addr,
                driver,
                numa_node: None,
                view,
                cell,
            },
        );
        self.ni_order.push(nid);
        self.routes.net_added(nid.net, self.clock.now());
        self.update_policy();
        self.seqno = self.seqno.wrapping_add(1);
        self.push_all(ctx);
        Ok(())
    }
}

impl Handler<RemoveNi> for LnetActor {
    type Result = Result<Arc<dyn Driver>, NodeError>;

    fn handle(&mut self, RemoveNi(nid): RemoveNi, ctx: &mut Context<Self>) -> Self::Result {
        let entry = self.nis.remove(&nid).ok_or(NodeError::NoSuchNi { nid })?;
        self.ni_order.retain(|n| *n != nid);
        let last_on_net = !self.has_net(nid.net);
        self.routes.ni_removed(&nid, last_on_net);
        if last_on_net {
            // The net's tunables go with it; a net added again brings its own.
            self.net_credits.remove(&nid.net);
            self.path.pools.set_net_credits(nid.net, None);
        }
        if let Some(q) = &self.local_recovery {
            q.do_send(Forget { nid });
        }
        self.update_policy();
        // The ping info lost an entry: a new sequence number, pushed to the peers.
        self.seqno = self.seqno.wrapping_add(1);
        self.push_all(ctx);
        Ok(entry.driver)
    }
}

impl Handler<ListNis> for LnetActor {
    type Result = MessageResult<ListNis>;

    fn handle(&mut self, _: ListNis, _ctx: &mut Context<Self>) -> MessageResult<ListNis> {
        MessageResult(
            self.ni_order
                .iter()
                .filter_map(|n| self.nis.get(n))
                .map(|e| e.view.borrow().with_cell(&e.cell))
                .collect(),
        )
    }
}

impl Handler<ListDrivers> for LnetActor {
    type Result = MessageResult<ListDrivers>;

    fn handle(&mut self, _: ListDrivers, _ctx: &mut Context<Self>) -> MessageResult<ListDrivers> {
        MessageResult(
            self.ni_order
                .iter()
                .filter_map(|n| self.nis.get(n))
                .map(|e| Arc::clone(&e.driver))
                .collect(),
        )
    }
}

impl Handler<ListRecovery> for LnetActor {
    type Result = ResponseFuture<Result<Vec<RecoveryEntry<Nid>>, NodeError>>;

    fn handle(
        &mut self,
        ListRecovery(kind): ListRecovery,
        _ctx: &mut Context<Self>,
    ) -> Self::Result {
        let addr = self.recovery(kind).cloned();
        Box::pin(async move {
            let addr = addr.ok_or(NodeError::Stopped)?;
            Ok(addr.send(List).await?)
        })
    }
}

impl Handler<SetNiHealth> for LnetActor {
    type Result = Result<(), NodeError>;

    fn handle(&mut self, m: SetNiHealth, _ctx: &mut Context<Self>) -> Result<(), NodeError> {
        if m.local {
            let e = self
                .nis
                .get(&m.nid)
                .ok_or(NodeError::NoSuchNi { nid: m.nid })?;
            tell(&e.addr, SetHealth(m.value));
        } else {
            let e = self
                .peer_nis
                .get(&m.nid)
                .ok_or(NodeError::NoSuchPeerNi { nid: m.nid })?;
            tell(&e.addr, SetHealth(m.value));
        }
        Ok(())
    }
}

impl Handler<SetTunables> for LnetActor {
    type Result = ();

    fn handle(&mut self, m: SetTunables, ctx: &mut Context<Self>) {
        let t = m.tunables;
        let recovery = RecoveryConfig::from(&t);
        for addr in [&self.local_recovery, &self.peer_recovery]
            .into_iter()
            .flatten()
        {
            tell(addr, Configure(recovery));
        }
        if t.routing() && !self.config.tunables.routing() {
            self.routes.restart_nets(self.clock.now());
        }
        let flipped = t.routing() != self.config.tunables.routing();
        // Turning discovery off is pushed (the ping info loses its discovery feature);
        // turning it on is not, as in the kernel.
        let discovery_off = !t.discovery() && self.config.tunables.discovery();
        let routing_on = t.routing();
        let buffers = |t: &lnet::tunables::Tunables| {
            use lnet::tunables::TunableName::{LargeBuffers, SmallBuffers, TinyBuffers};
            [t.get(TinyBuffers), t.get(SmallBuffers), t.get(LargeBuffers)]
        };
        if buffers(&t) != buffers(&self.config.tunables) {
            // `lnetctl set tiny_buffers` ...: the pools change size at once, nothing in
            // flight is lost.
            let ncpts = u32::try_from(self.config.cpts.len().max(1)).unwrap_or(1);
            let sizes = lnet::rtrbuf::per_cpt(buffers(&t), ncpts);
            self.path.pools.resize(sizes);
        }
        self.config.tunables = t;
        self.update_policy();
        // `set routing 1` is the way back from a drain; `set routing 0` leaves a drain as
        // it is (the node stays out of service, and now drops what it is sent to forward).
        let undrained = m.set_routing && routing_on && self.end_drain();
        if flipped || undrained || discovery_off {
            // The ping info now says routing is (dis)abled, the NIs are up again, or
            // discovery is off: tell the peers, as the kernel does on `lnetctl set
            // routing` and `lnetctl set discovery 0`.
            self.push_all(ctx);
        }
    }
}

impl Handler<SetUdsp> for LnetActor {
    type Result = ();

    fn handle(&mut self, SetUdsp(policy): SetUdsp, _ctx: &mut Context<Self>) {
        self.config.udsp = policy;
        self.publish_forward();
    }
}

impl Handler<GetUdsp> for LnetActor {
    type Result = MessageResult<GetUdsp>;

    fn handle(&mut self, _: GetUdsp, _ctx: &mut Context<Self>) -> MessageResult<GetUdsp> {
        MessageResult(self.config.udsp.clone())
    }
}

impl Handler<SetNiNumaNode> for LnetActor {
    type Result = Result<(), NodeError>;

    fn handle(
        &mut self,
        SetNiNumaNode(nid, node): SetNiNumaNode,
        _ctx: &mut Context<Self>,
    ) -> Self::Result {
        let e = self.nis.get_mut(&nid).ok_or(NodeError::NoSuchNi { nid })?;
        e.numa_node = node;
        Ok(())
    }
}

impl Handler<ShowSettings> for LnetActor {
    type Result = MessageResult<ShowSettings>;

    fn handle(&mut self, _: ShowSettings, _ctx: &mut Context<Self>) -> MessageResult<ShowSettings> {
        MessageResult((
            self.net_credits.iter().map(|(n, c)| (*n, *c)).collect(),
            self.config.cpts.len(),
        ))
    }
}

impl Handler<Counters> for LnetActor {
    type Result = MessageResult<Counters>;

    fn handle(&mut self, _: Counters, _ctx: &mut Context<Self>) -> MessageResult<Counters> {
        let mut c = self.counters.clone();
        self.path.add_counts(&mut c);
        // Gauges of `stats show`: the messages in flight (`msgs_alloc`: the actor's and
        // the forwarding path's), the most there have been at once (`msgs_max`: the
        // high-water marks of the actor's table and of each shard of the path, summed as
        // the kernel sums its CPTs') and the transactions waiting for their ACK or REPLY
        // (`rst_alloc`, the response trackers).
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        c.insert("msgs_alloc", n(self.msgs.len() + self.path.in_flight()));
        c.insert("msgs_max", n(self.msgs.max() + self.path.in_flight_max()));
        let waiting = self
            .txns
            .values()
            .filter(|t| t.want_response && !t.done)
            .count();
        c.insert("rst_alloc", u64::try_from(waiting).unwrap_or(u64::MAX));
        MessageResult(c)
    }
}

/// The local NIs whose link is down (`fatal_error` of `net show`).
#[derive(Message)]
#[rtype(result = "Vec<Nid>")]
pub(super) struct LinksDown;

impl Handler<LinksDown> for LnetActor {
    type Result = MessageResult<LinksDown>;

    fn handle(&mut self, _: LinksDown, _ctx: &mut Context<Self>) -> MessageResult<LinksDown> {
        MessageResult(
            self.ni_order
                .iter()
                .filter(|n| self.routes.link_down(n))
                .copied()
                .collect(),
        )
    }
}
