//! The peer table: peers by primary NID, and which peer each peer NI belongs to.
//!
//! Every lookup by NID is a hash lookup, so that a node with many peers pays the same per
//! message as one with a few, and adding a peer costs in the number of its own NIDs.
//!
//! The LNet actor's side: [`PeerView`], adding a configured peer ([`AddPeer`]),
//! listing the peers, and the peer NI actors behind the peer NIs.

use std::collections::{BTreeMap, HashMap, HashSet};

use actix::prelude::*;
use lnet::{Features, Nid};

use super::error::{BadPeerReason, NodeError, PeerBusyReason};
use super::{LnetActor, PeerNiEntry};
use crate::ni::{PeerNiActor, PeerNiView};

/// One peer: a primary NID and its peer NIs.
#[derive(Debug)]
pub(super) struct Peer {
    pub(super) primary: Nid,
    pub(super) multi_rail: bool,
    pub(super) nids: Vec<Nid>,
    /// The NIDs its ping info (or push) last gave as DOWN.
    pub(super) down: HashSet<Nid>,
    /// Discovered as Multi-Rail and discovery-capable: this node pushes its ping info to
    /// it when the info changes.
    pub(super) push: bool,
    /// Added by the administrator (configuration, API), not only learned from traffic or
    /// discovery: another configured peer may not take its NIDs.
    pub(super) configured: bool,
    /// The features of the last ping info learned from it (a ping reply, a router
    /// check or a push): it was discovered. `None`: only known from traffic or
    /// configuration.
    pub(super) learned: Option<Features>,
}

/// Peers by primary NID, with an index from every peer NI to its peer.
#[derive(Debug, Default)]
pub(super) struct PeerTable {
    by_primary: BTreeMap<Nid, Peer>,
    primary_of: HashMap<Nid, Nid>,
}

impl PeerTable {
    /// The peer that has `nid` among its NIDs.
    pub(super) fn get(&self, nid: &Nid) -> Option<&Peer> {
        self.primary_of
            .get(nid)
            .and_then(|p| self.by_primary.get(p))
    }

    /// The peer whose primary NID is `primary`, to change.
    pub(super) fn by_primary_mut(&mut self, primary: &Nid) -> Option<&mut Peer> {
        self.by_primary.get_mut(primary)
    }

    /// Every peer, by primary NID.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Peer> {
        self.by_primary.values()
    }

    /// How many peers.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.by_primary.len()
    }

    /// Checks that a configured peer `primary` with `nids` takes no NID of another
    /// configured peer (seed 003 snd-065: the same NID under two peers is an error).
    pub(super) fn check_configured(&self, primary: Nid, nids: &[Nid]) -> Result<(), BadPeerReason> {
        for nid in std::iter::once(&primary).chain(nids) {
            if let Some(owner) = self.get(nid) {
                if owner.configured && owner.primary != primary {
                    return Err(BadPeerReason::NidTaken {
                        nid: *nid,
                        owner: owner.primary,
                    });
                }
            }
        }
        Ok(())
    }

    /// Makes `nids` one peer with primary `primary`: every peer that held one of them (or
    /// has `primary` as its primary) is replaced. A peer stays configured once it was.
    /// Returns the NIDs of the peers replaced.
    pub(super) fn set(
        &mut self,
        primary: Nid,
        nids: Vec<Nid>,
        multi_rail: bool,
        configured: bool,
    ) -> Vec<Nid> {
        let mut merged: HashSet<Nid> = HashSet::new();
        let mut was_configured = false;
        let mut learned = None;
        let mut replaced = Vec::new();
        for nid in std::iter::once(&primary).chain(&nids) {
            let Some(old) = self.primary_of.get(nid).copied() else {
                continue;
            };
            if merged.insert(old) {
                if let Some(p) = self.by_primary.remove(&old) {
                    was_configured |= p.configured;
                    for n in &p.nids {
                        self.primary_of.remove(n);
                    }
                    replaced.extend(p.nids);
                }
            }
        }
        if let Some(p) = self.by_primary.remove(&primary) {
            was_configured |= p.configured;
            learned = p.learned;
            for n in &p.nids {
                self.primary_of.remove(n);
            }
            replaced.extend(p.nids);
        }
        if nids.is_empty() {
            return replaced;
        }
        for n in &nids {
            self.primary_of.insert(*n, primary);
        }
        self.by_primary.insert(
            primary,
            Peer {
                primary,
                multi_rail,
                nids,
                down: HashSet::new(),
                push: false,
                configured: configured || was_configured,
                learned,
            },
        );
        replaced
    }
}

/// A peer as this node knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerView {
    /// Its primary NID.
    pub primary: Nid,
    /// Whether it is Multi-Rail.
    pub multi_rail: bool,
    /// Whether it was configured (file or API) rather than learnt.
    pub configured: bool,
    /// The features of the last ping info learned from it, if it was discovered (a ping
    /// reply, a router check or a push).
    pub learned: Option<Features>,
    /// Its peer NIs.
    pub nis: Vec<PeerNiView>,
    /// Its NIDs with their status as its ping info or its last push gave it (true: up;
    /// NIDs added by hand are up).
    pub nids: Vec<(Nid, bool)>,
}

#[derive(Message)]
#[rtype(result = "Result<(), NodeError>")]
pub(super) struct AddPeer {
    pub(super) primary: Nid,
    pub(super) nids: Vec<Nid>,
    pub(super) multi_rail: bool,
}

#[derive(Message)]
#[rtype(result = "Vec<PeerView>")]
pub(super) struct ListPeers;

impl LnetActor {
    pub(super) fn ensure_peer_ni(&mut self, nid: Nid) {
        if self.peer_nis.contains_key(&nid) {
            return;
        }
        let Some(recovery) = self.peer_recovery.clone() else {
            return;
        };
        let credits = self
            .net_credits
            .get(&nid.net)
            .map_or(self.config.peer_credits, |c| c.peer_credits);
        let (actor, view, cell) =
            PeerNiActor::new(nid, credits, self.clock, self.events.clone(), recovery);
        let addr = self.place(&nid, actor);
        self.peer_nis.insert(nid, PeerNiEntry { addr, view, cell });
    }

    /// Makes `nids` one peer (merging any peers that held one of them).
    pub(super) fn set_peer(
        &mut self,
        primary: Nid,
        nids: Vec<Nid>,
        multi_rail: bool,
        configured: bool,
    ) {
        let nids: Vec<Nid> = nids.into_iter().filter(|n| !self.is_local(n)).collect();
        for nid in &nids {
            self.ensure_peer_ni(*nid);
        }
        self.publish_peer_nis(&nids);
        let replaced = self.peers.set(primary, nids, multi_rail, configured);
        self.publish_mr_peer(primary, &replaced);
    }
}

/// Deletes a peer (`lnetctl peer del --prim_nid P`), or some of its NIDs (`--nid`).
#[derive(Message)]
#[rtype(result = "Result<(), NodeError>")]
pub(super) struct DelPeer {
    pub(super) primary: Nid,
    /// The NIDs to delete; empty: the whole peer.
    pub(super) nids: Vec<Nid>,
}

impl Handler<DelPeer> for LnetActor {
    type Result = Result<(), NodeError>;

    fn handle(&mut self, m: DelPeer, _ctx: &mut Context<Self>) -> Result<(), NodeError> {
        let Some((nids, multi_rail, configured)) = self
            .peers
            .by_primary_mut(&m.primary)
            .map(|p| (p.nids.clone(), p.multi_rail, p.configured))
        else {
            return Err(NodeError::NoSuchPeer { nid: m.primary });
        };
        let busy = |reason| NodeError::PeerBusy {
            nid: m.primary,
            reason,
        };
        let keep: Vec<Nid> = if m.nids.is_empty() {
            Vec::new()
        } else {
            if let Some(n) = m.nids.iter().find(|n| !nids.contains(n)) {
                return Err(NodeError::NoSuchPeerNi { nid: *n });
            }
            nids.iter()
                .filter(|n| !m.nids.contains(n))
                .copied()
                .collect()
        };
        if m.nids.contains(&m.primary) && !keep.is_empty() {
            return Err(busy(PeerBusyReason::PrimaryWithOthers));
        }
        if nids
            .iter()
            .any(|n| !keep.contains(n) && self.routes.is_gateway(n))
        {
            return Err(busy(PeerBusyReason::Gateway));
        }
        for gone in nids.iter().filter(|n| !keep.contains(n)) {
            self.path.remove_peer_ni(gone);
        }
        let replaced = self.peers.set(m.primary, keep, multi_rail, configured);
        self.publish_mr_peer(m.primary, &replaced);
        Ok(())
    }
}

impl Handler<AddPeer> for LnetActor {
    type Result = Result<(), NodeError>;

    fn handle(&mut self, m: AddPeer, _ctx: &mut Context<Self>) -> Result<(), NodeError> {
        if m.nids.is_empty() || m.nids.iter().any(|n| self.is_local(n)) {
            return Err(NodeError::BadPeer {
                reason: BadPeerReason::NoUsableNid,
            });
        }
        let mut nids = m.nids;
        if !nids.contains(&m.primary) {
            nids.insert(0, m.primary);
        }
        self.peers
            .check_configured(m.primary, &nids)
            .map_err(|reason| NodeError::BadPeer { reason })?;
        self.set_peer(m.primary, nids, m.multi_rail, true);
        Ok(())
    }
}

impl Handler<ListPeers> for LnetActor {
    type Result = MessageResult<ListPeers>;

    fn handle(&mut self, _: ListPeers, _ctx: &mut Context<Self>) -> MessageResult<ListPeers> {
        MessageResult(
            self.peers
                .iter()
                .map(|p| PeerView {
                    primary: p.primary,
                    multi_rail: p.multi_rail,
                    configured: p.configured,
                    learned: p.learned,
                    nids: p.nids.iter().map(|n| (*n, !p.down.contains(n))).collect(),
                    nis: p
                        .nids
                        .iter()
                        .filter_map(|n| self.peer_nis.get(n))
                        .map(|e| e.view.borrow().with_cell(&e.cell))
                        .collect(),
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nid(s: &str) -> Nid {
        s.parse().unwrap()
    }

    #[test]
    fn a_nid_finds_its_peer_and_merging_replaces_the_old_peers() {
        let mut t = PeerTable::default();
        t.set(nid("10.0.0.1@tcp"), vec![nid("10.0.0.1@tcp")], false, false);
        t.set(nid("10.0.0.2@tcp"), vec![nid("10.0.0.2@tcp")], false, false);
        assert_eq!(t.len(), 2);
        t.set(
            nid("10.0.0.1@tcp"),
            vec![
                nid("10.0.0.1@tcp"),
                nid("10.0.0.2@tcp"),
                nid("10.0.1.1@tcp1"),
            ],
            true,
            false,
        );
        assert_eq!(t.len(), 1);
        let p = t.get(&nid("10.0.1.1@tcp1")).unwrap();
        assert_eq!(p.primary, nid("10.0.0.1@tcp"));
        assert!(p.multi_rail);
        assert_eq!(p.nids.len(), 3);
    }

    #[test]
    fn snd_065_a_configured_peers_nid_cannot_go_to_another_configured_peer() {
        let mut t = PeerTable::default();
        t.set(
            nid("10.0.0.1@tcp"),
            vec![nid("10.0.0.1@tcp"), nid("10.0.0.9@tcp")],
            true,
            true,
        );
        // Learned peers may be taken over by a configured one ...
        t.set(nid("10.0.0.5@tcp"), vec![nid("10.0.0.5@tcp")], false, false);
        assert!(t
            .check_configured(nid("10.0.0.6@tcp"), &[nid("10.0.0.5@tcp")])
            .is_ok());
        // ... a configured peer's NIDs may not.
        assert_eq!(
            t.check_configured(nid("10.0.0.7@tcp"), &[nid("10.0.0.9@tcp")]),
            Err(BadPeerReason::NidTaken {
                nid: nid("10.0.0.9@tcp"),
                owner: nid("10.0.0.1@tcp"),
            })
        );
        // The same peer may be configured again with more NIDs.
        assert!(t
            .check_configured(
                nid("10.0.0.1@tcp"),
                &[nid("10.0.0.9@tcp"), nid("10.0.0.8@tcp")]
            )
            .is_ok());
    }

    #[test]
    fn a_configured_peer_stays_configured_when_discovery_rewrites_it() {
        let mut t = PeerTable::default();
        t.set(nid("10.0.0.1@tcp"), vec![nid("10.0.0.1@tcp")], false, true);
        t.set(
            nid("10.0.0.1@tcp"),
            vec![nid("10.0.0.1@tcp"), nid("10.0.0.2@tcp")],
            true,
            false,
        );
        assert!(t.get(&nid("10.0.0.2@tcp")).unwrap().configured);
    }
}
