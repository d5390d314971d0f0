//! The forwarding path: a message for another node is forwarded on the task it arrived
//! on, with one hand-off (to the next hop's LND) and no actor message when all goes well.
//!
//! The LNet actor publishes a [`ForwardSnapshot`] whenever what the forward decision
//! reads changes: the route table and gateway state ([`lnet::forward::ForwardTable`]),
//! the local NIs and the known peer NIs with their shared cells ([`NiCell`]), whether
//! the node forwards. The receiving task then, synchronously:
//!
//! 1. decides the next hop ([`lnet::forward::ForwardTable::next_hop`]) from the snapshot
//!    and the live health and credits in the cells;
//! 2. charges a local NI tx credit in place (a free one);
//! 3. counts the message where the NI and peer NI actors would, and notes that its net
//!    was heard;
//! 4. charges a peer NI tx credit in place, or leaves the message waiting for one in the
//!    peer NI's credit queue ([`crate::ni_cell`]), in line with the messages the actors
//!    queued there;
//! 5. hands it to the next hop's LND, at once or when a completion gives the credit it
//!    waits for back (from that completion's task).
//!
//! When the send completes OK and both NIs are at full health, the credits and the
//! router buffer go back in place (a credit to the message waiting for it, if any) and
//! a counter goes up: no actor hears of it. Anything else (a failure, a health below the
//! maximum) goes to the actors: the message is handed to the LNet actor ([`Adopted`]),
//! which applies the health rules and resends or drops it as for any forwarded message.
//!
//! A message the path cannot take as it is (no local NI credit free, an NI or peer NI
//! below full health or not known yet, a next hop whose cached NI status is not UP (the
//! peer NI aliveness rule is the actor's to apply), fault rules in force, the node draining, a net or
//! gateway whose state the message would change, no next hop) takes the LNet actor's
//! path from the start: the path never decides anything the actor would decide
//! differently.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, PoisonError};

use actix::prelude::*;
use arc_swap::ArcSwap;
use bytes::Bytes;
use crossbeam_utils::sync::ShardedLock;
use lnd::{RxMessage, SendError, TryRefused, TrySend, TxCompletion, TxId, TxRequest};
use lnet::forward::{ForwardMsg, ForwardTable, Live, MrPeer};
use lnet::time::Millis;
use lnet::{Header, Net, Nid};
use rustc_hash::{FxHashMap, FxHashSet};
use tokio::sync::mpsc;

use crate::clock::Clock;
use crate::driver::Driver;
use crate::fault::FaultRules;
use crate::ni::{refusal_status, CreditBack, LocalNiActor, PeerNiActor};
use crate::ni_cell::{tx_bytes, NiCell, Waiter};
use crate::router::{RouterPools, Ticket};

mod in_flight;
pub(crate) mod published;
mod recent;

use in_flight::{InFlightTable, FAST_TX};
use published::{Kept, Published};
use recent::{Generation, Recent};

/// Shards of the maps by NID.
const SHARDS: usize = 16;

/// Links a thread keeps per peer NI: one per local NI it sent to it through lately (the
/// local NIs of a net, which Multi-Rail takes in turn, are few).
const LINKS_KEPT: usize = 4;

thread_local! {
    /// The peer NIs this thread's forwards read lately (see [`recent`]), each with its
    /// links to the local NIs this thread sent to it through lately.
    static RECENT: RefCell<Recent<PathPeerNi, Vec<Arc<PathLink>>>> =
        RefCell::new(Recent::default());
    /// The Multi-Rail peers (or none) of the NIDs this thread's forwards read lately.
    static RECENT_MR: RefCell<Recent<MrPeer>> = RefCell::new(Recent::default());
    /// The forwarding snapshot as this thread read it last (see [`published`]).
    static SNAPSHOT: Kept<ForwardSnapshot> = const { RefCell::new(None) };
}

/// A local NI as the forwarding path reaches it.
#[derive(Clone)]
pub(crate) struct PathNi {
    pub(crate) cell: Arc<NiCell>,
    pub(crate) addr: Addr<LocalNiActor>,
    /// Its LND's sender, when it has one: a send that may not wait goes through it
    /// rather than through `driver`, whose slot for the LND costs two atomic writes to
    /// read. It refuses sends once the NI stops, as the driver does.
    pub(crate) sender: Option<Arc<dyn TrySend>>,
    pub(crate) driver: Arc<dyn Driver>,
    /// Up, and not advertised DOWN: traffic on it changes nothing the actor keeps.
    pub(crate) quiet: bool,
}

/// A known peer NI as the forwarding path reaches it.
#[derive(Clone)]
pub(crate) struct PathPeerNi {
    pub(crate) cell: Arc<NiCell>,
    pub(crate) addr: Addr<PeerNiActor>,
}

/// A local NI (`O`) and a peer NI (`T`) on its net that the path sends through, held as
/// one: a send under way holds both until it completes (it gives their credits back
/// then), and holds them with one count of holders written when it starts and one when
/// it ends, not two of each (atomic writes). Each thread keeps the links of a peer NI it
/// sent to with the peer NI ([`recent`]), one for each local NI it sent through lately.
/// A kept link holds its local NI as a snapshot had it (its cell, actor address and LND
/// sender) until the thread lets it go: when the peer NI maps change, when the entry
/// makes room, or when [`LINKS_KEPT`] newer links of that peer NI are kept.
pub(crate) struct Link<O, T> {
    out: Arc<O>,
    to: Arc<T>,
}

/// The forwarding path's links.
type PathLink = Link<PathNi, PathPeerNi>;

impl<O, T> Link<O, T> {
    /// Whether `self` and `other` join the same two.
    fn same(&self, other: &Link<O, T>) -> bool {
        Arc::ptr_eq(&self.out, &other.out) && Arc::ptr_eq(&self.to, &other.to)
    }
}

/// The link of `out` and `to` among `kept` (the links of peer NI `to` that a thread
/// keeps); made and kept if there is none, the oldest let go when [`LINKS_KEPT`] are.
fn kept_link<O, T>(kept: &mut Vec<Arc<Link<O, T>>>, out: &Arc<O>, to: &Arc<T>) -> Arc<Link<O, T>> {
    if let Some(l) = kept.iter().find(|l| Arc::ptr_eq(&l.out, out)) {
        return Arc::clone(l);
    }
    let l = Arc::new(Link {
        out: Arc::clone(out),
        to: Arc::clone(to),
    });
    if kept.len() >= LINKS_KEPT {
        kept.remove(0);
    }
    kept.push(Arc::clone(&l));
    l
}

/// What the LNet actor publishes for the forwarding path. See the module documentation.
#[derive(Clone, Default)]
pub(crate) struct ForwardSnapshot {
    /// The node forwards (routing on, not draining).
    pub(crate) routing: bool,
    /// The route table and local NIs as the decision reads them.
    pub(crate) table: ForwardTable,
    /// The local NIs.
    pub(crate) nis: FxHashMap<Nid, Arc<PathNi>>,
    /// Gateways the actor holds dead: traffic from one revives it, so it takes the
    /// actor's path.
    pub(crate) dead_gateways: FxHashSet<Nid>,
    /// When each local net was last heard from by the forwarding path (milliseconds plus
    /// one), for the net check.
    pub(crate) heard: FxHashMap<Net, Arc<AtomicU64>>,
}

/// One shard of the known peer NIs.
type PeerNiMap = FxHashMap<Nid, Arc<PathPeerNi>>;

/// One shard of the Multi-Rail peers, by each of their NIDs.
type MrPeerMap = FxHashMap<Nid, Arc<MrPeer>>;

/// A message the forwarding path handed to an LND.
pub(crate) struct InFlight {
    header: Header,
    payload: Bytes,
    ticket: Ticket,
    received_at: Millis,
    link: Arc<PathLink>,
}

/// A forwarded message whose send the actors must finish: its completion and what the
/// forwarding path knew of it.
pub(crate) struct Adopted {
    pub(crate) done: TxCompletion,
    pub(crate) header: Header,
    pub(crate) payload: Bytes,
    pub(crate) ticket: Ticket,
    pub(crate) received_at: Millis,
}

/// A message charged to its next hop, for its LND.
pub(crate) struct PathSend {
    tx: TxRequest,
    ni: Nid,
    driver: Arc<dyn Driver>,
}

/// What [`ForwardPath::forward`] did with a message.
pub(crate) enum Forward {
    /// Handed to its LND, or waiting for a peer NI credit (sent when it comes).
    Sent,
    /// Charged, but its LND would make it wait: the caller finishes it with
    /// [`ForwardPath::send`]. Boxed, as it is rare: the answer to every message is then
    /// small enough to come back in registers, not copied out through the closures it
    /// is decided in.
    Waits(Box<PathSend>),
    /// Not for the path: the actors take it (as it came) with its buffer.
    Refused(Ticket),
}

/// A next hop whose local NI credit is charged (its NI as the snapshot holds it).
struct Charged<'s> {
    ni: Nid,
    peer: Nid,
    /// The destination the header names from here.
    dest: Nid,
    out: &'s Arc<PathNi>,
    link: Arc<PathLink>,
    now: Millis,
}

/// Counts of the forwarding path, added to the node's statistics.
#[derive(Debug, Default)]
pub(crate) struct PathCounts {
    /// Messages the path sent whose completion went to the actors.
    pub(crate) adopted: AtomicU64,
    /// Messages the LNet actor forwarded from the start.
    pub(crate) by_actor: AtomicU64,
    /// Messages the path forwarded after waiting for a peer NI credit.
    pub(crate) waited: AtomicU64,
}

/// How this node's forwarded messages went (`Node::forwarding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ForwardingCounts {
    /// Forwarded on the task they arrived on and completed OK at full health: no actor
    /// heard of them.
    pub fast: u64,
    /// Sent by the forwarding path, then finished by the actors (a failure, or a health
    /// below the maximum).
    pub handed_over: u64,
    /// Forwarded by the LNet actor from the start (see the module documentation for
    /// when).
    pub by_actor: u64,
    /// Of those the forwarding path sent, how many waited for a peer NI credit first.
    pub waited: u64,
}

/// The forwarding path's state, shared by the receiving tasks (through the
/// [`super::NodeHandler`]) and the LNet actor.
pub(crate) struct ForwardPath {
    pub(crate) snapshot: Published<ForwardSnapshot>,
    /// The peer NIs of known peers, apart from the snapshot (they change often and
    /// there can be many): added one by one, in shards by NID, each behind a lock of its
    /// own that the path only reads. The locks are sharded by thread: a reader locks a
    /// part of its own, so that the receiving tasks of different threads never write
    /// the same lock word.
    peer_nis: Vec<ShardedLock<PeerNiMap>>,
    /// The Multi-Rail peers the forward decision reads, kept as the peer NIs are (a
    /// change costs in the peer's own NIDs, and reaches the path at once).
    mr_peers: Vec<ShardedLock<MrPeerMap>>,
    /// Changes whenever a peer NI is added or removed (see [`recent`]).
    peers_changed: Generation,
    /// Changes whenever a NID's Multi-Rail peer changes.
    mr_changed: Generation,
    pub(crate) pools: Arc<RouterPools>,
    pub(crate) faults: FaultRules,
    pub(crate) clock: Clock,
    pub(crate) counts: PathCounts,
    in_flight: InFlightTable<InFlight>,
    adopt: mpsc::UnboundedSender<Adopted>,
}

impl std::fmt::Debug for ForwardPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForwardPath")
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

/// The shard of NID `nid` in the maps by NID (spread as CPTs are: [`Nid::cpt`]).
fn nid_shard(nid: &Nid) -> usize {
    usize::try_from(nid.cpt(SHARDS as u32)).unwrap_or(0)
}

impl ForwardPath {
    /// A path that forwards nothing until a snapshot is published; messages whose send
    /// the actors must finish go to `adopt`.
    pub(crate) fn new(
        pools: Arc<RouterPools>,
        faults: FaultRules,
        clock: Clock,
        adopt: mpsc::UnboundedSender<Adopted>,
    ) -> ForwardPath {
        ForwardPath {
            snapshot: Arc::new(ArcSwap::from_pointee(ForwardSnapshot::default())),
            peer_nis: (0..SHARDS)
                .map(|_| ShardedLock::new(PeerNiMap::default()))
                .collect(),
            mr_peers: (0..SHARDS)
                .map(|_| ShardedLock::new(MrPeerMap::default()))
                .collect(),
            peers_changed: Generation::new(),
            mr_changed: Generation::new(),
            pools,
            faults,
            clock,
            counts: PathCounts::default(),
            in_flight: InFlightTable::new(),
            adopt,
        }
    }

    fn peer_shard(&self, nid: &Nid) -> Option<&ShardedLock<PeerNiMap>> {
        self.peer_nis.get(nid_shard(nid))
    }

    /// NIDs `nids` belong to Multi-Rail peer `peer` now, or (`None`) to no Multi-Rail
    /// peer.
    pub(crate) fn set_mr_peer(&self, nids: &[Nid], peer: Option<&Arc<MrPeer>>) {
        for nid in nids {
            let Some(shard) = self.mr_peers.get(nid_shard(nid)) else {
                continue;
            };
            let mut shard = shard.write().unwrap_or_else(PoisonError::into_inner);
            match peer {
                Some(p) => shard.insert(*nid, Arc::clone(p)),
                None => shard.remove(nid),
            };
        }
        self.mr_changed.changed();
    }

    /// The Multi-Rail peer that has NID `nid`, if any, as this thread keeps it while the
    /// Multi-Rail peers stay as they were (see [`recent`]).
    pub(crate) fn mr_peer(&self, nid: &Nid) -> Option<Arc<MrPeer>> {
        let look_up = || self.look_up_mr_peer(nid);
        RECENT_MR.with(|r| match r.try_borrow_mut() {
            Ok(mut r) => r.with(&self.mr_changed, nid, look_up, |p| p.cloned()),
            Err(_) => look_up(),
        })
    }

    /// The Multi-Rail peer that has NID `nid`, under its shard's read lock.
    fn look_up_mr_peer(&self, nid: &Nid) -> Option<Arc<MrPeer>> {
        let shard = self.mr_peers.get(nid_shard(nid))?.read();
        shard
            .unwrap_or_else(PoisonError::into_inner)
            .get(nid)
            .cloned()
    }

    /// Peer NI `nid` belongs to a known peer: the path may send to it and take
    /// messages from it.
    pub(crate) fn add_peer_ni(&self, nid: Nid, peer_ni: PathPeerNi) {
        if let Some(s) = self.peer_shard(&nid) {
            s.write()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(nid, Arc::new(peer_ni));
        }
        self.peers_changed.changed();
    }

    /// Peer NI `nid` no longer belongs to a known peer: messages to or from it take the
    /// actor's path (which learns it again if it is heard from).
    pub(crate) fn remove_peer_ni(&self, nid: &Nid) {
        if let Some(s) = self.peer_shard(nid) {
            s.write()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(nid);
        }
        self.peers_changed.changed();
    }

    fn peer_ni(&self, nid: &Nid) -> Option<Arc<PathPeerNi>> {
        self.with_peer_ni(nid, Arc::clone)
    }

    /// `f` of known peer NI `nid` (`None`: not known), from what this thread keeps of
    /// the peer NIs it looked up lately while they have not changed.
    fn with_recent<R>(&self, nid: &Nid, f: impl FnOnce(Option<&Arc<PathPeerNi>>) -> R) -> R {
        let look_up = || self.peer_ni(nid);
        RECENT.with(|r| match r.try_borrow_mut() {
            Ok(mut r) => r.with(&self.peers_changed, nid, look_up, f),
            Err(_) => f(look_up().as_ref()),
        })
    }

    /// `f` of known peer NI `nid`, under its shard's read lock.
    fn with_peer_ni<R>(&self, nid: &Nid, f: impl FnOnce(&Arc<PathPeerNi>) -> R) -> Option<R> {
        let shard = self.peer_shard(nid)?.read();
        shard
            .unwrap_or_else(PoisonError::into_inner)
            .get(nid)
            .map(f)
    }

    /// The link of local NI `out` and known peer NI `nid`, as this thread keeps it with
    /// the peer NI while the peer NIs stay as they were (at most [`LINKS_KEPT`] per peer
    /// NI, the oldest let go first); `None`: `nid` is not known.
    fn link(&self, out: &Arc<PathNi>, nid: &Nid) -> Option<Arc<PathLink>> {
        let look_up = || self.peer_ni(nid);
        let link = |to: Option<&Arc<PathPeerNi>>, kept: &mut Vec<Arc<PathLink>>| {
            Some(kept_link(kept, out, to?))
        };
        RECENT.with(|r| match r.try_borrow_mut() {
            Ok(mut r) => r.with_kept(&self.peers_changed, nid, look_up, link),
            Err(_) => link(look_up().as_ref(), &mut Vec::new()),
        })
    }

    /// Messages the path handed to an LND whose send has not completed.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The most forwards each shard has held at once, summed (as the kernel sums the
    /// per-CPT high-water marks into `msgs_max`).
    pub(crate) fn in_flight_max(&self) -> usize {
        self.in_flight.max()
    }

    /// `counters` (the LNet actor's) with the path's own added.
    pub(crate) fn add_counts(&self, counters: &mut std::collections::BTreeMap<&'static str, u64>) {
        let (count, length) = self.in_flight.forwarded();
        for (name, n) in [("route_count", count), ("route_length", length)] {
            let c = counters.entry(name).or_default();
            *c = c.saturating_add(n);
        }
    }

    /// How the forwarded messages went so far.
    pub(crate) fn counts(&self) -> ForwardingCounts {
        ForwardingCounts {
            fast: self.in_flight.forwarded().0,
            handed_over: self.counts.adopted.load(Relaxed),
            by_actor: self.counts.by_actor.load(Relaxed),
            waited: self.counts.waited.load(Relaxed),
        }
    }

    /// Whether `id` is one of the path's sends.
    pub(crate) fn owns(id: TxId) -> bool {
        id.0 & FAST_TX != 0
    }

    /// Forwards `msg`, which holds router buffer `ticket`, if the path can take it as it
    /// is (its payload is taken then); otherwise leaves it as it came and gives the buffer
    /// back, for the actor's path. The message is borrowed, not moved in and out (216
    /// bytes). Never waits: a send its LND would make wait comes back, for the caller
    /// to finish with [`ForwardPath::send`].
    pub(crate) fn forward(self: &Arc<Self>, msg: &mut RxMessage, ticket: Ticket) -> Forward {
        published::read(&SNAPSHOT, &self.snapshot, |snap| {
            self.forward_with(snap, msg, ticket)
        })
    }

    /// [`ForwardPath::forward`] over `snap`. A function of its own in every build (not
    /// inlined into its callers): `scripts/router-instructions` counts the forwarded
    /// messages by its calls.
    #[inline(never)]
    fn forward_with(
        self: &Arc<Self>,
        snap: &ForwardSnapshot,
        msg: &mut RxMessage,
        ticket: Ticket,
    ) -> Forward {
        let Some(c) = self.charge(snap, msg) else {
            return Forward::Refused(ticket);
        };
        let Charged {
            ni,
            peer,
            dest,
            out,
            link,
            now,
        } = c;
        // The header as it came, but for the destination of a Multi-Rail final hop; the
        // message kept for the actors is as it came, for them to decide again.
        let mut header = msg.header;
        header.dest_nid = dest;
        let bytes = tx_bytes(&header);
        link.to.cell.queued_bytes(bytes);
        // A free peer NI credit (the usual case) is charged here, and the peer NI goes to
        // the flight as it was looked up; without one, the message queues for it below.
        let waits = (!link.to.cell.try_take()).then(|| Arc::clone(&link));
        let flight = InFlight {
            header: msg.header,
            payload: msg.payload.clone(),
            ticket,
            received_at: now,
            link,
        };
        // Kept by the next hop: one peer's sends in one shard.
        let id = match self.in_flight.insert(nid_shard(&peer) as u64, flight) {
            Ok(id) => id,
            Err(f) => {
                // Every slot of the shard taken (2^32 sends under way): the credits and
                // queued bytes go back and the actors take the message (counted again by
                // them).
                let to = &f.link.to;
                to.cell.sent_bytes(bytes);
                if waits.is_none() {
                    give_back(&to.cell, &to.addr);
                }
                give_back(&out.cell, &out.addr);
                return Forward::Refused(f.ticket);
            }
        };
        let tx = TxRequest {
            id,
            peer,
            header,
            payload: std::mem::take(&mut msg.payload),
        };
        // What a waiting send needs (the path, the driver) is taken only if it waits: the
        // receiving tasks of different threads would otherwise all write the same counts.
        let now = match waits {
            None => Some(tx),
            Some(link) => link.to.cell.take_or_queue(tx, |tx| {
                let path = Arc::clone(self);
                let send = PathSend {
                    tx,
                    ni,
                    driver: Arc::clone(&out.driver),
                };
                path.counts.waited.fetch_add(1, Relaxed);
                Waiter::Path(Box::new(move || path.resume(send)))
            }),
        };
        match now.and_then(|tx| self.try_send(tx, ni, &out.driver, out.sender.as_ref())) {
            Some(send) => Forward::Waits(Box::new(send)),
            None => Forward::Sent,
        }
    }

    /// Sends a message that waited for its peer NI credit, from the completion that gave
    /// the credit back; only if its LND would make it wait does a task of its own wait.
    fn resume(self: Arc<Self>, send: PathSend) {
        let PathSend { tx, ni, driver } = send;
        let Some(send) = self.try_send(tx, ni, &driver, None) else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move { self.send(send).await });
            }
            Err(_) => {
                let e = SendError::Stopped { ni: send.ni };
                self.refused(send.tx.id, send.ni, send.tx.peer, &e);
            }
        }
    }

    /// Hands a charged message, for local NI `ni`, to its LND (through `sender` if set,
    /// else `driver`) if it takes it without waiting; a refusal completes it at once.
    /// Gives it back if the LND would make it wait.
    fn try_send(
        &self,
        tx: TxRequest,
        ni: Nid,
        driver: &Arc<dyn Driver>,
        sender: Option<&Arc<dyn TrySend>>,
    ) -> Option<PathSend> {
        let (id, peer) = (tx.id, tx.peer);
        let sent = match sender {
            Some(sender) => sender.try_send(tx),
            None => driver.try_send(tx),
        };
        match sent {
            Ok(()) => None,
            Err(TryRefused::WouldWait(tx)) => Some(PathSend {
                tx: *tx,
                ni,
                driver: Arc::clone(driver),
            }),
            Err(TryRefused::Refused(e)) => {
                self.refused(id, ni, peer, &e);
                None
            }
            Err(_) => {
                self.refused(id, ni, peer, &SendError::Stopped { ni });
                None
            }
        }
    }

    /// Hands a charged message to its LND, waiting if it must; a refusal completes it at
    /// once.
    pub(crate) async fn send(&self, send: PathSend) {
        let PathSend { tx, ni, driver } = send;
        let (id, peer) = (tx.id, tx.peer);
        if let Err(e) = driver.send(tx).await {
            self.refused(id, ni, peer, &e);
        }
    }

    /// Completes send `id` that its LND refused.
    fn refused(&self, id: TxId, ni: Nid, peer: Nid, e: &SendError) {
        self.complete(TxCompletion {
            id,
            ni,
            peer,
            status: refusal_status(e),
            reason: Some(e.to_string()),
        });
    }

    /// Decides the next hop and charges its local NI credit, or says the actor's path
    /// must take the message.
    fn charge<'s>(&self, snap: &'s ForwardSnapshot, msg: &RxMessage) -> Option<Charged<'s>> {
        if !snap.routing || !self.faults.is_empty() || msg.header.check_lnet().is_err() {
            return None;
        }
        let from = msg.from.nid;
        let rx_ni = snap.nis.get(&msg.ni).filter(|n| n.quiet)?;
        // Every peer NI the decision reads (the sender, the destination, a gateway) is
        // one this thread keeps while the peer NIs stay as they were: no lock, no count
        // of holders written, one lookup per change at most.
        if snap.dead_gateways.contains(&from)
            || !rx_ni.cell.health().is_max()
            || !self.with_recent(&from, |s| s.map(|s| s.cell.health().is_max()))?
        {
            return None;
        }
        let live = |cell: &NiCell| Live {
            health: cell.health(),
            tx_credits: cell.credits(),
            seq: cell.seq(),
        };
        let fwd = ForwardMsg {
            src: msg.header.src_nid,
            dest: msg.header.dest_nid,
            arrived_on: msg.ni.net,
            msg_type: msg.header.msg_type(),
        };
        let known = |n: &Nid| self.with_recent(n, |p| p.map_or(Live::UNKNOWN, |p| live(&p.cell)));
        let hop = snap
            .table
            .next_hop(
                &fwd,
                |n| self.mr_peer(n),
                |n| snap.nis.get(n).map_or(Live::UNKNOWN, |e| live(&e.cell)),
                known,
            )
            .ok()?;
        let out = snap.nis.get(&hop.ni).filter(|n| n.quiet)?;
        let link = self.link(out, &hop.peer)?;
        let to = &link.to;
        // A peer NI whose cached status is not UP may be one the peer NI aliveness rule
        // drops messages to: the actor decides it, and counts the drop.
        if !out.cell.health().is_max()
            || !to.cell.health().is_max()
            || !to.cell.status_up()
            || !out.cell.try_take()
        {
            return None;
        }
        // Committed: count it where the actors would, at the time it was read.
        let now = self.clock.at(msg.received_at);
        let t = msg.header.msg_type();
        self.with_recent(&from, |s| {
            if let Some(s) = s {
                s.cell.count_received(t);
                s.cell.alive_at(now);
            }
        });
        rx_ni.cell.count_received(t);
        if let Some(h) = snap.heard.get(&msg.ni.net) {
            // Read first: within a millisecond many messages find it already set.
            let at = now.0.saturating_add(1);
            if h.load(Relaxed) < at {
                h.fetch_max(at, Relaxed);
            }
        }
        // Each count sent is also a pick for round robin (see NiCell::seq).
        to.cell.count_sent(t);
        out.cell.count_sent(t);
        Some(Charged {
            ni: hop.ni,
            peer: hop.peer,
            dest: hop.dest,
            out,
            link,
            now,
        })
    }

    /// A send of the path completed: finished in place when it went well at full
    /// health, else handed to the LNet actor.
    pub(crate) fn complete(&self, done: TxCompletion) {
        let Some((f, well)) = self
            .in_flight
            .remove_counting(done.id, |f| in_full(&done, f))
        else {
            return;
        };
        if !well {
            self.adopt(done, f);
            return;
        }
        let PathLink { out, to } = &*f.link;
        to.cell.sent_bytes(tx_bytes(&f.header));
        give_back(&to.cell, &to.addr);
        give_back(&out.cell, &out.addr);
        self.pools.release_with(f.ticket, f.payload);
    }

    /// [`ForwardPath::complete`] for sends that completed together: each lock (a shard
    /// of the sends under way, a CPT's pools) and each NI's credits taken once for a run
    /// of sends that share it. Each send is taken apart where the table hands it over:
    /// only what gives its credits, queued bytes and buffer back goes on.
    pub(crate) fn complete_all(&self, done: Vec<TxCompletion>) {
        let mut buffers = Vec::with_capacity(done.len());
        let mut sent: Vec<Sent> = Vec::with_capacity(done.len());
        let mut adopted = Vec::new();
        self.in_flight.remove_all(
            done,
            |d| d.id,
            |d, f| {
                let Some(counted) = in_full(&d, &f) else {
                    adopted.push((d, f));
                    return None;
                };
                sent.push(Sent {
                    bytes: tx_bytes(&f.header),
                    link: f.link,
                });
                buffers.push((f.ticket, f.payload));
                Some(counted)
            },
        );
        // No lock held from here: giving a credit back may send a message that waited.
        // The sends of a run to one peer NI through one NI give their bytes and credits
        // back together (most batches are one run).
        for run in sent.chunk_by(|a, b| a.link.same(&b.link)) {
            give_back_run(run);
        }
        drop(sent);
        for (d, f) in adopted {
            self.adopt(d, f);
        }
        self.pools.release_all_with(buffers);
    }

    /// Hands a send that did not go well at full health to the LNet actor.
    fn adopt(&self, done: TxCompletion, f: InFlight) {
        self.counts.adopted.fetch_add(1, Relaxed);
        let adopted = Adopted {
            done,
            header: f.header,
            payload: f.payload,
            ticket: f.ticket,
            received_at: f.received_at,
        };
        if let Err(mpsc::error::SendError(a)) = self.adopt.send(adopted) {
            // The node is gone: nothing will resend it.
            self.pools.release(a.ticket);
        }
    }
}

/// Whether send `f`, completed as `done` says, was forwarded in full (OK, both NIs at
/// full health), with its payload bytes: counted under the lock its removal takes.
fn in_full(done: &TxCompletion, f: &InFlight) -> Option<u64> {
    let PathLink { out, to } = &*f.link;
    let well = done.status.is_ok() && out.cell.health().is_max() && to.cell.health().is_max();
    well.then(|| u64::try_from(f.payload.len()).unwrap_or(u64::MAX))
}

/// A send that completed in full, as the credits it held see it.
struct Sent {
    /// Its bytes queued for its peer NI.
    bytes: u64,
    link: Arc<PathLink>,
}

/// Gives back what a run of sends to one peer NI through one NI held: their bytes queued
/// for the peer NI, and a tx credit of each NI per send.
fn give_back_run(run: &[Sent]) {
    let Some(first) = run.first() else {
        return;
    };
    let n = u32::try_from(run.len()).unwrap_or(u32::MAX);
    let bytes = run.iter().fold(0u64, |b, s| b.saturating_add(s.bytes));
    let PathLink { out, to } = &*first.link;
    to.cell.sent_bytes(bytes);
    for w in to.cell.give_back_n(n) {
        let_go(w, &to.addr);
    }
    for w in out.cell.give_back_n(n) {
        let_go(w, &out.addr);
    }
}

/// Gives a tx credit of `cell` back, letting go the waiter it is owed to, if any: the
/// owning actor (at `addr`) is told, a send of the path goes on.
fn give_back<A>(cell: &NiCell, addr: &Addr<A>)
where
    A: Actor + Handler<CreditBack>,
    A::Context: actix::dev::ToEnvelope<A, CreditBack>,
{
    if let Some(w) = cell.give_back() {
        let_go(w, addr);
    }
}

/// Lets a waiter handed a credit of the cell of the actor at `addr` go: tells the actor,
/// or resumes the forwarding path's send in place.
fn let_go<A>(w: Waiter, addr: &Addr<A>)
where
    A: Actor + Handler<CreditBack>,
    A::Context: actix::dev::ToEnvelope<A, CreditBack>,
{
    match w {
        Waiter::Actor => addr.do_send(CreditBack),
        Waiter::Path(go) => go(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nid(s: &str) -> Nid {
        s.parse().expect("nid")
    }

    fn path() -> ForwardPath {
        let clock = Clock::new();
        let (adopt, _) = mpsc::unbounded_channel();
        ForwardPath::new(
            Arc::new(RouterPools::new([8, 8, 8], 1, 8)),
            FaultRules::new(clock),
            clock,
            adopt,
        )
    }

    #[test]
    fn a_peer_ni_has_a_link_kept_for_each_local_ni_it_is_sent_to_through() {
        let to = Arc::new("peer NI");
        let outs: Vec<Arc<u32>> = (0..=LINKS_KEPT as u32).map(Arc::new).collect();
        let mut kept = Vec::new();
        // Multi-Rail takes two local NIs in turn: each keeps its link.
        let first = kept_link(&mut kept, &outs[0], &to);
        for _ in 0..3 {
            assert!(Arc::ptr_eq(
                &kept_link(&mut kept, &outs[1], &to).out,
                &outs[1]
            ));
            assert!(Arc::ptr_eq(&kept_link(&mut kept, &outs[0], &to), &first));
        }
        assert_eq!(kept.len(), 2);
        assert!(first.same(&kept_link(&mut kept, &outs[0], &to)));
        assert!(!first.same(&kept_link(&mut kept, &outs[1], &to)));
        // At most LINKS_KEPT: the oldest goes, and its local NI is let go.
        for out in &outs[2..] {
            kept_link(&mut kept, out, &to);
        }
        assert_eq!(kept.len(), LINKS_KEPT);
        drop(first);
        assert_eq!(Arc::strong_count(&outs[0]), 1, "its link let go");
        let again = kept_link(&mut kept, &outs[0], &to);
        assert!(Arc::ptr_eq(&again.out, &outs[0]) && Arc::ptr_eq(&again.to, &to));
        assert!(
            !kept.iter().any(|l| Arc::ptr_eq(&l.out, &outs[1])),
            "the next oldest went"
        );
    }

    #[test]
    fn a_multi_rail_peer_kept_by_a_thread_changes_with_the_path() {
        let path = path();
        let (a, b) = (nid("10.0.0.1@tcp"), nid("10.0.1.1@tcp1"));
        assert_eq!(path.mr_peer(&a), None, "none yet, and kept so");
        let peer = Arc::new(MrPeer {
            nids: vec![(a, true), (b, true)],
        });
        path.set_mr_peer(&[a, b], Some(&peer));
        assert_eq!(path.mr_peer(&a).as_deref(), Some(&*peer));
        assert_eq!(path.mr_peer(&b).as_deref(), Some(&*peer));
        path.set_mr_peer(&[b], None);
        assert_eq!(path.mr_peer(&b), None, "taken out: not kept any longer");
        assert_eq!(path.mr_peer(&a).as_deref(), Some(&*peer));
    }
}
