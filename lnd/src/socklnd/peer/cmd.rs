//! The commands other tasks send to a peer task.

use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::socklnd::conn::end::ConnEnd;
use crate::socklnd::handshake::PassiveDecision;
use crate::socklnd::stats::PeerStats;
use crate::socklnd::wire::{ByteOrder, ConnType, Hello};

/// What the other tasks tell a peer task.
pub(crate) enum PeerCmd {
    /// A valid HELLO request arrived: decide (and reserve a slot if accepted).
    Offer {
        hello: Hello,
        loopback: bool,
        reply: oneshot::Sender<PassiveDecision>,
    },
    /// The accepted connection's reply went out: start using it.
    Attach {
        stream: TcpStream,
        hello: Hello,
        order: ByteOrder,
        ctype: ConnType,
    },
    /// The accepted connection's reply could not be written: release its slot.
    Withdraw { ctype: ConnType },
    /// A connection ended.
    Closed { conn: u64, end: ConnEnd },
    /// A frame asking for zero-copy was received whole: acknowledge its cookie.
    ZcAck { cookie: u64 },
    /// Report the peer's state.
    Stats { reply: oneshot::Sender<PeerStats> },
}
