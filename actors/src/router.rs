//! The router actor: the router buffers of a forwarding node and the credits that guard
//! them (reference: core 5.2, 5.3).
//!
//! When a message for another node arrives, the LND hands its header up first; the
//! [`crate::NodeHandler`] asks this actor for a buffer ([`Reserve`]) before the payload is
//! read. The answer comes when a peer router-buffer credit and a buffer of the right pool
//! are free: until then the connection reads nothing more, so the sender feels
//! back-pressure and nothing is dropped. The LNet actor then picks the next hop and
//! sends the message on; when that send is over it gives the buffer back ([`Release`]),
//! and the next waiting message gets it.
//!
//! Pools are sized per CPT as the kernel sizes them ([`lnet::rtrbuf::per_cpt`]); a message
//! uses the pools of the CPT its sending peer NI hashes to.

use actix::prelude::*;
use lnet::rtrbuf::{BufferError, Grant, PeerRtrCredits, PoolStats, Requested, RouterBuffers};
use lnet::Nid;
use tokio::sync::oneshot;

/// A buffer held by a message being forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    cpt: usize,
    grant: Grant<Nid>,
}

/// Ask for a buffer for `len` payload bytes from peer NI `peer`; answered once there is
/// one (or at once, with an error, when the payload is too large for any).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Reserve {
    /// The peer NI that sent the message (on this hop).
    pub peer: Nid,
    /// The payload length.
    pub len: u32,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Result<Ticket, BufferError>>,
}

/// A forwarded message is done with its buffer.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Release(pub Ticket);

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

/// The router buffers of a node, one set of pools per CPT.
pub struct RouterActor {
    cpts: Vec<RouterBuffers<Nid, Waiter>>,
}

impl std::fmt::Debug for RouterActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterActor")
            .field("cpts", &self.cpts.len())
            .finish()
    }
}

impl RouterActor {
    /// Pools of `per_cpt` buffers (tiny, small, large) on each of `ncpts` CPTs, and
    /// `peer_credits` router-buffer credits per peer NI.
    pub fn new(per_cpt: [u32; 3], ncpts: usize, peer_credits: u32) -> RouterActor {
        RouterActor {
            cpts: (0..ncpts.max(1))
                .map(|_| RouterBuffers::new(per_cpt, peer_credits))
                .collect(),
        }
    }

    fn cpt_of(&self, peer: &Nid) -> usize {
        let n = self.cpts.len().max(1);
        usize::try_from(peer.nidhash()).unwrap_or(0) % n
    }

    /// Hands out what `release` freed; a waiter that went away gives its buffer back at
    /// once.
    fn grant_all(&mut self, cpt: usize, mut granted: Vec<(Waiter, Grant<Nid>)>) {
        while let Some((waiter, grant)) = granted.pop() {
            let ticket = Ticket { cpt, grant };
            if let Err(Ok(back)) = waiter.send(Ok(ticket)) {
                if let Some(b) = self.cpts.get_mut(cpt) {
                    granted.extend(b.release(back.grant));
                }
            }
        }
    }
}

impl Actor for RouterActor {
    type Context = Context<Self>;
}

impl Handler<Reserve> for RouterActor {
    type Result = ();

    fn handle(&mut self, m: Reserve, _ctx: &mut Context<Self>) {
        let cpt = self.cpt_of(&m.peer);
        let Some(b) = self.cpts.get_mut(cpt) else {
            return;
        };
        match b.request(m.peer, m.len, m.reply) {
            Requested::Granted(waiter, grant) => self.grant_all(cpt, vec![(waiter, grant)]),
            Requested::Waiting => {}
            Requested::Refused(waiter, e) => {
                let _ = waiter.send(Err(e));
            }
        }
    }
}

impl Handler<Release> for RouterActor {
    type Result = ();

    fn handle(&mut self, Release(ticket): Release, _ctx: &mut Context<Self>) {
        let cpt = ticket.cpt;
        let Some(b) = self.cpts.get_mut(cpt) else {
            return;
        };
        let granted = b.release(ticket.grant);
        self.grant_all(cpt, granted);
    }
}

impl Handler<ShowBuffers> for RouterActor {
    type Result = MessageResult<ShowBuffers>;

    fn handle(&mut self, _: ShowBuffers, _ctx: &mut Context<Self>) -> MessageResult<ShowBuffers> {
        let cpts = self
            .cpts
            .iter()
            .map(|b| {
                let mut pools = b.pools();
                let mut next = || {
                    pools.next().unwrap_or(PoolStats {
                        npages: 0,
                        nbuffers: 0,
                        credits: 0,
                        mincredits: 0,
                    })
                };
                [next(), next(), next()]
            })
            .collect();
        let mut peers: Vec<(Nid, PeerRtrCredits)> = Vec::new();
        for b in &self.cpts {
            peers.extend(b.peers().map(|(n, c)| (*n, c)));
        }
        peers.sort_by_key(|(n, _)| *n);
        let waiting = self.cpts.iter().map(|b| b.waiting()).sum();
        MessageResult(RoutingView {
            cpts,
            peers,
            waiting,
        })
    }
}
