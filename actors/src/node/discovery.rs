//! Ping and discovery: this node's ping info, learning a peer from its ping reply or
//! push, pushing changed ping info to the discovered peers, recovery pings, and the
//! results of [`Node::ping`](super::Node::ping) and
//! [`Node::discover`](super::Node::discover).

use std::collections::HashSet;
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use lnet::health::check::NiState;
use lnet::ping::RESERVED_PORTAL;
use lnet::recovery::RecoveryKind;
use lnet::{Features, Message as LnetMsg, NiStatus, Nid, PingInfo, WireHandle, PING_MATCHBITS};

use super::error::NodeError;
use super::txn::{Outcome, StartTxn};
use super::{LnetActor, PING_SINK_LENGTH};
use crate::events::RouteCause;
use crate::recovery::PingDue;

/// The answer to a ping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingReply {
    /// The NID that answered.
    pub from: Nid,
    /// Its ping info.
    pub info: PingInfo,
}

impl PingReply {
    /// The peer's NIDs with their status, in the order of its ping info.
    pub fn nids(&self) -> Vec<(Nid, bool)> {
        self.info.statuses().map(|(n, s)| (n, s.is_up())).collect()
    }
}

/// Why a ping failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PingFailure {
    /// The node refused it.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// The GET or its REPLY failed.
    #[error("ping failed: {0:?}")]
    Failed(Outcome),
    /// The REPLY was not a valid ping info.
    #[error("bad ping info: {0}")]
    BadInfo(String),
}

/// What discovery learned about a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredPeer {
    /// Its primary NID.
    pub primary: Nid,
    /// Its NIDs, with their status.
    pub nids: Vec<(Nid, bool)>,
    /// Whether it is Multi-Rail.
    pub multi_rail: bool,
    /// Whether our push to it was ACKed (only Multi-Rail, discovery-capable peers are
    /// pushed to).
    pub pushed: bool,
}

#[derive(Message)]
#[rtype(result = "PingInfo")]
pub(super) struct OwnInfo;

#[derive(Message)]
#[rtype(result = "Learned")]
pub(super) struct LearnPeer(pub(super) PingInfo, pub(super) Nid);

/// The peer that has NID `from` as this node holds it after learning its ping info: its
/// primary NID, whether it is Multi-Rail, and its NIDs with their status.
pub(super) type Learned = Option<(Nid, bool, Vec<(Nid, bool)>)>;

/// A local NI's status flipped (UP/DOWN).
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct NiStatusChanged;

impl LnetActor {
    pub(super) fn own_info(&self) -> PingInfo {
        let mut features = Features::NI_STATUS | Features::MULTI_RAIL;
        // `lnetctl set discovery 0`: the peers learn that this node takes no discovery
        // (they stop pushing to it), as the kernel's ping info says.
        if self.config.tunables.discovery() {
            features |= Features::DISCOVERY;
        }
        if !self.config.tunables.routing() || self.routes.draining() {
            features |= Features::RTE_DISABLED;
        }
        let nis = self
            .ni_order
            .iter()
            .filter_map(|nid| self.nis.get(nid))
            .map(|e| {
                let v = e.view.borrow();
                let routing = self.config.tunables.routing();
                if v.state == NiState::Up && !self.routes.advertised_down(&v.nid, routing) {
                    NiStatus::up(v.nid)
                } else {
                    NiStatus::down(v.nid)
                }
            })
            .collect();
        PingInfo::new(self.config.pid, self.seqno, features, nis)
    }
}

impl LnetActor {
    /// What a ping reply, a router check or a push from `from` says of its peer, applied
    /// as the kernel's discovery applies it (`lnet_discovery_event_reply`,
    /// `lnet_discovery_event_push`, `lnet_peer_merge_data`): the peer becomes Multi-Rail
    /// only if its info says so, it was not configured non-Multi-Rail, and discovery is
    /// on at both ends; it stops being Multi-Rail when its info no longer says so, unless
    /// it was configured Multi-Rail; and its NIDs are those of the info only when it is
    /// Multi-Rail with discovery on at both ends (otherwise it keeps the NIDs it has).
    pub(super) fn learn(&mut self, info: PingInfo, from: Nid) {
        let nids: Vec<Nid> = info.statuses().map(|(n, _)| n).collect();
        let known = self.peers.get(&from);
        let was_mr = known.is_some_and(|p| p.multi_rail);
        let configured = known.is_some_and(|p| p.configured);
        let known = known.map(|p| (p.primary, p.nids.clone()));
        let local_off = !self.config.tunables.discovery();
        let remote_off = !info.features.contains(Features::DISCOVERY);
        let says_mr = info.features.contains(Features::MULTI_RAIL);
        let mr = match (says_mr, was_mr) {
            (true, true) => true,
            (true, false) => {
                if configured {
                    tracing::warn!(peer = %from, "ping info says Multi-Rail, the configuration says not");
                }
                !(configured || local_off || remote_off)
            }
            (false, true) => {
                if configured {
                    tracing::warn!(peer = %from, "the configuration says Multi-Rail, ping info says not");
                }
                configured
            }
            (false, false) => false,
        };
        // `mr` for a new peer already means discovery is on at both ends.
        let merge = mr && !local_off && !remote_off;
        let (primary, nids) = match (nids.first().copied(), known) {
            (Some(first), _) if merge => (first, nids),
            (_, Some(known)) => known,
            (_, None) => (from, vec![from]),
        };
        self.set_peer(primary, nids, mr, false);
        let down: HashSet<Nid> = info
            .statuses()
            .filter(|(_, s)| !s.is_up())
            .map(|(n, _)| n)
            .collect();
        let push = mr && info.features.contains(Features::DISCOVERY);
        if let Some(peer) = self.peers.by_primary_mut(&primary) {
            peer.down = down;
            peer.push = push;
            peer.learned = Some(info.features);
        }
        // The forward decision reads which NIDs a Multi-Rail peer gives DOWN.
        self.publish_mr_peer(primary, &[]);
        // The peer NIs' cached NI status is what their peer says (the peer NI aliveness
        // rule reads it).
        for (nid, status) in info.statuses() {
            if let Some(e) = self.peer_nis.get(&nid) {
                e.cell.set_status_up(status.is_up());
            }
        }
    }

    /// This node's ping info changed (an NI was added, or an NI's status flipped): pushes
    /// it (a PUT with ACK on the reserved portal) to every discovered Multi-Rail,
    /// discovery-capable peer. Nobody waits for the ACKs.
    pub(super) fn push_all(&mut self, ctx: &mut Context<Self>) {
        let targets: Vec<Nid> = self
            .peers
            .iter()
            .filter(|p| p.push && p.multi_rail)
            .map(|p| p.primary)
            .collect();
        if targets.is_empty() {
            return;
        }
        let payload = match self.own_info().encode() {
            Ok(p) => Bytes::from(p),
            Err(e) => {
                tracing::warn!(%e, "own ping info does not encode");
                return;
            }
        };
        let timeout = Duration::from_secs(u64::from(self.config.tunables.transaction_timeout()));
        for dest in targets {
            if let Err(e) = self.start_txn(push_request(dest, payload.clone(), timeout), None, ctx)
            {
                tracing::debug!(%dest, %e, "push not sent");
            }
        }
    }
}

impl LnetActor {
    pub(super) fn recovery_ping(&mut self, due: PingDue, ctx: &mut Context<Self>) {
        let (pin_local, pin_peer, dest) = match due.queue {
            RecoveryKind::LocalNi => {
                // Through the NI being recovered, to a known peer NI on its net.
                let Some(peer) = self
                    .peer_nis
                    .keys()
                    .filter(|p| p.net == due.nid.net)
                    .min()
                    .copied()
                else {
                    return;
                };
                (Some(due.nid), Some(peer), peer)
            }
            RecoveryKind::PeerNi => (None, Some(due.nid), due.nid),
        };
        let req = StartTxn {
            dest,
            msg: ping_get(),
            payload: Bytes::new(),
            timeout: Duration::from_secs(u64::from(self.config.tunables.transaction_timeout())),
            want_response: true,
            src: None,
        };
        let _ = self.start_txn(req, Some((due.queue, pin_local, pin_peer)), ctx);
    }
}

/// A discovery push of `payload` (this node's ping info) to `dest`: a PUT with ACK on the
/// reserved portal.
pub(super) fn push_request(dest: Nid, payload: Bytes, timeout: Duration) -> StartTxn {
    StartTxn {
        dest,
        msg: LnetMsg::Put {
            // Any handle but NONE: start_txn puts the transaction's own there.
            ack_wmd: WireHandle {
                interface_cookie: 1,
                object_cookie: 1,
            },
            match_bits: PING_MATCHBITS,
            hdr_data: 0,
            ptl_index: RESERVED_PORTAL,
            offset: 0,
        },
        payload,
        timeout,
        want_response: true,
        src: None,
    }
}

pub(super) fn ping_get() -> LnetMsg {
    LnetMsg::Get {
        return_wmd: WireHandle::NONE,
        match_bits: PING_MATCHBITS,
        ptl_index: RESERVED_PORTAL,
        src_offset: 0,
        sink_length: PING_SINK_LENGTH,
    }
}

impl Handler<PingDue> for LnetActor {
    type Result = ();

    fn handle(&mut self, due: PingDue, ctx: &mut Context<Self>) {
        self.recovery_ping(due, ctx);
    }
}

impl Handler<OwnInfo> for LnetActor {
    type Result = MessageResult<OwnInfo>;

    fn handle(&mut self, _: OwnInfo, _ctx: &mut Context<Self>) -> MessageResult<OwnInfo> {
        MessageResult(self.own_info())
    }
}

impl Handler<LearnPeer> for LnetActor {
    type Result = MessageResult<LearnPeer>;

    fn handle(
        &mut self,
        LearnPeer(info, from): LearnPeer,
        _ctx: &mut Context<Self>,
    ) -> Self::Result {
        self.gateway_info(&info, from, RouteCause::PingReply);
        self.learn(info, from);
        MessageResult(self.peers.get(&from).map(|p| {
            let nids = p.nids.iter().map(|n| (*n, !p.down.contains(n))).collect();
            (p.primary, p.multi_rail, nids)
        }))
    }
}

impl Handler<NiStatusChanged> for LnetActor {
    type Result = ();

    fn handle(&mut self, _: NiStatusChanged, ctx: &mut Context<Self>) {
        self.publish_forward();
        self.push_all(ctx);
    }
}
