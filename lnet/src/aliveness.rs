//! Peer NI aliveness on a router: whether a message this node forwards may go to the
//! next hop's peer NI, as the kernel of lnetctl 2.17 decides it before it charges any
//! credit (lib-move.c `lnet_check_message_drop`, with `lnet_peer_aliveness_enabled` and
//! `lnet_is_peer_ni_alive`).
//!
//! The rule is on for a peer NI while this node routes and the `peer_timeout` tunable of
//! the peer NI's net is above 0 (the LNDs' default is [`DEFAULT_PEER_TIMEOUT`]; 0 turns
//! it off). Then a forwarded message whose target pid does not carry the userspace flag
//! is dropped with `EHOSTUNREACH` when the peer NI's cached NI status is not UP. The
//! status is UP until the LND reports the peer NI gone (the kernel's `lnet_notify` with
//! `auto_down`) or its peer's ping info or push gives it DOWN, and UP again as soon as
//! anything is received from it. This node's own messages (pings, discovery, ACKs and
//! REPLYs it answers with) always go: the rule is for forwarded traffic only, so that a
//! router frees its buffers and credits for the peers that are there.
//!
//! Since 2.16 (LU-17855) `peer_timeout` only turns the rule on: the kernel of 2.15 also
//! waited until `last_alive + peer_timeout` had passed, and let responses, resends and
//! recovery pings through, which the kernel of 2.17 no longer does (it forwards the same
//! message once; resends are the originator's).

use crate::nid::PID_USERFLAG;

/// `peer_timeout` of a socklnd or o2iblnd net configured without one, seconds (the
/// LNDs' `DEFAULT_PEER_TIMEOUT`).
pub const DEFAULT_PEER_TIMEOUT: u32 = 180;

/// `EHOSTUNREACH`, the error a message dropped by the rule is finalized with.
pub const EHOSTUNREACH: i32 = 113;

/// Whether the rule applies to the peer NIs of a net whose `peer_timeout` is
/// `peer_timeout`, on a node that routes (`routing`) or not.
pub const fn enabled(routing: bool, peer_timeout: u32) -> bool {
    routing && peer_timeout > 0
}

/// A message about to go to a peer NI, as the rule reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outgoing {
    /// This node forwards it (its source and destination are other nodes).
    pub forwarded: bool,
    /// The pid of its target (the header's destination pid).
    pub target_pid: u32,
}

/// A message the rule drops: its next hop is not alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("peer NI not alive")]
pub struct PeerNotAlive;

impl PeerNotAlive {
    /// The negative errno the message is finalized with (`-EHOSTUNREACH`).
    pub const fn errno(self) -> i32 {
        -EHOSTUNREACH
    }
}

/// The rule: whether `msg` may go to a peer NI whose cached NI status is UP
/// (`status_up`) or not, on a node that routes (`routing`) or not, the peer NI's net
/// having `peer_timeout`.
pub fn check(
    routing: bool,
    peer_timeout: u32,
    msg: Outgoing,
    status_up: bool,
) -> Result<(), PeerNotAlive> {
    if msg.target_pid & PID_USERFLAG != 0 || !enabled(routing, peer_timeout) || !msg.forwarded {
        return Ok(());
    }
    if status_up {
        Ok(())
    } else {
        Err(PeerNotAlive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORWARDED: Outgoing = Outgoing {
        forwarded: true,
        target_pid: 12345,
    };

    #[test]
    fn a_forwarded_message_to_a_peer_ni_not_up_is_dropped_with_ehostunreach() {
        let e = check(true, 180, FORWARDED, false);
        assert_eq!(e, Err(PeerNotAlive));
        assert_eq!(PeerNotAlive.errno(), -113);
    }

    #[test]
    fn a_forwarded_message_to_a_peer_ni_up_goes() {
        assert_eq!(check(true, 180, FORWARDED, true), Ok(()));
        assert_eq!(check(true, 1, FORWARDED, true), Ok(()));
    }

    #[test]
    fn peer_timeout_zero_turns_the_rule_off() {
        assert!(!enabled(true, 0));
        assert_eq!(check(true, 0, FORWARDED, false), Ok(()));
    }

    #[test]
    fn a_node_that_does_not_route_applies_no_rule() {
        assert!(!enabled(false, 180));
        assert_eq!(check(false, 180, FORWARDED, false), Ok(()));
    }

    #[test]
    fn this_nodes_own_messages_always_go() {
        let own = Outgoing {
            forwarded: false,
            ..FORWARDED
        };
        assert_eq!(check(true, 180, own, false), Ok(()));
    }

    #[test]
    fn a_userspace_target_pid_is_exempt() {
        let user = Outgoing {
            target_pid: PID_USERFLAG | 7,
            ..FORWARDED
        };
        assert_eq!(check(true, 180, user, false), Ok(()));
    }

    #[test]
    fn the_rule_is_on_from_one_second_up() {
        assert!(enabled(true, 1));
        assert!(enabled(true, DEFAULT_PEER_TIMEOUT));
        assert_eq!(check(true, u32::MAX, FORWARDED, false), Err(PeerNotAlive));
    }
}
