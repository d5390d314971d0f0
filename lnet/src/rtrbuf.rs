//! Router buffers and the credits that guard them (reference: core 5.2 and 5.3).
//!
//! A message being forwarded needs, in this order, one router-buffer credit of the peer NI
//! it came from (`lpni_rtrcredits`) and one buffer of the smallest pool that holds its
//! payload (tiny: 0 bytes, small: one page, large: up to 1 MiB). When either is out, the
//! message waits in a queue (of that peer, or of that pool) and nothing more is read from
//! its connection: the sender feels it as back-pressure. Nothing is dropped. When a
//! forwarded message is done its buffer and its credit go back, and the head of the
//! matching queue is served.
//!
//! [`RouterBuffers`] is that bookkeeping for one CPT, with the caller's token for each
//! waiting message. Credits go negative while messages wait and each pool and peer keeps
//! its low-water mark (`mincredits`), as `lnetctl routing show` and `peer show` print
//! them.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use std::hash::Hash;

use crate::header::LNET_MTU;

/// The page size buffers are counted in.
pub const PAGE_SIZE: u32 = 4096;

/// Default tiny buffers, over all CPTs.
pub const TINY_DEFAULT: u32 = 2048;
/// Default small buffers, over all CPTs.
pub const SMALL_DEFAULT: u32 = 16384;
/// Default large buffers, over all CPTs.
pub const LARGE_DEFAULT: u32 = 1024;

/// One of the three pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PoolKind {
    /// Payloads of 0 bytes.
    Tiny,
    /// Payloads of 1 byte to one page.
    Small,
    /// Payloads above one page, up to [`LNET_MTU`].
    Large,
}

impl PoolKind {
    /// All three, in `routing show` order.
    pub const ALL: [PoolKind; 3] = [PoolKind::Tiny, PoolKind::Small, PoolKind::Large];

    /// Pages per buffer (`npages`).
    pub const fn npages(self) -> u32 {
        match self {
            PoolKind::Tiny => 0,
            PoolKind::Small => 1,
            PoolKind::Large => LNET_MTU / PAGE_SIZE,
        }
    }

    /// The smallest pool whose buffers hold `len` bytes; `None` above [`LNET_MTU`].
    pub const fn for_payload(len: u32) -> Option<PoolKind> {
        if len == 0 {
            Some(PoolKind::Tiny)
        } else if len <= PAGE_SIZE {
            Some(PoolKind::Small)
        } else if len <= LNET_MTU {
            Some(PoolKind::Large)
        } else {
            None
        }
    }

    const fn index(self) -> usize {
        match self {
            PoolKind::Tiny => 0,
            PoolKind::Small => 1,
            PoolKind::Large => 2,
        }
    }
}

/// Buffers per CPT of each pool, from the configured totals (`tiny_buffers` ...; 0 means
/// the default) divided over `ncpts` CPTs, at least one each.
pub fn per_cpt(configured: [u32; 3], ncpts: u32) -> [u32; 3] {
    let defaults = [TINY_DEFAULT, SMALL_DEFAULT, LARGE_DEFAULT];
    let n = ncpts.max(1);
    let mut out = [1; 3];
    for ((o, c), d) in out.iter_mut().zip(configured).zip(defaults) {
        let total = if c == 0 { d } else { c };
        *o = (total / n).max(1);
    }
    out
}

/// One pool's numbers, as `routing show` prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Pages per buffer.
    pub npages: u32,
    /// Buffers in the pool.
    pub nbuffers: u32,
    /// Free buffers now; negative: that many messages wait.
    pub credits: i32,
    /// The lowest `credits` seen.
    pub mincredits: i32,
}

/// A peer NI's router-buffer credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerRtrCredits {
    /// Credits when idle.
    pub max: u32,
    /// Credits now; negative: that many messages wait.
    pub credits: i32,
    /// The lowest `credits` seen.
    pub mincredits: i32,
}

/// A buffer given to a message: which pool, and which peer's credit it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant<P> {
    /// The peer NI that sent the message.
    pub peer: P,
    /// The pool the buffer comes from.
    pub pool: PoolKind,
}

/// Why a message cannot have a buffer at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BufferError {
    /// The payload is larger than the largest buffer.
    #[error("payload of {len} bytes exceeds the largest router buffer")]
    TooLarge {
        /// The payload length.
        len: u32,
    },
}

/// The answer to [`RouterBuffers::request`].
#[derive(Debug, PartialEq, Eq)]
pub enum Requested<T, P> {
    /// A buffer now (no token was made).
    Granted(Grant<P>),
    /// The message waits for a credit or a buffer.
    Waiting,
    /// No buffer can hold it.
    Refused(T, BufferError),
}

struct Pool<P, T> {
    stats: PoolStats,
    /// The size asked for: while `stats.nbuffers` is above it, a buffer that comes back
    /// is taken out of the pool instead of being used again.
    target: u32,
    waiting: VecDeque<(T, P)>,
}

struct PeerState<T> {
    credits: PeerRtrCredits,
    waiting: VecDeque<(T, PoolKind)>,
}

/// The router buffers of one CPT and the router-buffer credits of the peer NIs that send
/// through it. `P` names a peer NI, `T` a waiting message.
pub struct RouterBuffers<P, T> {
    pools: [Pool<P, T>; 3],
    peers: FxHashMap<P, PeerState<T>>,
    peer_credits: u32,
}

impl<P: std::fmt::Debug, T> std::fmt::Debug for RouterBuffers<P, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterBuffers")
            .field(
                "pools",
                &self.pools.iter().map(|p| p.stats).collect::<Vec<_>>(),
            )
            .field("peers", &self.peers.len())
            .finish()
    }
}

impl<P: Clone + Eq + Hash, T> RouterBuffers<P, T> {
    /// Pools of `sizes` buffers (tiny, small, large), and `peer_credits` router-buffer
    /// credits for each peer NI (the NI's `peer_buffer_credits`, else its `peer_credits`).
    pub fn new(sizes: [u32; 3], peer_credits: u32) -> RouterBuffers<P, T> {
        let pool = |kind: PoolKind, n: u32| {
            let credits = i32::try_from(n).unwrap_or(i32::MAX);
            Pool {
                stats: PoolStats {
                    npages: kind.npages(),
                    nbuffers: n,
                    credits,
                    mincredits: credits,
                },
                target: n,
                waiting: VecDeque::new(),
            }
        };
        let [t, s, l] = sizes;
        RouterBuffers {
            pools: [
                pool(PoolKind::Tiny, t),
                pool(PoolKind::Small, s),
                pool(PoolKind::Large, l),
            ],
            peers: FxHashMap::default(),
            peer_credits: peer_credits.max(1),
        }
    }

    fn pool_mut(&mut self, kind: PoolKind) -> &mut Pool<P, T> {
        pool_in(&mut self.pools, kind)
    }

    /// The pools' numbers, tiny, small, large.
    pub fn pools(&self) -> impl Iterator<Item = PoolStats> + '_ {
        self.pools.iter().map(|p| p.stats)
    }

    /// A peer NI's router-buffer credits, if it ever sent through here.
    pub fn peer(&self, peer: &P) -> Option<PeerRtrCredits> {
        self.peers.get(peer).map(|p| p.credits)
    }

    /// Every peer NI's router-buffer credits.
    pub fn peers(&self) -> impl Iterator<Item = (&P, PeerRtrCredits)> + '_ {
        self.peers.iter().map(|(p, s)| (p, s.credits))
    }

    /// Messages waiting for a credit or a buffer.
    pub fn waiting(&self) -> usize {
        self.pools.iter().map(|p| p.waiting.len()).sum::<usize>()
            + self.peers.values().map(|p| p.waiting.len()).sum::<usize>()
    }

    /// A message of `len` payload bytes from `peer` wants a buffer: it gets one now, or
    /// waits (its token comes back from [`Self::release`] when it has one), or is refused.
    pub fn request(&mut self, peer: P, len: u32, token: T) -> Requested<T, P> {
        self.request_with_credits(peer, self.peer_credits, len, || token)
    }

    /// The router-buffer credits a peer NI gets when its net sets none.
    pub fn default_peer_credits(&self) -> u32 {
        self.peer_credits
    }

    /// [`Self::request`] from a peer NI whose net gives its peers `credits` router-buffer
    /// credits (its `peer_buffer_credits`, else its `peer_credits`), rather than the
    /// default of these buffers; they are set when the peer NI first sends. The token is
    /// made (`token()`) only when the message must wait or is refused: a grant needs none.
    pub fn request_with_credits(
        &mut self,
        peer: P,
        credits: u32,
        len: u32,
        token: impl FnOnce() -> T,
    ) -> Requested<T, P> {
        let Some(pool) = PoolKind::for_payload(len) else {
            return Requested::Refused(token(), BufferError::TooLarge { len });
        };
        let state = peer_state(&mut self.peers, &peer, credits);
        let c = &mut state.credits;
        c.credits = c.credits.saturating_sub(1);
        c.mincredits = c.mincredits.min(c.credits);
        if c.credits < 0 {
            state.waiting.push_back((token(), pool));
            return Requested::Waiting;
        }
        if self.take_buffer(pool) {
            return Requested::Granted(Grant { peer, pool });
        }
        self.pool_mut(pool).waiting.push_back((token(), peer));
        Requested::Waiting
    }

    /// [`Self::request_with_credits`] only if it is granted at once: `None` leaves the
    /// pools and the peer's credits as they were, but for their low-water marks, which
    /// count the wait the message has now (a caller that can free what it waits for, by
    /// finishing sends of its own, asks again; else it requests, and waits in turn).
    pub fn request_now_with_credits(
        &mut self,
        peer: P,
        credits: u32,
        len: u32,
        token: impl FnOnce() -> T,
    ) -> Option<Requested<T, P>> {
        let Some(pool) = PoolKind::for_payload(len) else {
            return Some(Requested::Refused(token(), BufferError::TooLarge { len }));
        };
        let state = peer_state(&mut self.peers, &peer, credits);
        let c = &mut state.credits;
        let after = c.credits.saturating_sub(1);
        c.mincredits = c.mincredits.min(after);
        if after < 0 {
            return None;
        }
        let s = &mut pool_in(&mut self.pools, pool).stats;
        let left = s.credits.saturating_sub(1);
        s.mincredits = s.mincredits.min(left);
        if left < 0 {
            return None;
        }
        c.credits = after;
        s.credits = left;
        Some(Requested::Granted(Grant { peer, pool }))
    }

    /// The peer credit is held: takes a buffer of pool `kind` (true), or counts one more
    /// waiter, which the caller queues on the pool (false).
    fn take_buffer(&mut self, kind: PoolKind) -> bool {
        take_buffer_in(&mut self.pools, kind)
    }

    /// Resizes the pools to `sizes` buffers (tiny, small, large), as `lnetctl set
    /// tiny_buffers` ... does on a running router: a pool that grows gives its new
    /// buffers to the messages waiting for one first; a pool that shrinks takes its free
    /// buffers out at once and the others as they come back, so that nothing in flight is
    /// lost. Returns the waiting messages that now have a buffer, in order.
    pub fn resize(&mut self, sizes: [u32; 3]) -> Vec<(T, Grant<P>)> {
        let mut granted = Vec::new();
        for (kind, n) in [PoolKind::Tiny, PoolKind::Small, PoolKind::Large]
            .into_iter()
            .zip(sizes)
        {
            let pool = self.pool_mut(kind);
            pool.target = n;
            while pool.stats.nbuffers < n {
                pool.stats.nbuffers += 1;
                pool.stats.credits = pool.stats.credits.saturating_add(1);
                if pool.stats.credits <= 0 {
                    if let Some((token, peer)) = pool.waiting.pop_front() {
                        granted.push((token, Grant { peer, pool: kind }));
                    }
                }
            }
            while pool.stats.nbuffers > n && pool.stats.credits > 0 {
                pool.stats.nbuffers -= 1;
                pool.stats.credits -= 1;
            }
        }
        granted
    }

    /// A forwarded message is done with its buffer: the buffer and the peer's credit go
    /// back. Returns the waiting messages that now have a buffer, in the order they
    /// should proceed.
    pub fn release(&mut self, grant: Grant<P>) -> Vec<(T, Grant<P>)> {
        self.release_n(grant, 1)
    }

    /// [`RouterBuffers::release`] of `n` buffers alike (one peer, one pool), one after
    /// the other, the peer looked up once: the waiting messages that now have a buffer,
    /// in order.
    pub fn release_n(&mut self, grant: Grant<P>, n: u32) -> Vec<(T, Grant<P>)> {
        let mut granted = Vec::new();
        let RouterBuffers { pools, peers, .. } = self;
        let mut peer = peers.get_mut(&grant.peer);
        for _ in 0..n {
            // The buffer first: a message queued on this pool already holds its peer
            // credit.
            let pool = pool_in(pools, grant.pool);
            let back = if pool.stats.nbuffers > pool.target {
                // The pool is shrinking: this buffer leaves it.
                pool.stats.nbuffers -= 1;
                false
            } else {
                pool.stats.credits = pool.stats.credits.saturating_add(1);
                true
            };
            if back && pool.stats.credits <= 0 {
                if let Some((token, peer)) = pool.waiting.pop_front() {
                    granted.push((
                        token,
                        Grant {
                            peer,
                            pool: grant.pool,
                        },
                    ));
                }
            }
            // Then the peer's credit: the head of its queue goes on to take a buffer.
            let next = match peer.as_deref_mut() {
                Some(state) => {
                    state.credits.credits = state.credits.credits.saturating_add(1);
                    if state.credits.credits <= 0 {
                        state.waiting.pop_front()
                    } else {
                        None
                    }
                }
                None => None,
            };
            if let Some((token, kind)) = next {
                if take_buffer_in(pools, kind) {
                    granted.push((
                        token,
                        Grant {
                            peer: grant.peer.clone(),
                            pool: kind,
                        },
                    ));
                } else {
                    pool_in(pools, kind)
                        .waiting
                        .push_back((token, grant.peer.clone()));
                }
            }
        }
        granted
    }
}

/// The router-buffer credits of `peer`, given `credits` when it first sends.
fn peer_state<'a, P: Clone + Eq + Hash, T>(
    peers: &'a mut FxHashMap<P, PeerState<T>>,
    peer: &P,
    credits: u32,
) -> &'a mut PeerState<T> {
    peers.entry(peer.clone()).or_insert_with(|| {
        let max = credits.max(1);
        let c = i32::try_from(max).unwrap_or(i32::MAX);
        PeerState {
            credits: PeerRtrCredits {
                max,
                credits: c,
                mincredits: c,
            },
            waiting: VecDeque::new(),
        }
    })
}

/// The pool of `kind` among `pools` (tiny, small, large).
fn pool_in<P, T>(pools: &mut [Pool<P, T>; 3], kind: PoolKind) -> &mut Pool<P, T> {
    let [t, s, l] = pools;
    match kind.index() {
        0 => t,
        1 => s,
        _ => l,
    }
}

/// The peer credit is held: takes a buffer of pool `kind` among `pools` (true), or
/// counts one more waiter, which the caller queues on the pool (false).
fn take_buffer_in<P, T>(pools: &mut [Pool<P, T>; 3], kind: PoolKind) -> bool {
    let s = &mut pool_in(pools, kind).stats;
    s.credits = s.credits.saturating_sub(1);
    s.mincredits = s.mincredits.min(s.credits);
    s.credits >= 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn releasing_buffers_alike_at_once_is_releasing_them_one_by_one(
            asks in proptest::collection::vec(
                (0u8..3, prop_oneof![Just(0u32), Just(4096), Just(8192)]),
                1..40,
            ),
            sizes in (1u32..6, 1u32..6, 1u32..6),
            credits in 1u32..5,
            n in 1u32..8,
        ) {
            // The same requests on two sets of pools: some granted, the rest waiting on
            // a peer's credits or on a pool.
            let build = || {
                let mut b: RouterBuffers<u8, usize> =
                    RouterBuffers::new([sizes.0, sizes.1, sizes.2], credits);
                let mut grants = Vec::new();
                for (i, (peer, len)) in asks.iter().enumerate() {
                    if let Requested::Granted(g) = b.request(*peer, *len, i) {
                        grants.push(g);
                    }
                }
                (b, grants)
            };
            let (mut at_once, grants) = build();
            let (mut by_one, _) = build();
            let Some(g) = grants.first().cloned() else {
                return Ok(());
            };
            let held = grants.iter().filter(|x| **x == g).count();
            let n = n.min(u32::try_from(held).unwrap_or(u32::MAX));
            let granted = at_once.release_n(g.clone(), n);
            let mut one_by_one = Vec::new();
            for _ in 0..n {
                one_by_one.extend(by_one.release(g.clone()));
            }
            prop_assert_eq!(granted, one_by_one);
            prop_assert_eq!(
                at_once.pools().collect::<Vec<_>>(),
                by_one.pools().collect::<Vec<_>>()
            );
            for p in 0..3u8 {
                prop_assert_eq!(at_once.peer(&p), by_one.peer(&p));
            }
            prop_assert_eq!(at_once.waiting(), by_one.waiting());
        }
    }

    #[test]
    fn the_smallest_pool_that_holds_the_payload() {
        assert_eq!(PoolKind::for_payload(0), Some(PoolKind::Tiny));
        assert_eq!(PoolKind::for_payload(1), Some(PoolKind::Small));
        assert_eq!(PoolKind::for_payload(4096), Some(PoolKind::Small));
        assert_eq!(PoolKind::for_payload(4097), Some(PoolKind::Large));
        assert_eq!(PoolKind::for_payload(1 << 20), Some(PoolKind::Large));
        assert_eq!(PoolKind::for_payload((1 << 20) + 1), None);
        assert_eq!(PoolKind::Large.npages(), 256);
    }

    #[test]
    fn defaults_are_divided_over_cpts() {
        assert_eq!(per_cpt([0, 0, 0], 1), [2048, 16384, 1024]);
        assert_eq!(per_cpt([0, 0, 0], 2), [1024, 8192, 512]);
        assert_eq!(per_cpt([10, 0, 3], 4), [2, 4096, 1]);
        assert_eq!(per_cpt([0, 0, 0], 0), [2048, 16384, 1024]);
    }

    #[test]
    fn peer_credits_then_pool_credits_queue_and_resume_in_order() {
        // Two large buffers, two credits per peer.
        let mut b: RouterBuffers<&str, u32> = RouterBuffers::new([4, 4, 2], 2);
        let Requested::Granted(g1) = b.request("a", 8192, 1) else {
            panic!()
        };
        let Requested::Granted(g2) = b.request("a", 8192, 2) else {
            panic!()
        };
        // Peer a is out of credits: 3 waits on the peer.
        assert_eq!(b.request("a", 8192, 3), Requested::Waiting);
        // Peer b has credits but the pool is empty: 4 waits on the pool.
        assert_eq!(b.request("b", 8192, 4), Requested::Waiting);
        assert_eq!(b.waiting(), 2);
        let large = b.pools().nth(2).unwrap();
        assert_eq!((large.credits, large.mincredits), (-1, -1));
        assert_eq!(b.peer(&"a").unwrap().mincredits, -1);
        // a's first message is done: the pool serves b's message, then a's credit lets
        // message 3 queue on the pool.
        let next = b.release(g1);
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].0, 4);
        assert_eq!(b.waiting(), 1);
        let next = b.release(g2);
        assert_eq!(next.iter().map(|(t, _)| *t).collect::<Vec<_>>(), vec![3]);
        assert_eq!(b.waiting(), 0);
        for (_, g) in [
            next,
            b.release(Grant {
                peer: "b",
                pool: PoolKind::Large,
            }),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        {
            b.release(g);
        }
        let large = b.pools().nth(2).unwrap();
        assert_eq!((large.credits, large.mincredits), (2, -1));
        assert_eq!(b.peer(&"a").unwrap().credits, 2);
    }

    #[test]
    fn a_request_made_now_is_granted_or_queues_nothing_but_counts_the_wait() {
        // Two large buffers, two credits per peer.
        let mut b: RouterBuffers<&str, u32> = RouterBuffers::new([4, 4, 2], 2);
        let Some(Requested::Granted(g1)) = b.request_now_with_credits("a", 2, 8192, || 1) else {
            panic!()
        };
        let Some(Requested::Granted(_)) = b.request_now_with_credits("a", 2, 8192, || 2) else {
            panic!()
        };
        // Peer a is out of credits: nothing queued, its credits as they were, the wait
        // counted in its low-water mark as a queued message would be.
        assert_eq!(b.request_now_with_credits("a", 2, 8192, || 3), None);
        assert_eq!(b.waiting(), 0);
        let a = b.peer(&"a").unwrap();
        assert_eq!((a.credits, a.mincredits), (0, -1));
        // Peer b has credits, the pool has no buffer: b's credit is not taken.
        assert_eq!(b.request_now_with_credits("b", 2, 8192, || 4), None);
        assert_eq!(b.peer(&"b").unwrap().credits, 2);
        let large = b.pools().nth(2).unwrap();
        assert_eq!((large.credits, large.mincredits), (0, -1));
        // A buffer back: granted now, as a request would be.
        assert!(b.release(g1).is_empty());
        assert!(matches!(
            b.request_now_with_credits("b", 2, 8192, || 5),
            Some(Requested::Granted(Grant { peer: "b", .. }))
        ));
        // Too large for any pool: refused, no credit taken.
        assert!(matches!(
            b.request_now_with_credits("c", 2, u32::MAX, || 6),
            Some(Requested::Refused(6, BufferError::TooLarge { .. }))
        ));
    }

    proptest! {
        /// A request made now is granted exactly when its peer has a credit and its pool
        /// a buffer, queues nothing, and leaves credits that count what is held.
        #[test]
        fn a_request_made_now_is_granted_when_a_credit_and_a_buffer_are_free(
            asks in proptest::collection::vec(
                (0u8..3, prop_oneof![Just(0u32), Just(4096), Just(8192)], any::<bool>()),
                1..60,
            ),
        ) {
            let mut b: RouterBuffers<u8, u32> = RouterBuffers::new([2, 2, 2], 2);
            let mut held: Vec<Grant<u8>> = Vec::new();
            for (peer, len, release) in asks {
                let by_peer = held.iter().filter(|g| g.peer == peer).count();
                let pool = PoolKind::for_payload(len).unwrap();
                let by_pool = held.iter().filter(|g| g.pool == pool).count();
                match b.request_now_with_credits(peer, 2, len, || 0) {
                    Some(Requested::Granted(g)) => {
                        prop_assert!(by_peer < 2 && by_pool < 2);
                        held.push(g);
                    }
                    None => prop_assert!(by_peer == 2 || by_pool == 2),
                    other => prop_assert!(false, "{:?}", other),
                }
                prop_assert_eq!(b.waiting(), 0);
                if release && !held.is_empty() {
                    let g = held.remove(0);
                    prop_assert!(b.release(g).is_empty());
                }
                for (kind, stats) in [PoolKind::Tiny, PoolKind::Small, PoolKind::Large].into_iter().zip(b.pools()) {
                    let n = held.iter().filter(|g| g.pool == kind).count();
                    prop_assert_eq!(i64::from(stats.credits), 2 - n as i64);
                }
                for p in 0u8..3 {
                    if let Some(c) = b.peer(&p) {
                        let n = held.iter().filter(|g| g.peer == p).count();
                        prop_assert_eq!(i64::from(c.credits), 2 - n as i64);
                    }
                }
            }
        }
    }

    #[test]
    fn a_pool_resized_live_grows_for_the_waiting_first_and_shrinks_as_buffers_come_back() {
        let mut b: RouterBuffers<u8, u32> = RouterBuffers::new([1, 1, 2], 8);
        fn large(b: &RouterBuffers<u8, u32>) -> (u32, i32) {
            let p = b.pools().nth(2).unwrap();
            (p.nbuffers, p.credits)
        }
        fn take(b: &mut RouterBuffers<u8, u32>, t: u32) -> Option<Grant<u8>> {
            match b.request(7, 8192, t) {
                Requested::Granted(g) => Some(g),
                Requested::Waiting => None,
                Requested::Refused(..) => panic!("refused"),
            }
        }
        let g1 = take(&mut b, 1).unwrap();
        let g2 = take(&mut b, 2).unwrap();
        assert!(take(&mut b, 3).is_none());
        assert!(take(&mut b, 4).is_none());
        assert_eq!(large(&b), (2, -2));
        // Three more buffers: the two waiting messages get two of them, one stays free.
        let got = b.resize([1, 1, 5]);
        assert_eq!(got.iter().map(|(t, _)| *t).collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!(large(&b), (5, 1));
        // Down to two: the free one leaves at once, the rest as they come back.
        assert!(b.resize([1, 1, 2]).is_empty());
        assert_eq!(large(&b), (4, 0));
        assert!(take(&mut b, 5).is_none(), "no buffer free");
        assert_eq!(large(&b), (4, -1));
        assert!(b.release(g1).is_empty(), "leaves the pool: 5 still waits");
        assert_eq!(large(&b), (3, -1));
        assert!(b.release(g2).is_empty());
        assert_eq!(large(&b), (2, -1));
        // At its size again: the next buffer back goes to message 5.
        let [(_, g3), (_, g4)] = <[_; 2]>::try_from(got).unwrap();
        let next = b.release(g3);
        assert_eq!(next.iter().map(|(t, _)| *t).collect::<Vec<_>>(), vec![5]);
        assert_eq!(large(&b), (2, 0));
        for (_, g) in next {
            b.release(g);
        }
        b.release(g4);
        assert_eq!(large(&b), (2, 2), "every buffer back, none lost");
        assert_eq!(b.peer(&7).unwrap().credits, 8);
    }

    #[test]
    fn oversize_payloads_are_refused_without_taking_credits() {
        let mut b: RouterBuffers<u8, ()> = RouterBuffers::new([1, 1, 1], 1);
        assert_eq!(
            b.request(1, (1 << 20) + 1, ()),
            Requested::Refused((), BufferError::TooLarge { len: (1 << 20) + 1 })
        );
        assert_eq!(b.peer(&1), None);
        assert!(matches!(b.request(1, 0, ()), Requested::Granted(..)));
    }
}
