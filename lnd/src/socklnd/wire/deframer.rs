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
//! An LNET frame with no payload (an ACK, a 0-byte PUT) has nothing to decide: it gives
//! one [`Event::Lnet`], as in the other mode, once its checksum is verified. NOOPs are the
//! same in both modes.
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
    /// Header-first mode: the ksock and LNet headers of an LNET frame with a payload (the
    /// header passed [`Header::check_lnet`]); no payload byte has been consumed yet. Say where the
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

    /// Gives back the memory behind an empty buffer. Once every byte of a read is taken,
    /// the buffer still holds the rest of that read's allocation, up to a read's size,
    /// for as long as the connection waits for its next bytes; the next read comes in a
    /// buffer of its own anyway ([`Deframer::feed`]).
    pub fn release_empty_buffer(&mut self) {
        if self.buf.is_empty() {
            self.buf = BytesMut::new();
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
                            if self.header_first && header.payload_length == 0 {
                                // Nothing to decide: the frame is all in.
                                let head_len = KSOCK_HEADER_BYTES + form.size();
                                verify_frame(
                                    self.buf.get(..head_len).unwrap_or_default(),
                                    ksock.csum,
                                )?;
                                self.buf.advance(head_len);
                                *pending = None;
                                return Ok(Some(Event::Lnet {
                                    ksock,
                                    header,
                                    payload: Bytes::new(),
                                }));
                            }
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
mod tests;
