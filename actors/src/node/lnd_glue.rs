//! What the LNDs call ([`NodeHandler`]) and how it reaches the LNet actor: a message to
//! forward first waits here for a router buffer, then takes the forwarding path
//! ([`super::fast_path`]) or goes to the actor; other messages and completions go to the
//! actor on bounded channels, read by it as streams.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use bytes::BytesMut;
use lnd::lnd::{whole_by_halves, PeerDown};
use lnd::{Later, LndHandler, RxDecision, RxHeader, RxMessage, Taken, TxCompletion};
use lnet::fault::{Direction, FaultVerdict};
use lnet::Nid;
use rustc_hash::FxHashSet;
use tokio::sync::mpsc;

use super::fast_path::published::{self, Kept, Published};
use super::fast_path::{Adopted, Forward, ForwardPath};
use super::held::Held;
use super::LnetActor;
use crate::fault::FaultRules;
use crate::router::{Reservation, Ticket};

/// What the LNDs call. A message for another node waits here for a router buffer before
/// its payload is read, when the node forwards, then takes the forwarding path; the rest
/// goes to the LNet actor through bounded channels.
#[derive(Debug)]
pub struct NodeHandler {
    pub(super) completions: mpsc::Sender<TxCompletion>,
    pub(super) received: mpsc::Sender<Inbound>,
    /// Read by every receiving thread, each on its own (no lock they share).
    pub(super) policy: Published<RxPolicy>,
    /// The node's fault rules, applied to every message received before LNet processes
    /// it (see [`crate::fault`]).
    pub(super) faults: FaultRules,
    pub(super) path: Arc<ForwardPath>,
    /// The waits this handler makes the LNDs' receives wait, per net they came on.
    pub(super) held: Arc<Held>,
}

thread_local! {
    /// The receive policy as this thread read it last (see [`published`]).
    static POLICY: Kept<RxPolicy> = const { std::cell::RefCell::new(None) };
}

/// What a receiving LND needs to know to place a payload: this node's NIDs and whether
/// it forwards.
#[derive(Debug, Clone, Default)]
pub(crate) struct RxPolicy {
    pub(super) local: FxHashSet<Nid>,
    pub(super) routing: bool,
}

/// What the LNDs hand the node.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A message, with the router buffer it holds when it is to be forwarded.
    Message(RxMessage, Option<Ticket>),
    /// The LND lost a peer.
    PeerDown(PeerDown),
}

impl NodeHandler {
    /// Whether a message for `dest` is forwarded: routing is on and `dest` is none of
    /// this node's NIDs.
    fn to_forward(&self, dest: &Nid) -> bool {
        published::read(&POLICY, &self.policy, |p| {
            p.routing && !p.local.contains(dest)
        })
    }

    /// Where the payload of a header that passed the fault rules goes: a local message's
    /// into a buffer of its own; a message to forward into a router buffer, once one and
    /// a router-buffer credit of its sending peer are granted (`Err` while that waits).
    /// The header is borrowed, not copied for every message (over 160 bytes).
    fn place(&self, rx: &RxHeader) -> Result<RxDecision, Later<'_, RxDecision>> {
        let len = rx.header.payload_length;
        let (ni, from) = (rx.ni, rx.from.nid);
        if !self.to_forward(&rx.header.dest_nid) {
            return Ok(RxDecision::Receive(BytesMut::with_capacity(
                usize::try_from(len).unwrap_or(0),
            )));
        }
        // Store and forward: wait for a peer router-buffer credit and a buffer, held for
        // the message until its payload is in (`on_message_now`).
        let pools = &self.path.pools;
        match pools.reserve_held(ni, from, len) {
            Reservation::Granted(_, memory) => Ok(RxDecision::Receive(memory)),
            Reservation::Waiting(answer) => Err(self.held.wait(ni.net, async move {
                match answer.await {
                    Ok(Ok(t)) => {
                        pools.hold(ni, &t);
                        RxDecision::Receive(pools.buffer(&t))
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(%from, %e, "message to forward refused");
                        RxDecision::Close
                    }
                    Err(_) => RxDecision::Close,
                }
            })),
            Reservation::Refused(e) => {
                tracing::warn!(%from, %e, "message to forward refused");
                Ok(RxDecision::Close)
            }
        }
    }

    /// [`NodeHandler::place`] and [`NodeHandler::take`] for a message with no payload
    /// that passed the fault rules: the router buffer of one to forward is taken, not
    /// held ([`crate::router::RouterPools::reserve`]), as nothing is read between.
    fn place_whole(&self, msg: RxMessage) -> Taken<'_> {
        if !self.to_forward(&msg.header.dest_nid) {
            return taken(self.take(msg, None));
        }
        let (net, from) = (msg.ni.net, msg.from.nid);
        match self.path.pools.reserve(from, msg.header.payload_length) {
            Reservation::Granted(ticket, _) => taken(self.take(msg, Some(ticket))),
            Reservation::Waiting(answer) => Taken::Later(self.held.wait(net, async move {
                match answer.await {
                    Ok(Ok(ticket)) => {
                        if let Some(later) = self.take(msg, Some(ticket)) {
                            later.await;
                        }
                        true
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(%from, %e, "message to forward refused");
                        false
                    }
                    Err(_) => false,
                }
            })),
            Reservation::Refused(e) => {
                tracing::warn!(%from, %e, "message to forward refused");
                Taken::Close
            }
        }
    }

    /// Takes a message read whole, with the router buffer it holds when it is to be
    /// forwarded: the forwarding path sends it, or the LNet actor gets it.
    fn take(&self, mut msg: RxMessage, ticket: Option<Ticket>) -> Option<Later<'_, ()>> {
        let ticket = match ticket {
            Some(t) => match self.forward_now(&mut msg, t) {
                Ok(later) => return later,
                Err(t) => Some(t),
            },
            None => None,
        };
        self.to_actor(msg, ticket)
    }

    /// The forwarding path's part of [`NodeHandler::take`], on a borrowed message: `Ok`
    /// when it took the message (sent now, or once the wait is over), `Err` with the
    /// router buffer when it left it as it came, for the LNet actor.
    fn forward_now(
        &self,
        msg: &mut RxMessage,
        ticket: Ticket,
    ) -> Result<Option<Later<'_, ()>>, Ticket> {
        match self.path.forward(msg, ticket) {
            Forward::Sent => Ok(None),
            Forward::Waits(send) => Ok(Some(self.held.wait(msg.ni.net, self.path.send(*send)))),
            Forward::Refused(t) => Err(t),
        }
    }

    /// Hands `msg` to the LNet actor, with the router buffer it holds if it is to be
    /// forwarded.
    fn to_actor(&self, msg: RxMessage, ticket: Option<Ticket>) -> Option<Later<'_, ()>> {
        let net = msg.ni.net;
        match self.received.try_send(Inbound::Message(msg, ticket)) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => None,
            // The node is busy: this connection reads nothing until it takes the message.
            Err(mpsc::error::TrySendError::Full(inbound)) => {
                Some(self.held.wait(net, async move {
                    let _ = self.received.send(inbound).await;
                }))
            }
        }
    }
}

/// A message taken now, or once `later` is over.
fn taken(later: Option<Later<'_, ()>>) -> Taken<'_> {
    match later {
        None => Taken::Now,
        Some(later) => Taken::Later(Box::pin(async move {
            later.await;
            true
        })),
    }
}

impl LndHandler for NodeHandler {
    async fn on_header(&self, rx: RxHeader) -> RxDecision {
        match self.on_header_now(rx) {
            Ok(decision) => decision,
            Err(later) => later.await,
        }
    }

    async fn on_message(&self, msg: RxMessage) {
        if let Some(later) = self.on_message_now(msg) {
            later.await;
        }
    }

    fn on_header_now(&self, rx: RxHeader) -> Result<RxDecision, Later<'_, RxDecision>> {
        match self.faults.check(Direction::Receive, rx.ni, &rx.header) {
            None | Some(FaultVerdict::Fail(_)) => self.place(&rx),
            // Dropped silently: the payload is read and thrown away.
            Some(FaultVerdict::Drop) => Ok(RxDecision::Discard),
            // Held, and the connection it came on with it.
            Some(FaultVerdict::Delay(by)) => Err(self.held.wait(rx.ni.net, async move {
                tokio::time::sleep(Duration::from_millis(by.as_millis())).await;
                match self.place(&rx) {
                    Ok(decision) => decision,
                    Err(later) => later.await,
                }
            })),
        }
    }

    fn on_message_now(&self, msg: RxMessage) -> Option<Later<'_, ()>> {
        let ticket = self
            .path
            .pools
            .take_held(msg.ni, msg.from.nid, msg.header.payload_length);
        self.take(msg, ticket)
    }

    /// A message with no payload is placed and taken in one call: a message to forward
    /// takes its router buffer and goes on at once, with no buffer held between its header
    /// and its payload. One with a payload is taken by halves.
    fn on_whole_now(&self, msg: RxMessage) -> Taken<'_> {
        if !msg.payload.is_empty() {
            return whole_by_halves(self, msg);
        }
        match self.faults.check(Direction::Receive, msg.ni, &msg.header) {
            None | Some(FaultVerdict::Fail(_)) => self.place_whole(msg),
            Some(FaultVerdict::Drop) => Taken::Now,
            Some(FaultVerdict::Delay(by)) => Taken::Later(self.held.wait(msg.ni.net, async move {
                tokio::time::sleep(Duration::from_millis(by.as_millis())).await;
                match self.place_whole(msg) {
                    Taken::Now => true,
                    Taken::Later(later) => later.await,
                    Taken::Close => false,
                }
            })),
        }
    }

    /// A message to forward whose sending peer NI has no router-buffer credit left, or
    /// whose pool has no buffer, is left in its slot: the LND may write what it
    /// forwarded, which gives them back. Only with no fault rule (a rule is applied once,
    /// by `on_whole_now`). One the forwarding path sends is taken where it lies.
    fn try_whole_now(&self, slot: &mut Option<RxMessage>) -> Option<Taken<'_>> {
        let Some(msg) = slot.as_mut() else {
            return Some(Taken::Now);
        };
        if !msg.payload.is_empty()
            || !self.faults.is_empty()
            || !self.to_forward(&msg.header.dest_nid)
        {
            return slot.take().map(|msg| self.on_whole_now(msg));
        }
        let from = msg.from.nid;
        match self.path.pools.reserve_now(from, msg.header.payload_length) {
            None => None,
            Some(Ok((ticket, _))) => Some(taken(match self.forward_now(msg, ticket) {
                Ok(later) => later,
                Err(t) => slot.take().and_then(|msg| self.to_actor(msg, Some(t))),
            })),
            Some(Err(e)) => {
                tracing::warn!(%from, %e, "message to forward refused");
                Some(Taken::Close)
            }
        }
    }

    fn on_send_complete(&self, done: TxCompletion) {
        if ForwardPath::owns(done.id) {
            self.path.complete(done);
            return;
        }
        // At most one completion per send in flight, and the channel holds them all.
        if self.completions.try_send(done).is_err() {
            tracing::error!("completion channel full or closed");
        }
    }

    fn on_sends_complete(&self, done: Vec<TxCompletion>) {
        // A write's sends are the forwarding path's, or else the actor's, as a rule.
        if done.iter().all(|d| ForwardPath::owns(d.id)) {
            self.path.complete_all(done);
            return;
        }
        for d in done {
            self.on_send_complete(d);
        }
    }

    fn on_peer_down(&self, down: PeerDown) {
        // Buffers granted to messages from this peer that will never be read in full.
        self.path.pools.release_held(down.ni, down.peer);
        if self.received.try_send(Inbound::PeerDown(down)).is_err() {
            tracing::warn!("peer-down report dropped: the node is busy");
        }
    }

    fn registered_memory(&self) -> Option<Arc<lnd::registered::RegisteredMemory>> {
        Some(Arc::clone(self.path.pools.registered()))
    }
}

/// The receiving end of one of the LNDs' channels to the node, as a stream the LNet
/// actor reads directly (no task in between).
pub(super) struct ChannelStream<T>(pub(super) mpsc::Receiver<T>);

impl<T> Stream for ChannelStream<T> {
    type Item = T;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<T>> {
        self.0.poll_recv(cx)
    }
}

/// The receiving end of the forwarding path's hand-overs to the LNet actor, as a stream.
pub(super) struct UnboundedStream<T>(pub(super) mpsc::UnboundedReceiver<T>);

impl<T> Stream for UnboundedStream<T> {
    type Item = T;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<T>> {
        self.0.poll_recv(cx)
    }
}

impl StreamHandler<Adopted> for LnetActor {
    fn handle(&mut self, a: Adopted, ctx: &mut Context<Self>) {
        self.adopt(a, ctx);
    }

    /// The node's handle is gone; the actor ends with its other work.
    fn finished(&mut self, _ctx: &mut Context<Self>) {}
}

impl StreamHandler<TxCompletion> for LnetActor {
    fn handle(&mut self, done: TxCompletion, ctx: &mut Context<Self>) {
        self.on_completion(done, ctx);
    }

    /// The node's handle is gone; the actor ends with its other work.
    fn finished(&mut self, _ctx: &mut Context<Self>) {}
}

impl StreamHandler<Inbound> for LnetActor {
    fn handle(&mut self, inbound: Inbound, ctx: &mut Context<Self>) {
        match inbound {
            Inbound::Message(rx, ticket) => self.on_received(rx, ticket, ctx),
            Inbound::PeerDown(down) => self.on_peer_down(down),
        }
    }

    /// The node's handle is gone; the actor ends with its other work.
    fn finished(&mut self, _ctx: &mut Context<Self>) {}
}
