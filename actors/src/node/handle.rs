//! The handle of a node ([`Node`]): the API of the LNet endpoint, each call a message to
//! the LNet actor.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use arc_swap::ArcSwap;
use bytes::Bytes;
use lnd::{Lnd, RxMessage, TxCompletion};
use lnet::health::{HealthStatus, HealthValue};
use lnet::ping::{INTERFACES_MAX_DEFAULT, RESERVED_PORTAL};
use lnet::recovery::{RecoveryEntry, RecoveryKind};
use lnet::route::RouteSpec;
use lnet::tunables::Tunables;
use lnet::udsp::UdspPolicy;
use lnet::{Features, Message as LnetMsg, Net, Nid, PingInfo, WireHandle, PING_MATCHBITS};
use tokio::sync::mpsc;

use super::config::{NiCredits, NodeConfig};
use super::discovery::{DiscoveredPeer, LearnPeer, OwnInfo, PingFailure, PingReply};
use super::error::{LndStartError, NodeError};
use super::fast_path::{ForwardPath, ForwardingCounts};
use super::forward::{DrainState, Drained, EndDrain, ForwardsInFlight, StartDrain};
use super::held::Held;
use super::lnd_glue::{ChannelStream, Inbound, NodeHandler, RxPolicy, UnboundedStream};
use super::msgs::{
    AddNi, Counters, GetUdsp, LinksDown, ListDrivers, ListNis, ListRecovery, RemoveNi, SetNiHealth,
    SetNiNumaNode, SetTunables, SetUdsp, ShowSettings,
};
use super::peers::{AddPeer, DelPeer, ListPeers, PeerTable, PeerView};
use super::recv::{Attach, MdSpec};
use super::router_check::SetLink;
use super::routes::{AddRoute, DelRoute, ListRoutes, RouteView, Routes, RoutingShow, RoutingState};
use super::send::{GetRequest, PutRequest};
use super::txn::{FailReason, MsgEventKind, Outcome, StartTxn, Transaction};
use super::LnetActor;
use crate::clock::Clock;
use crate::driver::{Driver, NiDriver};
use crate::events::EventBus;
use crate::fault::FaultRules;
use crate::lnd_counters::NiLndCounters;
use crate::ni::LocalNiView;
use crate::router::{RouterActor, RouterPools, ShowBuffers};

/// How long [`Node::lnd_counters`] waits for one NI's LND (o2iblnd answers from its NI
/// task) before it leaves that NI out.
const LND_COUNTERS_WAIT: Duration = Duration::from_secs(2);

/// The handle of a node: the API of the LNet endpoint.
#[derive(Debug, Clone)]
pub struct Node {
    pub(super) addr: Addr<LnetActor>,
    pub(super) events: EventBus,
    pub(super) handler: Arc<NodeHandler>,
    pub(super) clock: Clock,
    pub(super) faults: FaultRules,
    /// What the show documents print of each local NI beyond what the node tracks.
    pub(super) descriptions: Arc<std::sync::Mutex<BTreeMap<Nid, crate::show::NiDescription>>>,
}

impl Node {
    /// Starts a node's actors on the current arbiter (inside a running actix system).
    pub fn start(config: NodeConfig) -> Node {
        let clock = Clock::new();
        let faults = FaultRules::new(clock);
        let events = EventBus::new(config.event_capacity);
        let cap = config.max_in_flight.saturating_mul(2).max(16);
        let (ctx_tx, ctx_rx) = mpsc::channel::<TxCompletion>(cap);
        let (rx_tx, rx_rx) = mpsc::channel::<Inbound>(256);
        let ncpts = config.cpts.len().max(1);
        let sizes = lnet::rtrbuf::per_cpt(
            [
                config
                    .tunables
                    .get(lnet::tunables::TunableName::TinyBuffers),
                config
                    .tunables
                    .get(lnet::tunables::TunableName::SmallBuffers),
                config
                    .tunables
                    .get(lnet::tunables::TunableName::LargeBuffers),
            ],
            u32::try_from(ncpts).unwrap_or(1),
        );
        let rtr_credits = if config.peer_buffer_credits > 0 {
            config.peer_buffer_credits
        } else {
            config.peer_credits
        };
        let pools = Arc::new(RouterPools::new(sizes, ncpts, rtr_credits));
        let router = RouterActor::new(Arc::clone(&pools)).start();
        let (adopt_tx, adopt_rx) = mpsc::unbounded_channel();
        let path = Arc::new(ForwardPath::new(pools, faults.clone(), clock, adopt_tx));
        let policy = Arc::new(ArcSwap::from_pointee(RxPolicy {
            local: rustc_hash::FxHashSet::default(),
            routing: config.tunables.routing(),
        }));
        let routes = Routes::new(config.router_check, config.net_check);
        let held = Arc::new(Held::default());
        let actor = LnetActor {
            config,
            clock,
            faults: faults.clone(),
            events: events.clone(),
            completions: ctx_tx.clone(),
            nis: BTreeMap::new(),
            ni_order: Vec::new(),
            peers: PeerTable::default(),
            peer_nis: HashMap::new(),
            msgs: super::msg_table::MsgTable::default(),
            attempts: HashMap::new(),
            txns: HashMap::new(),
            txn_deadlines: BTreeSet::new(),
            txn_timer: None,
            next_id: 0,
            mds: Vec::new(),
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            seqno: 0,
            local_recovery: None,
            peer_recovery: None,
            counters: BTreeMap::new(),
            router,
            path: Arc::clone(&path),
            policy: Arc::clone(&policy),
            routes,
            path_heard: Default::default(),
            held: Arc::clone(&held),
            net_credits: HashMap::new(),
        };
        // The LNDs' completions and received messages go straight into the actor.
        let addr = LnetActor::create(move |ctx| {
            ctx.add_stream(ChannelStream(ctx_rx));
            ctx.add_stream(ChannelStream(rx_rx));
            ctx.add_stream(UnboundedStream(adopt_rx));
            actor
        });
        Node {
            addr,
            events,
            handler: Arc::new(NodeHandler {
                completions: ctx_tx,
                received: rx_tx,
                policy,
                path,
                faults: faults.clone(),
                held,
            }),
            clock,
            faults,
            descriptions: Arc::default(),
        }
    }

    /// Records what `net show` prints of local NI `nid` beyond what the node tracks: the
    /// interface it runs on and its LND's tunables, as the caller started it.
    pub fn describe_ni(&self, nid: Nid, description: crate::show::NiDescription) {
        if let Ok(mut d) = self.descriptions.lock() {
            d.insert(nid, description);
        }
    }

    /// The description of local NI `nid`, if one was recorded.
    pub(crate) fn ni_description(&self, nid: &Nid) -> Option<crate::show::NiDescription> {
        self.descriptions.lock().ok()?.get(nid).cloned()
    }

    /// How this node's forwarded messages went so far: on the forwarding path alone,
    /// handed over to the actors, or through the LNet actor from the start.
    pub fn forwarding(&self) -> ForwardingCounts {
        self.handler.path.counts()
    }

    /// The handler every LND of this node reports to.
    pub fn handler(&self) -> Arc<NodeHandler> {
        Arc::clone(&self.handler)
    }

    /// The events bus.
    pub fn events(&self) -> &EventBus {
        &self.events
    }

    /// The node's clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Starts an NI on LND `L` with `credits` (its tx credits, and those of its net's
    /// peer NIs); returns its NID.
    pub async fn add_ni<L: Lnd<Handler = NodeHandler>>(
        &self,
        config: L::Config,
        credits: impl Into<NiCredits>,
    ) -> Result<Nid, NodeError> {
        let driver = self.start_lnd::<L>(config).await?;
        let nid = driver.nid();
        self.add_driver(driver, credits).await?;
        Ok(nid)
    }

    /// Starts LND `L` with this node's handler.
    pub(super) async fn start_lnd<L: Lnd<Handler = NodeHandler>>(
        &self,
        config: L::Config,
    ) -> Result<Arc<NiDriver<L>>, NodeError> {
        let lnd = L::start(config, self.handler())
            .await
            .map_err(|e| NodeError::NiStart {
                source: LndStartError::new(e),
            })?;
        Ok(Arc::new(NiDriver::new(lnd)))
    }

    /// Adds an NI whose LND was started already (with [`Node::handler`] as its handler).
    pub async fn add_driver(
        &self,
        driver: Arc<dyn Driver>,
        credits: impl Into<NiCredits>,
    ) -> Result<(), NodeError> {
        let nid = driver.nid();
        if let Err(e) = self
            .addr
            .send(AddNi {
                driver: Arc::clone(&driver),
                credits: credits.into(),
            })
            .await?
        {
            driver.stop().await;
            return Err(e);
        }
        tracing::debug!(%nid, "NI added");
        Ok(())
    }

    /// Takes local NI `nid` out of the node (`lnetctl net del`): it is no longer selected
    /// nor advertised (the new ping info is pushed to the discovered peers), leaves the
    /// recovery queue, and its LND is stopped (its connections closed, sends not yet on the
    /// wire aborted). Whether the LND stopped cleanly.
    pub async fn remove_ni(&self, nid: Nid) -> Result<bool, NodeError> {
        let driver = self.addr.send(RemoveNi(nid)).await??;
        Ok(driver.stop().await)
    }

    /// Removes every local NI ([`Node::remove_ni`]), as a stopping node does last. Whether
    /// every LND stopped cleanly.
    pub async fn stop_nis(&self) -> Result<bool, NodeError> {
        let mut clean = true;
        for ni in self.local_nis().await? {
            clean &= self.remove_ni(ni.nid).await?;
        }
        Ok(clean)
    }

    /// Adds (or replaces) a peer: its primary NID, its NIDs (on one or more nets), and
    /// whether it is Multi-Rail (`lnetctl peer add --prim_nid --nid [--non_mr]`).
    pub async fn add_peer(
        &self,
        primary: Nid,
        nids: Vec<Nid>,
        multi_rail: bool,
    ) -> Result<(), NodeError> {
        self.addr
            .send(AddPeer {
                primary,
                nids,
                multi_rail,
            })
            .await?
    }

    /// Exposes an MD: PUTs that match come out of the returned channel.
    pub async fn attach(&self, md: MdSpec) -> Result<mpsc::Receiver<RxMessage>, NodeError> {
        Ok(self.addr.send(Attach(md)).await?)
    }

    /// Sends a PUT.
    pub async fn put(&self, req: PutRequest) -> Result<Transaction, NodeError> {
        let ack_wmd = if req.ack {
            WireHandle {
                interface_cookie: 1,
                object_cookie: 1,
            }
        } else {
            WireHandle::NONE
        };
        self.addr
            .send(StartTxn {
                dest: req.dest,
                msg: LnetMsg::Put {
                    ack_wmd,
                    match_bits: req.match_bits,
                    hdr_data: req.hdr_data,
                    ptl_index: req.portal,
                    offset: 0,
                },
                payload: req.payload,
                timeout: req.timeout,
                want_response: req.ack,
                src: None,
            })
            .await?
    }

    /// Sends a GET.
    pub async fn get(&self, req: GetRequest) -> Result<Transaction, NodeError> {
        self.addr
            .send(StartTxn {
                dest: req.dest,
                msg: LnetMsg::Get {
                    return_wmd: WireHandle::NONE,
                    match_bits: req.match_bits,
                    ptl_index: req.portal,
                    src_offset: 0,
                    sink_length: req.sink_length,
                },
                payload: Bytes::new(),
                timeout: req.timeout,
                want_response: true,
                src: None,
            })
            .await?
    }

    /// Pings `nid` (`lnetctl ping`): a GET on the reserved portal; the REPLY's ping info.
    pub async fn ping(&self, nid: Nid, timeout: Duration) -> Result<PingReply, PingFailure> {
        self.ping_from(nid, None, timeout).await
    }

    /// Pings `nid` from local NI `source` (`lnetctl ping --source`) on every attempt, or
    /// from the NI the selection picks when `None`. A source that is no local NI is
    /// [`NodeError::NoSuchNi`]; one with no path to `nid` fails as a send with no route.
    pub async fn ping_from(
        &self,
        nid: Nid,
        source: Option<Nid>,
        timeout: Duration,
    ) -> Result<PingReply, PingFailure> {
        let txn = self
            .addr
            .send(StartTxn {
                dest: nid,
                msg: super::discovery::ping_get(),
                payload: Bytes::new(),
                timeout,
                want_response: true,
                src: source,
            })
            .await
            .map_err(NodeError::from)??;
        let events = txn.finish().await;
        let Some(last) = events.last() else {
            return Err(PingFailure::Failed(Outcome::Failed {
                status: HealthStatus::LocalError,
                reason: FailReason::Timeout,
            }));
        };
        if last.kind != MsgEventKind::Reply || !last.status.is_ok() {
            return Err(PingFailure::Failed(last.status));
        }
        let payload = last.payload.clone().unwrap_or_default();
        let info = PingInfo::decode_validated(&payload, INTERFACES_MAX_DEFAULT)
            .map_err(|e| PingFailure::BadInfo(e.to_string()))?;
        Ok(PingReply {
            from: last.from.unwrap_or(nid),
            info,
        })
    }

    /// Discovers `nid`: pings it, records its NIDs and Multi-Rail flag as a peer, then,
    /// if it is Multi-Rail and discovery-capable, pushes this node's ping info to it and
    /// waits for the ACK.
    pub async fn discover(
        &self,
        nid: Nid,
        timeout: Duration,
    ) -> Result<DiscoveredPeer, PingFailure> {
        let reply = self.ping(nid, timeout).await?;
        let info = reply.info.clone();
        // What `discover` shows is the peer as this node holds it now, as lnetctl shows
        // the kernel's peer after its discovery.
        let learned = self
            .addr
            .send(LearnPeer(info.clone(), reply.from))
            .await
            .map_err(NodeError::from)?;
        let (primary, multi_rail, nids) = learned.unwrap_or_else(|| {
            let nids = reply.nids();
            let primary = nids.first().map(|n| n.0).unwrap_or(nid);
            (primary, false, nids)
        });
        let mut pushed = false;
        if multi_rail && info.features.contains(Features::DISCOVERY) {
            let own = self.addr.send(OwnInfo).await.map_err(NodeError::from)?;
            let payload = own
                .encode()
                .map_err(|e| PingFailure::BadInfo(e.to_string()))?;
            let txn = self
                .put(PutRequest {
                    dest: primary,
                    portal: RESERVED_PORTAL,
                    match_bits: PING_MATCHBITS,
                    hdr_data: 0,
                    payload: Bytes::from(payload),
                    ack: true,
                    timeout,
                })
                .await?;
            let events = txn.finish().await;
            pushed = events
                .last()
                .is_some_and(|e| e.kind == MsgEventKind::Ack && e.status.is_ok());
        }
        Ok(DiscoveredPeer {
            primary,
            nids,
            multi_rail,
            pushed,
        })
    }

    /// Replaces the global tunables (`lnetctl set ...`, each value checked by
    /// [`Tunables::set`]); messages sent from now on follow them.
    pub async fn set_tunables(&self, tunables: Tunables) -> Result<(), NodeError> {
        Ok(self
            .addr
            .send(SetTunables {
                tunables,
                set_routing: false,
            })
            .await?)
    }

    /// Replaces the global tunables for `lnetctl set routing 0|1` (`tunables` carries the
    /// new `routing`): as [`Node::set_tunables`], and routing on also ends a drain
    /// ([`Node::undrain`]), in one push to the peers. Routing off leaves a drain as it
    /// is: the node then drops the messages it is sent to forward, as the kernel does.
    pub async fn set_routing(&self, tunables: Tunables) -> Result<(), NodeError> {
        Ok(self
            .addr
            .send(SetTunables {
                tunables,
                set_routing: true,
            })
            .await?)
    }

    /// This node's ping info as it would answer a ping now.
    pub async fn ping_info(&self) -> Result<PingInfo, NodeError> {
        Ok(self.addr.send(OwnInfo).await?)
    }

    /// The local NIs (`lnetctl net show`).
    pub async fn local_nis(&self) -> Result<Vec<LocalNiView>, NodeError> {
        Ok(self.addr.send(ListNis).await?)
    }

    /// The LND counters of every local NI whose LND keeps some (how its connections and
    /// connection attempts ended, ...), in the order the NIs were added. An NI whose LND
    /// does not answer within two seconds is left out.
    pub async fn lnd_counters(&self) -> Result<Vec<NiLndCounters>, NodeError> {
        let drivers: Vec<Arc<dyn Driver>> = self.addr.send(ListDrivers).await?;
        let mut out = Vec::with_capacity(drivers.len());
        for driver in drivers {
            let read = tokio::time::timeout(LND_COUNTERS_WAIT, driver.counters()).await;
            if let Ok(Some(counters)) = read {
                out.push(NiLndCounters {
                    nid: driver.nid(),
                    counters,
                });
            }
        }
        Ok(out)
    }

    /// The peers (`lnetctl peer show`).
    pub async fn peers(&self) -> Result<Vec<PeerView>, NodeError> {
        Ok(self.addr.send(ListPeers).await?)
    }

    /// A recovery queue's entries (`lnetctl debug recovery --local|--peer`).
    pub async fn recovery(&self, kind: RecoveryKind) -> Result<Vec<RecoveryEntry<Nid>>, NodeError> {
        self.addr.send(ListRecovery(kind)).await?
    }

    /// A recovery queue as `lnetctl debug recovery --local|--peer` lists it: its heading
    /// and `nid-0`, `nid-1`, … in queue order.
    pub async fn recovery_listing(
        &self,
        kind: RecoveryKind,
    ) -> Result<(&'static str, Vec<(String, Nid)>), NodeError> {
        let entries = self.recovery(kind).await?;
        let listing = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (format!("nid-{i}"), e.key))
            .collect();
        Ok((kind.heading(), listing))
    }

    /// Sets a local NI's health (`lnetctl net set --nid --health`).
    pub async fn set_local_ni_health(&self, nid: Nid, value: HealthValue) -> Result<(), NodeError> {
        self.addr
            .send(SetNiHealth {
                local: true,
                nid,
                value,
            })
            .await?
    }

    /// Sets a peer NI's health (`lnetctl peer set --nid --health`).
    pub async fn set_peer_ni_health(&self, nid: Nid, value: HealthValue) -> Result<(), NodeError> {
        self.addr
            .send(SetNiHealth {
                local: false,
                nid,
                value,
            })
            .await?
    }

    /// Node-wide counters (`resend_count`, `successful_resends`, `failed_resends`,
    /// `response_timeout_count`, `late_messages`, `drop_count`).
    pub async fn counters(&self) -> Result<BTreeMap<&'static str, u64>, NodeError> {
        Ok(self.addr.send(Counters).await?)
    }

    /// Deletes the peer whose primary NID is `primary` (`lnetctl peer del --prim_nid`), or
    /// only its NIDs `nids` when some are given (`--nid`). Refused for a peer that is a
    /// gateway of a route, and for its primary NID while it has others. Its peer NIs'
    /// state (health, credits, counters) is kept for when it comes back.
    pub async fn del_peer(&self, primary: Nid, nids: Vec<Nid>) -> Result<(), NodeError> {
        self.addr.send(DelPeer { primary, nids }).await?
    }

    /// The local NIs whose link is down (for the show documents).
    pub(crate) async fn links_down(&self) -> Result<Vec<Nid>, NodeError> {
        Ok(self.addr.send(LinksDown).await?)
    }

    /// Each local net's `peer_credits` and `peer_buffer_credits`, and the number of CPTs
    /// (for the show documents).
    pub(crate) async fn show_settings(
        &self,
    ) -> Result<(BTreeMap<Net, super::config::NetCredits>, usize), NodeError> {
        Ok(self.addr.send(ShowSettings).await?)
    }

    /// Replaces the UDSP rules (`udsp:`; `lnetctl udsp add|del`): they apply to every
    /// selection from now on. A bad list is refused whole, naming the rule and field.
    pub async fn set_udsp(&self, rules: &[lnet::config::UdspRule]) -> Result<(), NodeError> {
        let policy = UdspPolicy::new(rules)?;
        Ok(self.addr.send(SetUdsp(policy)).await?)
    }

    /// The UDSP rules in force.
    pub async fn udsp(&self) -> Result<UdspPolicy, NodeError> {
        Ok(self.addr.send(GetUdsp).await?)
    }

    /// Sets the NUMA node of local NI `nid`'s device (`None`: it has none), which the
    /// local NI choice compares with [`NodeConfig::memory_node`].
    pub async fn set_ni_numa_node(&self, nid: Nid, node: Option<u32>) -> Result<(), NodeError> {
        self.addr.send(SetNiNumaNode(nid, node)).await?
    }

    /// Starts a drain and returns at once (`lnet-router drain`): every NI is advertised
    /// DOWN and routing disabled in the ping info, which is pushed to the peers at once
    /// so that they route around the node; it keeps forwarding what it is sent (what was
    /// under way, and what peers send before they have moved) and stays up.
    /// [`Node::undrain`] or [`Node::set_routing`] with routing on ends it. Returns the
    /// forwarded messages under way; draining an already draining node changes nothing.
    pub async fn start_drain(&self) -> Result<usize, NodeError> {
        Ok(self.addr.send(StartDrain).await?)
    }

    /// Ends a drain: each NI is advertised as it is again (UP unless its link is down or
    /// its net silent), routing as the `routing` tunable says, pushed to the peers at
    /// once. Whether the node was draining.
    pub async fn undrain(&self) -> Result<bool, NodeError> {
        Ok(self.addr.send(EndDrain).await?)
    }

    /// Whether the node is draining, and the forwarded messages under way.
    pub async fn drain_state(&self) -> Result<(bool, usize), NodeError> {
        Ok(self.addr.send(DrainState).await?)
    }

    /// Drains the node before it stops: every NI is advertised DOWN and routing disabled
    /// in its ping info, which is pushed to its peers at once so that they route around
    /// it; it keeps forwarding for `grace` while they move, then waits (at most `bound`)
    /// for the messages it is forwarding to finish.
    pub async fn drain(&self, grace: Duration, bound: Duration) -> Result<Drained, NodeError> {
        let in_flight_at_start = self.start_drain().await?;
        tokio::time::sleep(grace).await;
        let step = Duration::from_millis(20);
        let mut waited = Duration::ZERO;
        loop {
            let left = self.addr.send(ForwardsInFlight).await?;
            if left == 0 || waited >= bound {
                return Ok(Drained {
                    in_flight_at_start,
                    left,
                });
            }
            tokio::time::sleep(step).await;
            waited += step;
        }
    }

    /// Adds a route (`lnetctl route add --net --gateway [--hop] [--priority]`): checked
    /// against this node's nets and routes; its gateway is checked at once.
    pub async fn add_route(&self, spec: RouteSpec) -> Result<(), NodeError> {
        self.addr.send(AddRoute(spec)).await?
    }

    /// Deletes a route; whether it existed.
    pub async fn del_route(&self, net: Net, gateway: Nid) -> Result<bool, NodeError> {
        Ok(self.addr.send(DelRoute { net, gateway }).await?)
    }

    /// The routes and their states (`lnetctl route show -v`).
    pub async fn routes(&self) -> Result<Vec<RouteView>, NodeError> {
        Ok(self.addr.send(ListRoutes).await?)
    }

    /// Router buffers, credits and the advertised status of each net (`lnetctl routing
    /// show`).
    pub async fn routing_show(&self) -> Result<RoutingShow, NodeError> {
        let (enabled, draining, nets, router) = self.addr.send(RoutingState).await?;
        let buffers = router.send(ShowBuffers).await?;
        Ok(RoutingShow {
            enabled,
            draining,
            buffers,
            nets,
        })
    }

    /// The link of local NI `nid` went down (`up` false) or came back: while down, the
    /// NI is advertised DOWN and not used, and the change is pushed to the peers at once.
    pub async fn set_ni_link(&self, nid: Nid, up: bool) -> Result<(), NodeError> {
        self.addr.send(SetLink { nid, up }).await?
    }
}
