//! One established socklnd connection: a writer task and a reader task (socklnd
//! reference §3.5, §3.6, §3.8).
//!
//! The writer sends what is queued on it, in order, each frame within the socklnd
//! timeout, and completes the sends it wrote whole (dispatching what waits for their
//! credits) without going through the peer task. The reader follows the receive state machine by feeding every byte to
//! the sans-io [`Deframer`] in header-first mode (the one parser, fuzzed): ksock header,
//! LNet header, then it stops reading until the upper layer has said where the payload
//! goes, reads the payload straight into that buffer (or discards it), acknowledges a
//! zero-copy request, and delivers the message. A frame started but not finished within
//! the socklnd timeout closes the connection.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use lnet::{HeaderForm, ProcessId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tokio::time::Instant;

pub(crate) mod end;
pub(crate) mod item;

pub(crate) use item::WriteItem;

use super::peer::cmd::PeerCmd;
use super::peer::tx::{self, PeerTx};
use super::wire::{ByteOrder, Deframer, Event, KsockHeader, ProtoVersion, Side, Stage, ZcAcks};
use crate::lnd::{LndHandler, RxDecision, RxHeader, RxMessage};
use end::ConnEnd;

/// Frames up to this size are written with one write call (header and payload copied
/// together, with the other small frames queued at the same time); larger payloads are
/// written from their own buffer.
const COALESCE_BYTES: usize = 4096;
/// Most frames a writer takes from its queue for one round of writes.
const WRITE_BATCH: usize = 64;
/// Bytes a reader asks the socket for while it is between payloads: the next headers, and
/// the frames after them, come in one read (a payload's first bytes read this way are
/// copied into its buffer; the rest is read straight into it).
const HEADER_READ: usize = 16 * 1024;
/// Most bytes read at once outside a payload read into the caller's buffer (a discarded
/// payload is read in chunks of this size).
const READ_CHUNK: usize = 64 * 1024;

/// How far a writer got, shared with its peer task: frames go out in `seq` order, so
/// everything up to `done_through` is on the wire, and the write under way carries
/// `current..=current_last`.
///
/// A connection being closed is fenced: [`WriterProgress::close`] stops the writer from
/// starting any write after it, and names the sends a write already under way may put on
/// the wire, so that only sends that cannot reach the peer any more are sent again.
#[derive(Debug, Default)]
pub(crate) struct WriterProgress {
    current: AtomicU64,
    current_last: AtomicU64,
    done_through: AtomicU64,
    closed: AtomicBool,
}

impl WriterProgress {
    /// The writer is about to write sends `first..=last`: false once the connection is
    /// closed (nothing may be written then).
    fn start(&self, first: u64, last: u64) -> bool {
        self.current_last.store(last, Ordering::SeqCst);
        self.current.store(first, Ordering::SeqCst);
        !self.closed.load(Ordering::SeqCst)
    }

    /// Stops the writer from starting another write; the sends the write under way (if
    /// any) may still put on the wire, whole or in part.
    pub(crate) fn close(&self) -> Option<std::ops::RangeInclusive<u64>> {
        self.closed.store(true, Ordering::SeqCst);
        match self.current.load(Ordering::SeqCst) {
            0 => None,
            first => Some(first..=self.current_last.load(Ordering::SeqCst).max(first)),
        }
    }

    /// Whether send `seq` has been handed to TCP whole.
    pub(crate) fn is_done(&self, seq: u64) -> bool {
        seq <= self.done_through.load(Ordering::SeqCst)
    }
}

/// What the writer task needs.
pub(crate) struct Writer<H> {
    pub(crate) conn: u64,
    pub(crate) form: HeaderForm,
    pub(crate) timeout: Duration,
    pub(crate) handler: Arc<H>,
    pub(crate) nid: lnet::Nid,
    pub(crate) peer_id: ProcessId,
    pub(crate) peer: mpsc::Sender<PeerCmd>,
    pub(crate) tx: Arc<PeerTx>,
    pub(crate) progress: Arc<WriterProgress>,
}

impl<H: LndHandler> Writer<H> {
    /// Writes what comes in until the peer task drops the queue or a write fails. What
    /// is queued together is written together: small frames are coalesced into one write.
    pub(crate) async fn run(self, mut w: OwnedWriteHalf, mut rx: mpsc::Receiver<WriteItem>) {
        let mut batch: Vec<WriteItem> = Vec::with_capacity(WRITE_BATCH);
        let mut out = Coalesced::default();
        let mut sent: Vec<u64> = Vec::with_capacity(WRITE_BATCH);
        while let Some(first) = rx.recv().await {
            batch.push(first);
            while batch.len() < WRITE_BATCH {
                match rx.try_recv() {
                    Ok(item) => batch.push(item),
                    Err(_) => break,
                }
            }
            sent.clear();
            let mut result = Ok(());
            for item in batch.drain(..) {
                if result.is_err() {
                    break;
                }
                match item {
                    WriteItem::Noop(k) => out.bytes.extend_from_slice(&k.encode()),
                    WriteItem::Lnet {
                        seq,
                        header,
                        payload,
                    } => {
                        let mut head = KsockHeader::lnet().encode().to_vec();
                        if let Err(e) = header.encode_into(self.form, &mut head) {
                            // Checked when the send was accepted; cannot happen.
                            result = Err(ConnEnd::Protocol(format!("cannot encode header: {e}")));
                            break;
                        }
                        sent.push(seq);
                        if payload.len() <= COALESCE_BYTES {
                            out.push(seq, &head, &payload);
                            continue;
                        }
                        result = self.flush(&mut w, &mut out).await;
                        if result.is_ok() && !self.progress.start(seq, seq) {
                            result = Err(ConnEnd::Local);
                        }
                        if result.is_ok() {
                            result = self.write(&mut w, &head, Some(&payload)).await;
                            if result.is_ok() {
                                self.progress.done_through.store(seq, Ordering::SeqCst);
                                // A large frame's credit comes back as soon as it is out.
                                self.completed(&mut sent);
                            }
                        }
                    }
                }
            }
            if result.is_ok() {
                result = self.flush(&mut w, &mut out).await;
            }
            if let Err(end) = result {
                let _ = self
                    .peer
                    .send(PeerCmd::Closed {
                        conn: self.conn,
                        end,
                    })
                    .await;
                return;
            }
            self.progress.current.store(0, Ordering::SeqCst);
            self.completed(&mut sent);
        }
        // The peer task dropped the queue: close our direction.
        let _ = tokio::time::timeout(self.timeout, w.shutdown()).await;
    }

    /// Completes the sends `sent` names, all handed to TCP whole.
    fn completed(&self, sent: &mut Vec<u64>) {
        if sent.is_empty() {
            return;
        }
        let done = self.tx.written(self.conn, sent);
        sent.clear();
        tx::complete_all(&*self.handler, self.nid, self.peer_id, done);
    }

    /// Writes the coalesced frames, keeping the progress exact after every write (a
    /// frame is done once its last byte is in, the one cut short is current), so that
    /// whatever stops the writer, the peer task knows which frames went out whole.
    async fn flush(&self, w: &mut OwnedWriteHalf, out: &mut Coalesced) -> Result<(), ConnEnd> {
        if out.bytes.is_empty() {
            return Ok(());
        }
        let progress = &self.progress;
        let Coalesced { bytes, ends } = &*out;
        if let (Some((first, _)), Some((last, _))) = (ends.first(), ends.last()) {
            if !progress.start(*first, *last) {
                out.bytes.clear();
                out.ends.clear();
                return Err(ConnEnd::Local);
            }
        }
        let mut next = 0usize;
        let mark = |next: usize| {
            progress
                .current
                .store(ends.get(next).map_or(0, |e| e.0), Ordering::SeqCst);
        };
        let io = async {
            let mut off = 0usize;
            while let Some(rest) = bytes.get(off..).filter(|r| !r.is_empty()) {
                let n = w.write(rest).await?;
                if n == 0 {
                    return Err(io::Error::from(io::ErrorKind::WriteZero));
                }
                off += n;
                while let Some((seq, _)) = ends.get(next).filter(|(_, end)| *end <= off) {
                    progress.done_through.store(*seq, Ordering::SeqCst);
                    next += 1;
                }
                mark(next);
            }
            Ok(())
        };
        let result = match tokio::time::timeout(self.timeout, io).await {
            Err(_) => Err(ConnEnd::WriteStalled),
            Ok(Err(e)) => Err(ConnEnd::WriteFailed(e)),
            Ok(Ok(())) => Ok(()),
        };
        out.bytes.clear();
        out.ends.clear();
        result
    }

    async fn write(
        &self,
        w: &mut OwnedWriteHalf,
        head: &[u8],
        payload: Option<&[u8]>,
    ) -> Result<(), ConnEnd> {
        let io = async {
            w.write_all(head).await?;
            if let Some(p) = payload {
                w.write_all(p).await?;
            }
            Ok::<(), io::Error>(())
        };
        match tokio::time::timeout(self.timeout, io).await {
            Err(_) => Err(ConnEnd::WriteStalled),
            Ok(Err(e)) => Err(ConnEnd::WriteFailed(e)),
            Ok(Ok(())) => Ok(()),
        }
    }
}

/// Small frames waiting to be written together, with where each LNET frame ends.
#[derive(Debug, Default)]
struct Coalesced {
    bytes: Vec<u8>,
    /// The send number of each LNET frame in `bytes` and the offset just past its end.
    ends: Vec<(u64, usize)>,
}

impl Coalesced {
    fn push(&mut self, seq: u64, head: &[u8], payload: &[u8]) {
        self.bytes.extend_from_slice(head);
        self.bytes.extend_from_slice(payload);
        self.ends.push((seq, self.bytes.len()));
    }
}

/// When a peer was last heard from, shared by its connections' readers and its task.
#[derive(Debug)]
pub(crate) struct LastAlive {
    epoch: Instant,
    millis: AtomicU64,
}

impl LastAlive {
    pub(crate) fn new(now: Instant) -> LastAlive {
        LastAlive {
            epoch: now,
            millis: AtomicU64::new(0),
        }
    }

    pub(crate) fn touch(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.millis.fetch_max(ms, Ordering::AcqRel);
    }

    pub(crate) fn get(&self) -> Instant {
        self.epoch + Duration::from_millis(self.millis.load(Ordering::Acquire))
    }
}

/// What the reader task needs.
pub(crate) struct Reader<H> {
    pub(crate) conn: u64,
    pub(crate) handler: Arc<H>,
    pub(crate) ni: lnet::Nid,
    pub(crate) from: ProcessId,
    pub(crate) version: ProtoVersion,
    pub(crate) order: ByteOrder,
    pub(crate) timeout: Duration,
    pub(crate) peer: mpsc::Sender<PeerCmd>,
    pub(crate) alive: Arc<LastAlive>,
}

impl<H: LndHandler> Reader<H> {
    /// Reads frames until the connection ends, then tells the peer task why.
    pub(crate) async fn run(self, mut r: OwnedReadHalf) {
        let end = self.read_frames(&mut r).await;
        let _ = self
            .peer
            .send(PeerCmd::Closed {
                conn: self.conn,
                end,
            })
            .await;
    }

    /// Every byte from the peer goes through the (fuzzed) deframer in header-first mode;
    /// this loop only moves bytes and acts on its events.
    async fn read_frames(&self, r: &mut OwnedReadHalf) -> ConnEnd {
        let mut d = Deframer::for_frames(Side::Active, self.version, self.order).header_first();
        // Set while a frame is being received: the socklnd timeout runs.
        let mut deadline: Option<Instant> = None;
        loop {
            loop {
                let event = match d.poll() {
                    Ok(Some(event)) => event,
                    Ok(None) => break,
                    Err(e) => return ConnEnd::Deframe(e),
                };
                if let Err(end) = self.on_event(&mut d, event).await {
                    return end;
                }
                if d.stage() == Stage::Payload {
                    // The payload's time starts once the upper layer has decided.
                    deadline = Some(Instant::now() + self.timeout);
                }
            }
            if !d.is_mid_message() {
                deadline = None;
            }
            let read = self.read_some(r, &mut d, deadline).await;
            match read {
                Err(end) => return end,
                Ok(0) => {
                    return match d.finish() {
                        Ok(()) => ConnEnd::PeerClosed { mid_frame: false },
                        Err(e) => ConnEnd::Deframe(e),
                    }
                }
                Ok(_) => {
                    self.alive.touch();
                    if deadline.is_none() && d.is_mid_message() {
                        deadline = Some(Instant::now() + self.timeout);
                    }
                }
            }
        }
    }

    /// Reads what the deframer wants (payloads straight into the caller's buffer), at
    /// most one frame's worth, before `deadline` if set.
    async fn read_some(
        &self,
        r: &mut OwnedReadHalf,
        d: &mut Deframer,
        deadline: Option<Instant>,
    ) -> Result<usize, ConnEnd> {
        let io = async {
            if let Some((sink, left)) = d.payload_sink() {
                let mut limited = (&mut *r).take(u64::try_from(left).unwrap_or(u64::MAX));
                return limited.read_buf(sink).await;
            }
            let want = if d.stage() == Stage::Payload {
                d.wanted().clamp(1, READ_CHUNK)
            } else {
                d.wanted().clamp(HEADER_READ, READ_CHUNK)
            };
            let mut buf = BytesMut::with_capacity(want);
            let n = (&mut *r)
                .take(u64::try_from(want).unwrap_or(u64::MAX))
                .read_buf(&mut buf)
                .await?;
            d.feed(buf);
            Ok(n)
        };
        let result = match deadline {
            Some(at) => match tokio::time::timeout_at(at, io).await {
                Err(_) => return Err(ConnEnd::ReadStalled),
                Ok(r) => r,
            },
            None => io.await,
        };
        result.map_err(ConnEnd::ReadFailed)
    }

    async fn on_event(&self, d: &mut Deframer, event: Event) -> Result<(), ConnEnd> {
        match event {
            Event::Noop(ksock) => no_acks_expected(&ksock),
            Event::LnetHeader { ksock, header } => {
                no_acks_expected(&ksock)?;
                // Nothing is read while the upper layer decides: back-pressure on this
                // socket.
                let decision = self
                    .handler
                    .on_header(RxHeader {
                        ni: self.ni,
                        from: self.from,
                        header,
                    })
                    .await;
                let decided = match decision {
                    RxDecision::Close => return Err(ConnEnd::UpperLayer),
                    RxDecision::Receive(buf) => d.receive_payload(buf),
                    RxDecision::Discard => d.discard_payload(),
                };
                decided.map_err(|e| ConnEnd::Protocol(e.to_string()))
            }
            Event::LnetPayload {
                ksock,
                header,
                payload,
            } => {
                if let Some(cookie) = ksock.zc_request() {
                    if self.peer.send(PeerCmd::ZcAck { cookie }).await.is_err() {
                        return Err(ConnEnd::Local);
                    }
                }
                if let Some(buf) = payload {
                    self.handler
                        .on_message(RxMessage {
                            ni: self.ni,
                            from: self.from,
                            header,
                            payload: buf.freeze(),
                        })
                        .await;
                }
                Ok(())
            }
            other => Err(ConnEnd::Protocol(format!(
                "unexpected event after the handshake: {other:?}"
            ))),
        }
    }
}

/// This side never asks for zero-copy, so no ZC-ACK may come back (keepalives are fine).
fn no_acks_expected(ksock: &KsockHeader) -> Result<(), ConnEnd> {
    match ksock.acks() {
        ZcAcks::None | ZcAcks::Keepalive => Ok(()),
        acks => Err(ConnEnd::Protocol(format!(
            "ZC-ACK {acks:?} for a cookie never requested"
        ))),
    }
}
