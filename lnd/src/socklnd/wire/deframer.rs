//! A sans-io deframer for one socklnd connection: bytes in, events out.
//!
//! The connection task reads from its socket, hands the bytes to [`Deframer::push`] (or
//! [`Deframer::feed`]) in whatever chunks the socket gives, and calls [`Deframer::poll`]
//! until it returns `Ok(None)`. What it expects depends on the side:
//!
//! * [`Side::Passive`] (accepted the TCP connection): the acceptor request, then the
//!   peer's HELLO, then frames.
//! * [`Side::Active`] (connected): the peer's HELLO reply, then frames. After a reply with
//!   ctype NONE nothing more may arrive.
//!
//! The HELLO fixes the header form (72 bytes for V2/V3, 96 for V4) and the byte order of
//! every later ksock header. A V1 HELLO is read whole and refused.
//!
//! Limits: an LNet header is checked ([`Header::check_lnet`]) as soon as it is in, so an
//! oversize `payload_length` fails before any payload is buffered, and an event is
//! produced as soon as a frame is complete: a reader that reads at most
//! [`Deframer::wanted`] bytes at a time never makes it hold more than one frame
//! ([`super::frame::MAX_FRAME_BYTES`]). Payloads are split off the buffer without a copy.
//!
//! Header-first mode ([`Deframer::header_first`]) is what a connection reader uses: an
//! LNET frame gives [`Event::LnetHeader`] (ksock header and checked LNet header) as soon as
//! they are in, before any payload; the deframer then waits, consuming nothing more, until
//! the caller says where the payload goes ([`Deframer::receive_payload`] into a buffer of
//! its choosing, or [`Deframer::discard_payload`]). The payload then goes straight into
//! that buffer: the caller may read the socket directly into it
//! ([`Deframer::payload_sink`], no copy), or push bytes as usual (copied once from the
//! bytes pushed). A discarded payload is counted and dropped, never held. When the payload
//! is complete (and its checksum verified) [`Event::LnetPayload`] hands the buffer back.
//! NOOPs are the same in both modes.
//!
//! Cookies are only reported; the LND acknowledges zero-copy requests. A non-zero csum is
//! verified (V2 definition, [`super::csum`]). After an error the deframer stays failed:
//! every later poll returns the same error and pushed bytes are dropped.

use bytes::{Buf, Bytes, BytesMut};
use lnet::acceptor::{AcceptorError, AcceptorRequest, Decoded};
use lnet::{ByteOrder, Header, HeaderError, HeaderForm};

use super::conn_type::ConnType;
use super::csum::{verify_frame, Csum, CsumError};
use super::hello::{Hello, HelloDecoded, HelloError, ProtoVersion};
use super::ksock::{KsockError, KsockHeader, KsockType, KSOCK_HEADER_BYTES};

/// Which end of the TCP connection this deframer reads for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Accepted the connection: reads the acceptor request and the peer's HELLO.
    Passive,
    /// Opened the connection: reads the peer's HELLO reply.
    Active,
}

/// What the deframer is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The acceptor connection request (passive side only).
    AcceptorRequest,
    /// The peer's HELLO.
    Hello,
    /// The 24-byte ksock header of the next frame.
    KsockHeader,
    /// The LNet header of an LNET frame.
    LnetHeader,
    /// The payload of an LNET frame (in header-first mode: once the caller has said where
    /// it goes).
    Payload,
    /// Header-first mode: an LNET header was reported; the deframer waits for
    /// [`Deframer::receive_payload`] or [`Deframer::discard_payload`].
    PayloadDecision,
    /// Nothing: the peer refused the connection (HELLO reply with ctype NONE).
    Refused,
}

/// Something complete that arrived on the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The acceptor connection request (passive side).
    Acceptor(AcceptorRequest),
    /// The peer's HELLO, and the byte order of its HELLO and of every later ksock header.
    Hello {
        /// The HELLO.
        hello: Hello,
        /// The peer's byte order ([`ByteOrder::Big`]: the connection is "flipped").
        order: ByteOrder,
    },
    /// A NOOP frame: ZC-ACKs or a keepalive ([`KsockHeader::acks`]).
    Noop(KsockHeader),
    /// An LNET frame whose header passed [`Header::check_lnet`].
    Lnet {
        /// Its ksock header (zero-copy request and piggy-backed ACK cookies).
        ksock: KsockHeader,
        /// Its LNet header.
        header: Header,
        /// Exactly `header.payload_length` bytes.
        payload: Bytes,
    },
    /// Header-first mode: the ksock and LNet headers of an LNET frame (the header passed
    /// [`Header::check_lnet`]); no payload byte has been consumed yet. Say where the
    /// payload goes with [`Deframer::receive_payload`] or [`Deframer::discard_payload`].
    LnetHeader {
        /// Its ksock header (zero-copy request and piggy-backed ACK cookies).
        ksock: KsockHeader,
        /// Its LNet header.
        header: Header,
    },
    /// Header-first mode: the payload of the frame last reported by [`Event::LnetHeader`]
    /// is in, and the frame's checksum (if any) matched.
    LnetPayload {
        /// Its ksock header.
        ksock: KsockHeader,
        /// Its LNet header.
        header: Header,
        /// The buffer given to [`Deframer::receive_payload`], holding exactly
        /// `header.payload_length` bytes; `None` if the payload was discarded.
        payload: Option<BytesMut>,
    },
}

/// A call about a payload made when no payload decision was awaited (a caller bug; the
/// deframer is unchanged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadDecisionError {
    /// The deframer is not in header-first mode or is not at [`Stage::PayloadDecision`].
    #[error("no LNET header is waiting for a payload decision (stage {stage:?})")]
    NotAwaited {
        /// Where the deframer was.
        stage: Stage,
    },
}

/// Errors that close the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeframeError {
    /// A bad acceptor request (see [`AcceptorError::reply_before_close`]).
    #[error("acceptor request: {0}")]
    Acceptor(#[from] AcceptorError),
    /// A bad or refused HELLO (see [`HelloError::wants_version_reply`]).
    #[error("HELLO: {0}")]
    Hello(#[from] HelloError),
    /// A bad ksock header.
    #[error(transparent)]
    Ksock(#[from] KsockError),
    /// A bad LNet header, or one the receive checks refuse.
    #[error("LNet header: {0}")]
    Header(#[from] HeaderError),
    /// A frame whose checksum does not match.
    #[error(transparent)]
    Csum(#[from] CsumError),
    /// Bytes after a HELLO reply with ctype NONE: the peer should have closed.
    #[error("{buffered} bytes after a HELLO reply with ctype NONE: expected the peer to close")]
    DataAfterRefusal {
        /// Bytes that arrived.
        buffered: usize,
    },
    /// The stream ended in the middle of something.
    #[error("connection closed while reading the {stage:?} with {buffered} bytes of it")]
    UnexpectedEof {
        /// What was being read.
        stage: Stage,
        /// Bytes of it that had arrived.
        buffered: usize,
    },
}

/// Where the deframer is.
#[derive(Debug, Clone)]
enum State {
    Acceptor,
    Hello,
    Frames {
        form: HeaderForm,
        /// The frame being read, once its ksock header (and then LNet header) are in.
        pending: Option<(KsockHeader, Option<Header>)>,
    },
    /// Header-first mode: the headers of an LNET frame were reported.
    Payload {
        form: HeaderForm,
        ksock: KsockHeader,
        header: Header,
        /// The running checksum when the frame carries one.
        csum: Option<Csum>,
        sink: Sink,
    },
    Refused,
    Failed {
        /// The error every later poll returns.
        err: DeframeError,
        /// Where it happened.
        stage: Stage,
    },
}

/// Where a header-first payload goes.
#[derive(Debug, Clone)]
enum Sink {
    /// Not decided yet.
    Undecided,
    /// Into the caller's buffer (which holds the payload bytes received so far).
    Receive(BytesMut),
    /// Nowhere; this many bytes are still to come.
    Discard { left: usize },
}

/// The deframer of one socklnd connection. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Deframer {
    side: Side,
    state: State,
    buf: BytesMut,
    version: Option<ProtoVersion>,
    order: ByteOrder,
    header_first: bool,
}

impl Deframer {
    /// A deframer for a new connection on `side`.
    pub fn new(side: Side) -> Deframer {
        Deframer {
            side,
            state: match side {
                Side::Passive => State::Acceptor,
                Side::Active => State::Hello,
            },
            buf: BytesMut::new(),
            version: None,
            order: ByteOrder::Little,
            header_first: false,
        }
    }

    /// A deframer past the handshake, reading frames of a connection that negotiated
    /// `version` with a peer writing in `order`.
    pub fn for_frames(side: Side, version: ProtoVersion, order: ByteOrder) -> Deframer {
        Deframer {
            side,
            state: State::Frames {
                form: version.header_form(),
                pending: None,
            },
            buf: BytesMut::new(),
            version: Some(version),
            order,
            header_first: false,
        }
    }

    /// This deframer in header-first mode (see the [module documentation](self)): LNET
    /// frames give [`Event::LnetHeader`] then [`Event::LnetPayload`] instead of one
    /// [`Event::Lnet`].
    pub fn header_first(mut self) -> Deframer {
        self.header_first = true;
        self
    }

    /// Whether the deframer is in header-first mode.
    pub fn is_header_first(&self) -> bool {
        self.header_first
    }

    /// Header-first mode, after [`Event::LnetHeader`]: read the payload into `buf`
    /// (cleared first, and grown to the payload length). Bytes already pushed are
    /// moved into it by the next [`Deframer::poll`].
    pub fn receive_payload(&mut self, mut buf: BytesMut) -> Result<(), PayloadDecisionError> {
        let State::Payload { header, sink, .. } = &mut self.state else {
            return Err(self.not_awaited());
        };
        if !matches!(sink, Sink::Undecided) {
            return Err(self.not_awaited());
        }
        buf.clear();
        buf.reserve(payload_len(header));
        *sink = Sink::Receive(buf);
        Ok(())
    }

    /// Header-first mode, after [`Event::LnetHeader`]: read the payload and throw it away
    /// (the checksum, if any, is still verified).
    pub fn discard_payload(&mut self) -> Result<(), PayloadDecisionError> {
        let State::Payload { header, sink, .. } = &mut self.state else {
            return Err(self.not_awaited());
        };
        if !matches!(sink, Sink::Undecided) {
            return Err(self.not_awaited());
        }
        *sink = Sink::Discard {
            left: payload_len(header),
        };
        Ok(())
    }

    fn not_awaited(&self) -> PayloadDecisionError {
        PayloadDecisionError::NotAwaited {
            stage: self.stage(),
        }
    }

    /// Header-first mode, while a payload goes into the caller's buffer and nothing else
    /// is buffered: that buffer and how many more bytes it takes, so that the caller can
    /// read the socket straight into it (no copy). Bytes appended to it count as received
    /// (append at most the number given); call [`Deframer::poll`] after each read.
    pub fn payload_sink(&mut self) -> Option<(&mut BytesMut, usize)> {
        if !self.buf.is_empty() {
            return None;
        }
        match &mut self.state {
            State::Payload {
                header,
                sink: Sink::Receive(buf),
                ..
            } => {
                let left = payload_len(header).saturating_sub(buf.len());
                (left > 0).then_some((buf, left))
            }
            _ => None,
        }
    }
    /// The side this deframer reads for.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The protocol version, once the HELLO is in.
    pub fn version(&self) -> Option<ProtoVersion> {
        self.version
    }

    /// The peer's byte order (little-endian until the HELLO says otherwise).
    pub fn order(&self) -> ByteOrder {
        self.order
    }

    /// The error that stopped the deframer, if one did.
    pub fn error(&self) -> Option<&DeframeError> {
        match &self.state {
            State::Failed { err, .. } => Some(err),
            _ => None,
        }
    }

    /// What the deframer is waiting for (after an error: where it stopped).
    pub fn stage(&self) -> Stage {
        match &self.state {
            State::Acceptor => Stage::AcceptorRequest,
            State::Hello => Stage::Hello,
            State::Frames { pending: None, .. } => Stage::KsockHeader,
            State::Frames {
                pending: Some((_, None)),
                ..
            } => Stage::LnetHeader,
            State::Frames {
                pending: Some((_, Some(_))),
                ..
            } => Stage::Payload,
            State::Payload {
                sink: Sink::Undecided,
                ..
            } => Stage::PayloadDecision,
            State::Payload { .. } => Stage::Payload,
            State::Refused => Stage::Refused,
            State::Failed { stage, .. } => *stage,
        }
    }

    /// Bytes received and not yet turned into events.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Whether part of an acceptor request, HELLO or frame has arrived but not all of it:
    /// the connection is "receiving" and the socklnd timeout applies.
    pub fn is_mid_message(&self) -> bool {
        match self.state {
            State::Frames {
                pending: Some(_), ..
            }
            | State::Payload { .. } => true,
            State::Failed { .. } | State::Refused => false,
            _ => !self.buf.is_empty(),
        }
    }

    /// How many more bytes the deframer needs before [`Deframer::poll`] can make progress:
    /// reading at most this many keeps the buffer within one frame. 0 when `poll` can
    /// make progress without more bytes (call it first), after an error, after a
    /// refusal, or while a payload decision is awaited ([`Stage::PayloadDecision`]).
    pub fn wanted(&self) -> usize {
        let needed = match &self.state {
            State::Failed { .. } | State::Refused => return 0,
            State::Payload { header, sink, .. } => match sink {
                Sink::Undecided => return 0,
                Sink::Receive(buf) => payload_len(header).saturating_sub(buf.len()),
                Sink::Discard { left } => *left,
            },
            State::Acceptor => match AcceptorRequest::decode(&self.buf) {
                Ok(Decoded::Incomplete { needed }) => needed,
                _ => return 0,
            },
            State::Hello => match Hello::decode(&self.buf) {
                Ok(HelloDecoded::Incomplete { needed }) => needed,
                _ => return 0,
            },
            State::Frames { form, pending } => match pending {
                None => match self.peek_ksock_type() {
                    Some(KsockType::Lnet) => KSOCK_HEADER_BYTES + form.size(),
                    Some(KsockType::Noop) => KSOCK_HEADER_BYTES,
                    None if self.buf.len() >= KSOCK_HEADER_BYTES => return 0,
                    None => KSOCK_HEADER_BYTES,
                },
                Some((_, None)) => KSOCK_HEADER_BYTES + form.size(),
                Some((_, Some(h))) => frame_len(*form, h),
            },
        };
        needed.saturating_sub(self.buf.len())
    }

    /// The type of the ksock header at the front of the buffer, if it is all in and valid.
    fn peek_ksock_type(&self) -> Option<KsockType> {
        KsockHeader::decode(&self.buf, self.order)
            .ok()
            .map(|k| k.msg_type)
    }

    /// Adds bytes received from the socket. Dropped if the deframer has failed.
    pub fn push(&mut self, data: &[u8]) {
        if !matches!(self.state, State::Failed { .. }) {
            self.buf.extend_from_slice(data);
        }
    }

    /// Adds a buffer received from the socket, without a copy when it directly follows
    /// the bytes already held. Dropped if the deframer has failed.
    pub fn feed(&mut self, data: BytesMut) {
        if matches!(self.state, State::Failed { .. }) {
            return;
        }
        if self.buf.is_empty() {
            self.buf = data;
        } else {
            self.buf.unsplit(data);
        }
    }

    /// Tells the deframer the peer closed the stream; call it once [`Deframer::poll`] has
    /// returned `Ok(None)`. Fails if buffered bytes are left (something was cut short) or
    /// the deframer had already failed; it stays failed afterwards.
    pub fn finish(&mut self) -> Result<(), DeframeError> {
        if let State::Failed { err, .. } = &self.state {
            return Err(err.clone());
        }
        if self.is_mid_message() {
            let err = DeframeError::UnexpectedEof {
                stage: self.stage(),
                buffered: self.buf.len(),
            };
            return Err(self.fail(err));
        }
        Ok(())
    }

    /// The next complete event, `Ok(None)` if more bytes are needed, or the error that
    /// closes the connection (again on every later call).
    pub fn poll(&mut self) -> Result<Option<Event>, DeframeError> {
        match self.step() {
            Ok(event) => Ok(event),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Same as [`Deframer::poll`], under the name an iterator-minded caller looks for.
    pub fn next_event(&mut self) -> Result<Option<Event>, DeframeError> {
        self.poll()
    }

    fn fail(&mut self, err: DeframeError) -> DeframeError {
        let stage = match &err {
            DeframeError::UnexpectedEof { stage, .. } => *stage,
            _ => self.stage(),
        };
        self.buf = BytesMut::new();
        self.state = State::Failed {
            err: err.clone(),
            stage,
        };
        err
    }

    fn step(&mut self) -> Result<Option<Event>, DeframeError> {
        loop {
            match &mut self.state {
                State::Failed { err, .. } => return Err(err.clone()),
                State::Refused => {
                    return if self.buf.is_empty() {
                        Ok(None)
                    } else {
                        Err(DeframeError::DataAfterRefusal {
                            buffered: self.buf.len(),
                        })
                    }
                }
                State::Acceptor => {
                    return match AcceptorRequest::decode(&self.buf)? {
                        Decoded::Incomplete { .. } => Ok(None),
                        Decoded::Complete { request, consumed } => {
                            self.buf.advance(consumed);
                            self.state = State::Hello;
                            Ok(Some(Event::Acceptor(request)))
                        }
                    }
                }
                State::Hello => return self.step_hello(),
                State::Payload {
                    form,
                    ksock,
                    header,
                    csum,
                    sink,
                } => {
                    let form = *form;
                    let total = payload_len(header);
                    match sink {
                        Sink::Undecided => return Ok(None),
                        Sink::Receive(buf) => {
                            let n = total.saturating_sub(buf.len()).min(self.buf.len());
                            if n > 0 {
                                buf.extend_from_slice(&self.buf.split_to(n));
                            }
                            if buf.len() > total {
                                // More was appended through payload_sink than asked for:
                                // it belongs to the next frame.
                                let mut extra = buf.split_off(total);
                                extra.unsplit(std::mem::take(&mut self.buf));
                                self.buf = extra;
                            }
                            if buf.len() < total {
                                return Ok(None);
                            }
                            if let Some(c) = csum {
                                let mut c = c.clone();
                                c.update(buf);
                                check_csum(ksock.csum, c)?;
                            }
                        }
                        Sink::Discard { left } => {
                            let n = (*left).min(self.buf.len());
                            let chunk = self.buf.split_to(n);
                            if let Some(c) = csum.as_mut() {
                                c.update(&chunk);
                            }
                            *left -= n;
                            if *left > 0 {
                                return Ok(None);
                            }
                            if let Some(c) = csum {
                                check_csum(ksock.csum, c.clone())?;
                            }
                        }
                    }
                    let done = std::mem::replace(
                        &mut self.state,
                        State::Frames {
                            form,
                            pending: None,
                        },
                    );
                    let State::Payload {
                        ksock,
                        header,
                        sink,
                        ..
                    } = done
                    else {
                        return Ok(None);
                    };
                    let payload = match sink {
                        Sink::Receive(buf) => Some(buf),
                        Sink::Discard { .. } | Sink::Undecided => None,
                    };
                    return Ok(Some(Event::LnetPayload {
                        ksock,
                        header,
                        payload,
                    }));
                }
                State::Frames { form, pending } => {
                    let form = *form;
                    match *pending {
                        None => {
                            let Some(kb) = self.buf.get(..KSOCK_HEADER_BYTES) else {
                                return Ok(None);
                            };
                            let ksock = KsockHeader::decode(kb, self.order)?;
                            if ksock.msg_type == KsockType::Noop {
                                verify_frame(kb, ksock.csum)?;
                                self.buf.advance(KSOCK_HEADER_BYTES);
                                return Ok(Some(Event::Noop(ksock)));
                            }
                            *pending = Some((ksock, None));
                        }
                        Some((ksock, None)) => {
                            let Some(hb) = self
                                .buf
                                .get(KSOCK_HEADER_BYTES..KSOCK_HEADER_BYTES + form.size())
                            else {
                                return Ok(None);
                            };
                            let header = Header::decode(hb, form)?;
                            header.check_lnet()?;
                            if self.header_first {
                                let head_len = KSOCK_HEADER_BYTES + form.size();
                                let csum = (ksock.csum != 0).then(|| {
                                    start_csum(self.buf.get(..head_len).unwrap_or_default())
                                });
                                self.buf.advance(head_len);
                                self.state = State::Payload {
                                    form,
                                    ksock,
                                    header,
                                    csum,
                                    sink: Sink::Undecided,
                                };
                                return Ok(Some(Event::LnetHeader { ksock, header }));
                            }
                            let total = frame_len(form, &header);
                            self.buf.reserve(total.saturating_sub(self.buf.len()));
                            *pending = Some((ksock, Some(header)));
                        }
                        Some((ksock, Some(header))) => {
                            let total = frame_len(form, &header);
                            if self.buf.len() < total {
                                return Ok(None);
                            }
                            let frame = self.buf.get(..total).unwrap_or_default();
                            verify_frame(frame, ksock.csum)?;
                            *pending = None;
                            let mut frame = self.buf.split_to(total);
                            frame.advance(KSOCK_HEADER_BYTES + form.size());
                            return Ok(Some(Event::Lnet {
                                ksock,
                                header,
                                payload: frame.freeze(),
                            }));
                        }
                    }
                }
            }
        }
    }

    fn step_hello(&mut self) -> Result<Option<Event>, DeframeError> {
        let HelloDecoded::Complete {
            hello,
            order,
            consumed,
        } = Hello::decode(&self.buf)?
        else {
            return Ok(None);
        };
        if self.side == Side::Passive {
            hello.check_request()?;
        }
        self.buf.advance(consumed);
        self.version = Some(hello.version);
        self.order = order;
        self.state = if hello.ctype == ConnType::None {
            State::Refused
        } else {
            State::Frames {
                form: hello.version.header_form(),
                pending: None,
            }
        };
        Ok(Some(Event::Hello { hello, order }))
    }
}

/// Payload bytes of the LNET frame this header starts.
fn payload_len(header: &Header) -> usize {
    // payload_length <= LNET_MTU once check_lnet passed.
    header.payload_length as usize
}

/// A running checksum over a frame's ksock and LNet headers, the csum field counted as 0.
fn start_csum(head: &[u8]) -> Csum {
    let mut c = Csum::new();
    c.update(head.get(..4).unwrap_or(head));
    c.update(&[0u8; 4]);
    c.update(head.get(8..).unwrap_or_default());
    c
}

/// Compares a finished running checksum with the frame's csum field.
fn check_csum(received: u32, c: Csum) -> Result<(), CsumError> {
    let computed = c.finish();
    if computed == received {
        Ok(())
    } else {
        Err(CsumError::Mismatch { received, computed })
    }
}

/// Bytes of the whole LNET frame this header starts.
fn frame_len(form: HeaderForm, header: &Header) -> usize {
    // payload_length <= LNET_MTU once check_lnet passed.
    KSOCK_HEADER_BYTES + form.size() + header.payload_length as usize
}

#[cfg(test)]
mod tests {
    use super::super::csum::{frame_csum, seal_frame};
    use super::super::frame::{encode_lnet, encode_noop};
    use super::super::hello::V1Hello;
    use super::super::ksock::ZcAcks;
    use super::super::testutil::*;
    use super::*;
    use lnet::acceptor::AcceptorVersion;
    use lnet::nid::PID_LUSTRE;
    use lnet::{Message, MsgType, Nid, NidError, ProcessId, WireHandle, LNET_MTU};
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    /// Polls until the deframer needs more bytes.
    fn drain(d: &mut Deframer) -> Result<Vec<Event>, DeframeError> {
        let mut events = Vec::new();
        while let Some(e) = d.poll()? {
            events.push(e);
        }
        Ok(events)
    }

    /// Feeds `bytes` in chunks of the given sizes (cycled), polling after each; returns
    /// the events and the error that stopped it, if any.
    fn run(side: Side, bytes: &[u8], chunks: &[usize]) -> (Vec<Event>, Option<DeframeError>) {
        let mut d = Deframer::new(side);
        let mut events = Vec::new();
        let mut rest = bytes;
        let mut sizes = chunks.iter().copied().cycle();
        while !rest.is_empty() {
            let n = sizes.next().unwrap_or(rest.len()).clamp(1, rest.len());
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            d.push(chunk);
            match drain(&mut d) {
                Ok(mut e) => events.append(&mut e),
                Err(err) => return (events, Some(err)),
            }
        }
        (events, None)
    }

    fn run_frames(bytes: &[u8]) -> Result<Vec<Event>, DeframeError> {
        let mut d = Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little);
        d.push(bytes);
        let events = drain(&mut d)?;
        assert_eq!(d.buffered(), 0);
        assert_eq!(d.stage(), Stage::KsockHeader);
        Ok(events)
    }

    /// Encodes an event (of a V2/V3 connection) back to bytes.
    fn reencode(event: &Event) -> Vec<u8> {
        let mut out = Vec::new();
        match event {
            Event::Acceptor(req) => out = req.encode().unwrap(),
            Event::Hello { hello, order } => hello.encode_in(*order, &mut out).unwrap(),
            Event::Noop(k) => encode_noop(k, ByteOrder::Little, &mut out).unwrap(),
            Event::Lnet {
                ksock,
                header,
                payload,
            } => encode_lnet(
                ksock,
                header,
                HeaderForm::Nid4,
                payload,
                ByteOrder::Little,
                &mut out,
            )
            .unwrap(),
            Event::LnetHeader { .. } | Event::LnetPayload { .. } => {
                panic!("header-first events are not re-encoded: {event:?}")
            }
        }
        out
    }

    /// Runs a header-first deframer over `bytes` in chunks, reading payloads straight into
    /// the sink when `direct`, discarding the payload of every frame whose index is in
    /// `discard`, and turns the events back into whole-frame events (a discarded payload
    /// comes back empty). Checks the buffer never holds more than what was asked for.
    fn run_header_first(
        side: Side,
        bytes: &[u8],
        chunks: &[usize],
        discard: &dyn Fn(usize) -> bool,
        direct: bool,
    ) -> (Vec<Event>, Option<DeframeError>) {
        let mut d = Deframer::new(side).header_first();
        assert!(d.is_header_first());
        let mut events = Vec::new();
        let mut rest = bytes;
        let mut sizes = chunks.iter().copied().cycle();
        let mut frame = 0;
        loop {
            loop {
                match d.poll() {
                    Err(e) => return (events, Some(e)),
                    Ok(None) => break,
                    Ok(Some(Event::LnetHeader { ksock, header })) => {
                        assert_eq!(d.stage(), Stage::PayloadDecision);
                        assert_eq!(d.wanted(), 0);
                        assert!(d.is_mid_message());
                        // Nothing of the payload was consumed.
                        assert!(d.poll().unwrap().is_none());
                        if discard(frame) {
                            d.discard_payload().unwrap();
                        } else {
                            d.receive_payload(BytesMut::from(&b"stale"[..])).unwrap();
                        }
                        assert!(d.discard_payload().is_err(), "decided twice");
                        let _ = (ksock, header);
                    }
                    Ok(Some(Event::LnetPayload {
                        ksock,
                        header,
                        payload,
                    })) => {
                        assert_eq!(d.stage(), Stage::KsockHeader);
                        let payload = match payload {
                            Some(p) => {
                                assert!(!discard(frame));
                                assert_eq!(p.len(), header.payload_length as usize);
                                p.freeze()
                            }
                            None => {
                                assert!(discard(frame));
                                Bytes::new()
                            }
                        };
                        frame += 1;
                        events.push(Event::Lnet {
                            ksock,
                            header,
                            payload,
                        });
                    }
                    Ok(Some(e)) => events.push(e),
                }
            }
            if rest.is_empty() {
                return (events, None);
            }
            let n = sizes.next().unwrap_or(rest.len()).clamp(1, rest.len());
            if direct {
                if let Some((sink, left)) = d.payload_sink() {
                    let n = n.min(left);
                    let (chunk, tail) = rest.split_at(n);
                    sink.extend_from_slice(chunk);
                    rest = tail;
                    continue;
                }
            }
            let wanted = d.wanted();
            let n = if wanted > 0 { n.min(wanted) } else { n };
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            d.push(chunk);
            assert!(d.buffered() <= super::super::frame::MAX_FRAME_BYTES);
        }
    }

    /// What a header-first run gives for `events`: the same, with discarded payloads empty.
    fn with_discarded(events: &[Event], discard: &dyn Fn(usize) -> bool) -> Vec<Event> {
        let mut frame = 0;
        events
            .iter()
            .map(|e| match e {
                Event::Lnet {
                    ksock,
                    header,
                    payload,
                } => {
                    let payload = if discard(frame) {
                        Bytes::new()
                    } else {
                        payload.clone()
                    };
                    frame += 1;
                    Event::Lnet {
                        ksock: *ksock,
                        header: *header,
                        payload,
                    }
                }
                other => other.clone(),
            })
            .collect()
    }

    #[test]
    fn header_first_spec_session_and_errors() {
        let stream = [
            unhex(SPEC_7_1_ACCEPTOR),
            unhex(SPEC_7_1_PEER),
            unhex(SPEC_7_2_GET),
        ]
        .concat();
        let (full, err) = run(Side::Passive, &stream, &[stream.len()]);
        assert_eq!(err, None);
        for chunk in [1, 7, stream.len()] {
            for direct in [false, true] {
                let (got, err) =
                    run_header_first(Side::Passive, &stream, &[chunk], &|_| false, direct);
                assert_eq!(err, None);
                assert_eq!(got, full);
            }
        }
        // Not awaited: a caller bug, reported, nothing changes.
        let mut d =
            Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little).header_first();
        assert_eq!(
            d.receive_payload(BytesMut::new()),
            Err(PayloadDecisionError::NotAwaited {
                stage: Stage::KsockHeader
            })
        );
        assert!(d.discard_payload().is_err());
        assert!(d.payload_sink().is_none());
        // Oversize payload_length fails at the header, before any payload.
        let mut frame = KsockHeader::lnet().encode().to_vec();
        frame.extend(put_header(LNET_MTU + 1));
        d.push(&frame);
        assert!(matches!(
            d.poll(),
            Err(DeframeError::Header(HeaderError::PayloadTooLarge { .. }))
        ));
        assert_eq!(d.stage(), Stage::LnetHeader);
        // A bad checksum is caught whether the payload is received or discarded.
        let mut bad = unhex(SPEC_7_3_REPLY);
        bad[4..8].copy_from_slice(&0x1234_5678u32.to_le_bytes());
        let computed = frame_csum(&bad);
        for discard in [false, true] {
            let mut d = Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little)
                .header_first();
            d.push(&bad);
            assert!(matches!(d.poll(), Ok(Some(Event::LnetHeader { .. }))));
            if discard {
                d.discard_payload().unwrap();
            } else {
                d.receive_payload(BytesMut::new()).unwrap();
            }
            assert_eq!(
                d.poll(),
                Err(DeframeError::Csum(CsumError::Mismatch {
                    received: 0x1234_5678,
                    computed
                }))
            );
            assert_eq!(d.stage(), Stage::Payload);
        }
        // A sealed frame passes both ways.
        let mut sealed = unhex(SPEC_7_3_REPLY);
        let csum = seal_frame(&mut sealed, ByteOrder::Little);
        for discard in [false, true] {
            let mut d = Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little)
                .header_first();
            d.push(&sealed[..100]);
            assert!(
                matches!(d.poll(), Ok(Some(Event::LnetHeader { ksock, .. })) if ksock.csum == csum)
            );
            if discard {
                d.discard_payload().unwrap();
            } else {
                d.receive_payload(BytesMut::new()).unwrap();
            }
            assert_eq!(d.poll(), Ok(None));
            d.push(&sealed[100..]);
            let Ok(Some(Event::LnetPayload { payload, .. })) = d.poll() else {
                panic!("no payload");
            };
            assert_eq!(payload.is_none(), discard);
            assert_eq!(d.finish(), Ok(()));
        }
        // EOF while the decision is awaited is a cut frame.
        let mut d =
            Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little).header_first();
        d.push(&sealed[..KSOCK_HEADER_BYTES + 72]);
        assert!(matches!(d.poll(), Ok(Some(Event::LnetHeader { .. }))));
        assert!(matches!(
            d.finish(),
            Err(DeframeError::UnexpectedEof {
                stage: Stage::PayloadDecision,
                buffered: 0
            })
        ));
    }

    #[test]
    fn header_first_payload_sink_takes_only_its_payload() {
        // Two frames pushed through the sink in one go: the excess goes back to the
        // stream.
        let reply = unhex(SPEC_7_3_REPLY);
        let mut d =
            Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little).header_first();
        d.push(&reply[..96]);
        assert!(matches!(d.poll(), Ok(Some(Event::LnetHeader { .. }))));
        d.receive_payload(BytesMut::with_capacity(8)).unwrap();
        let (sink, left) = d.payload_sink().unwrap();
        assert_eq!(left, reply.len() - 96);
        sink.extend_from_slice(&reply[96..]);
        sink.extend_from_slice(&KsockHeader::keepalive().encode());
        let Ok(Some(Event::LnetPayload {
            payload: Some(p), ..
        })) = d.poll()
        else {
            panic!("no payload");
        };
        assert_eq!(&p[..], &reply[96..]);
        assert_eq!(d.poll(), Ok(Some(Event::Noop(KsockHeader::keepalive()))));
        assert_eq!(d.buffered(), 0);
    }

    fn lnet_event(e: &Event) -> (KsockHeader, Header, Bytes) {
        match e {
            Event::Lnet {
                ksock,
                header,
                payload,
            } => (*ksock, *header, payload.clone()),
            other => panic!("expected an LNET frame, got {other:?}"),
        }
    }

    const SPEC_WMD: WireHandle = WireHandle {
        interface_cookie: 0x17D6_F0A0_B1C2_D3E4,
        object_cookie: 0x405,
    };

    #[test]
    fn spec_7_1_and_7_2_passive_session() {
        let acceptor = unhex(SPEC_7_1_ACCEPTOR);
        let hello = unhex(SPEC_7_1_PEER);
        let get = unhex(SPEC_7_2_GET);
        let stream = [acceptor.clone(), hello.clone(), get.clone()].concat();
        let (events, err) = run(Side::Passive, &stream, &[stream.len()]);
        assert_eq!(err, None);
        assert_eq!(events.len(), 3);
        assert_eq!(
            events[0],
            Event::Acceptor(AcceptorRequest {
                version: AcceptorVersion::V1,
                nid: nid("192.168.1.1@tcp"),
            })
        );
        let Event::Hello { hello: h, order } = &events[1] else {
            panic!("expected a HELLO, got {:?}", events[1]);
        };
        assert_eq!(*order, ByteOrder::Little);
        assert_eq!(h.src(), ProcessId::lustre(nid("192.168.1.2@tcp")));
        assert_eq!(h.ctype, ConnType::Control);
        let (ksock, header, payload) = lnet_event(&events[2]);
        assert_eq!(ksock, KsockHeader::lnet());
        assert_eq!(
            header,
            Header {
                dest_nid: nid("192.168.1.1@tcp"),
                src_nid: nid("192.168.1.2@tcp"),
                dest_pid: PID_LUSTRE,
                src_pid: PID_LUSTRE,
                payload_length: 0,
                msg: Message::Get {
                    return_wmd: SPEC_WMD,
                    match_bits: 1 << 63,
                    ptl_index: 0,
                    src_offset: 0,
                    sink_length: 272,
                },
            }
        );
        assert!(payload.is_empty());
        assert_eq!(reencode(&events[0]), acceptor);
        assert_eq!(reencode(&events[1]), hello);
        assert_eq!(reencode(&events[2]), get);
    }

    #[test]
    fn spec_7_3_reply_frame_both_ways() {
        let bytes = unhex(SPEC_7_3_REPLY);
        assert_eq!(bytes.len(), 160);
        let events = run_frames(&bytes).unwrap();
        assert_eq!(events.len(), 1);
        let (ksock, header, payload) = lnet_event(&events[0]);
        assert_eq!(ksock, KsockHeader::lnet());
        assert_eq!(
            header,
            Header {
                dest_nid: nid("192.168.1.2@tcp"),
                src_nid: nid("192.168.1.1@tcp"),
                dest_pid: PID_LUSTRE,
                src_pid: PID_LUSTRE,
                payload_length: 64,
                msg: Message::Reply { dst_wmd: SPEC_WMD },
            }
        );
        assert_eq!(&payload[..], &bytes[96..]);
        assert_eq!(&payload[..4], b"gnip");
        assert_eq!(reencode(&events[0]), bytes);
    }

    #[test]
    fn spec_7_4_noops_both_ways() {
        let keepalive = unhex(SPEC_7_4_KEEPALIVE);
        let ack = unhex(SPEC_7_4_ZC_ACK);
        let events = run_frames(&[keepalive.clone(), ack.clone()].concat()).unwrap();
        assert_eq!(
            events,
            vec![
                Event::Noop(KsockHeader::keepalive()),
                Event::Noop(KsockHeader::zc_ack(0x2A))
            ]
        );
        let Event::Noop(k) = &events[1] else {
            unreachable!()
        };
        assert_eq!(k.acks(), ZcAcks::One(0x2A));
        assert_eq!(reencode(&events[0]), keepalive);
        assert_eq!(reencode(&events[1]), ack);
    }

    #[test]
    fn kernel_captures_both_ways() {
        let wmd = |object_cookie| WireHandle {
            interface_cookie: 0x18EA_3A85_3E41_78AE,
            object_cookie,
        };
        let me = nid("10.0.0.2@tcp");
        let kernel = nid("10.0.0.1@tcp");

        // Active side: the kernel's HELLO reply, then its REPLY to our ping.
        let hello = unhex(KERNEL_HELLO_REPLY);
        let reply = unhex(KERNEL_REPLY_FRAME);
        let stream = [hello.clone(), reply.clone()].concat();
        let (events, err) = run(Side::Active, &stream, &[1]);
        assert_eq!(err, None);
        assert_eq!(events.len(), 2);
        assert_eq!(reencode(&events[0]), hello);
        let (_, header, payload) = lnet_event(&events[1]);
        assert_eq!(
            header,
            Header {
                dest_nid: me,
                src_nid: kernel,
                dest_pid: PID_LUSTRE,
                src_pid: PID_LUSTRE,
                payload_length: 48,
                msg: Message::Reply { dst_wmd: SPEC_WMD },
            }
        );
        assert_eq!(payload.len(), 48);
        assert_eq!(reencode(&events[1]), reply);

        // `lnetctl ping` GET and the discovery PUSH.
        let get = unhex(KERNEL_PING_GET_FRAME);
        let push = unhex(KERNEL_PUSH_FRAME);
        let events = run_frames(&[get.clone(), push.clone()].concat()).unwrap();
        assert_eq!(events.len(), 2);
        let (_, header, payload) = lnet_event(&events[0]);
        assert_eq!(
            header.msg,
            Message::Get {
                return_wmd: wmd(0xd),
                match_bits: 1 << 63,
                ptl_index: 0,
                src_offset: 0,
                sink_length: 3960,
            }
        );
        assert_eq!((header.dest_nid, header.src_nid), (me, kernel));
        assert!(payload.is_empty());
        assert_eq!(reencode(&events[0]), get);
        let (_, header, payload) = lnet_event(&events[1]);
        assert_eq!(
            header.msg,
            Message::Put {
                ack_wmd: wmd(0x19),
                match_bits: 1 << 63,
                hdr_data: 0,
                ptl_index: 0,
                offset: 0,
            }
        );
        assert_eq!(header.payload_length, 48);
        assert_eq!(&payload[..], &push[96..]);
        assert_eq!(reencode(&events[1]), push);
    }

    /// An acceptor request, a HELLO and a few frames of every kind.
    fn session_bytes() -> Vec<u8> {
        let mut s = unhex(SPEC_7_1_ACCEPTOR);
        s.extend(unhex(SPEC_7_1_PEER));
        s.extend(unhex(SPEC_7_2_GET));
        s.extend(unhex(SPEC_7_4_KEEPALIVE));
        s.extend(unhex(SPEC_7_3_REPLY));
        s.extend(unhex(KERNEL_PUSH_FRAME));
        s.extend(unhex(SPEC_7_4_ZC_ACK));
        let mut zc_put = Vec::new();
        let put = Header {
            dest_nid: nid("10.0.0.9@tcp1"),
            src_nid: nid("192.168.1.2@tcp"),
            dest_pid: PID_LUSTRE,
            src_pid: PID_LUSTRE,
            payload_length: 3000,
            msg: Message::Put {
                ack_wmd: WireHandle::NONE,
                match_bits: 5,
                hdr_data: 6,
                ptl_index: 7,
                offset: 8,
            },
        };
        let payload: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        let ksock = KsockHeader {
            zc_cookies: [2, 0],
            ..KsockHeader::lnet()
        };
        encode_lnet(
            &ksock,
            &put,
            HeaderForm::Nid4,
            &payload,
            ByteOrder::Little,
            &mut zc_put,
        )
        .unwrap();
        s.extend(zc_put);
        s
    }

    #[test]
    fn session_one_byte_at_a_time_equals_all_at_once() {
        let bytes = session_bytes();
        let (all, err) = run(Side::Passive, &bytes, &[bytes.len()]);
        assert_eq!(err, None);
        assert_eq!(all.len(), 8);
        let (one, err) = run(Side::Passive, &bytes, &[1]);
        assert_eq!(err, None);
        assert_eq!(one, all);
        let (odd, err) = run(Side::Passive, &bytes, &[7, 1, 100, 23, 2]);
        assert_eq!(err, None);
        assert_eq!(odd, all);
        let (_, put, payload) = lnet_event(&all[7]);
        assert_eq!(put.payload_length, 3000);
        assert_eq!(payload.len(), 3000);
        let Event::Lnet { ksock, .. } = &all[7] else {
            unreachable!()
        };
        assert_eq!(ksock.zc_request(), Some(2));
    }

    #[test]
    fn wanted_and_stage_follow_the_stream() {
        let bytes = session_bytes();
        let mut d = Deframer::new(Side::Passive);
        assert_eq!(d.side(), Side::Passive);
        assert_eq!((d.stage(), d.wanted()), (Stage::AcceptorRequest, 4));
        assert!(!d.is_mid_message());
        d.push(&bytes[..4]);
        assert_eq!(d.poll(), Ok(None));
        assert_eq!(d.wanted(), 4);
        assert!(d.is_mid_message());
        d.push(&bytes[4..16]);
        assert_eq!(d.wanted(), 0);
        assert!(matches!(d.poll(), Ok(Some(Event::Acceptor(_)))));
        assert_eq!((d.stage(), d.wanted()), (Stage::Hello, 4));
        d.push(&bytes[16..24]);
        assert_eq!(d.wanted(), 48);
        d.push(&bytes[24..72]);
        assert!(matches!(d.poll(), Ok(Some(Event::Hello { .. }))));
        assert_eq!(d.version(), Some(ProtoVersion::V3));
        assert_eq!((d.stage(), d.wanted()), (Stage::KsockHeader, 24));
        d.push(&bytes[72..96]);
        assert_eq!(d.wanted(), 72);
        assert_eq!(d.poll(), Ok(None));
        assert_eq!(d.stage(), Stage::LnetHeader);
        assert!(d.is_mid_message());
        d.push(&bytes[96..168]);
        assert!(matches!(d.poll(), Ok(Some(Event::Lnet { .. }))));
        // Keepalive NOOP.
        d.push(&bytes[168..180]);
        assert_eq!(d.wanted(), 12);
        d.push(&bytes[180..192]);
        assert_eq!(d.wanted(), 0);
        assert!(matches!(d.poll(), Ok(Some(Event::Noop(_)))));
        // REPLY with 64 bytes of payload.
        d.push(&bytes[192..192 + 96]);
        assert_eq!(d.poll(), Ok(None));
        assert_eq!((d.stage(), d.wanted()), (Stage::Payload, 64));
        assert_eq!(
            d.finish(),
            Err(DeframeError::UnexpectedEof {
                stage: Stage::Payload,
                buffered: 96
            })
        );
        assert_eq!(d.stage(), Stage::Payload);
        assert_eq!(d.wanted(), 0);
    }

    #[test]
    fn finish_between_frames_is_clean() {
        let mut d = Deframer::for_frames(Side::Passive, ProtoVersion::V3, ByteOrder::Little);
        d.push(&unhex(SPEC_7_4_KEEPALIVE));
        assert!(matches!(d.poll(), Ok(Some(Event::Noop(_)))));
        assert_eq!(d.finish(), Ok(()));
        let mut d = Deframer::new(Side::Passive);
        assert_eq!(d.finish(), Ok(()));
        d.push(&[0x00, 0x71]);
        assert_eq!(
            d.finish(),
            Err(DeframeError::UnexpectedEof {
                stage: Stage::AcceptorRequest,
                buffered: 2
            })
        );
        assert!(d.error().is_some());
    }

    #[test]
    fn payload_is_split_off_without_a_copy() {
        let bytes = unhex(SPEC_7_3_REPLY);
        let data = BytesMut::from(&bytes[..]);
        let base = data.as_ptr() as usize;
        let mut d = Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little);
        d.feed(data);
        let (_, _, payload) = lnet_event(&d.poll().unwrap().unwrap());
        assert_eq!(payload.as_ptr() as usize, base + 96);
        assert_eq!(&payload[..], &bytes[96..]);
        // feed() after push() keeps the order.
        let mut d = Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little);
        d.push(&bytes[..50]);
        d.feed(BytesMut::from(&bytes[50..]));
        let (_, _, again) = lnet_event(&d.poll().unwrap().unwrap());
        assert_eq!(again, payload);
    }

    #[test]
    fn active_side_refused_with_none() {
        let mut d = Deframer::new(Side::Active);
        d.push(&unhex(SPEC_7_1_REPLY_NONE));
        let Ok(Some(Event::Hello { hello, .. })) = d.poll() else {
            panic!("expected the HELLO")
        };
        assert_eq!(hello.ctype, ConnType::None);
        assert_eq!((d.stage(), d.wanted()), (Stage::Refused, 0));
        assert_eq!(d.poll(), Ok(None));
        assert_eq!(d.finish(), Ok(()));
        d.push(&[0xC0]);
        assert_eq!(
            d.poll(),
            Err(DeframeError::DataAfterRefusal { buffered: 1 })
        );
        assert_eq!(
            d.poll(),
            Err(DeframeError::DataAfterRefusal { buffered: 1 })
        );
        assert_eq!(d.stage(), Stage::Refused);
    }

    #[test]
    fn flipped_connection_swaps_ksock_headers_only() {
        let hello = Hello::new(
            ProtoVersion::V3,
            ProcessId::lustre(nid("10.0.0.1@tcp")),
            nid("10.0.0.2@tcp"),
            99,
            ConnType::BulkIn,
        );
        let mut stream = Vec::new();
        hello.encode_in(ByteOrder::Big, &mut stream).unwrap();
        encode_noop(
            &KsockHeader::zc_ack_range(3, 9),
            ByteOrder::Big,
            &mut stream,
        )
        .unwrap();
        let reply = unhex(SPEC_7_3_REPLY);
        let ksock = KsockHeader {
            zc_cookies: [0x1234, 5],
            ..KsockHeader::lnet()
        };
        stream.extend_from_slice(&ksock.encode_in(ByteOrder::Big));
        stream.extend_from_slice(&reply[24..]);
        let (events, err) = run(Side::Active, &stream, &[5]);
        assert_eq!(err, None);
        assert_eq!(
            events[0],
            Event::Hello {
                hello,
                order: ByteOrder::Big
            }
        );
        assert_eq!(events[1], Event::Noop(KsockHeader::zc_ack_range(3, 9)));
        let (k, header, _) = lnet_event(&events[2]);
        assert_eq!(k, ksock);
        assert_eq!(header.payload_length, 64);
        // The same frames read as little-endian are refused.
        let mut d = Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little);
        d.push(&stream[56..]);
        assert_eq!(
            d.poll(),
            Err(DeframeError::Ksock(KsockError::UnknownType {
                value: 0xC000_0000
            }))
        );
    }

    #[test]
    fn v4_session_uses_96_byte_headers() {
        let router = nid("fe80::1@tcp");
        let peer = nid("fe80::2@tcp");
        let mut stream = AcceptorRequest::new(router).unwrap().encode().unwrap();
        Hello::new(
            ProtoVersion::V4,
            ProcessId::lustre(peer),
            router,
            1,
            ConnType::BulkOut,
        )
        .encode_in(ByteOrder::Little, &mut stream)
        .unwrap();
        let header = Header {
            dest_nid: nid("fe80::3@tcp1"),
            src_nid: peer,
            dest_pid: PID_LUSTRE,
            src_pid: PID_LUSTRE,
            payload_length: 5,
            msg: Message::Put {
                ack_wmd: WireHandle::NONE,
                match_bits: 0,
                hdr_data: 0,
                ptl_index: 4,
                offset: 0,
            },
        };
        let start = stream.len();
        encode_lnet(
            &KsockHeader::lnet(),
            &header,
            HeaderForm::Large,
            b"hello",
            ByteOrder::Little,
            &mut stream,
        )
        .unwrap();
        assert_eq!(stream.len() - start, 120 + 5);
        let (events, err) = run(Side::Passive, &stream, &[3]);
        assert_eq!(err, None);
        assert_eq!(events.len(), 3);
        assert_eq!(
            events[2],
            Event::Lnet {
                ksock: KsockHeader::lnet(),
                header,
                payload: Bytes::from_static(b"hello"),
            }
        );
    }

    #[test]
    fn checksummed_frames_verify() {
        let mut reply = unhex(SPEC_7_3_REPLY);
        let csum = seal_frame(&mut reply, ByteOrder::Little);
        let mut noop = KsockHeader::zc_ack(7).encode();
        let noop_csum = seal_frame(&mut noop, ByteOrder::Little);
        let events = run_frames(&[reply, noop.to_vec()].concat()).unwrap();
        let (k, _, _) = lnet_event(&events[0]);
        assert_eq!(k.csum, csum);
        assert_eq!(
            events[1],
            Event::Noop(KsockHeader {
                csum: noop_csum,
                ..KsockHeader::zc_ack(7)
            })
        );
    }

    #[test]
    fn oversize_payload_fails_before_any_payload_arrives() {
        let mut d = Deframer::for_frames(Side::Passive, ProtoVersion::V3, ByteOrder::Little);
        let mut frame = KsockHeader::lnet().encode().to_vec();
        frame.extend(put_header(LNET_MTU + 1));
        d.push(&frame);
        assert_eq!(
            d.poll(),
            Err(DeframeError::Header(HeaderError::PayloadTooLarge {
                msg_type: MsgType::Put,
                payload_length: LNET_MTU + 1,
                max: LNET_MTU
            }))
        );
        assert_eq!(d.stage(), Stage::LnetHeader);
        // Stays failed; pushed bytes are dropped.
        d.push(&[0; 1000]);
        assert_eq!(d.buffered(), 0);
        assert!(matches!(d.poll(), Err(DeframeError::Header(_))));
        assert!(matches!(d.finish(), Err(DeframeError::Header(_))));
        assert!(matches!(d.error(), Some(DeframeError::Header(_))));
        // LNET_MTU itself is fine.
        let mut d = Deframer::for_frames(Side::Passive, ProtoVersion::V3, ByteOrder::Little);
        let mut frame = KsockHeader::lnet().encode().to_vec();
        frame.extend(put_header(LNET_MTU));
        d.push(&frame);
        assert_eq!(d.poll(), Ok(None));
        assert_eq!(d.wanted(), LNET_MTU as usize);
        assert_eq!(
            d.wanted() + d.buffered(),
            super::super::frame::MAX_FRAME_BYTES - 24
        );
    }

    fn put_header(payload_length: u32) -> Vec<u8> {
        Header {
            dest_nid: nid("10.0.0.1@tcp"),
            src_nid: nid("10.0.0.2@tcp"),
            dest_pid: PID_LUSTRE,
            src_pid: PID_LUSTRE,
            payload_length,
            msg: Message::Put {
                ack_wmd: WireHandle::NONE,
                match_bits: 0,
                hdr_data: 0,
                ptl_index: 4,
                offset: 0,
            },
        }
        .encode_nid4()
        .unwrap()
        .to_vec()
    }

    #[test]
    fn malformed_streams_get_specific_errors() {
        let handshake = [unhex(SPEC_7_1_ACCEPTOR), unhex(SPEC_7_1_PEER)].concat();
        let after_handshake = |frame: Vec<u8>| [handshake.clone(), frame].concat();
        let lnet = KsockHeader::lnet().encode().to_vec();
        let with_header = |mut header: Vec<u8>, edit: &dyn Fn(&mut Vec<u8>)| {
            edit(&mut header);
            after_handshake([lnet.clone(), header].concat())
        };
        let v1 = V1Hello::new(
            ProcessId::lustre(nid("192.168.1.2@tcp")),
            5,
            ConnType::Control,
        )
        .unwrap();
        let seventeen = Hello {
            ips: vec![Ipv4Addr::new(10, 0, 0, 1); 17],
            ..Hello::new(
                ProtoVersion::V3,
                ProcessId::lustre(nid("192.168.1.2@tcp")),
                nid("192.168.1.1@tcp"),
                5,
                ConnType::Control,
            )
        }
        .encode()
        .unwrap();
        let mut none_request = unhex(SPEC_7_1_PEER);
        none_request[48..52].copy_from_slice(&[0xFF; 4]);
        let mut bad_csum = unhex(SPEC_7_3_REPLY);
        bad_csum[4..8].copy_from_slice(&0x1234_5678u32.to_le_bytes());
        let bad_csum_computed = frame_csum(&bad_csum);
        let mut bad_noop_csum = KsockHeader::keepalive().encode();
        bad_noop_csum[4] = 1;
        let bad_noop_computed = frame_csum(&bad_noop_csum);
        let mut unknown_ksock = KsockHeader::lnet().encode();
        unknown_ksock[0] = 0xC2;
        let get_header = unhex(SPEC_7_2_GET)[24..].to_vec();

        let cases: Vec<(&str, Vec<u8>, DeframeError)> = vec![
            (
                "garbage before the acceptor request",
                b"GET / HTTP/1.1\r\n".to_vec(),
                DeframeError::Acceptor(AcceptorError::BadMagic { got: 0x2054_4547 }),
            ),
            (
                "HELLO without acceptor request",
                unhex(SPEC_7_1_PEER),
                DeframeError::Acceptor(AcceptorError::ProtoMagic { got: 0x4572_6963 }),
            ),
            (
                "acceptor version 3",
                unhex("00 71 ce ac 03 00 00 00"),
                DeframeError::Acceptor(AcceptorError::UnknownVersion { version: 3 }),
            ),
            (
                "bad HELLO magic",
                [unhex(SPEC_7_1_ACCEPTOR), unhex("de ad be ef 03 00 00 00")].concat(),
                DeframeError::Hello(HelloError::BadMagic { got: 0xEFBE_ADDE }),
            ),
            (
                "wrong HELLO version",
                [unhex(SPEC_7_1_ACCEPTOR), unhex("63 69 72 45 05 00 00 00")].concat(),
                DeframeError::Hello(HelloError::UnknownVersion {
                    magic: 0x4572_6963,
                    version: 5,
                }),
            ),
            (
                "V1 HELLO",
                [unhex(SPEC_7_1_ACCEPTOR), v1.encode()].concat(),
                DeframeError::Hello(HelloError::UnsupportedV1 {
                    hello: Box::new(v1.clone()),
                }),
            ),
            (
                "nips 17",
                [unhex(SPEC_7_1_ACCEPTOR), seventeen[..56].to_vec()].concat(),
                DeframeError::Hello(HelloError::TooManyIps { nips: 17, max: 16 }),
            ),
            (
                "ctype NONE in a request",
                [unhex(SPEC_7_1_ACCEPTOR), none_request].concat(),
                DeframeError::Hello(HelloError::ConnTypeNoneInRequest),
            ),
            (
                "oversize payload_length",
                after_handshake([lnet.clone(), put_header(LNET_MTU + 1)].concat()),
                DeframeError::Header(HeaderError::PayloadTooLarge {
                    msg_type: MsgType::Put,
                    payload_length: LNET_MTU + 1,
                    max: LNET_MTU,
                }),
            ),
            (
                "ACK with payload",
                with_header(put_header(8), &|h| h[24] = 0),
                DeframeError::Header(HeaderError::UnexpectedPayload {
                    msg_type: MsgType::Ack,
                    payload_length: 8,
                }),
            ),
            (
                "GET with payload",
                with_header(get_header.clone(), &|h| h[28] = 1),
                DeframeError::Header(HeaderError::UnexpectedPayload {
                    msg_type: MsgType::Get,
                    payload_length: 1,
                }),
            ),
            (
                "LNet HELLO in a frame",
                with_header(put_header(0), &|h| h[24] = 4),
                DeframeError::Header(HeaderError::HelloNotAllowed),
            ),
            (
                "unknown LNet type",
                with_header(put_header(0), &|h| h[24] = 7),
                DeframeError::Header(HeaderError::UnknownType { value: 7 }),
            ),
            (
                "source NID ANY",
                with_header(put_header(0), &|h| h[8..16].fill(0xFF)),
                DeframeError::Header(HeaderError::SourceIsAny),
            ),
            (
                "unknown ksock type",
                after_handshake(unknown_ksock.to_vec()),
                DeframeError::Ksock(KsockError::UnknownType { value: 0xC2 }),
            ),
            (
                "bad checksum",
                after_handshake(bad_csum),
                DeframeError::Csum(CsumError::Mismatch {
                    received: 0x1234_5678,
                    computed: bad_csum_computed,
                }),
            ),
            (
                "bad NOOP checksum",
                after_handshake(bad_noop_csum.to_vec()),
                DeframeError::Csum(CsumError::Mismatch {
                    received: 1,
                    computed: bad_noop_computed,
                }),
            ),
            (
                "NID with the top byte set",
                with_header(get_header, &|h| h[7] = 0x01),
                DeframeError::Header(HeaderError::BadNid {
                    field: "dest_nid",
                    source: NidError::TopByteSet {
                        raw: 0x0102_0000_C0A8_0101,
                    },
                }),
            ),
        ];
        for (name, bytes, want) in cases {
            for chunk in [1, bytes.len()] {
                let (_, err) = run(Side::Passive, &bytes, &[chunk]);
                assert_eq!(err.as_ref(), Some(&want), "{name}, chunks of {chunk}");
            }
            let mut d = Deframer::new(Side::Passive);
            d.push(&bytes);
            let first = drain(&mut d).unwrap_err();
            assert_eq!(first, want, "{name}");
            assert_eq!(d.poll(), Err(want.clone()), "{name}: stays failed");
            d.push(&bytes);
            assert_eq!(d.poll(), Err(want), "{name}: still failed");
            assert_eq!(d.wanted(), 0);
        }
    }

    #[test]
    fn hello_errors_on_the_active_side_too() {
        let (_, err) = run(Side::Active, &unhex("63 69 72 45 07 00 00 00"), &[8]);
        assert!(matches!(
            err,
            Some(DeframeError::Hello(ref e)) if e.wants_version_reply()
        ));
        let mut src_any = unhex(KERNEL_HELLO_REPLY);
        src_any[8..16].fill(0xFF);
        let (_, err) = run(Side::Active, &src_any, &[56]);
        assert_eq!(err, Some(DeframeError::Hello(HelloError::SrcNidAny)));
    }

    /// One frame of a generated stream.
    #[derive(Debug, Clone)]
    enum TestFrame {
        Noop([u64; 2]),
        Lnet([u64; 2], Header, Vec<u8>),
    }

    fn frame_strategy(large: bool) -> impl Strategy<Value = (TestFrame, bool)> {
        (
            prop_oneof![
                1 => any::<[u64; 2]>().prop_map(TestFrame::Noop),
                3 => (any::<[u64; 2]>(), header_strategy(large, 4096))
                    .prop_map(|(c, (h, p))| TestFrame::Lnet(c, h, p)),
            ],
            proptest::bool::weighted(0.2),
        )
    }

    /// A whole connection: handshake for `side`, then frames, with the events it must give.
    fn session_strategy() -> impl Strategy<Value = (Side, Vec<u8>, Vec<Event>)> {
        (
            prop_oneof![Just(Side::Passive), Just(Side::Active)],
            hello_strategy().prop_filter("not a refusal", |h| h.ctype != ConnType::None),
            order_strategy(),
        )
            .prop_flat_map(|(side, hello, order)| {
                let large = hello.version == ProtoVersion::V4;
                (
                    Just(side),
                    Just(hello),
                    Just(order),
                    proptest::collection::vec(frame_strategy(large), 0..8),
                )
            })
            .prop_map(|(side, hello, order, frames)| {
                let mut bytes = Vec::new();
                let mut events = Vec::new();
                if side == Side::Passive {
                    let req = AcceptorRequest::new(hello.dst_nid)
                        .unwrap_or(AcceptorRequest::new(Nid::LO_0).unwrap());
                    bytes.extend(req.encode().unwrap());
                    events.push(Event::Acceptor(req));
                }
                hello.encode_in(order, &mut bytes).unwrap();
                let form = hello.version.header_form();
                events.push(Event::Hello { hello, order });
                for (frame, seal) in frames {
                    let start = bytes.len();
                    let mut ksock = match frame {
                        TestFrame::Noop(c) => KsockHeader {
                            msg_type: KsockType::Noop,
                            csum: 0,
                            zc_cookies: c,
                        },
                        TestFrame::Lnet(c, ..) => KsockHeader {
                            msg_type: KsockType::Lnet,
                            csum: 0,
                            zc_cookies: c,
                        },
                    };
                    match &frame {
                        TestFrame::Noop(_) => encode_noop(&ksock, order, &mut bytes).unwrap(),
                        TestFrame::Lnet(_, h, p) => {
                            encode_lnet(&ksock, h, form, p, order, &mut bytes).unwrap()
                        }
                    }
                    if seal {
                        ksock.csum = seal_frame(&mut bytes[start..], order);
                    }
                    events.push(match frame {
                        TestFrame::Noop(_) => Event::Noop(ksock),
                        TestFrame::Lnet(_, header, payload) => Event::Lnet {
                            ksock,
                            header,
                            payload: Bytes::from(payload),
                        },
                    });
                }
                (side, bytes, events)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn header_first_gives_the_same_frames(
            (side, bytes, events) in session_strategy(),
            chunks in proptest::collection::vec(1usize..700, 1..20),
            discard_mask in any::<u8>(),
            direct in any::<bool>(),
        ) {
            let discard = |i: usize| discard_mask & (1 << (i % 8)) != 0;
            let (got, err) = run_header_first(side, &bytes, &chunks, &discard, direct);
            prop_assert_eq!(err, None);
            prop_assert_eq!(got, with_discarded(&events, &discard));
        }

        #[test]
        fn header_first_corrupted_streams_fail_like_whole_frames(
            (side, bytes, _) in session_strategy(),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
            chunks in proptest::collection::vec(1usize..300, 1..8),
        ) {
            let mut bytes = bytes;
            let len = bytes.len();
            for (at, x) in flips {
                bytes[at % len] ^= x;
            }
            let (full, full_err) = run(side, &bytes, &chunks);
            let (got, err) = run_header_first(side, &bytes, &chunks, &|_| false, false);
            // Same error; `run` drops the events of the batch that failed, so the whole-frame
            // events are a prefix of the header-first ones.
            prop_assert_eq!(&err, &full_err);
            if err.is_none() {
                prop_assert_eq!(got, full);
            } else {
                prop_assert!(got.len() >= full.len());
                prop_assert_eq!(&got[..full.len()], &full[..]);
            }
        }

        #[test]
        fn streams_in_random_chunks_give_the_same_events(
            (side, bytes, events) in session_strategy(),
            chunks in proptest::collection::vec(1usize..700, 1..20),
        ) {
            let (got, err) = run(side, &bytes, &chunks);
            prop_assert_eq!(err, None);
            prop_assert_eq!(&got, &events);
            let (all, err) = run(side, &bytes, &[bytes.len().max(1)]);
            prop_assert_eq!(err, None);
            prop_assert_eq!(&all, &events);
        }

        #[test]
        fn corrupted_streams_never_panic(
            (side, bytes, _) in session_strategy(),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
            chunks in proptest::collection::vec(1usize..300, 1..8),
        ) {
            let mut bytes = bytes;
            let len = bytes.len();
            for (at, x) in flips {
                bytes[at % len] ^= x;
            }
            let mut d = Deframer::new(side);
            let mut rest = &bytes[..];
            let mut sizes = chunks.iter().copied().cycle();
            while !rest.is_empty() {
                let n = sizes.next().unwrap().min(rest.len());
                let (chunk, tail) = rest.split_at(n);
                rest = tail;
                d.push(chunk);
                let _ = d.wanted();
                let _ = d.stage();
                if let Err(first) = drain(&mut d) {
                    prop_assert_eq!(d.poll(), Err(first));
                    prop_assert_eq!(d.wanted(), 0);
                }
                prop_assert!(d.buffered() <= len);
            }
            let _ = d.finish();
        }

        #[test]
        fn garbage_never_panics(
            side in prop_oneof![Just(Side::Passive), Just(Side::Active)],
            bytes in proptest::collection::vec(any::<u8>(), 0..400),
        ) {
            let (_, _) = run(side, &bytes, &[13]);
            let mut d = Deframer::for_frames(side, ProtoVersion::V3, ByteOrder::Little);
            d.push(&bytes);
            let _ = drain(&mut d);
            let _ = d.finish();
        }
    }
}
