//! The router buffers of a forwarding node and the credits that guard them (reference:
//! core 5.2, 5.3): [`RouterPools`], one set of pools per CPT, each behind a short lock of
//! its own, charged in place by the receiving path; and the router actor that owns them.
//!
//! When a message for another node arrives, the LND hands its header up first; the
//! [`crate::NodeHandler`] reserves a buffer ([`RouterPools::reserve_held`]) before the
//! payload is read; the pools hold it for the message until its payload is in
//! ([`RouterPools::take_held`]), or give it back if its peer goes away first
//! ([`RouterPools::release_held`]). When no peer router-buffer credit or no buffer of
//! the right pool is free, the reservation waits: the connection reads nothing more, so
//! the sender feels back-pressure and nothing is dropped. When the send to the next hop is over the buffer
//! is given back ([`RouterPools::release`]) and the oldest waiting reservation of that
//! CPT gets it.
//!
//! Pools are sized per CPT as the kernel sizes them ([`lnet::rtrbuf::per_cpt`]); a message
//! uses the pools of the CPT its sending peer NI hashes to.

use actix::prelude::*;
use bytes::{Bytes, BytesMut};
use lnd::registered::RegisteredMemory;
use lnet::rtrbuf::{
    BufferError, Grant, PeerRtrCredits, PoolKind, PoolStats, Requested, RouterBuffers, PAGE_SIZE,
};
use lnet::{Net, Nid};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

use crate::by_runs::by_runs;

/// A buffer held by a message being forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    cpt: usize,
    grant: Grant<Nid>,
}

/// The pools and credits now.
#[derive(Debug, Message)]
#[rtype(result = "RoutingView")]
pub struct ShowBuffers;

/// What `lnetctl routing show` prints, and the router-buffer credits of each peer NI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingView {
    /// Per CPT: the tiny, small and large pools.
    pub cpts: Vec<[PoolStats; 3]>,
    /// Each peer NI that sent through this node: its router-buffer credits.
    pub peers: Vec<(Nid, PeerRtrCredits)>,
    /// Messages waiting for a credit or a buffer now.
    pub waiting: usize,
}

type Waiter = oneshot::Sender<Result<Ticket, BufferError>>;

/// The answer to a reservation.
#[derive(Debug)]
pub enum Reservation {
    /// A buffer, now, with the memory for the payload (see [`RouterPools::buffer`]).
    Granted(Ticket, BytesMut),
    /// None free: the buffer comes on this channel when one is released.
    Waiting(oneshot::Receiver<Result<Ticket, BufferError>>),
    /// Never: the payload is too large for any pool.
    Refused(BufferError),
}

/// The router buffers of a node, one set of pools per CPT. See the module documentation.
pub struct RouterPools {
    cpts: Vec<Mutex<CptPools>>,
    /// The large buffers' memory registered with the o2ib NIs' domains, when there is
    /// one: a payload read into it from a socket goes out by RDMA from where it lies.
    registered: Arc<RegisteredMemory>,
}

/// Registered large buffers there may be, per large buffer of the pools: the memory of a
/// payload held after its forward completed (a clone still being written) is handed out
/// again only once it is let go of.
const REGISTERED_PER_BUFFER: usize = 2;

/// One CPT's pools, and the router-buffer credits the peer NIs of each local net get.
struct CptPools {
    buffers: RouterBuffers<Nid, Waiter>,
    net_credits: FxHashMap<Net, u32>,
    /// The memory of the small and large buffers given back, for the next messages: as
    /// the kernel's pools keep their pages, a buffer's memory is used again rather than
    /// freed and faulted in afresh. At most as many as the pool has buffers.
    spare: [Vec<BytesMut>; 2],
    /// Buffers granted to messages whose payload is being read, by local NI, sending
    /// peer NI and pool ([`RouterPools::reserve_held`]): buffers of one pool from one
    /// peer NI are alike, so a count is all there is to keep.
    held: FxHashMap<(Nid, Nid, PoolKind), u32>,
}

/// The memory of a buffer given back, to keep: the index of its pool's spare list, and
/// the memory.
type Spare = (usize, BytesMut);

/// Bytes of one buffer of `pool`, and its index in [`CptPools::spare`] (the tiny pool's
/// buffers hold no payload).
fn buffer_size(pool: PoolKind) -> Option<(usize, usize)> {
    let bytes = usize::try_from(pool.npages().saturating_mul(PAGE_SIZE)).ok()?;
    match pool {
        PoolKind::Tiny => None,
        PoolKind::Small => Some((bytes, 0)),
        PoolKind::Large => Some((bytes, 1)),
    }
}

impl CptPools {
    /// The router-buffer credits a peer NI gets: its net's, else the pools' default.
    fn credits_of(&self, peer: &Nid) -> u32 {
        match self.net_credits.get(&peer.net) {
            Some(c) => *c,
            None => self.default_peer_credits(),
        }
    }

    /// The memory of a buffer of `pool` given back earlier, if one is kept.
    fn spare(&mut self, pool: PoolKind) -> Option<BytesMut> {
        let (_, i) = buffer_size(pool)?;
        self.spare.get_mut(i).and_then(Vec::pop)
    }
}

/// The memory of `payload`, held by `ticket`'s buffer, to keep for a later message of
/// its pool (with the index of the pool's spare list): when nothing else holds it and it
/// is a whole buffer. Registered memory goes back to `registered`.
fn reusable(ticket: &Ticket, payload: Bytes, registered: &RegisteredMemory) -> Option<Spare> {
    if ticket.grant.pool == PoolKind::Large && !payload.is_empty() {
        registered.give_back(payload.as_ptr() as usize);
    }
    buffer_size(ticket.grant.pool).and_then(|(size, i)| {
        let mut memory = payload.try_into_mut().ok()?;
        memory.clear();
        (memory.capacity() >= size).then_some((i, memory))
    })
}

/// Gives `n` buffers like `ticket`'s back to pools `b` (their CPT's, locked), keeping
/// `memory` when the pool has room for it; the oldest reservations waiting for them get
/// them (a waiter that went away gives its buffer back at once).
fn give_back_locked(b: &mut CptPools, ticket: Ticket, n: u32, memory: Option<Spare>) {
    let cpt = ticket.cpt;
    if let Some((i, memory)) = memory {
        let nbuffers = b
            .pools()
            .find(|p| p.npages == ticket.grant.pool.npages())
            .map_or(0, |p| usize::try_from(p.nbuffers).unwrap_or(0));
        if let Some(list) = b.spare.get_mut(i) {
            if list.len() < nbuffers {
                list.push(memory);
            }
        }
    }
    // Handed out in the order the pools granted them (a batch may grant several).
    let mut granted = std::collections::VecDeque::from(b.release_n(ticket.grant, n));
    while let Some((waiter, grant)) = granted.pop_front() {
        if let Err(Ok(back)) = waiter.send(Ok(Ticket { cpt, grant })) {
            granted.extend(b.release(back.grant));
        }
    }
}

/// Registered large buffers there may be for `large` large buffers on each of `ncpts`
/// CPTs.
fn registered_most(large: u32, ncpts: usize) -> usize {
    usize::try_from(large)
        .unwrap_or(usize::MAX)
        .saturating_mul(ncpts.max(1))
        .saturating_mul(REGISTERED_PER_BUFFER)
}

/// `spare`, or (outside any lock) new memory of `pool`'s size (none for the tiny pool).
fn memory_of(pool: PoolKind, spare: Option<BytesMut>) -> BytesMut {
    spare.unwrap_or_else(|| match buffer_size(pool) {
        Some((size, _)) => BytesMut::with_capacity(size),
        None => BytesMut::new(),
    })
}

impl std::ops::Deref for CptPools {
    type Target = RouterBuffers<Nid, Waiter>;
    fn deref(&self) -> &Self::Target {
        &self.buffers
    }
}

impl std::ops::DerefMut for CptPools {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.buffers
    }
}

impl std::fmt::Debug for RouterPools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterPools")
            .field("cpts", &self.cpts.len())
            .finish()
    }
}

impl RouterPools {
    /// Pools of `per_cpt` buffers (tiny, small, large) on each of `ncpts` CPTs, and
    /// `peer_credits` router-buffer credits per peer NI of a net with none of its own
    /// ([`RouterPools::set_net_credits`]).
    pub fn new(per_cpt: [u32; 3], ncpts: usize, peer_credits: u32) -> RouterPools {
        let large = buffer_size(PoolKind::Large).map_or(0, |(size, _)| size);
        RouterPools {
            registered: Arc::new(RegisteredMemory::new(
                large,
                registered_most(per_cpt[2], ncpts),
            )),
            cpts: (0..ncpts.max(1))
                .map(|_| {
                    Mutex::new(CptPools {
                        buffers: RouterBuffers::new(per_cpt, peer_credits),
                        net_credits: FxHashMap::default(),
                        spare: [Vec::new(), Vec::new()],
                        held: FxHashMap::default(),
                    })
                })
                .collect(),
        }
    }

    /// The router-buffer credits of each peer NI on local net `net` (the net's
    /// `peer_buffer_credits`, else its `peer_credits`, as the kernel's
    /// `lnet_peer_buffer_credits`; none: the default of these pools), given to a peer NI
    /// when it first sends.
    pub fn set_net_credits(&self, net: Net, credits: Option<u32>) {
        for cpt in 0..self.cpts.len() {
            if let Some(mut c) = self.lock(cpt) {
                match credits {
                    Some(n) => c.net_credits.insert(net, n),
                    None => c.net_credits.remove(&net),
                };
            }
        }
    }

    /// The CPT whose pools serve messages from peer NI `peer` (the kernel's
    /// [`Nid::cpt`]).
    pub fn cpt_of(&self, peer: &Nid) -> usize {
        let n = u32::try_from(self.cpts.len()).unwrap_or(u32::MAX);
        usize::try_from(peer.cpt(n)).unwrap_or(0)
    }

    fn lock(&self, cpt: usize) -> Option<MutexGuard<'_, CptPools>> {
        self.cpts
            .get(cpt)
            .map(|m| m.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A buffer for `len` payload bytes from peer NI `peer`, charged to its router
    /// credits; when granted at once, with its memory, taken under the same lock.
    pub fn reserve(&self, peer: Nid, len: u32) -> Reservation {
        self.reserve_on(None, peer, len)
    }

    /// [`RouterPools::reserve`] for a message arriving on local NI `ni` whose payload
    /// is read next: a buffer granted at once is held for it, under the same lock, until
    /// [`RouterPools::take_held`] (one that waited, once [`RouterPools::hold`] is called).
    pub fn reserve_held(&self, ni: Nid, peer: Nid, len: u32) -> Reservation {
        self.reserve_on(Some(ni), peer, len)
    }

    fn reserve_on(&self, held_on: Option<Nid>, peer: Nid, len: u32) -> Reservation {
        let cpt = self.cpt_of(&peer);
        let Some(mut b) = self.lock(cpt) else {
            return Reservation::Refused(BufferError::TooLarge { len });
        };
        let credits = b.credits_of(&peer);
        // The answer's channel only for a reservation that waits.
        let mut answer = None;
        let requested = b.request_with_credits(peer, credits, len, || {
            let (tx, rx) = oneshot::channel();
            answer = Some(rx);
            tx
        });
        match (requested, answer) {
            (Requested::Granted(grant), _) => {
                let (ticket, memory) = self.granted(b, cpt, held_on, grant);
                Reservation::Granted(ticket, memory)
            }
            (Requested::Waiting, Some(rx)) => Reservation::Waiting(rx),
            (Requested::Refused(_, e), _) => Reservation::Refused(e),
            // A wait always made its channel.
            (Requested::Waiting, None) => Reservation::Refused(BufferError::TooLarge { len }),
        }
    }

    /// [`RouterPools::reserve`] only if it is granted at once, or refused: `None` (the
    /// message would wait for a credit or a buffer) queues nothing. A caller whose own
    /// sends, once finished, give back what it waits for finishes them and asks again,
    /// instead of waiting (see [`lnet::rtrbuf::RouterBuffers::request_now_with_credits`]).
    pub fn reserve_now(
        &self,
        peer: Nid,
        len: u32,
    ) -> Option<Result<(Ticket, BytesMut), BufferError>> {
        let cpt = self.cpt_of(&peer);
        let Some(mut b) = self.lock(cpt) else {
            return Some(Err(BufferError::TooLarge { len }));
        };
        let credits = b.credits_of(&peer);
        match b.request_now_with_credits(peer, credits, len, || oneshot::channel().0)? {
            Requested::Granted(grant) => Some(Ok(self.granted(b, cpt, None, grant))),
            Requested::Refused(_, e) => Some(Err(e)),
            // Never the answer to a request made now.
            Requested::Waiting => None,
        }
    }

    /// The ticket of a buffer granted under the lock `b` of CPT `cpt`, held for the
    /// message arriving on local NI `held_on` if set, with its memory.
    fn granted(
        &self,
        mut b: MutexGuard<'_, CptPools>,
        cpt: usize,
        held_on: Option<Nid>,
        grant: Grant<Nid>,
    ) -> (Ticket, BytesMut) {
        if let Some(ni) = held_on {
            *b.held.entry((ni, grant.peer, grant.pool)).or_default() += 1;
        }
        // Registered memory, when there is any, is taken outside the pool's lock (a new
        // buffer is registered with each o2ib NI first).
        let registered = self.uses_registered(grant.pool);
        let spare = if registered {
            None
        } else {
            b.spare(grant.pool)
        };
        drop(b);
        let memory = registered
            .then(|| self.registered.take())
            .flatten()
            .unwrap_or_else(|| memory_of(grant.pool, spare));
        (Ticket { cpt, grant }, memory)
    }

    /// Holds `ticket`, granted after a wait, for the message arriving on local NI `ni`
    /// whose payload is read next (see [`RouterPools::reserve_held`]).
    pub fn hold(&self, ni: Nid, ticket: &Ticket) {
        if let Some(mut b) = self.lock(ticket.cpt) {
            *b.held
                .entry((ni, ticket.grant.peer, ticket.grant.pool))
                .or_default() += 1;
        }
    }

    /// The buffer held for a message of `len` payload bytes from peer NI `peer` on local
    /// NI `ni`, now read whole; `None` if none is held for it (a message for this node).
    pub fn take_held(&self, ni: Nid, peer: Nid, len: u32) -> Option<Ticket> {
        let pool = PoolKind::for_payload(len)?;
        let cpt = self.cpt_of(&peer);
        let mut b = self.lock(cpt)?;
        let n = b.held.get_mut(&(ni, peer, pool))?;
        // The entry stays, at 0, for the peer's next message (see `release_held`).
        *n = n.checked_sub(1)?;
        Some(Ticket {
            cpt,
            grant: Grant { peer, pool },
        })
    }

    /// Gives back every buffer held for messages from peer NI `peer` on local NI `ni`:
    /// the peer is gone, their payloads will never be read.
    pub fn release_held(&self, ni: Nid, peer: Nid) {
        let cpt = self.cpt_of(&peer);
        let lost: Vec<PoolKind> = match self.lock(cpt) {
            Some(mut b) => {
                let mut lost = Vec::new();
                b.held.retain(|(n, p, pool), count| {
                    let gone = *n == ni && *p == peer;
                    if gone {
                        lost.extend(std::iter::repeat_n(
                            *pool,
                            usize::try_from(*count).unwrap_or(0),
                        ));
                    }
                    !gone
                });
                lost
            }
            None => Vec::new(),
        };
        for pool in lost {
            self.release(Ticket {
                cpt,
                grant: Grant { peer, pool },
            });
        }
    }

    /// The memory for the payload of the message holding `ticket` (one whose
    /// reservation waited): a buffer of its pool given back earlier, or a new one of the
    /// pool's size.
    pub fn buffer(&self, ticket: &Ticket) -> BytesMut {
        if self.uses_registered(ticket.grant.pool) {
            if let Some(memory) = self.registered.take() {
                return memory;
            }
        }
        let spare = self
            .lock(ticket.cpt)
            .and_then(|mut b| b.spare(ticket.grant.pool));
        memory_of(ticket.grant.pool, spare)
    }

    /// Gives a buffer back ([`RouterPools::release`]) with the payload it held: when
    /// nothing else holds that memory, it serves a later message of the pool.
    pub fn release_with(&self, ticket: Ticket, payload: Bytes) {
        let memory = reusable(&ticket, payload, &self.registered);
        self.give_back(ticket, memory);
    }

    /// [`RouterPools::release_with`] for each of `buffers`, holding a CPT's lock for a
    /// run of buffers of that CPT; a run of buffers alike (one peer, one pool, no memory
    /// to keep: the tiny pool's, or memory still held elsewhere) goes back at once.
    pub fn release_all_with(&self, buffers: Vec<(Ticket, Bytes)>) {
        let mut alike: Vec<(Ticket, u32, Option<Spare>)> = Vec::with_capacity(buffers.len());
        for (ticket, payload) in buffers {
            let memory = reusable(&ticket, payload, &self.registered);
            match alike.last_mut() {
                Some((last, n, None)) if memory.is_none() && *last == ticket => *n += 1,
                _ => alike.push((ticket, 1, memory)),
            }
        }
        by_runs(
            alike,
            |(ticket, _, _)| ticket.cpt,
            |cpt| self.lock(cpt),
            |b, (ticket, n, memory)| give_back_locked(b, ticket, n, memory),
        );
    }

    /// Gives a buffer back; the oldest reservation waiting for it gets it (a waiter that
    /// went away gives it back at once).
    pub fn release(&self, ticket: Ticket) {
        self.give_back(ticket, None);
    }

    /// [`RouterPools::release`], keeping `memory` (a spare list's index and the memory)
    /// under the same lock when the pool has room for it.
    fn give_back(&self, ticket: Ticket, memory: Option<Spare>) {
        if let Some(mut b) = self.lock(ticket.cpt) {
            give_back_locked(&mut b, ticket, 1, memory);
        }
    }

    /// The registered memory of the large buffers (see [`lnd::registered`]).
    pub fn registered(&self) -> &Arc<RegisteredMemory> {
        &self.registered
    }

    /// Whether a buffer of `pool` takes its memory from the registered large buffers: the
    /// large pool, once an o2ib NI registers them.
    fn uses_registered(&self, pool: PoolKind) -> bool {
        pool == PoolKind::Large && self.registered.has_domains()
    }

    /// Resizes every CPT's pools to `per_cpt` buffers (tiny, small, large) while the
    /// node runs: the reservations waiting get the new buffers first; a pool that shrinks
    /// gives up its buffers as they come back ([`lnet::rtrbuf::RouterBuffers::resize`]).
    pub fn resize(&self, per_cpt: [u32; 3]) {
        for cpt in 0..self.cpts.len() {
            let Some(mut b) = self.lock(cpt) else {
                continue;
            };
            let mut granted = b.resize(per_cpt);
            if cpt == 0 {
                self.registered
                    .set_most(registered_most(per_cpt[2], self.cpts.len()));
            }
            // The memory kept for a pool that shrinks goes with its buffers.
            for (list, n) in b.spare.iter_mut().zip([per_cpt[1], per_cpt[2]]) {
                list.truncate(usize::try_from(n).unwrap_or(usize::MAX));
            }
            while let Some((waiter, grant)) = granted.pop() {
                if let Err(Ok(back)) = waiter.send(Ok(Ticket { cpt, grant })) {
                    granted.extend(b.release(back.grant));
                }
            }
        }
    }

    /// The pools and credits now.
    pub fn show(&self) -> RoutingView {
        let mut cpts = Vec::new();
        let mut peers: Vec<(Nid, PeerRtrCredits)> = Vec::new();
        let mut waiting = 0;
        for cpt in 0..self.cpts.len() {
            let Some(b) = self.lock(cpt) else {
                continue;
            };
            let mut pools = b.pools();
            let mut next = || {
                pools.next().unwrap_or(PoolStats {
                    npages: 0,
                    nbuffers: 0,
                    credits: 0,
                    mincredits: 0,
                })
            };
            cpts.push([next(), next(), next()]);
            peers.extend(b.peers().map(|(n, c)| (*n, c)));
            waiting += b.waiting();
        }
        peers.sort_by_key(|(n, _)| *n);
        RoutingView {
            cpts,
            peers,
            waiting,
        }
    }
}

/// The router actor: owns the node's [`RouterPools`], which the receiving path charges in
/// place, and answers for them.
#[derive(Debug)]
pub struct RouterActor {
    pools: Arc<RouterPools>,
}

impl RouterActor {
    /// The actor owning `pools`.
    pub fn new(pools: Arc<RouterPools>) -> RouterActor {
        RouterActor { pools }
    }
}

impl Actor for RouterActor {
    type Context = Context<Self>;
}

impl Handler<ShowBuffers> for RouterActor {
    type Result = MessageResult<ShowBuffers>;

    fn handle(&mut self, _: ShowBuffers, _ctx: &mut Context<Self>) -> MessageResult<ShowBuffers> {
        MessageResult(self.pools.show())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nid(s: &str) -> Nid {
        s.parse().expect("a NID")
    }

    fn granted(r: Reservation) -> (Ticket, BytesMut) {
        match r {
            Reservation::Granted(t, memory) => (t, memory),
            other => panic!("not granted: {other:?}"),
        }
    }

    /// A large buffer's memory given back with its payload serves the next large
    /// message; a payload still held elsewhere is not taken back.
    #[test]
    fn buffer_memory_is_used_again_once_nothing_else_holds_it() {
        let pools = RouterPools::new([8, 8, 8], 1, 8);
        let from = nid("10.0.0.1@tcp");
        let (t, mut memory) = granted(pools.reserve(from, 1 << 20));
        assert!(memory.capacity() >= 1 << 20);
        let at = memory.as_ptr();
        memory.resize(1 << 20, 7);
        let payload = memory.freeze();
        pools.release_with(t, payload);
        let (t, again) = granted(pools.reserve(from, 300_000));
        assert_eq!(again.as_ptr(), at);
        assert!(again.is_empty());

        // Held by another owner (a send still under way): not kept.
        let mut memory = again;
        memory.resize(300_000, 1);
        let payload = memory.freeze();
        let other = payload.clone();
        pools.release_with(t, payload);
        let (_, fresh) = granted(pools.reserve(from, 5000));
        assert_ne!(fresh.as_ptr(), other.as_ptr());

        // The small pool's buffers are a page; the tiny pool's hold nothing.
        let (_, small) = granted(pools.reserve(from, 100));
        assert!(small.capacity() >= PAGE_SIZE as usize);
        let (_, tiny) = granted(pools.reserve(from, 0));
        assert_eq!(tiny.capacity(), 0);
    }

    /// A reservation that waited gets its memory from the pool once granted: the memory
    /// of the buffer given back.
    #[test]
    fn a_reservation_that_waited_gets_the_memory_given_back() {
        let pools = RouterPools::new([8, 8, 1], 1, 8);
        let from = nid("10.0.0.1@tcp");
        let (t, mut memory) = granted(pools.reserve(from, 1 << 20));
        let at = memory.as_ptr();
        let Reservation::Waiting(mut answer) = pools.reserve(from, 1 << 20) else {
            panic!("the one large buffer is taken: the second waits");
        };
        memory.resize(10, 0);
        pools.release_with(t, memory.freeze());
        let t = answer
            .try_recv()
            .expect("granted on release")
            .expect("a buffer");
        assert_eq!(pools.buffer(&t).as_ptr(), at);
    }

    /// Buffers given back together, from peers of two CPTs, serve the reservations
    /// waiting for them and come back whole.
    #[test]
    fn buffers_given_back_together_go_back_to_their_own_cpts() {
        let pools = RouterPools::new([8, 2, 8], 2, 8);
        // Four peers of each CPT, in turn.
        let mut of_cpt: [Vec<Nid>; 2] = [Vec::new(), Vec::new()];
        for i in 1..=250 {
            let p = nid(&format!("10.0.{i}.1@tcp"));
            if let Some(list) = of_cpt.get_mut(pools.cpt_of(&p)) {
                if list.len() < 4 {
                    list.push(p);
                }
            }
        }
        let [c0, c1] = of_cpt;
        assert_eq!((c0.len(), c1.len()), (4, 4), "peers on both CPTs");
        let peers: Vec<Nid> = c0.into_iter().zip(c1).flat_map(|(a, b)| [a, b]).collect();
        let mut held = Vec::new();
        let mut waiting = Vec::new();
        for p in &peers {
            match pools.reserve(*p, 100) {
                Reservation::Granted(t, m) => held.push((t, m.freeze())),
                Reservation::Waiting(w) => waiting.push(w),
                Reservation::Refused(e) => panic!("{e}"),
            }
        }
        assert_eq!(
            (held.len(), waiting.len()),
            (4, 4),
            "two small buffers per CPT"
        );
        pools.release_all_with(held);
        let again: Vec<(Ticket, Bytes)> = waiting
            .iter_mut()
            .map(|w| {
                let t = w.try_recv().expect("granted").expect("a buffer");
                (t, Bytes::new())
            })
            .collect();
        pools.release_all_with(again);
        let view = pools.show();
        for cpt in &view.cpts {
            assert_eq!(cpt[1].credits, 2, "{view:?}");
        }
        assert!(view.peers.iter().all(|(_, c)| c.credits == 8), "{view:?}");
    }

    /// Buffers of one peer and one pool given back together go back at once, and the
    /// reservations waiting for the peer's credits get them in order.
    #[test]
    fn tiny_buffers_of_one_peer_go_back_together_to_the_waiting_in_order() {
        let pools = RouterPools::new([8, 8, 8], 1, 2);
        let p = nid("10.0.0.1@tcp");
        let (mut held, mut waiting) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            match pools.reserve(p, 0) {
                Reservation::Granted(t, m) => held.push((t, m.freeze())),
                Reservation::Waiting(w) => waiting.push(w),
                Reservation::Refused(e) => panic!("{e}"),
            }
        }
        assert_eq!((held.len(), waiting.len()), (2, 3), "two credits");
        assert_eq!(state(&pools, p), (-3, [6, 8, 8]));
        pools.release_all_with(held);
        let mut again = Vec::new();
        for w in waiting.iter_mut().take(2) {
            let t = w.try_recv().expect("granted").expect("a buffer");
            again.push((t, Bytes::new()));
        }
        let last = waiting.last_mut().expect("three waited");
        assert!(
            last.try_recv().is_err(),
            "the third waits for a third credit"
        );
        assert_eq!(state(&pools, p), (-1, [6, 8, 8]));
        pools.release_all_with(again);
        let t = last.try_recv().expect("granted").expect("a buffer");
        assert_eq!(state(&pools, p), (1, [7, 8, 8]));
        pools.release_all_with(vec![(t, Bytes::new())]);
        assert_eq!(state(&pools, p), (2, [8, 8, 8]));
    }

    /// The credits of peer NI `peer` and the free buffers of each pool.
    fn state(pools: &RouterPools, peer: Nid) -> (i32, [i32; 3]) {
        let view = pools.show();
        let credits = view
            .peers
            .iter()
            .find(|(n, _)| *n == peer)
            .map_or(i32::MIN, |(_, c)| c.credits);
        let [t, s, l] = view.cpts[0];
        (credits, [t.credits, s.credits, l.credits])
    }

    /// A buffer held for a message being read is taken by that message once, whichever
    /// way it was granted; those of a peer that went away go back to the pools and to
    /// its credits, and only its own.
    #[test]
    fn buffers_held_for_messages_being_read_are_taken_once_or_given_back_with_the_peer() {
        let pools = RouterPools::new([8, 8, 1], 1, 8);
        let (ni, other_ni) = (nid("10.0.0.9@tcp"), nid("10.0.1.9@tcp1"));
        let (a, b) = (nid("10.0.0.1@tcp"), nid("10.0.0.2@tcp"));
        let idle = state(&pools, a);
        // Nothing held: a message for this node.
        assert!(pools.take_held(ni, a, 0).is_none());

        granted(pools.reserve_held(ni, a, 0));
        granted(pools.reserve_held(ni, a, 0));
        let t = pools.take_held(ni, a, 0).expect("held");
        assert_eq!(
            t.grant,
            Grant {
                peer: a,
                pool: PoolKind::Tiny
            }
        );
        // Held on another NI, or for another pool: not this message's.
        assert!(pools.take_held(other_ni, a, 0).is_none());
        assert!(pools.take_held(ni, a, 100).is_none());
        pools.release(t);
        assert!(pools.take_held(ni, a, 0).is_some_and(|t| {
            pools.release(t);
            true
        }));
        assert!(pools.take_held(ni, a, 0).is_none());
        assert_eq!(state(&pools, a).1, idle.1);

        // One held by a, one by b, the large pool's only buffer held by a, and b waiting
        // for it: a goes away.
        granted(pools.reserve_held(ni, a, 100));
        granted(pools.reserve_held(ni, b, 100));
        granted(pools.reserve_held(ni, a, 1 << 20));
        let Reservation::Waiting(mut answer) = pools.reserve_held(ni, b, 1 << 20) else {
            panic!("the one large buffer is held: b waits");
        };
        pools.release_held(ni, a);
        assert_eq!(state(&pools, a).0, 8, "a's credits all back");
        assert!(pools.take_held(ni, a, 100).is_none());
        // b's wait is over: it holds the large buffer once told so, and its small one
        // is still held.
        let t = answer.try_recv().expect("granted").expect("a buffer");
        pools.hold(ni, &t);
        let large = pools
            .take_held(ni, b, 1 << 20)
            .expect("held after the wait");
        let small = pools.take_held(ni, b, 100).expect("still held");
        pools.release(large);
        pools.release(small);
        assert_eq!(state(&pools, b).0, 8);
        assert_eq!(state(&pools, a).1, idle.1);
    }
}
