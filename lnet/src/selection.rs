//! Path selection (health reference 2.8, with the UDSP priorities of part 3): which local
//! NI, peer net, peer NI and route a message takes.
//!
//! Every step is a pure function over plain candidate structs that the caller fills in
//! from its live state. Each step compares candidates criterion by criterion; the first
//! criterion that differs decides, and on a full tie the candidate met first is kept (the
//! kernel's "a tie keeps the current best"). Round robin comes from the sequence numbers:
//! the candidate used longest ago has the lowest one (see [`advance_sequences`]).
//!
//! * Local NI ([`best_local_ni`], 2.8.1): not fatal, higher health, lower UDSP priority,
//!   lower device priority, lower NUMA distance (distances below `numa_range` count as
//!   equal unless the memory is on a GPU), more tx credits, lower sequence.
//! * Peer net of a Multi-Rail peer ([`best_peer_net`], 2.8.2).
//! * Peer NI ([`best_peer_ni`], 2.8.3): higher health, lower UDSP priority, preferred for
//!   the chosen local NI, more tx credits, lower sequence. NUMA plays no part.
//! * Remote peer net when routing ([`best_remote_peer_net`], 2.8.4).
//! * Route ([`best_route`], 2.8.5), over alive routes only.
//!
//! [`select_path`] chains them for a peer reachable on local nets: peer net, then local NI
//! on it, then peer NI on it.

use std::cmp::Ordering;

use crate::health::value::HealthValue;
use crate::nid::Net;

/// The "unset" selection priority (`LNET_MAX_SELECTION_PRIORITY`, shown as −1).
pub const LNET_MAX_SELECTION_PRIORITY: u32 = u32::MAX;

/// Picks the first candidate that no later one beats: `better(a, b)` is `Less` when `a`
/// should be preferred to `b`.
fn pick<'a, T>(
    candidates: impl IntoIterator<Item = &'a T>,
    mut better: impl FnMut(&T, &T) -> Ordering,
) -> Option<&'a T> {
    let mut best: Option<&'a T> = None;
    for c in candidates {
        best = match best {
            Some(b) if better(c, b) != Ordering::Less => Some(b),
            _ => Some(c),
        };
    }
    best
}

/// A local NI that could carry the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalNiCandidate<I> {
    /// The NI (normally its NID).
    pub id: I,
    /// Its net.
    pub net: Net,
    /// Whether its device reported a fatal error.
    pub fatal: bool,
    /// `ni_healthv`.
    pub health: HealthValue,
    /// `ni_sel_priority` (UDSP src NID rule); [`LNET_MAX_SELECTION_PRIORITY`] if unset.
    pub sel_priority: u32,
    /// The device priority for GPU memory; [`LNET_MAX_SELECTION_PRIORITY`] otherwise.
    pub dev_priority: u32,
    /// NUMA distance from the message memory's CPT to the NI's device CPT.
    pub numa_distance: u32,
    /// `ni_tx_credits` (negative when messages are queued).
    pub tx_credits: i32,
    /// `ni_seq`, the round-robin counter.
    pub seq: u64,
}

/// Settings for local NI selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LocalNiParams {
    /// `numa_range`: NUMA distances below it count as equal.
    pub numa_range: u32,
    /// Whether the message memory is GPU memory (then NUMA distances are compared as they
    /// are).
    pub gpu_memory: bool,
}

/// Compares two local NIs by 2.8.1; `Less` means `a` is better.
pub fn compare_local_ni<I>(
    a: &LocalNiCandidate<I>,
    b: &LocalNiCandidate<I>,
    params: LocalNiParams,
) -> Ordering {
    let distance = |c: &LocalNiCandidate<I>| {
        if params.gpu_memory {
            c.numa_distance
        } else {
            c.numa_distance.max(params.numa_range)
        }
    };
    a.fatal
        .cmp(&b.fatal)
        .then(b.health.cmp(&a.health))
        .then(a.sel_priority.cmp(&b.sel_priority))
        .then(a.dev_priority.cmp(&b.dev_priority))
        .then(distance(a).cmp(&distance(b)))
        .then(b.tx_credits.cmp(&a.tx_credits))
        .then(a.seq.cmp(&b.seq))
}

/// The best local NI (2.8.1), or `None` if there is no candidate.
pub fn best_local_ni<I>(
    candidates: &[LocalNiCandidate<I>],
    params: LocalNiParams,
) -> Option<&LocalNiCandidate<I>> {
    pick(candidates, |a, b| compare_local_ni(a, b, params))
}

/// A local net on which a Multi-Rail peer has NIs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerNetCandidate<I> {
    /// The net.
    pub id: I,
    /// `lpn_healthv`: the best health of the peer's NIs on it.
    pub peer_net_health: HealthValue,
    /// `lpn_sel_priority` (UDSP dst net rule).
    pub peer_net_sel_priority: u32,
    /// The best health of this node's non-fatal NIs on it.
    pub local_net_health: HealthValue,
    /// `net_sel_priority` (UDSP src net rule).
    pub local_net_sel_priority: u32,
    /// `lpn_seq`.
    pub peer_net_seq: u64,
    /// `net_seq`.
    pub local_net_seq: u64,
}

/// Compares two peer nets by 2.8.2; `Less` means `a` is better.
pub fn compare_peer_net<I>(a: &PeerNetCandidate<I>, b: &PeerNetCandidate<I>) -> Ordering {
    b.peer_net_health
        .cmp(&a.peer_net_health)
        .then(a.peer_net_sel_priority.cmp(&b.peer_net_sel_priority))
        .then(b.local_net_health.cmp(&a.local_net_health))
        .then(a.local_net_sel_priority.cmp(&b.local_net_sel_priority))
        .then(a.peer_net_seq.cmp(&b.peer_net_seq))
        .then(a.local_net_seq.cmp(&b.local_net_seq))
}

/// The best peer net (2.8.2).
pub fn best_peer_net<I>(candidates: &[PeerNetCandidate<I>]) -> Option<&PeerNetCandidate<I>> {
    pick(candidates, compare_peer_net)
}

/// A peer NI the message could go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerNiCandidate<I> {
    /// The peer NI (normally its NID).
    pub id: I,
    /// Its net.
    pub net: Net,
    /// `lpni_healthv`.
    pub health: HealthValue,
    /// `lpni_sel_priority` (UDSP dst NID rule).
    pub sel_priority: u32,
    /// `lpni_txcredits`.
    pub tx_credits: i32,
    /// `lpni_seq`.
    pub seq: u64,
}

/// Compares two peer NIs by 2.8.3, given whether each is preferred for the chosen local
/// NI; `Less` means `a` is better.
pub fn compare_peer_ni<I>(
    a: &PeerNiCandidate<I>,
    a_preferred: bool,
    b: &PeerNiCandidate<I>,
    b_preferred: bool,
) -> Ordering {
    b.health
        .cmp(&a.health)
        .then(a.sel_priority.cmp(&b.sel_priority))
        .then(b_preferred.cmp(&a_preferred))
        .then(b.tx_credits.cmp(&a.tx_credits))
        .then(a.seq.cmp(&b.seq))
}

/// The best peer NI (2.8.3). `is_preferred` tells whether the chosen local NI is on a peer
/// NI's preferred list (UDSP NID-pair rule, or a non-MR peer's preferred NID).
pub fn best_peer_ni<I>(
    candidates: &[PeerNiCandidate<I>],
    is_preferred: impl Fn(&PeerNiCandidate<I>) -> bool,
) -> Option<&PeerNiCandidate<I>> {
    pick(candidates, |a, b| {
        compare_peer_ni(a, is_preferred(a), b, is_preferred(b))
    })
}

/// A remote net of the destination peer, reached through routers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotePeerNetCandidate<I> {
    /// The net.
    pub id: I,
    /// `lpn_healthv`.
    pub health: HealthValue,
    /// `lpn_sel_priority`.
    pub sel_priority: u32,
    /// `lpn_seq`.
    pub seq: u64,
}

/// The best remote peer net (2.8.4): higher health, lower priority, lower sequence.
pub fn best_remote_peer_net<I>(
    candidates: &[RemotePeerNetCandidate<I>],
) -> Option<&RemotePeerNetCandidate<I>> {
    pick(candidates, |a, b| {
        b.health
            .cmp(&a.health)
            .then(a.sel_priority.cmp(&b.sel_priority))
            .then(a.seq.cmp(&b.seq))
    })
}

/// A route to the remote net.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteCandidate<I> {
    /// The route (normally its gateway's primary NID).
    pub id: I,
    /// Whether the route is alive (2.9). Dead routes are never chosen.
    pub alive: bool,
    /// Whether the gateway is on the destination peer NI's preferred-router list.
    pub preferred: bool,
    /// The route's `priority` (lower is better).
    pub priority: u32,
    /// Its hop count; `None` (undefined) counts as 1.
    pub hops: Option<u32>,
    /// Health of the gateway's best peer NI on the source net.
    pub gateway_health: HealthValue,
    /// Bytes queued to that gateway peer NI (`lpni_txqnob`).
    pub gateway_tx_queued_bytes: u64,
    /// Tx credits of that gateway peer NI.
    pub gateway_tx_credits: i32,
    /// `lr_seq`.
    pub seq: u64,
}

/// Compares two routes by 2.8.5; `Less` means `a` is better. Aliveness is not compared.
pub fn compare_route<I>(a: &RouteCandidate<I>, b: &RouteCandidate<I>) -> Ordering {
    let hops = |r: &RouteCandidate<I>| r.hops.unwrap_or(1);
    b.preferred
        .cmp(&a.preferred)
        .then(a.priority.cmp(&b.priority))
        .then(hops(a).cmp(&hops(b)))
        .then(b.gateway_health.cmp(&a.gateway_health))
        .then(a.gateway_tx_queued_bytes.cmp(&b.gateway_tx_queued_bytes))
        .then(b.gateway_tx_credits.cmp(&a.gateway_tx_credits))
        .then(a.seq.cmp(&b.seq))
}

/// The best alive route (2.8.5), or `None` if no route is alive.
pub fn best_route<I>(candidates: &[RouteCandidate<I>]) -> Option<&RouteCandidate<I>> {
    pick(candidates.iter().filter(|r| r.alive), compare_route)
}

/// The sequence number the chosen route gets: one more than the highest seen.
pub fn next_route_seq<I>(candidates: &[RouteCandidate<I>]) -> u64 {
    candidates
        .iter()
        .map(|r| r.seq)
        .max()
        .unwrap_or(0)
        .wrapping_add(1)
}

/// The round-robin counters after a send (2.8.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SendSequences {
    /// The peer's send counter, one up; also copied to the chosen peer net and peer NI.
    pub peer_seq: u64,
    /// The global net counter, one up; also copied to the chosen local net and NI.
    pub net_seq: u64,
}

/// Advances the peer's send counter and the global net counter after a send.
pub const fn advance_sequences(peer_seq: u64, net_seq: u64) -> SendSequences {
    SendSequences {
        peer_seq: peer_seq.wrapping_add(1),
        net_seq: net_seq.wrapping_add(1),
    }
}

/// Where a response (ACK or REPLY) goes: from the local NID the request was addressed to,
/// back to the NID the request came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponsePath<I> {
    /// The local NID to send from: the request's destination NID.
    pub local: I,
    /// The peer NID to send to: the request's source NID.
    pub peer: I,
}

/// The path of a response to a request that came from `request_src` to `request_dst`.
pub fn response_path<I: Clone>(request_src: &I, request_dst: &I) -> ResponsePath<I> {
    ResponsePath {
        local: request_dst.clone(),
        peer: request_src.clone(),
    }
}

/// A chosen path.
#[derive(Debug, PartialEq, Eq)]
pub struct Path<'a, L, P> {
    /// The local NI.
    pub local_ni: &'a LocalNiCandidate<L>,
    /// The peer NI, on the same net.
    pub peer_ni: &'a PeerNiCandidate<P>,
}

/// Chooses a local NI and a peer NI for a peer reachable on local nets: the best peer net
/// (among those with at least one candidate local NI and one candidate peer NI), then the
/// best local NI on it, then the best peer NI on it. `is_preferred(peer_ni, local_ni)`
/// tells whether that local NI is on the peer NI's preferred list.
pub fn select_path<'a, L, P>(
    nets: &[PeerNetCandidate<Net>],
    local_nis: &'a [LocalNiCandidate<L>],
    peer_nis: &'a [PeerNiCandidate<P>],
    params: LocalNiParams,
    is_preferred: impl Fn(&PeerNiCandidate<P>, &LocalNiCandidate<L>) -> bool,
) -> Option<Path<'a, L, P>> {
    let usable = nets.iter().filter(|n| {
        local_nis.iter().any(|l| l.net == n.id) && peer_nis.iter().any(|p| p.net == n.id)
    });
    let net = pick(usable, compare_peer_net)?.id;
    let local_ni = pick(local_nis.iter().filter(|l| l.net == net), |a, b| {
        compare_local_ni(a, b, params)
    })?;
    let peer_ni = pick(peer_nis.iter().filter(|p| p.net == net), |a, b| {
        compare_peer_ni(a, is_preferred(a, local_ni), b, is_preferred(b, local_ni))
    })?;
    Some(Path { local_ni, peer_ni })
}

#[cfg(test)]
mod tests;
