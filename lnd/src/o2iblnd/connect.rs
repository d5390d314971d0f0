//! The o2iblnd connection handshake as plain decisions (protocol reference §1.8, §1.9).
//!
//! * [`check_connreq`]: what the passive side does with a CONNREQ, in the kernel's order of
//!   checks: accept with a CONNACK, or refuse with a `kib_rej`.
//! * [`check_connack`]: whether the CONNACK an active side got on ESTABLISHED is acceptable.
//! * [`on_reject`]: what the active side does with a reject: reconnect with adjusted
//!   parameters, wait for the peer's own connection, or give up.
//!
//! No verbs, no clock: the driver passes in what it knows about the peer.

use lnet::Nid;

use super::wire::{
    race_loser, Body, ConnParams, KibMsg, MsgError, Rej, RejParams, RejWhy, Version,
    IBLND_MAX_RDMA_FRAGS, IBLND_MSG_SIZE, MAX_CONN_RACES_BEFORE_ABORT,
};

/// What the passive NI knows about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalNi {
    /// The NI's NID.
    pub nid: Nid,
    /// The NI's incarnation.
    pub incarnation: u64,
    /// `peer_credits`: the largest queue depth it accepts.
    pub peer_credits: u16,
}

impl LocalNi {
    /// The reject this NI sends for `why`, with its incarnation and the connection
    /// parameters it accepts, as the kernel fills every reject of a passive connect.
    pub fn rej(&self, version: Version, why: RejWhy) -> Rej {
        Rej {
            magic: Default::default(),
            version,
            why,
            params: Some(RejParams {
                incarnation: self.incarnation,
                connparams: ConnParams {
                    queue_depth: self.peer_credits,
                    max_frags: IBLND_MAX_RDMA_FRAGS,
                    max_msg_size: u32::try_from(IBLND_MSG_SIZE).unwrap_or(u32::MAX),
                },
            }),
        }
    }
}

/// What the passive NI knows about the requesting peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerView {
    /// This side is itself connecting to the requester right now.
    pub connecting: bool,
    /// CONN_RACE rejects already sent to this peer.
    pub races: u32,
    /// The peer's incarnation and version from an earlier connection, if any.
    pub known: Option<(u64, Version)>,
}

/// Why a CONNREQ was refused (for logs and counters); the reject carries the `why`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefuseReason {
    /// The private data does not unpack (short, bad magic, unknown version, bad body).
    Unpack(MsgError),
    /// It is not a CONNREQ.
    NotConnReq,
    /// Addressed to another NID.
    WrongNid {
        /// The `dstnid` it named.
        dstnid: Nid,
    },
    /// It names an older incarnation of this NI.
    StaleDstStamp {
        /// The `dststamp` it carried.
        dststamp: u64,
    },
    /// The peer restarted (new incarnation or version): its old connections are closed.
    PeerRestarted,
    /// Its queue depth is larger than this NI's `peer_credits`.
    QueueDepth {
        /// What it asked for.
        asked: u16,
    },
    /// Its `max_frags` is not 257.
    MaxFrags {
        /// What it asked for.
        asked: u16,
    },
    /// Its `max_msg_size` is larger than 4096.
    MaxMsgSize {
        /// What it asked for.
        asked: u32,
    },
    /// Connection race lost (the requester's nidhash is the smaller one).
    Race,
}

/// The passive side's answer to a CONNREQ.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PassiveDecision {
    /// Accept: build the connection with `params` and pass `connack` to `rdma_accept`.
    Accept {
        /// The requesting peer.
        peer: Nid,
        /// The requester's incarnation.
        peer_stamp: u64,
        /// The version, the requester's.
        version: Version,
        /// The connection's queue depth and max_frags (the requester's).
        params: ConnParams,
        /// The CONNACK to send as private data.
        connack: KibMsg,
    },
    /// Refuse with this reject.
    Reject {
        /// The reject to send.
        rej: Rej,
        /// The requester, when the CONNREQ unpacked.
        peer: Option<Nid>,
        /// Its incarnation, when the CONNREQ unpacked.
        peer_stamp: Option<u64>,
        /// Why.
        reason: RefuseReason,
    },
}

/// Checks a CONNREQ as the kernel's `kiblnd_passive_connect` does, in the same order.
pub fn check_connreq(
    private_data: &[u8],
    me: &LocalNi,
    peer: impl Fn(Nid) -> PeerView,
) -> PassiveDecision {
    let msg = match KibMsg::unpack(private_data) {
        Ok(u) => u.msg,
        Err(e) => {
            // A future "unified" magic or an unknown version: FATAL with our version.
            return PassiveDecision::Reject {
                rej: me.rej(Version::V2, RejWhy::Fatal),
                peer: None,
                peer_stamp: None,
                reason: RefuseReason::Unpack(e),
            };
        }
    };
    let version = msg.version;
    let reject = |why: RejWhy, reason: RefuseReason| PassiveDecision::Reject {
        rej: me.rej(version, why),
        peer: Some(msg.srcnid),
        peer_stamp: Some(msg.srcstamp),
        reason,
    };
    if msg.dstnid != me.nid {
        return reject(RejWhy::Fatal, RefuseReason::WrongNid { dstnid: msg.dstnid });
    }
    if msg.dststamp != 0 && msg.dststamp != me.incarnation {
        return reject(
            RejWhy::ConnStale,
            RefuseReason::StaleDstStamp {
                dststamp: msg.dststamp,
            },
        );
    }
    let Body::ConnReq(cp) = msg.body else {
        return reject(RejWhy::Fatal, RefuseReason::NotConnReq);
    };
    let max_depth = if version == Version::V1 {
        8
    } else {
        me.peer_credits
    };
    if cp.queue_depth > max_depth || cp.queue_depth == 0 {
        let why = if version == Version::V1 {
            RejWhy::Fatal
        } else {
            RejWhy::MsgQueueSize
        };
        return reject(
            why,
            RefuseReason::QueueDepth {
                asked: cp.queue_depth,
            },
        );
    }
    if cp.max_frags != IBLND_MAX_RDMA_FRAGS {
        // Larger than 257, or smaller with no FastReg pool to split transfers.
        return reject(
            RejWhy::RdmaFrags,
            RefuseReason::MaxFrags {
                asked: cp.max_frags,
            },
        );
    }
    if usize::try_from(cp.max_msg_size).map_or(true, |s| s > IBLND_MSG_SIZE) {
        return reject(
            RejWhy::Fatal,
            RefuseReason::MaxMsgSize {
                asked: cp.max_msg_size,
            },
        );
    }
    let view = peer(msg.srcnid);
    if let Some((stamp, v)) = view.known {
        if stamp != msg.srcstamp || v != version {
            return reject(RejWhy::ConnStale, RefuseReason::PeerRestarted);
        }
    }
    if view.connecting && race_loser(msg.srcnid, me.nid) && view.races < MAX_CONN_RACES_BEFORE_ABORT
    {
        return reject(RejWhy::ConnRace, RefuseReason::Race);
    }
    let params = ConnParams {
        queue_depth: cp.queue_depth,
        max_frags: cp.max_frags,
        max_msg_size: u32::try_from(IBLND_MSG_SIZE).unwrap_or(u32::MAX),
    };
    PassiveDecision::Accept {
        peer: msg.srcnid,
        peer_stamp: msg.srcstamp,
        version,
        params,
        connack: KibMsg {
            version,
            credits: 0,
            srcnid: me.nid,
            srcstamp: me.incarnation,
            dstnid: msg.srcnid,
            dststamp: msg.srcstamp,
            body: Body::ConnAck(params),
        },
    }
}

/// The CONNREQ an active side sends.
pub fn connreq(
    me: &LocalNi,
    peer: Nid,
    peer_stamp: u64,
    version: Version,
    params: ConnParams,
) -> KibMsg {
    KibMsg {
        version,
        credits: 0,
        srcnid: me.nid,
        srcstamp: me.incarnation,
        dstnid: peer,
        dststamp: peer_stamp,
        body: Body::ConnReq(params),
    }
}

/// Why a CONNACK was not acceptable: the connection is torn down at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnAckError {
    /// The private data does not unpack.
    #[error("CONNACK does not unpack: {0}")]
    Unpack(MsgError),
    /// Not a CONNACK.
    #[error("expected CONNACK, got {got:?}")]
    NotConnAck {
        /// What came.
        got: super::wire::MsgType,
    },
    /// Another version than the one requested.
    #[error("CONNACK version {got:?}, requested {sent:?}")]
    Version {
        /// Requested.
        sent: Version,
        /// Answered.
        got: Version,
    },
    /// Parameters larger than offered.
    #[error("CONNACK parameters {got:?} exceed the offer {offered:?}")]
    Params {
        /// Offered.
        offered: ConnParams,
        /// Answered.
        got: ConnParams,
    },
    /// Addressed to another NI or another incarnation of it.
    #[error("CONNACK addressed to {dstnid} stamp {dststamp}")]
    NotForUs {
        /// Its `dstnid`.
        dstnid: Nid,
        /// Its `dststamp`.
        dststamp: u64,
    },
    /// From another NID than the one connected to.
    #[error("CONNACK from {got}, connected to {expected}")]
    WrongPeer {
        /// Connected to.
        expected: Nid,
        /// Its `srcnid`.
        got: Nid,
    },
}

/// An accepted CONNACK: what the connection takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// The peer's incarnation (its `srcstamp`).
    pub peer_stamp: u64,
    /// Queue depth and max_frags of the connection.
    pub params: ConnParams,
}

/// Checks the CONNACK of an ESTABLISHED event (§1.8 active side, step 4).
pub fn check_connack(
    private_data: &[u8],
    me: &LocalNi,
    peer: Nid,
    sent: Version,
    offered: ConnParams,
) -> Result<Accepted, ConnAckError> {
    let msg = KibMsg::unpack(private_data)
        .map_err(ConnAckError::Unpack)?
        .msg;
    let Body::ConnAck(cp) = msg.body else {
        return Err(ConnAckError::NotConnAck {
            got: msg.msg_type(),
        });
    };
    if msg.version != sent {
        return Err(ConnAckError::Version {
            sent,
            got: msg.version,
        });
    }
    if cp.queue_depth > offered.queue_depth
        || cp.queue_depth == 0
        || cp.max_frags > offered.max_frags
        || usize::try_from(cp.max_msg_size).map_or(true, |s| s > IBLND_MSG_SIZE)
    {
        return Err(ConnAckError::Params { offered, got: cp });
    }
    if msg.dstnid != me.nid || msg.dststamp != me.incarnation {
        return Err(ConnAckError::NotForUs {
            dstnid: msg.dstnid,
            dststamp: msg.dststamp,
        });
    }
    if msg.srcnid != peer {
        return Err(ConnAckError::WrongPeer {
            expected: peer,
            got: msg.srcnid,
        });
    }
    Ok(Accepted {
        peer_stamp: msg.srcstamp,
        params: cp,
    })
}

/// What the active side does after a reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RejectAction {
    /// Connect again at once with these parameters.
    Reconnect {
        /// Version to request.
        version: Version,
        /// Parameters to offer.
        params: ConnParams,
        /// `dststamp` to send.
        peer_stamp: u64,
    },
    /// Lost a connection race: the peer's own connection will carry the traffic; try
    /// again later if it does not come.
    Later,
    /// Give up: fail what waits for the connection.
    GiveUp,
}

/// The active side's reaction to a reject (§1.9 table), given what it requested.
/// `rej` is `None` when the private data was not a `kib_rej` (the kernel gives up).
pub fn on_reject(
    rej: Option<&Rej>,
    sent: Version,
    offered: ConnParams,
    peer_stamp: u64,
) -> RejectAction {
    let Some(rej) = rej else {
        return RejectAction::GiveUp;
    };
    let why = rej.effective_why(sent);
    let theirs = rej.params.map(|p| p.connparams);
    match why {
        RejWhy::ConnRace => RejectAction::Later,
        RejWhy::ConnUncompat if rej.version != sent => RejectAction::Reconnect {
            version: rej.version,
            params: if rej.version == Version::V1 {
                ConnParams {
                    queue_depth: 8,
                    ..offered
                }
            } else {
                offered
            },
            peer_stamp,
        },
        RejWhy::ConnStale => RejectAction::Reconnect {
            version: sent,
            params: offered,
            peer_stamp: rej.params.map_or(peer_stamp, |p| p.incarnation),
        },
        RejWhy::MsgQueueSize => match theirs {
            Some(t) if t.queue_depth > 0 && offered.queue_depth > t.queue_depth => {
                RejectAction::Reconnect {
                    version: sent,
                    params: ConnParams {
                        queue_depth: t.queue_depth,
                        ..offered
                    },
                    peer_stamp,
                }
            }
            _ => RejectAction::GiveUp,
        },
        RejWhy::RdmaFrags => match theirs {
            Some(t) if t.max_frags > 0 && offered.max_frags > t.max_frags => {
                RejectAction::Reconnect {
                    version: sent,
                    params: ConnParams {
                        max_frags: t.max_frags,
                        ..offered
                    },
                    peer_stamp,
                }
            }
            _ => RejectAction::GiveUp,
        },
        _ => RejectAction::GiveUp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lnet::{LndType, Net};
    use std::net::Ipv4Addr;

    fn o2ib(ip: [u8; 4]) -> Nid {
        Nid::from_ipv4(Net::new(LndType::O2IBLND, 0), Ipv4Addr::from(ip))
    }

    fn me() -> LocalNi {
        LocalNi {
            nid: o2ib([10, 0, 0, 2]),
            incarnation: 0x600d,
            peer_credits: 8,
        }
    }

    fn req(version: Version, qd: u16, dststamp: u64) -> Vec<u8> {
        let a = LocalNi {
            nid: o2ib([10, 0, 0, 1]),
            incarnation: 0xa,
            peer_credits: 8,
        };
        let mut m = connreq(
            &a,
            me().nid,
            dststamp,
            version,
            ConnParams {
                queue_depth: qd,
                ..ConnParams::DEFAULT
            },
        )
        .encode()
        .unwrap();
        if version == Version::V1 {
            m[4] = 0x11;
        }
        m
    }

    fn why(d: PassiveDecision) -> RejWhy {
        match d {
            PassiveDecision::Reject { rej, .. } => rej.why,
            PassiveDecision::Accept { .. } => panic!("accepted"),
        }
    }

    #[test]
    fn accepts_a_good_connreq_and_echoes_the_stamp() {
        let d = check_connreq(&req(Version::V2, 8, 0), &me(), |_| PeerView::default());
        let PassiveDecision::Accept {
            connack,
            params,
            peer_stamp,
            ..
        } = d
        else {
            panic!("refused")
        };
        assert_eq!(peer_stamp, 0xa);
        assert_eq!(params, ConnParams::DEFAULT);
        assert_eq!(connack.dststamp, 0xa);
        assert_eq!(connack.encode().unwrap().len(), 56);
    }

    #[test]
    fn refuses_in_the_kernel_order() {
        let mut bad_version = req(Version::V2, 8, 0);
        bad_version[4] = 0x13;
        let d = check_connreq(&bad_version, &me(), |_| PeerView::default());
        let PassiveDecision::Reject { rej, .. } = d else {
            panic!()
        };
        assert_eq!((rej.why, rej.version), (RejWhy::Fatal, Version::V2));
        assert_eq!(
            why(check_connreq(&req(Version::V2, 9, 0), &me(), |_| {
                PeerView::default()
            })),
            RejWhy::MsgQueueSize
        );
        assert_eq!(
            why(check_connreq(&req(Version::V2, 8, 77), &me(), |_| {
                PeerView::default()
            })),
            RejWhy::ConnStale
        );
        assert_eq!(
            why(check_connreq(&req(Version::V2, 8, 0), &me(), |_| {
                PeerView {
                    known: Some((0xb, Version::V2)),
                    ..Default::default()
                }
            })),
            RejWhy::ConnStale
        );
        // 10.0.0.1 has the smaller nidhash: it loses the race against 10.0.0.2, 20 times.
        let racing = |races| PeerView {
            connecting: true,
            races,
            known: None,
        };
        assert_eq!(
            why(check_connreq(&req(Version::V2, 8, 0), &me(), |_| racing(0))),
            RejWhy::ConnRace
        );
        assert!(matches!(
            check_connreq(&req(Version::V2, 8, 0), &me(), |_| racing(20)),
            PassiveDecision::Accept { .. }
        ));
    }

    #[test]
    fn the_active_side_adjusts_or_gives_up() {
        let me = me();
        let rej = |why, version| Rej {
            magic: Default::default(),
            version,
            why,
            params: me.rej(version, why).params,
        };
        let big = ConnParams {
            queue_depth: 16,
            ..ConnParams::DEFAULT
        };
        assert_eq!(
            on_reject(
                Some(&rej(RejWhy::MsgQueueSize, Version::V2)),
                Version::V2,
                big,
                0
            ),
            RejectAction::Reconnect {
                version: Version::V2,
                params: ConnParams::DEFAULT,
                peer_stamp: 0
            }
        );
        assert_eq!(
            on_reject(
                Some(&rej(RejWhy::MsgQueueSize, Version::V2)),
                Version::V2,
                ConnParams::DEFAULT,
                0
            ),
            RejectAction::GiveUp
        );
        assert_eq!(
            on_reject(
                Some(&rej(RejWhy::ConnStale, Version::V2)),
                Version::V2,
                big,
                0
            ),
            RejectAction::Reconnect {
                version: Version::V2,
                params: big,
                peer_stamp: 0x600d
            }
        );
        // FATAL from a v1 peer means: retry with v1.
        let v1 = Rej {
            magic: Default::default(),
            version: Version::V1,
            why: RejWhy::Fatal,
            params: None,
        };
        assert!(matches!(
            on_reject(Some(&v1), Version::V2, ConnParams::DEFAULT, 0),
            RejectAction::Reconnect {
                version: Version::V1,
                ..
            }
        ));
        assert_eq!(
            on_reject(
                Some(&rej(RejWhy::ConnRace, Version::V2)),
                Version::V2,
                big,
                0
            ),
            RejectAction::Later
        );
        assert_eq!(
            on_reject(Some(&rej(RejWhy::Fatal, Version::V2)), Version::V2, big, 0),
            RejectAction::GiveUp
        );
        assert_eq!(on_reject(None, Version::V2, big, 0), RejectAction::GiveUp);
    }

    #[test]
    fn a_connack_must_match_what_was_asked() {
        let a = LocalNi {
            nid: o2ib([10, 0, 0, 1]),
            incarnation: 0xa,
            peer_credits: 8,
        };
        let d = check_connreq(&req(Version::V2, 8, 0), &me(), |_| PeerView::default());
        let PassiveDecision::Accept { connack, .. } = d else {
            panic!()
        };
        let bytes = connack.encode().unwrap();
        let ok = check_connack(&bytes, &a, me().nid, Version::V2, ConnParams::DEFAULT).unwrap();
        assert_eq!(ok.peer_stamp, 0x600d);
        assert!(matches!(
            check_connack(&bytes, &a, me().nid, Version::V1, ConnParams::DEFAULT),
            Err(ConnAckError::Version { .. })
        ));
        let small = ConnParams {
            queue_depth: 4,
            ..ConnParams::DEFAULT
        };
        assert!(matches!(
            check_connack(&bytes, &a, me().nid, Version::V2, small),
            Err(ConnAckError::Params { .. })
        ));
        let other = LocalNi {
            incarnation: 0xb,
            ..a
        };
        assert!(matches!(
            check_connack(&bytes, &other, me().nid, Version::V2, ConnParams::DEFAULT),
            Err(ConnAckError::NotForUs { .. })
        ));
    }
}
