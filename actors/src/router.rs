//! The router buffers of a forwarding node and the credits that guard them (reference:
//! core 5.2, 5.3): [`RouterPools`], one set of pools per CPT, each behind a short lock of
//! its own, charged in place by the receiving path; and the router actor that owns them.
//!
//! When a message for another node arrives, the LND hands its header up first; the
//! [`crate::NodeHandler`] reserves a buffer ([`RouterPools::reserve`]) before the payload
//! is read. When no peer router-buffer credit or no buffer of the right pool is free, the
//! reservation waits: the connection reads nothing more, so the sender feels
//! back-pressure and nothing is dropped. When the send to the next hop is over the buffer
//! is given back ([`RouterPools::release`]) and the oldest waiting reservation of that
//! CPT gets it.
//!
//! Pools are sized per CPT as the kernel sizes them ([`lnet::rtrbuf::per_cpt`]); a message
//! uses the pools of the CPT its sending peer NI hashes to.

use actix::prelude::*;
use lnet::rtrbuf::{BufferError, Grant, PeerRtrCredits, PoolStats, Requested, RouterBuffers};
use lnet::{Net, Nid};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

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
    /// A buffer, now.
    Granted(Ticket),
    /// None free: the buffer comes on this channel when one is released.
    Waiting(oneshot::Receiver<Result<Ticket, BufferError>>),
    /// Never: the payload is too large for any pool.
    Refused(BufferError),
}

/// The router buffers of a node, one set of pools per CPT. See the module documentation.
pub struct RouterPools {
    cpts: Vec<Mutex<CptPools>>,
}

/// One CPT's pools, and the router-buffer credits the peer NIs of each local net get.
struct CptPools {
    buffers: RouterBuffers<Nid, Waiter>,
    net_credits: FxHashMap<Net, u32>,
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
        RouterPools {
            cpts: (0..ncpts.max(1))
                .map(|_| {
                    Mutex::new(CptPools {
                        buffers: RouterBuffers::new(per_cpt, peer_credits),
                        net_credits: FxHashMap::default(),
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

    /// The CPT whose pools serve messages from peer NI `peer`.
    pub fn cpt_of(&self, peer: &Nid) -> usize {
        let n = self.cpts.len().max(1);
        usize::try_from(peer.nidhash()).unwrap_or(0) % n
    }

    fn lock(&self, cpt: usize) -> Option<MutexGuard<'_, CptPools>> {
        self.cpts
            .get(cpt)
            .map(|m| m.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A buffer for `len` payload bytes from peer NI `peer`, charged to its router
    /// credits.
    pub fn reserve(&self, peer: Nid, len: u32) -> Reservation {
        let cpt = self.cpt_of(&peer);
        let (tx, rx) = oneshot::channel();
        let Some(mut b) = self.lock(cpt) else {
            return Reservation::Refused(BufferError::TooLarge { len });
        };
        let requested = match b.net_credits.get(&peer.net).copied() {
            Some(credits) => b.request_with_credits(peer, credits, len, tx),
            None => b.request(peer, len, tx),
        };
        match requested {
            Requested::Granted(_, grant) => Reservation::Granted(Ticket { cpt, grant }),
            Requested::Waiting => Reservation::Waiting(rx),
            Requested::Refused(_, e) => Reservation::Refused(e),
        }
    }

    /// Gives a buffer back; the oldest reservation waiting for it gets it (a waiter that
    /// went away gives it back at once).
    pub fn release(&self, ticket: Ticket) {
        let cpt = ticket.cpt;
        let Some(mut b) = self.lock(cpt) else {
            return;
        };
        let mut granted = b.release(ticket.grant);
        while let Some((waiter, grant)) = granted.pop() {
            if let Err(Ok(back)) = waiter.send(Ok(Ticket { cpt, grant })) {
                granted.extend(b.release(back.grant));
            }
        }
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
