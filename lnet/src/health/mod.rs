//! LNet health status of a message (`enum lnet_msg_hstatus`).
//!
//! Every send an LND completes carries one of these. What the upper layer does with it
//! (which NI loses health, which recovery queue it joins, whether the message may be
//! resent) comes from the health reference, part 2.2:
//!
//! | status | health charged to | resend |
//! |---|---|---|
//! | OK | nobody (health goes up) | — |
//! | LOCAL_INTERRUPT, LOCAL_DROPPED, LOCAL_ABORTED, LOCAL_NO_ROUTE, LOCAL_TIMEOUT | local NI | yes, if local resend is allowed |
//! | LOCAL_ERROR | local NI | no |
//! | REMOTE_DROPPED | peer NI | yes, if remote resend is allowed |
//! | REMOTE_ERROR, REMOTE_TIMEOUT | peer NI | no |
//! | NETWORK_TIMEOUT | peer NI and local NI | no |

pub mod check;
pub mod value;

pub use check::{health_check, HealthContext, HealthOutcome};
pub use value::{HealthValue, LNET_MAX_HEALTH_VALUE};

use std::fmt;

/// The health status of a message (`enum lnet_msg_hstatus`), with its wire/ABI value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum HealthStatus {
    /// 0: the message went through.
    Ok = 0,
    /// 1: interrupted locally.
    LocalInterrupt = 1,
    /// 2: dropped locally (e.g. a local connect failure).
    LocalDropped = 2,
    /// 3: aborted locally (e.g. the NI was stopped).
    LocalAborted = 3,
    /// 4: no route locally.
    LocalNoRoute = 4,
    /// 5: a local error that a resend would not cure.
    LocalError = 5,
    /// 6: timed out before it left this node.
    LocalTimeout = 6,
    /// 7: the peer reported an error.
    RemoteError = 7,
    /// 8: the peer dropped it (e.g. connection refused or reset).
    RemoteDropped = 8,
    /// 9: the peer did not answer in time.
    RemoteTimeout = 9,
    /// 10: timed out on the way: the network or the peer, nobody can tell.
    NetworkTimeout = 10,
}

/// Which NIs a status lowers the health of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Charge {
    /// The local NI the message used.
    pub local_ni: bool,
    /// The peer NI the message went to.
    pub peer_ni: bool,
}

impl HealthStatus {
    /// Every status, in value order.
    pub const ALL: [HealthStatus; 11] = [
        HealthStatus::Ok,
        HealthStatus::LocalInterrupt,
        HealthStatus::LocalDropped,
        HealthStatus::LocalAborted,
        HealthStatus::LocalNoRoute,
        HealthStatus::LocalError,
        HealthStatus::LocalTimeout,
        HealthStatus::RemoteError,
        HealthStatus::RemoteDropped,
        HealthStatus::RemoteTimeout,
        HealthStatus::NetworkTimeout,
    ];

    /// The numeric value (`LNET_MSG_STATUS_*`).
    pub const fn to_u32(self) -> u32 {
        self as u32
    }

    /// The status for a numeric value; `None` for `END` (11) and beyond.
    pub fn from_u32(value: u32) -> Option<HealthStatus> {
        HealthStatus::ALL.into_iter().find(|s| s.to_u32() == value)
    }

    /// Whether this is OK.
    pub const fn is_ok(self) -> bool {
        matches!(self, HealthStatus::Ok)
    }

    /// The NIs whose health this status lowers.
    pub const fn charge(self) -> Charge {
        use HealthStatus::*;
        match self {
            Ok => Charge {
                local_ni: false,
                peer_ni: false,
            },
            LocalInterrupt | LocalDropped | LocalAborted | LocalNoRoute | LocalError
            | LocalTimeout => Charge {
                local_ni: true,
                peer_ni: false,
            },
            RemoteError | RemoteDropped | RemoteTimeout => Charge {
                local_ni: false,
                peer_ni: true,
            },
            NetworkTimeout => Charge {
                local_ni: true,
                peer_ni: true,
            },
        }
    }

    /// Whether the message may be resent on another path (subject to the retry count and
    /// to the local/remote resend gates of the health reference).
    pub const fn resendable(self) -> bool {
        use HealthStatus::*;
        matches!(
            self,
            LocalInterrupt
                | LocalDropped
                | LocalAborted
                | LocalNoRoute
                | LocalTimeout
                | RemoteDropped
        )
    }

    /// The enumerator's name without its `LNET_MSG_STATUS_` prefix.
    pub const fn name(self) -> &'static str {
        use HealthStatus::*;
        match self {
            Ok => "OK",
            LocalInterrupt => "LOCAL_INTERRUPT",
            LocalDropped => "LOCAL_DROPPED",
            LocalAborted => "LOCAL_ABORTED",
            LocalNoRoute => "LOCAL_NO_ROUTE",
            LocalError => "LOCAL_ERROR",
            LocalTimeout => "LOCAL_TIMEOUT",
            RemoteError => "REMOTE_ERROR",
            RemoteDropped => "REMOTE_DROPPED",
            RemoteTimeout => "REMOTE_TIMEOUT",
            NetworkTimeout => "NETWORK_TIMEOUT",
        }
    }
}

impl fmt::Display for HealthStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_the_enum() {
        assert_eq!(HealthStatus::Ok.to_u32(), 0);
        assert_eq!(HealthStatus::LocalError.to_u32(), 5);
        assert_eq!(HealthStatus::LocalTimeout.to_u32(), 6);
        assert_eq!(HealthStatus::RemoteDropped.to_u32(), 8);
        assert_eq!(HealthStatus::NetworkTimeout.to_u32(), 10);
        for (i, s) in HealthStatus::ALL.into_iter().enumerate() {
            assert_eq!(s.to_u32() as usize, i);
            assert_eq!(HealthStatus::from_u32(s.to_u32()), Some(s));
        }
        assert_eq!(HealthStatus::from_u32(11), None);
        assert_eq!(HealthStatus::from_u32(u32::MAX), None);
    }

    #[test]
    fn charges_and_resends_follow_the_table() {
        use HealthStatus::*;
        assert_eq!(Ok.charge(), Charge::default());
        assert!(Ok.is_ok() && !Ok.resendable());
        for s in [
            LocalInterrupt,
            LocalDropped,
            LocalAborted,
            LocalNoRoute,
            LocalTimeout,
        ] {
            assert_eq!(
                s.charge(),
                Charge {
                    local_ni: true,
                    peer_ni: false
                }
            );
            assert!(s.resendable(), "{s}");
        }
        assert!(LocalError.charge().local_ni && !LocalError.resendable());
        assert!(RemoteDropped.charge().peer_ni && RemoteDropped.resendable());
        for s in [RemoteError, RemoteTimeout] {
            assert_eq!(
                s.charge(),
                Charge {
                    local_ni: false,
                    peer_ni: true
                }
            );
            assert!(!s.resendable());
        }
        assert_eq!(
            NetworkTimeout.charge(),
            Charge {
                local_ni: true,
                peer_ni: true
            }
        );
        assert!(!NetworkTimeout.resendable());
        assert_eq!(NetworkTimeout.to_string(), "NETWORK_TIMEOUT");
    }
}
