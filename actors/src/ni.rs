//! The local NI actor and the peer NI actor: each owns one NI's credits, health value,
//! status and statistics, applies the health effects that [`lnet::health::health_check`]
//! decided, publishes every change on the events bus, and puts its NI on its recovery
//! queue when the rules say so.
//!
//! Each actor also publishes a snapshot of its state on a `tokio::sync::watch` channel,
//! which the LNet actor reads without a round trip when it selects a path.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use lnd::{SendError, TxCompletion, TxRequest};
use lnet::fault::{Direction, FaultVerdict};
use lnet::health::check::{local_ni_state_change, NiEffect, NiState};
use lnet::health::{HealthStatus, HealthValue};
use lnet::time::Millis;
use lnet::{MsgType, Nid};
use tokio::sync::{mpsc, watch};

use crate::clock::Clock;
use crate::events::{Event, EventBus, NiKind};
use crate::fault::FaultRules;
use crate::mailbox::NI_MAILBOX;
use crate::ni_cell::{tx_bytes, NiCell};
use crate::recovery::{Heard, Queue, RecoveryActor};
use crate::tx_credits::TxCredits;
use crate::Driver;

/// Counters of one NI or peer NI.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NiStats {
    /// Messages handed to the LND (attempts, resends included).
    pub send_count: u64,
    /// Messages received.
    pub recv_count: u64,
    /// Sends that completed with a failure.
    pub drop_count: u64,
    /// Failures by health status (the health statistics of `lnetctl net show -v 3`).
    pub health_stats: BTreeMap<HealthStatus, u64>,
    /// Messages handed to the LND, by type (`sent_stats`).
    pub sent: TypeCounts,
    /// Messages received, by type (`received_stats`).
    pub received: TypeCounts,
    /// Sends that completed with a failure, by type (`dropped_stats`).
    pub dropped: TypeCounts,
    /// Latencies of this node's own operations through it (the latency keys of
    /// `statistics:`).
    pub latency: OpLatencies,
}

/// An operation whose latency an NI and a peer NI keep, as the kernel's
/// `lnet_latency_op`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyOp {
    /// A PUT of this node's, from its start to its send's completion (first attempts
    /// only: a resend's wait would count too).
    PutEgress,
    /// A GET of this node's, from its start to its REPLY.
    GetRtt,
    /// A PUT of this node's that asked for an ACK, from its start to the ACK.
    PutAck,
}

/// Samples of one operation's latency: their number, sum and extremes, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Latency {
    /// Samples taken.
    pub samples: u64,
    /// Their sum.
    pub sum_ns: u64,
    /// The shortest (0 with no sample).
    pub min_ns: u64,
    /// The longest.
    pub max_ns: u64,
}

impl Latency {
    /// One more sample; a latency of 0 (below the clock's resolution) is not one, as in
    /// the kernel.
    pub fn record(&mut self, ns: u64) {
        if ns == 0 {
            return;
        }
        self.min_ns = if self.samples == 0 {
            ns
        } else {
            self.min_ns.min(ns)
        };
        self.max_ns = self.max_ns.max(ns);
        self.samples = self.samples.saturating_add(1);
        self.sum_ns = self.sum_ns.saturating_add(ns);
    }

    /// The mean (0 with no sample).
    pub fn avg_ns(&self) -> u64 {
        self.sum_ns.checked_div(self.samples).unwrap_or(0)
    }
}

/// The latencies an NI or peer NI keeps, by operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpLatencies {
    /// [`LatencyOp::PutEgress`].
    pub put_egress: Latency,
    /// [`LatencyOp::GetRtt`].
    pub get_rtt: Latency,
    /// [`LatencyOp::PutAck`].
    pub put_ack: Latency,
}

impl OpLatencies {
    /// One more sample of `op`.
    pub fn record(&mut self, op: LatencyOp, ns: u64) {
        match op {
            LatencyOp::PutEgress => self.put_egress.record(ns),
            LatencyOp::GetRtt => self.get_rtt.record(ns),
            LatencyOp::PutAck => self.put_ack.record(ns),
        }
    }
}

/// Counts of messages by LNet message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TypeCounts {
    /// PUTs.
    pub put: u64,
    /// GETs.
    pub get: u64,
    /// REPLYs.
    pub reply: u64,
    /// ACKs.
    pub ack: u64,
    /// HELLOs.
    pub hello: u64,
}

impl TypeCounts {
    /// Counts one message of type `t`.
    pub fn bump(&mut self, t: MsgType) {
        let n = match t {
            MsgType::Put => &mut self.put,
            MsgType::Get => &mut self.get,
            MsgType::Reply => &mut self.reply,
            MsgType::Ack => &mut self.ack,
            MsgType::Hello => &mut self.hello,
        };
        *n = n.saturating_add(1);
    }
}

/// What a local NI looks like now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalNiView {
    /// Its NID.
    pub nid: Nid,
    /// Its health value.
    pub health: HealthValue,
    /// Its status as the ping buffer shows it.
    pub state: NiState,
    /// Its tx credits now (negative: messages are queued).
    pub tx_credits: i32,
    /// Its tx credits when idle.
    pub max_tx_credits: u32,
    /// The lowest tx credits seen.
    pub min_tx_credits: i32,
    /// Its counters.
    pub stats: NiStats,
}

/// What a peer NI looks like now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerNiView {
    /// Its NID.
    pub nid: Nid,
    /// Its health value.
    pub health: HealthValue,
    /// Its tx credits now (this node's sends to it not yet completed are charged).
    pub tx_credits: i32,
    /// Its tx credits when idle.
    pub max_tx_credits: u32,
    /// The lowest tx credits seen.
    pub min_tx_credits: i32,
    /// Bytes of this node's messages charged to its tx credits and not yet sent (headers
    /// included): `tx_q_num_of_buf`.
    pub tx_queued_bytes: u64,
    /// When it was last heard from.
    pub last_alive: Option<Millis>,
    /// Whether its cached NI status is UP: DOWN once its LND reported it gone or its peer
    /// gave it DOWN, UP again once heard from (the kernel's `lpni_ns_status`).
    pub status_up: bool,
    /// Its counters.
    pub stats: NiStats,
}

impl LocalNiView {
    /// This view with the live credits and the counts of the forwarding path of `cell`.
    pub(crate) fn with_cell(&self, cell: &NiCell) -> LocalNiView {
        let mut v = self.clone();
        v.tx_credits = cell.credits();
        v.min_tx_credits = cell.min_credits();
        add_path_counts(&mut v.stats, cell);
        v
    }
}

/// `stats` with what the forwarding path counted in `cell` added.
fn add_path_counts(stats: &mut NiStats, cell: &NiCell) {
    let c = cell.counts();
    stats.send_count = stats.send_count.saturating_add(c.send);
    stats.recv_count = stats.recv_count.saturating_add(c.recv);
    for (to, from) in [(&mut stats.sent, c.sent), (&mut stats.received, c.received)] {
        let [put, get, reply, ack, hello] = from;
        to.put = to.put.saturating_add(put);
        to.get = to.get.saturating_add(get);
        to.reply = to.reply.saturating_add(reply);
        to.ack = to.ack.saturating_add(ack);
        to.hello = to.hello.saturating_add(hello);
    }
}

impl PeerNiView {
    /// This view with the live credits, last-alive time and the counts of the
    /// forwarding path of `cell`.
    pub(crate) fn with_cell(&self, cell: &NiCell) -> PeerNiView {
        let mut v = self.clone();
        v.tx_credits = cell.credits();
        v.min_tx_credits = cell.min_credits();
        v.last_alive = v.last_alive.max(cell.last_alive());
        v.status_up = cell.status_up();
        v.tx_queued_bytes = cell.tx_queued_bytes();
        add_path_counts(&mut v.stats, cell);
        v
    }
}

/// Apply a health effect decided by `health_check`.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub(crate) struct Apply {
    /// The effect.
    pub(crate) effect: NiEffect,
    /// The message status behind it.
    pub(crate) cause: HealthStatus,
    /// `health_sensitivity` now.
    pub(crate) sensitivity: u32,
    /// Whether this finishes a send (its credit comes back).
    pub(crate) send_done: bool,
    /// The bytes of the send finished, as its peer NI counted them queued.
    pub(crate) sent_bytes: u64,
    /// Whether this is a received message (counts as received; a peer NI is heard from).
    pub(crate) received: bool,
    /// The type of the message sent or received, when there is one.
    pub(crate) msg_type: Option<MsgType>,
}

/// Count a message of this type dropped before it was sent (`drop_count` and
/// `dropped_stats`), as the kernel counts a message the peer NI aliveness rule drops on
/// both its local NI and its peer NI.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub(crate) struct CountDropped(pub(crate) MsgType);

/// One latency sample of an operation of this node's through the NI or peer NI.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub(crate) struct RecordLatency(pub(crate) LatencyOp, pub(crate) u64);

/// Set the health value (`lnetctl net set --health`, `peer set --health`).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub(crate) struct SetHealth(pub(crate) HealthValue);

/// Hand a message to the LND, charging a tx credit (queued while there is none).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct Transmit(pub(crate) TxRequest);

/// The forwarding path gave back a credit that a message in this actor's queue waits
/// for (see [`NiCell::give_back`]): the oldest waiting message goes.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub(crate) struct CreditBack;

/// Send a message to this peer NI through local NI `via`: the peer NI charges a peer tx
/// credit (queuing the message while there is none), then the local NI charges its own.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct PeerTransmit {
    pub(crate) tx: TxRequest,
    pub(crate) via: Addr<LocalNiActor>,
}

struct HealthCore {
    kind: NiKind,
    nid: Nid,
    health: HealthValue,
    cell: Arc<NiCell>,
    stats: NiStats,
    clock: Clock,
    events: EventBus,
    recovery: Addr<RecoveryActor>,
}

impl HealthCore {
    /// Counts a message of type `t` dropped before it was sent.
    fn count_dropped(&mut self, t: MsgType) {
        self.stats.drop_count = self.stats.drop_count.saturating_add(1);
        self.stats.dropped.bump(t);
    }

    /// Applies `effect`; returns the health before and after.
    fn apply(&mut self, a: &Apply, last_alive: Option<Millis>) -> (HealthValue, HealthValue) {
        if !a.cause.is_ok() {
            self.stats.drop_count = self.stats.drop_count.saturating_add(1);
            let n = self.stats.health_stats.entry(a.cause).or_default();
            *n = n.saturating_add(1);
            if let (true, Some(t)) = (a.send_done, a.msg_type) {
                self.stats.dropped.bump(t);
            }
        }
        if a.received {
            self.stats.recv_count = self.stats.recv_count.saturating_add(1);
            if let Some(t) = a.msg_type {
                self.stats.received.bump(t);
            }
        }
        let before = self.health;
        let after = a.effect.change.apply(before, a.sensitivity);
        self.set(after, Some(a.cause));
        if a.effect.reset_ping_count {
            tell(&self.recovery, Heard { nid: self.nid });
        }
        if a.effect.joins_recovery(after) {
            tell(
                &self.recovery,
                Queue {
                    nid: self.nid,
                    health: after,
                    last_alive,
                },
            );
        }
        (before, after)
    }

    fn set(&mut self, after: HealthValue, cause: Option<HealthStatus>) {
        let before = self.health;
        self.health = after;
        self.cell.set_health(after);
        if before != after {
            self.events.publish(Event::Health {
                at: self.clock.now(),
                kind: self.kind,
                nid: self.nid,
                before,
                after,
                cause,
            });
            tell(
                &self.recovery,
                crate::recovery::HealthChanged {
                    nid: self.nid,
                    health: after,
                },
            );
        }
    }
}

/// Sends `msg` to `addr` without blocking the caller, waiting for mailbox room.
pub(crate) fn tell<A, M>(addr: &Addr<A>, msg: M)
where
    A: Actor + Handler<M>,
    A::Context: actix::dev::ToEnvelope<A, M>,
    M: Message + Send + 'static,
    M::Result: Send,
{
    let addr = addr.clone();
    actix::spawn(async move {
        let _ = addr.send(msg).await;
    });
}

/// One local NI.
pub struct LocalNiActor {
    core: HealthCore,
    state: NiState,
    driver: Arc<dyn Driver>,
    credits: TxCredits<TxRequest>,
    completions: mpsc::Sender<TxCompletion>,
    view: watch::Sender<LocalNiView>,
    faults: FaultRules,
}

impl std::fmt::Debug for LocalNiActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalNiActor")
            .field("nid", &self.core.nid)
            .finish()
    }
}

impl LocalNiActor {
    pub(crate) fn new(
        driver: Arc<dyn Driver>,
        credits: u32,
        clock: Clock,
        events: EventBus,
        recovery: Addr<RecoveryActor>,
        completions: mpsc::Sender<TxCompletion>,
        faults: FaultRules,
    ) -> (LocalNiActor, watch::Receiver<LocalNiView>, Arc<NiCell>) {
        let nid = driver.nid();
        let cell = Arc::new(NiCell::new(credits));
        let credits = TxCredits::new(Arc::clone(&cell));
        let first = LocalNiView {
            nid,
            health: HealthValue::MAX,
            state: NiState::Up,
            tx_credits: credits.now(),
            max_tx_credits: credits.max(),
            min_tx_credits: credits.min(),
            stats: NiStats::default(),
        };
        let (view, rx) = watch::channel(first);
        (
            LocalNiActor {
                core: HealthCore {
                    kind: NiKind::Local,
                    nid,
                    health: HealthValue::MAX,
                    cell: Arc::clone(&cell),
                    stats: NiStats::default(),
                    clock,
                    events,
                    recovery,
                },
                state: NiState::Up,
                driver,
                credits,
                completions,
                view,
                faults,
            },
            rx,
            cell,
        )
    }

    fn publish(&self) {
        let view = LocalNiView {
            nid: self.core.nid,
            health: self.core.health,
            state: self.state,
            tx_credits: self.credits.now(),
            max_tx_credits: self.credits.max(),
            min_tx_credits: self.credits.min(),
            stats: self.core.stats.clone(),
        };
        self.view.send_replace(view);
    }

    fn status_after(&mut self, before: HealthValue, after: HealthValue) {
        if let Some(state) = local_ni_state_change(before, after) {
            self.state = state;
            self.core.events.publish(Event::LocalNiStatus {
                at: self.core.clock.now(),
                nid: self.core.nid,
                state,
            });
        }
    }

    fn start_send(&mut self, tx: TxRequest) {
        self.core.stats.send_count = self.core.stats.send_count.saturating_add(1);
        self.core.stats.sent.bump(tx.header.msg_type());
        let driver = Arc::clone(&self.driver);
        let completions = self.completions.clone();
        let ni = self.core.nid;
        // Fault injection, before the LND has the message (see [`crate::fault`]).
        let verdict = self.faults.check(Direction::Send, ni, &tx.header);
        actix::spawn(async move {
            let (id, peer) = (tx.id, tx.peer);
            let complete = |status: HealthStatus, reason: Option<String>| {
                let done = TxCompletion {
                    id,
                    ni,
                    peer,
                    status,
                    reason,
                };
                if completions.try_send(done).is_err() {
                    tracing::error!(%ni, "completion channel full or closed");
                }
            };
            match verdict {
                None => {}
                // Lost on the network: for its sender the message was handed off.
                Some(FaultVerdict::Drop) => return complete(HealthStatus::Ok, None),
                Some(FaultVerdict::Fail(status)) => {
                    return complete(status, Some(format!("fault injection: {status}")));
                }
                Some(FaultVerdict::Delay(by)) => {
                    tokio::time::sleep(Duration::from_millis(by.as_millis())).await;
                }
            }
            if let Err(err) = driver.send(tx).await {
                complete(refusal_status(&err), Some(err.to_string()));
            }
        });
    }
}

/// The status a send the LND refused completes with.
pub(crate) fn refusal_status(err: &SendError) -> HealthStatus {
    match err {
        SendError::Stopped { .. } => HealthStatus::LocalAborted,
        SendError::Unreachable { .. } | SendError::WrongNet { .. } => HealthStatus::LocalNoRoute,
        _ => HealthStatus::LocalError,
    }
}

impl Actor for LocalNiActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(NI_MAILBOX);
    }
}

impl Handler<Transmit> for LocalNiActor {
    type Result = ();

    fn handle(&mut self, Transmit(tx): Transmit, _ctx: &mut Context<Self>) {
        if let Some(tx) = self.credits.take(tx) {
            self.start_send(tx);
        }
        self.publish();
    }
}

impl Handler<CreditBack> for LocalNiActor {
    type Result = ();

    fn handle(&mut self, _: CreditBack, _ctx: &mut Context<Self>) {
        if let Some(next) = self.credits.passed_on() {
            self.start_send(next);
        }
        self.publish();
    }
}

impl Handler<Apply> for LocalNiActor {
    type Result = ();

    fn handle(&mut self, a: Apply, _ctx: &mut Context<Self>) {
        let (before, after) = self.core.apply(&a, None);
        self.status_after(before, after);
        if a.send_done {
            if let Some(next) = self.credits.give_back() {
                self.start_send(next);
            }
        }
        self.publish();
    }
}

impl Handler<CountDropped> for LocalNiActor {
    type Result = ();

    fn handle(&mut self, CountDropped(t): CountDropped, _ctx: &mut Context<Self>) {
        self.core.count_dropped(t);
        self.publish();
    }
}

impl Handler<CountDropped> for PeerNiActor {
    type Result = ();

    fn handle(&mut self, CountDropped(t): CountDropped, _ctx: &mut Context<Self>) {
        self.core.count_dropped(t);
        self.publish();
    }
}

impl Handler<RecordLatency> for LocalNiActor {
    type Result = ();

    fn handle(&mut self, RecordLatency(op, ns): RecordLatency, _ctx: &mut Context<Self>) {
        self.core.stats.latency.record(op, ns);
        self.publish();
    }
}

impl Handler<RecordLatency> for PeerNiActor {
    type Result = ();

    fn handle(&mut self, RecordLatency(op, ns): RecordLatency, _ctx: &mut Context<Self>) {
        self.core.stats.latency.record(op, ns);
        self.publish();
    }
}

impl Handler<SetHealth> for LocalNiActor {
    type Result = ();

    fn handle(&mut self, SetHealth(value): SetHealth, _ctx: &mut Context<Self>) {
        let before = self.core.health;
        self.core.set(value, None);
        self.status_after(before, value);
        if !value.is_max() {
            tell(
                &self.core.recovery,
                Queue {
                    nid: self.core.nid,
                    health: value,
                    last_alive: None,
                },
            );
        }
        self.publish();
    }
}

/// One peer NI.
pub struct PeerNiActor {
    core: HealthCore,
    credits: TxCredits<(TxRequest, Addr<LocalNiActor>)>,
    last_alive: Option<Millis>,
    view: watch::Sender<PeerNiView>,
}

impl std::fmt::Debug for PeerNiActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerNiActor")
            .field("nid", &self.core.nid)
            .field("credits", &self.credits.now())
            .finish()
    }
}

impl std::fmt::Debug for HealthCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthCore")
            .field("nid", &self.nid)
            .field("health", &self.health)
            .finish()
    }
}

impl PeerNiActor {
    pub(crate) fn new(
        nid: Nid,
        credits: u32,
        clock: Clock,
        events: EventBus,
        recovery: Addr<RecoveryActor>,
    ) -> (PeerNiActor, watch::Receiver<PeerNiView>, Arc<NiCell>) {
        let cell = Arc::new(NiCell::new(credits));
        let credits = TxCredits::new(Arc::clone(&cell));
        let (view, rx) = watch::channel(PeerNiView {
            nid,
            health: HealthValue::MAX,
            tx_credits: credits.now(),
            max_tx_credits: credits.max(),
            min_tx_credits: credits.min(),
            tx_queued_bytes: credits.cell().tx_queued_bytes(),
            last_alive: None,
            status_up: true,
            stats: NiStats::default(),
        });
        (
            PeerNiActor {
                core: HealthCore {
                    kind: NiKind::Peer,
                    nid,
                    health: HealthValue::MAX,
                    cell: Arc::clone(&cell),
                    stats: NiStats::default(),
                    clock,
                    events,
                    recovery,
                },
                credits,
                last_alive: None,
                view,
            },
            rx,
            cell,
        )
    }

    fn publish(&self) {
        self.view.send_replace(PeerNiView {
            nid: self.core.nid,
            health: self.core.health,
            tx_credits: self.credits.now(),
            max_tx_credits: self.credits.max(),
            min_tx_credits: self.credits.min(),
            tx_queued_bytes: self.credits.cell().tx_queued_bytes(),
            last_alive: self.last_alive,
            status_up: self.credits.status_up(),
            stats: self.core.stats.clone(),
        });
    }
}

impl Actor for PeerNiActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(NI_MAILBOX);
    }
}

impl Handler<PeerTransmit> for PeerNiActor {
    type Result = ();

    fn handle(&mut self, m: PeerTransmit, _ctx: &mut Context<Self>) {
        self.core.stats.send_count = self.core.stats.send_count.saturating_add(1);
        self.core.stats.sent.bump(m.tx.header.msg_type());
        self.credits.cell().queued_bytes(tx_bytes(&m.tx.header));
        if let Some((tx, via)) = self.credits.take((m.tx, m.via)) {
            tell(&via, Transmit(tx));
        }
        self.publish();
    }
}

impl Handler<CreditBack> for PeerNiActor {
    type Result = ();

    fn handle(&mut self, _: CreditBack, _ctx: &mut Context<Self>) {
        if let Some((tx, via)) = self.credits.passed_on() {
            tell(&via, Transmit(tx));
        }
        self.publish();
    }
}

impl Handler<Apply> for PeerNiActor {
    type Result = ();

    fn handle(&mut self, a: Apply, _ctx: &mut Context<Self>) {
        if a.received {
            self.last_alive = Some(self.core.clock.now());
        }
        let last_alive = self.last_alive;
        self.core.apply(&a, last_alive);
        if a.send_done {
            self.credits.cell().sent_bytes(a.sent_bytes);
            if let Some((tx, via)) = self.credits.give_back() {
                tell(&via, Transmit(tx));
            }
        }
        self.publish();
    }
}

impl Handler<SetHealth> for PeerNiActor {
    type Result = ();

    fn handle(&mut self, SetHealth(value): SetHealth, _ctx: &mut Context<Self>) {
        self.core.set(value, None);
        if !value.is_max() {
            tell(
                &self.core.recovery,
                Queue {
                    nid: self.core.nid,
                    health: value,
                    last_alive: self.last_alive,
                },
            );
        }
        self.publish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_sends_complete_with_a_local_status() {
        let nid: Nid = "10.0.0.1@tcp".parse().unwrap();
        assert_eq!(
            refusal_status(&SendError::Stopped { ni: nid }),
            HealthStatus::LocalAborted
        );
        assert_eq!(
            refusal_status(&SendError::Unreachable { peer: nid }),
            HealthStatus::LocalNoRoute
        );
        assert_eq!(
            refusal_status(&SendError::SelfSend { peer: nid }),
            HealthStatus::LocalError
        );
        for err in [
            SendError::Stopped { ni: nid },
            SendError::SelfSend { peer: nid },
        ] {
            assert!(refusal_status(&err).charge().local_ni);
        }
    }
}
