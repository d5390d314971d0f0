//! The interface every LND offers the layers above it (socklnd now; o2iblnd and the test
//! fabric later).
//!
//! * [`Lnd::start`] brings one NI up; [`Lnd::stop`] takes it down.
//! * [`Lnd::send`] queues one LNet message (header and payload) for a peer NID. Every
//!   message it accepts is finished exactly once with a [`TxCompletion`] carrying an LNet
//!   [`HealthStatus`] and the NI it charges, through [`LndHandler::on_send_complete`].
//! * Received messages come to the [`LndHandler`] in two steps: the header first
//!   ([`LndHandler::on_header`]), so the caller can decide where the payload goes (a router
//!   buffer, nowhere, or close the connection); the connection reads nothing more until
//!   that decision is made, which is how a lack of buffers becomes TCP back-pressure.
//!   Then the whole message ([`LndHandler::on_message`]).
//! * When a peer loses its last connection and the LND has nothing under way to reach it
//!   again, it says so once through [`LndHandler::on_peer_down`] (a default no-op), so that
//!   the layer above can mark the peer NI down (the kernel's `lnet_notify`).

use std::future::Future;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use lnet::health::HealthStatus;
use lnet::{Header, Nid, ProcessId};

use crate::counters::LndCounters;

/// The caller's name for one send; it comes back in the send's [`TxCompletion`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxId(pub u64);

/// One LNet message to send to a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxRequest {
    /// The caller's name for this send.
    pub id: TxId,
    /// The next hop: a peer NI on this NI's net (pid 12345). Not necessarily the header's
    /// `dest_nid`, which names the final destination.
    pub peer: Nid,
    /// The LNet header, sent as it is.
    pub header: Header,
    /// Exactly `header.payload_length` bytes.
    pub payload: Bytes,
}

/// How one send ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxCompletion {
    /// The send's name.
    pub id: TxId,
    /// The local NI the send used (the one a local status charges).
    pub ni: Nid,
    /// The peer NI it went to (the one a remote status charges).
    pub peer: Nid,
    /// The health status: [`HealthStatus::Ok`] once the whole frame was handed to the
    /// transport; see [`HealthStatus::charge`] for who pays otherwise.
    pub status: HealthStatus,
    /// Why it failed, for logs; `None` when OK.
    pub reason: Option<String>,
}

impl TxCompletion {
    /// The NIs whose health this completion lowers (see [`HealthStatus::charge`]): the
    /// local NI, the peer NI, both, or neither when OK.
    pub fn charged(&self) -> Charged {
        let charge = self.status.charge();
        Charged {
            local_ni: charge.local_ni.then_some(self.ni),
            peer_ni: charge.peer_ni.then_some(self.peer),
        }
    }
}

/// The NIs a failed send charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Charged {
    /// The local NI, if it pays.
    pub local_ni: Option<Nid>,
    /// The peer NI, if it pays.
    pub peer_ni: Option<Nid>,
}

/// An LNet header that arrived, before its payload is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxHeader {
    /// The local NI it arrived on.
    pub ni: Nid,
    /// The peer that sent it on this hop (not necessarily the header's `src_nid`).
    pub from: ProcessId,
    /// The header; it passed the receive checks every node applies
    /// ([`Header::check_lnet`]).
    pub header: Header,
}

/// What to do with the payload of a message whose header arrived.
#[derive(Debug)]
pub enum RxDecision {
    /// Read the payload into this buffer (cleared first and grown if it is too small),
    /// then call [`LndHandler::on_message`].
    Receive(BytesMut),
    /// Read the payload and throw it away (e.g. routing is disabled); keep the connection.
    Discard,
    /// A protocol error: close the connection the message came on.
    Close,
}

/// A message received whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxMessage {
    /// The local NI it arrived on.
    pub ni: Nid,
    /// The peer that sent it on this hop.
    pub from: ProcessId,
    /// The header.
    pub header: Header,
    /// Exactly `header.payload_length` bytes, in the buffer the caller chose.
    pub payload: Bytes,
    /// When the LND read it: the read that brought its last byte (one clock read serves
    /// every message of a read).
    pub received_at: tokio::time::Instant,
}

/// What the layer above still has to wait for before it answers an LND
/// ([`LndHandler::on_header_now`], [`LndHandler::on_message_now`]): allocated only when
/// there is such a wait, so the usual answer builds no future.
pub type Later<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the layer above did with a message that came whole
/// ([`LndHandler::on_whole_now`]).
#[must_use]
pub enum Taken<'a> {
    /// Taken, or dropped as the layer above decided.
    Now,
    /// Taken once this wait is over; `false`: close the connection it came on (as
    /// [`RxDecision::Close`]).
    Later(Later<'a, bool>),
    /// A protocol error: close the connection it came on.
    Close,
}

impl std::fmt::Debug for Taken<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Taken::Now => "Now",
            Taken::Later(_) => "Later",
            Taken::Close => "Close",
        })
    }
}

/// [`LndHandler::on_whole_now`] made of [`LndHandler::on_header_now`] and
/// [`LndHandler::on_message_now`], as its default is: the payload goes into the buffer the
/// decision chose.
pub fn whole_by_halves<H: LndHandler + ?Sized>(handler: &H, msg: RxMessage) -> Taken<'_> {
    let RxMessage {
        ni,
        from,
        header,
        payload,
        received_at,
    } = msg;
    let take = move |mut buf: BytesMut| {
        buf.clear();
        buf.extend_from_slice(&payload);
        RxMessage {
            ni,
            from,
            header,
            payload: buf.freeze(),
            received_at,
        }
    };
    match handler.on_header_now(RxHeader { ni, from, header }) {
        Ok(RxDecision::Close) => Taken::Close,
        Ok(RxDecision::Discard) => Taken::Now,
        Ok(RxDecision::Receive(buf)) => match handler.on_message_now(take(buf)) {
            None => Taken::Now,
            Some(later) => Taken::Later(Box::pin(async move {
                later.await;
                true
            })),
        },
        Err(decision) => Taken::Later(Box::pin(async move {
            match decision.await {
                RxDecision::Close => false,
                RxDecision::Discard => true,
                RxDecision::Receive(buf) => {
                    if let Some(later) = handler.on_message_now(take(buf)) {
                        later.await;
                    }
                    true
                }
            }
        })),
    }
}

/// What an LND tells the layer above it.
///
/// The LND calls these from its own tasks. [`LndHandler::on_header`] and
/// [`LndHandler::on_message`] may wait (the connection reads nothing meanwhile);
/// [`LndHandler::on_send_complete`] must not block: completions come from the task that
/// also drives the peer's sends. There is at most one completion per accepted send, so a
/// caller that bounds what it sends bounds what comes back.
pub trait LndHandler: Send + Sync + 'static {
    /// A header arrived: decide where its payload goes.
    fn on_header(&self, rx: RxHeader) -> impl Future<Output = RxDecision> + Send;
    /// A message whose payload the caller asked for is in.
    fn on_message(&self, msg: RxMessage) -> impl Future<Output = ()> + Send;

    /// [`LndHandler::on_header`] without building its future when the decision needs no
    /// wait: `Ok` is the decision, `Err` the wait that makes it (the LND awaits it, reading
    /// nothing meanwhile). socklnd's receive path calls this one (o2iblnd's judges each
    /// header in a boxed future of its own, parked if it waits). The default always waits
    /// on `on_header`.
    fn on_header_now(&self, rx: RxHeader) -> Result<RxDecision, Later<'_, RxDecision>> {
        Err(Box::pin(self.on_header(rx)))
    }

    /// [`LndHandler::on_message`] without building its future when taking the message
    /// needs no wait: `None` when it is taken, else the wait that takes it (awaited like
    /// [`LndHandler::on_header_now`]'s). The default always waits on `on_message`.
    fn on_message_now(&self, msg: RxMessage) -> Option<Later<'_, ()>> {
        Some(Box::pin(self.on_message(msg)))
    }

    /// A message that came whole (socklnd: a frame with no payload, which has nothing to
    /// decide), in one call: what [`LndHandler::on_header_now`] and then
    /// [`LndHandler::on_message_now`] would do with it, the payload placed where the
    /// header's decision says. The default is those two calls ([`whole_by_halves`]).
    fn on_whole_now(&self, msg: RxMessage) -> Taken<'_> {
        whole_by_halves(self, msg)
    }

    /// [`LndHandler::on_whole_now`], but a message that would wait for what the LND's
    /// own sends give back once finished (a router-buffer credit held by messages it
    /// forwarded and has not written yet) is left where it is (`None`), with nothing
    /// queued for it: the LND finishes those sends and asks again, or calls
    /// `on_whole_now`, which waits in turn. Spares a wait (a future, a channel) for what
    /// the caller can settle in place. The default never leaves a message.
    ///
    /// The message is lent in its slot, not moved in (and back out): the handler takes it
    /// from there when it keeps it. `Some`: the message was taken, and whatever the
    /// handler left in the slot is the caller's to drop. An empty slot is taken at once.
    fn try_whole_now(&self, msg: &mut Option<RxMessage>) -> Option<Taken<'_>> {
        Some(msg.take().map_or(Taken::Now, |msg| self.on_whole_now(msg)))
    }

    /// A send accepted by [`Lnd::send`] is finished.
    fn on_send_complete(&self, done: TxCompletion);

    /// Sends accepted by [`Lnd::send`] that finished together (socklnd: one write put
    /// them all on the wire), in the order they were sent. Like
    /// [`LndHandler::on_send_complete`] it must not block. The default completes each in
    /// turn; a handler may take them as one batch.
    fn on_sends_complete(&self, done: Vec<TxCompletion>) {
        for d in done {
            self.on_send_complete(d);
        }
    }

    /// A peer went down: its last connection closed or failed (socklnd: after its
    /// sibling connections were closed too), no connection to it is being set up and no
    /// send to it is queued. Called once per loss, and not again until a connection to the
    /// peer has come up again. Like [`LndHandler::on_send_complete`] it must not block.
    /// The default does nothing.
    fn on_peer_down(&self, down: PeerDown) {
        let _ = down;
    }

    /// The buffers of the layer above that an LND may register and send from in place
    /// (o2iblnd's RDMA): see [`crate::registered`]. None by default: the LND copies.
    fn registered_memory(&self) -> Option<std::sync::Arc<crate::registered::RegisteredMemory>> {
        None
    }
}

/// A peer that went down ([`LndHandler::on_peer_down`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerDown {
    /// The local NI.
    pub ni: Nid,
    /// The peer NI.
    pub peer: Nid,
    /// The health status a send caught by the same failure completes with (who is at
    /// fault, see [`HealthStatus::charge`]).
    pub status: HealthStatus,
    /// Why, for logs.
    pub reason: String,
}

impl PeerDown {
    /// A peer-down report (for LNDs and test doubles).
    pub fn new(ni: Nid, peer: Nid, status: HealthStatus, reason: String) -> PeerDown {
        PeerDown {
            ni,
            peer,
            status,
            reason,
        }
    }
}

/// Why [`Lnd::send`] refused a message (no completion follows a refusal).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The NI is stopped or stopping.
    #[error("NI {ni} is stopped")]
    Stopped {
        /// The NI.
        ni: Nid,
    },
    /// The peer is not on this NI's net.
    #[error("peer {peer} is not on the net of NI {ni}")]
    WrongNet {
        /// The peer.
        peer: Nid,
        /// The NI.
        ni: Nid,
    },
    /// The peer has no address this LND can reach (e.g. no IPv4 address for socklnd).
    #[error("peer {peer} has no address this LND can reach")]
    Unreachable {
        /// The peer.
        peer: Nid,
    },
    /// The peer is this NI itself.
    #[error("peer {peer} is this NI")]
    SelfSend {
        /// The peer.
        peer: Nid,
    },
    /// The payload is not as long as the header says.
    #[error(
        "bad message for {peer}: header says {header} bytes of payload, payload has {payload}"
    )]
    PayloadLength {
        /// The peer.
        peer: Nid,
        /// The header's `payload_length`.
        header: u32,
        /// The payload's length.
        payload: usize,
    },
    /// The payload is larger than this LND can carry in one message.
    #[error("bad message for {peer}: payload of {len} bytes, at most {max}")]
    PayloadTooLarge {
        /// The peer.
        peer: Nid,
        /// The payload's length.
        len: usize,
        /// The largest this LND carries.
        max: usize,
    },
    /// The header fails LNet's checks, or cannot be encoded.
    #[error("bad message for {peer}: {source}")]
    BadHeader {
        /// The peer.
        peer: Nid,
        /// What is wrong with the header.
        #[source]
        source: lnet::HeaderError,
    },
}

impl SendError {
    /// [`SendError::PayloadLength`] unless the payload is as long as the header says.
    pub fn check_payload_length(tx: &TxRequest) -> Result<(), SendError> {
        if usize::try_from(tx.header.payload_length).ok() == Some(tx.payload.len()) {
            return Ok(());
        }
        Err(SendError::PayloadLength {
            peer: tx.peer,
            header: tx.header.payload_length,
            payload: tx.payload.len(),
        })
    }
}

/// Why [`Lnd::try_send`] did not take a message.
#[derive(Debug)]
#[non_exhaustive]
pub enum TryRefused {
    /// Taking it would mean waiting (the peer's queue is full, or the LND takes no message
    /// without awaiting): here it is back, for [`Lnd::send`].
    WouldWait(Box<TxRequest>),
    /// Refused as [`Lnd::send`] would refuse it (no completion follows).
    Refused(SendError),
}

/// The part of an LND that takes a message without waiting ([`Lnd::try_send`]), apart from
/// the LND ([`Lnd::sender`]): a sender keeps it and sends through it without reaching the
/// LND itself, which whoever stops the NI must own. Once the NI is stopping it refuses
/// every message as stopped ([`SendError::Stopped`]), or finishes it as
/// [`Lnd::stop`] finishes the sends it finds.
pub trait TrySend: Send + Sync + 'static {
    /// [`Lnd::try_send`].
    fn try_send(&self, tx: TxRequest) -> Result<(), TryRefused>;
}

/// One LNet network driver, running one NI.
pub trait Lnd: Sized + Send + Sync + 'static {
    /// What it takes to start an NI.
    type Config: Send;
    /// Who it reports to.
    type Handler: LndHandler;
    /// The error [`Lnd::start`] can fail with.
    type StartError: std::error::Error + Send + Sync + 'static;

    /// Brings the NI up (e.g. opens its listener).
    fn start(
        config: Self::Config,
        handler: Arc<Self::Handler>,
    ) -> impl Future<Output = Result<Self, Self::StartError>> + Send;

    /// The NI's NID.
    fn nid(&self) -> Nid;

    /// Queues a message for its peer. Waits while the peer's queue is full (bounded
    /// buffering: back-pressure reaches the caller); an accepted message is finished
    /// later by [`LndHandler::on_send_complete`].
    fn send(&self, tx: TxRequest) -> impl Future<Output = Result<(), SendError>> + Send;

    /// [`Lnd::send`] when it would not wait, from a context that may not await (a
    /// completion handing its credit to a waiting message). The default takes nothing.
    fn try_send(&self, tx: TxRequest) -> Result<(), TryRefused> {
        Err(TryRefused::WouldWait(Box::new(tx)))
    }

    /// Its [`TrySend`], for a sender to keep; `None` (the default) when the LND has none
    /// apart from itself.
    fn sender(&self) -> Option<Arc<dyn TrySend>> {
        None
    }

    /// Takes the NI down: stops accepting, closes every connection, and finishes every
    /// send not yet handed to the network with [`HealthStatus::LocalAborted`].
    fn stop(self) -> impl Future<Output = ()> + Send;

    /// A snapshot of what the LND counts of this NI (how its connections ended, ...), for
    /// the layer above to show; `None` when it counts nothing (the default) or cannot say
    /// now (stopping).
    fn counters(&self) -> impl Future<Output = Option<LndCounters>> + Send {
        std::future::ready(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_charges_the_nis_its_status_names() {
        let ni: Nid = "10.0.0.1@tcp".parse().unwrap();
        let peer: Nid = "10.0.0.2@tcp".parse().unwrap();
        let done = |status| TxCompletion {
            id: TxId(1),
            ni,
            peer,
            status,
            reason: None,
        };
        assert_eq!(done(HealthStatus::Ok).charged(), Charged::default());
        assert_eq!(
            done(HealthStatus::LocalTimeout).charged(),
            Charged {
                local_ni: Some(ni),
                peer_ni: None
            }
        );
        assert_eq!(
            done(HealthStatus::RemoteDropped).charged(),
            Charged {
                local_ni: None,
                peer_ni: Some(peer)
            }
        );
        assert_eq!(
            done(HealthStatus::NetworkTimeout).charged(),
            Charged {
                local_ni: Some(ni),
                peer_ni: Some(peer)
            }
        );
    }
}
