//! What the LNDs call ([`NodeHandler`]) and how it reaches the LNet actor: completions
//! and received messages on bounded channels, read by the actor as streams; a message to
//! forward first waits here for a router buffer.

use std::collections::{HashMap, HashSet};

use actix::prelude::*;
use bytes::BytesMut;
use lnd::{lnd::PeerDown, LndHandler, RxDecision, RxHeader, RxMessage, TxCompletion};
use lnet::rtrbuf::PoolKind;
use lnet::Nid;
use tokio::sync::{mpsc, oneshot, watch};

use super::LnetActor;
use crate::router::{Release, Reserve, RouterActor, Ticket};

/// What the LNDs call: forwards completions and received messages to the node, through
/// bounded channels. A message for another node waits here for a router buffer
/// ([`RouterActor`]) before its payload is read, when the node forwards.
#[derive(Debug)]
pub struct NodeHandler {
    pub(super) completions: mpsc::Sender<TxCompletion>,
    pub(super) received: mpsc::Sender<Inbound>,
    pub(super) policy: watch::Receiver<RxPolicy>,
    pub(super) router: Addr<RouterActor>,
    /// Buffers granted to messages whose payload is being read, by local NI, peer and
    /// pool: buffers of one pool from one peer are interchangeable.
    pub(super) pending: std::sync::Mutex<HashMap<(Nid, Nid, PoolKind), Vec<Ticket>>>,
}

/// What a receiving LND needs to know to place a payload: this node's NIDs and whether
/// it forwards.
#[derive(Debug, Clone, Default)]
pub(crate) struct RxPolicy {
    pub(super) local: HashSet<Nid>,
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
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<(Nid, Nid, PoolKind), Vec<Ticket>>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl LndHandler for NodeHandler {
    async fn on_header(&self, rx: RxHeader) -> RxDecision {
        let len = rx.header.payload_length;
        let buf =
            || RxDecision::Receive(BytesMut::with_capacity(usize::try_from(len).unwrap_or(0)));
        let forward = {
            let p = self.policy.borrow();
            p.routing && !p.local.contains(&rx.header.dest_nid)
        };
        if !forward {
            return buf();
        }
        // Store and forward: wait for a peer router-buffer credit and a buffer.
        let (tx, answer) = oneshot::channel();
        self.router.do_send(Reserve {
            peer: rx.from.nid,
            len,
            reply: tx,
        });
        match answer.await {
            Ok(Ok(ticket)) => {
                if let Some(pool) = PoolKind::for_payload(len) {
                    self.pending()
                        .entry((rx.ni, rx.from.nid, pool))
                        .or_default()
                        .push(ticket);
                }
                buf()
            }
            Ok(Err(e)) => {
                tracing::warn!(from = %rx.from.nid, %e, "message to forward refused");
                RxDecision::Close
            }
            Err(_) => RxDecision::Close,
        }
    }

    async fn on_message(&self, msg: RxMessage) {
        let ticket = PoolKind::for_payload(msg.header.payload_length).and_then(|pool| {
            let mut pending = self.pending();
            let key = (msg.ni, msg.from.nid, pool);
            let t = pending.get_mut(&key).and_then(Vec::pop);
            if pending.get(&key).is_some_and(Vec::is_empty) {
                pending.remove(&key);
            }
            t
        });
        let _ = self.received.send(Inbound::Message(msg, ticket)).await;
    }

    fn on_send_complete(&self, done: TxCompletion) {
        // At most one completion per send in flight, and the channel holds them all.
        if self.completions.try_send(done).is_err() {
            tracing::error!("completion channel full or closed");
        }
    }

    fn on_peer_down(&self, down: PeerDown) {
        // Buffers granted to messages from this peer that will never be read in full.
        let lost: Vec<Ticket> = {
            let mut pending = self.pending();
            let keys: Vec<_> = pending
                .keys()
                .filter(|(ni, peer, _)| *ni == down.ni && *peer == down.peer)
                .copied()
                .collect();
            keys.into_iter()
                .filter_map(|k| pending.remove(&k))
                .flatten()
                .collect()
        };
        for t in lost {
            self.router.do_send(Release(t));
        }
        if self.received.try_send(Inbound::PeerDown(down)).is_err() {
            tracing::warn!("peer-down report dropped: the node is busy");
        }
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
