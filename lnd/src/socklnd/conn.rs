//! One established socklnd connection: a writer task and a reader task (socklnd
//! reference §3.5, §3.6, §3.8).
//!
//! The writer sends what is queued on the connection ([`outbox`]), in order, each frame
//! within the socklnd timeout, and completes the sends it wrote whole (dispatching what
//! waits for their credits) without going through the peer task. Its task writes only what
//! nobody else can write without waiting: a reader forwarding frames to this connection
//! writes them itself ([`batch`]). The reader follows the receive state machine by feeding every byte to
//! the sans-io [`Deframer`] in header-first mode (the one parser, fuzzed): ksock header,
//! LNet header, then it stops reading until the upper layer has said where the payload
//! goes, reads the payload straight into that buffer (or discards it), acknowledges a
//! zero-copy request, and delivers the message. A frame started but not finished within
//! the socklnd timeout closes the connection.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::task::Poll;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use lnet::{HeaderForm, ProcessId};
use tokio::io::AsyncReadExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tokio::time::Instant;

pub(crate) mod batch;
pub(crate) mod end;
pub(crate) mod item;
pub(crate) mod outbox;
pub(crate) mod queue;

pub(crate) use item::WriteItem;
pub(crate) use queue::ConnQueue;

use super::peer::cmd::PeerCmd;
use super::peer::tx::PeerTx;
use super::stats::WriteCounters;
use super::tunables::LiveTunables;
use super::wire::{ByteOrder, Deframer, Event, KsockHeader, ProtoVersion, Side, Stage, ZcAcks};
use crate::lnd::{Later, LndHandler, RxDecision, RxHeader, RxMessage, Taken};
use end::ConnEnd;
use outbox::{Coalesced, Outbox, Pushed, Round, WRITE_BATCH};

/// Frames up to this size are written with one write call (header and payload copied
/// together, with the other small frames queued at the same time); larger payloads are
/// written from their own buffer, by the writer task.
const COALESCE_BYTES: usize = 4096;
/// Bytes a reader asks the socket for while it is between payloads: the next headers, and
/// the frames after them, come in one read (a payload's first bytes read this way are
/// copied into its buffer; the rest is read straight into it).
const HEADER_READ: usize = 16 * 1024;
/// Most bytes read at once outside a payload read into the caller's buffer (a discarded
/// payload is read in chunks of this size).
const READ_CHUNK: usize = 64 * 1024;
/// Rounds of writes a reader makes on one connection before leaving what keeps coming to
/// its writer task.
const INLINE_ROUNDS: usize = 4;
/// Bytes a connection's staged frames hold at most (see [`outbox`]): past this, a reader
/// whose next frame waits writes them, as the start of more.
const STAGE_BYTES: usize = 8 * 1024;
/// Times a reader writes what it forwarded, and asks again, while the upper layer's
/// decision on a header waits, before it lets its task wait.
const DECIDE_ROUNDS: usize = 16;

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
    pub(crate) fn start(&self, first: u64, last: u64) -> bool {
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

/// What a writer needs to know of its connection.
pub(crate) struct WriterParts<H> {
    pub(crate) conn: u64,
    pub(crate) form: HeaderForm,
    /// The NI's live settings: the socklnd timeout bounds each write round.
    pub(crate) tunables: Arc<LiveTunables>,
    pub(crate) handler: Arc<H>,
    pub(crate) nid: lnet::Nid,
    pub(crate) peer: mpsc::Sender<PeerCmd>,
    /// The peer's send side (weak: the send side holds this writer's queue).
    pub(crate) tx: Weak<PeerTx>,
    pub(crate) progress: Arc<WriterProgress>,
    /// Frames the queue holds at most.
    pub(crate) capacity: usize,
    /// The NI's write counters.
    pub(crate) counts: Arc<WriteCounters>,
}

/// One connection's writing: its queue, its socket's write half, and the task that
/// writes what nobody else can write without waiting.
pub(crate) struct Writer<H> {
    parts: WriterParts<H>,
    half: OwnedWriteHalf,
    outbox: Outbox,
    me: Weak<Writer<H>>,
}

impl<H: LndHandler> Writer<H> {
    /// The writer of a connection whose write half is `half`.
    pub(crate) fn new(parts: WriterParts<H>, half: OwnedWriteHalf) -> Arc<Writer<H>> {
        let capacity = parts.capacity;
        Arc::new_cyclic(|me| Writer {
            parts,
            half,
            outbox: Outbox::new(capacity),
            me: me.clone(),
        })
    }

    /// The writer task: writes what is left to it until the connection closes or a
    /// write fails. What is queued together is written together: small frames are
    /// coalesced into one write.
    pub(crate) async fn run(self: Arc<Self>) {
        let mut batch: Vec<WriteItem> = Vec::with_capacity(WRITE_BATCH);
        let mut out = Coalesced::default();
        let mut sent: Vec<u64> = Vec::with_capacity(WRITE_BATCH);
        loop {
            let woken = self.outbox.wake.notified();
            let result = match self.outbox.take_round(&mut batch) {
                Round::Wait => {
                    woken.await;
                    continue;
                }
                // Closed by the peer task: the last reference to the write half shuts
                // our direction down.
                Round::Stop(None) => return,
                Round::Stop(Some(end)) => Err(end),
                Round::Rest(rest) => {
                    sent.extend(rest.ends.iter().map(|(seq, _)| *seq));
                    out = rest;
                    self.flush(&mut out).await
                }
                Round::Items => self.write_batch(&mut batch, &mut out, &mut sent).await,
            };
            if let Err(end) = result {
                self.outbox.release(None, None);
                let _ = self
                    .parts
                    .peer
                    .send(PeerCmd::Closed {
                        conn: self.parts.conn,
                        end,
                    })
                    .await;
                return;
            }
            self.parts.counts.by_writer_task();
            self.parts.progress.current.store(0, Ordering::SeqCst);
            self.completed(&mut sent);
            self.outbox.release(None, None);
        }
    }

    /// Writes the frames of `batch`, small ones together, large payloads from their own
    /// buffers; `sent` gets the send numbers of the LNET frames.
    async fn write_batch(
        &self,
        batch: &mut Vec<WriteItem>,
        out: &mut Coalesced,
        sent: &mut Vec<u64>,
    ) -> Result<(), ConnEnd> {
        for item in batch.drain(..) {
            match item {
                WriteItem::Noop(k) => out.bytes.extend_from_slice(&k.encode()),
                WriteItem::Lnet {
                    seq,
                    header,
                    payload,
                } => {
                    sent.push(seq);
                    if payload.len() <= COALESCE_BYTES {
                        out.push_frame(seq, self.parts.form, &header, &payload)
                            .map_err(cannot_encode)?;
                        continue;
                    }
                    let head = self.head(&header)?;
                    self.flush(out).await?;
                    if !self.parts.progress.start(seq, seq) {
                        return Err(ConnEnd::Local);
                    }
                    write_all(&self.half, &head, self.parts.tunables.timeout()).await?;
                    write_all(&self.half, &payload, self.parts.tunables.timeout()).await?;
                    // The payload's memory is the sender's again once the send completes.
                    drop(payload);
                    self.parts
                        .progress
                        .done_through
                        .store(seq, Ordering::SeqCst);
                    // A large frame's send completes as soon as it is out.
                    self.completed(sent);
                }
            }
        }
        self.flush(out).await
    }

    /// The ksock and LNet headers of an LNET frame.
    fn head(&self, header: &lnet::Header) -> Result<Vec<u8>, ConnEnd> {
        let mut head = KsockHeader::lnet().encode().to_vec();
        header
            .encode_into(self.parts.form, &mut head)
            .map_err(cannot_encode)?;
        Ok(head)
    }

    /// Completes the sends `sent` names, all handed to TCP whole or staged.
    fn completed(&self, sent: &mut Vec<u64>) {
        if sent.is_empty() {
            return;
        }
        let Some(tx) = self.parts.tx.upgrade() else {
            sent.clear();
            return;
        };
        let done = tx.written(self.parts.nid, self.parts.conn, sent);
        sent.clear();
        // One write's sends, completed together.
        self.parts.handler.on_sends_complete(done);
    }

    /// Marks the frames of `out` whose last byte is within the first `written` bytes
    /// done, and the first one that is not as the one under way.
    fn mark(&self, out: &Coalesced, written: usize) {
        let progress = &self.parts.progress;
        // Frames end in `seq` order: one store for the last one done (each store is a
        // fence on this path, once per write, not once per frame).
        let (mut done, mut next) = (None, None);
        for (seq, end) in &out.ends {
            if *end <= written {
                done = Some(*seq);
            } else {
                next = Some(*seq);
                break;
            }
        }
        if let Some(seq) = done {
            progress.done_through.store(seq, Ordering::SeqCst);
        }
        progress.current.store(next.unwrap_or(0), Ordering::SeqCst);
    }

    /// Writes the coalesced frames, keeping the progress exact after every write (a
    /// frame is done once its last byte is in, the one cut short is current), so that
    /// whatever stops the writer, the peer task knows which frames went out whole.
    async fn flush(&self, out: &mut Coalesced) -> Result<(), ConnEnd> {
        if out.bytes.is_empty() {
            return Ok(());
        }
        if let (Some((first, _)), Some((last, _))) = (out.ends.first(), out.ends.last()) {
            if !self.parts.progress.start(*first, *last) {
                out.bytes.clear();
                out.ends.clear();
                return Err(ConnEnd::Local);
            }
        }
        let io = async {
            let mut off = 0usize;
            while off < out.bytes.len() {
                let n = write_some(&self.half, out.bytes.get(off..).unwrap_or_default()).await?;
                off += n;
                self.mark(out, off);
            }
            Ok(())
        };
        let result = match tokio::time::timeout(self.parts.tunables.timeout(), io).await {
            Err(_) => Err(ConnEnd::WriteStalled),
            Ok(Err(e)) => Err(ConnEnd::WriteFailed(e)),
            Ok(Ok(())) => Ok(()),
        };
        out.bytes.clear();
        out.ends.clear();
        result
    }

    /// Hands `buf` to the socket without blocking. With `more`, as the start of more
    /// (`MSG_MORE`, as the kernel's socklnd sends while more is queued): TCP holds what
    /// does not fill a segment until the next write without it or [`Writer::push`].
    fn send(&self, buf: &[u8], more: bool) -> io::Result<usize> {
        let stream: &tokio::net::TcpStream = self.half.as_ref();
        let flags = if more {
            libc::MSG_MORE | libc::MSG_NOSIGNAL
        } else {
            libc::MSG_NOSIGNAL
        };
        stream.try_io(tokio::io::Interest::WRITABLE, || {
            socket2::SockRef::from(stream).send_with_flags(buf, flags)
        })
    }

    /// One round of writes that never blocks: the staged frames, then the small frames at
    /// the head of the queue, as far as the socket takes them; the rest, or the error,
    /// goes to the writer task. With `more` (a frame the reader read waits), the new
    /// frames are staged instead while the staged bytes stay within [`STAGE_BYTES`],
    /// else written as the start of more.
    fn write_round(&self, scratch: &mut Scratch, more: bool) -> RoundEnd {
        let Scratch { batch, out, sent } = scratch;
        out.clear();
        sent.clear();
        if !self.outbox.take_now(batch, COALESCE_BYTES, out, !more) {
            return RoundEnd::Idle;
        }
        let mut failed = None;
        for item in batch.drain(..) {
            match item {
                WriteItem::Noop(k) => out.bytes.extend_from_slice(&k.encode()),
                WriteItem::Lnet {
                    seq,
                    header,
                    payload,
                } => {
                    if let Err(e) = out.push_frame(seq, self.parts.form, &header, &payload) {
                        failed = Some(cannot_encode(e));
                        break;
                    }
                }
            }
        }
        if failed.is_none() {
            if let (Some((first, _)), Some((last, _))) = (out.ends.first(), out.ends.last()) {
                if !self.parts.progress.start(*first, *last) {
                    // Closed meanwhile: the peer task settles these sends.
                    self.outbox.release(None, None);
                    return RoundEnd::Idle;
                }
            }
            if more && out.bytes.len() <= STAGE_BYTES {
                return self.stage(out, sent);
            }
        }
        let mut off = 0usize;
        while failed.is_none() && off < out.bytes.len() {
            match self.send(out.bytes.get(off..).unwrap_or_default(), more) {
                Ok(0) => failed = Some(ConnEnd::WriteFailed(io::ErrorKind::WriteZero.into())),
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => failed = Some(ConnEnd::WriteFailed(e)),
            }
        }
        self.mark(out, off);
        sent.extend(
            out.ends
                .iter()
                .take_while(|(_, end)| *end <= off)
                .map(|(seq, _)| *seq),
        );
        let rest = (off < out.bytes.len() && failed.is_none()).then(|| out.split_off_rest(off));
        self.parts.counts.by_reader(rest.is_some(), more);
        self.completed(sent);
        let stop = rest.is_some() || failed.is_some();
        if self.outbox.release(rest, failed) {
            if stop {
                self.outbox.wake.notify_one();
                return RoundEnd::Done;
            }
            return RoundEnd::Again;
        }
        RoundEnd::Done
    }

    /// Completes the new frames of `out` without writing them: their bytes, after those
    /// staged before, stay in the queue for the next write (noted for this thread's
    /// flush).
    fn stage(&self, out: &mut Coalesced, sent: &mut Vec<u64>) -> RoundEnd {
        let progress = &self.parts.progress;
        if let Some((last, _)) = out.ends.last() {
            progress.done_through.store(*last, Ordering::SeqCst);
        }
        progress.current.store(0, Ordering::SeqCst);
        sent.extend(out.ends.iter().map(|(seq, _)| *seq));
        out.ends.clear();
        self.parts.counts.staged();
        if let Some(me) = self.me.upgrade() {
            batch::staged(me);
        }
        // Completions may queue more on this connection: it is in the middle of a round.
        self.completed(sent);
        RoundEnd::Staged {
            again: self.outbox.stage(out),
        }
    }
}

/// How a round of non-blocking writes ended.
enum RoundEnd {
    /// Nothing was written: nothing queued, or the write turn is someone else's.
    Idle,
    /// Staged, not written; `again`: more was queued meanwhile.
    Staged { again: bool },
    /// Written; more was queued meanwhile, for another round.
    Again,
    /// Written; nothing more for now, or the rest is the writer task's.
    Done,
}

/// The buffers of a reader's rounds of writes, kept by its thread from round to round.
#[derive(Default)]
struct Scratch {
    batch: Vec<WriteItem>,
    out: Coalesced,
    sent: Vec<u64>,
}

thread_local! {
    static SCRATCH: std::cell::Cell<Option<Box<Scratch>>> = const { std::cell::Cell::new(None) };
}

impl<H: LndHandler> batch::WriteNow for Writer<H> {
    fn write_now(&self, more: bool) -> bool {
        // Taken while in use: a write made meanwhile (none is) would use buffers of its
        // own.
        let mut scratch = SCRATCH.with(std::cell::Cell::take).unwrap_or_default();
        let mut wrote = false;
        let mut rounds = 0;
        let end = loop {
            if rounds == INLINE_ROUNDS {
                self.outbox.wake.notify_one();
                break wrote;
            }
            rounds += 1;
            match self.write_round(&mut scratch, more) {
                RoundEnd::Idle | RoundEnd::Staged { again: false } => break wrote,
                RoundEnd::Staged { again: true } => {}
                RoundEnd::Done => break true,
                RoundEnd::Again => wrote = true,
            }
        };
        scratch.out.clear();
        scratch.sent.clear();
        scratch.batch.clear();
        SCRATCH.with(|s| s.set(Some(scratch)));
        end
    }

    fn push(&self) {
        let stream: &tokio::net::TcpStream = self.half.as_ref();
        // Taking the cork off sends what the writes with `MSG_MORE` left in the socket.
        if let Err(e) = socket2::SockRef::from(stream).set_cork(false) {
            tracing::debug!(conn = self.parts.conn, %e, "socklnd: push failed");
        }
    }

    fn hand_off(&self) {
        self.outbox.hand_off();
    }
}

impl<H: LndHandler> ConnQueue for Writer<H> {
    fn push(&self, item: WriteItem, keep: usize) -> bool {
        let defer = batch::active();
        let Some(pushed) = self.outbox.push(item, keep, defer) else {
            return false;
        };
        match pushed {
            Pushed::Queued => {}
            Pushed::Idle => {
                let deferred = defer
                    && self
                        .me
                        .upgrade()
                        .is_some_and(|me| batch::defer(me as Arc<dyn batch::WriteNow>));
                if !deferred {
                    self.outbox.hand_off();
                }
            }
        }
        true
    }

    fn close(&self) {
        self.outbox.close();
    }
}

/// Writes some of `buf` once the socket takes it.
async fn write_some(half: &OwnedWriteHalf, buf: &[u8]) -> io::Result<usize> {
    loop {
        half.writable().await?;
        match half.try_write(buf) {
            Ok(0) if !buf.is_empty() => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Writes all of `buf` within `timeout`.
async fn write_all(half: &OwnedWriteHalf, buf: &[u8], timeout: Duration) -> Result<(), ConnEnd> {
    let io = async {
        let mut off = 0;
        while off < buf.len() {
            off += write_some(half, buf.get(off..).unwrap_or_default()).await?;
        }
        Ok::<(), io::Error>(())
    };
    match tokio::time::timeout(timeout, io).await {
        Err(_) => Err(ConnEnd::WriteStalled),
        Ok(Err(e)) => Err(ConnEnd::WriteFailed(e)),
        Ok(Ok(())) => Ok(()),
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
        self.touch_at(Instant::now());
    }

    pub(crate) fn touch_at(&self, now: Instant) {
        let ms = u64::try_from(now.saturating_duration_since(self.epoch).as_millis())
            .unwrap_or(u64::MAX);
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
    /// The NI's live settings: the socklnd timeout bounds a frame's arrival.
    pub(crate) tunables: Arc<LiveTunables>,
    pub(crate) peer: mpsc::Sender<PeerCmd>,
    pub(crate) alive: Arc<LastAlive>,
}

impl<H: LndHandler> Reader<H> {
    /// Reads frames until the connection ends, then tells the peer task why.
    pub(crate) async fn run(self, mut r: OwnedReadHalf) {
        // Frames forwarded from what this reader reads are written by it (see `batch`).
        let end = batch::Batched::new(self.read_frames(&mut r)).await;
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
            let mut budget = batch::FlushBudget::default();
            loop {
                let event = match d.poll() {
                    Ok(Some(event)) => event,
                    Ok(None) => break,
                    Err(e) => return ConnEnd::Deframe(e),
                };
                if budget.next_needs_flush() {
                    // The next hops start on what this read forwarded so far.
                    batch::flush();
                }
                let done = match self.on_event_now(&mut d, event) {
                    Ok(None) => Ok(()),
                    Ok(Some(waits)) => self.wait(&mut d, waits).await,
                    Err(end) => Err(end),
                };
                if let Err(end) = done {
                    return end;
                }
                if d.stage() == Stage::Payload {
                    // The payload's time starts once the upper layer has decided (taken
                    // below, before the payload is read).
                    deadline = None;
                }
            }
            if !d.is_mid_message() {
                deadline = None;
            } else if deadline.is_none() {
                deadline = Some(Instant::now() + self.tunables.timeout());
            }
            // What the frames read so far queued on other connections goes out now.
            batch::flush();
            // An idle connection keeps no read buffer.
            d.release_empty_buffer();
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
                    let now = Instant::now();
                    self.alive.touch_at(now);
                    batch::read_at(now);
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
            // A buffer of its own: reading into the deframer's, after what it holds, cost
            // 1 MiB bulk half its rate.
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

    /// The upper layer's decision on a header, when it has to wait (for a router buffer
    /// or credit). Meanwhile the frames already forwarded are written: their completions
    /// give back what it waits for, and it is asked again before this task yields.
    async fn decide<T>(&self, mut decision: Later<'_, T>) -> T {
        for _ in 0..DECIDE_ROUNDS {
            let now = std::future::poll_fn(|cx| Poll::Ready(decision.as_mut().poll(cx))).await;
            if let Poll::Ready(d) = now {
                return d;
            }
            if !batch::write_noted(true) {
                break;
            }
        }
        decision.await
    }

    /// Acts on an event without waiting, when it can: `Some` is what is left to wait for
    /// ([`Reader::wait`]).
    fn on_event_now(&self, d: &mut Deframer, event: Event) -> Result<Option<Waits<'_>>, ConnEnd> {
        match event {
            Event::Noop(ksock) => no_acks_expected(&ksock).map(|()| None),
            // A frame with no payload: its header decided and the message taken in one
            // call.
            Event::Lnet {
                ksock,
                header,
                payload,
            } => {
                no_acks_expected(&ksock)?;
                if let Some(cookie) = ksock.zc_request() {
                    return Ok(Some(Waits::ZcAck {
                        cookie,
                        then: Then::Whole(Box::new(self.message(header, payload))),
                    }));
                }
                self.whole(&mut Some(self.message(header, payload)))
            }
            Event::LnetHeader { ksock, header } => {
                no_acks_expected(&ksock)?;
                // Nothing is read while the upper layer decides: back-pressure on this
                // socket.
                let now = self.handler.on_header_now(RxHeader {
                    ni: self.ni,
                    from: self.from,
                    header,
                });
                match now {
                    Ok(decision) => apply_decision(d, decision).map(|()| None),
                    Err(later) => Ok(Some(Waits::Decision(later))),
                }
            }
            Event::LnetPayload {
                ksock,
                header,
                payload,
            } => {
                if let Some(cookie) = ksock.zc_request() {
                    let then = match payload {
                        Some(buf) => Then::Message(Box::new(self.message(header, buf.freeze()))),
                        None => Then::Nothing,
                    };
                    return Ok(Some(Waits::ZcAck { cookie, then }));
                }
                Ok(payload.and_then(|buf| {
                    self.handler
                        .on_message_now(self.message(header, buf.freeze()))
                        .map(Waits::Message)
                }))
            }
            other => Err(ConnEnd::Protocol(format!(
                "unexpected event after the handshake: {other:?}"
            ))),
        }
    }

    /// A message whose payload is in, for the upper layer.
    fn message(&self, header: lnet::Header, payload: Bytes) -> RxMessage {
        RxMessage {
            ni: self.ni,
            from: self.from,
            header,
            payload,
            received_at: batch::now(),
        }
    }

    /// Hands a message that came whole to the upper layer: `Some` is what is left to
    /// wait for.
    /// One that would wait for what the frames already forwarded hold (a router-buffer
    /// credit) waits for their writes instead: they are written, which gives it back,
    /// and the upper layer is asked again, as [`Reader::decide`] does for a wait.
    /// The message is lent to the upper layer in its slot (it is not moved at each ask).
    fn whole(&self, msg: &mut Option<RxMessage>) -> Result<Option<Waits<'_>>, ConnEnd> {
        for _ in 0..DECIDE_ROUNDS {
            if let Some(taken) = self.handler.try_whole_now(msg) {
                return whole_taken(taken);
            }
            if !batch::write_noted(true) {
                break;
            }
        }
        match msg.take() {
            Some(msg) => whole_taken(self.handler.on_whole_now(msg)),
            None => Ok(None),
        }
    }

    /// Waits for what [`Reader::on_event_now`] left.
    async fn wait(&self, d: &mut Deframer, waits: Waits<'_>) -> Result<(), ConnEnd> {
        match waits {
            Waits::Decision(later) => apply_decision(d, self.decide(later).await),
            Waits::Message(later) => {
                later.await;
                Ok(())
            }
            Waits::Whole(later) => {
                if self.decide(later).await {
                    Ok(())
                } else {
                    Err(ConnEnd::UpperLayer)
                }
            }
            Waits::ZcAck { cookie, then } => {
                if self.peer.send(PeerCmd::ZcAck { cookie }).await.is_err() {
                    return Err(ConnEnd::Local);
                }
                match then {
                    Then::Nothing => Ok(()),
                    Then::Message(message) => {
                        if let Some(later) = self.handler.on_message_now(*message) {
                            later.await;
                        }
                        Ok(())
                    }
                    Then::Whole(message) => {
                        let kept = match self.handler.on_whole_now(*message) {
                            Taken::Now => true,
                            Taken::Later(later) => self.decide(later).await,
                            Taken::Close => false,
                        };
                        kept.then_some(()).ok_or(ConnEnd::UpperLayer)
                    }
                }
            }
        }
    }
}

/// What is left of a message that came whole once the upper layer took it.
fn whole_taken(taken: Taken<'_>) -> Result<Option<Waits<'_>>, ConnEnd> {
    match taken {
        Taken::Now => Ok(None),
        Taken::Later(later) => Ok(Some(Waits::Whole(later))),
        Taken::Close => Err(ConnEnd::UpperLayer),
    }
}

/// What an event still waits for once [`Reader::on_event_now`] has acted on it.
enum Waits<'h> {
    /// The upper layer's decision on a header.
    Decision(Later<'h, RxDecision>),
    /// The upper layer taking a message.
    Message(Later<'h, ()>),
    /// The upper layer taking a message that came whole; `false`: close the connection.
    Whole(Later<'h, bool>),
    /// The peer asked for a ZC-ACK: it is queued on the peer task before the message, if
    /// any, goes up.
    ZcAck { cookie: u64, then: Then },
}

/// What goes up once a ZC-ACK is queued.
enum Then {
    /// Nothing: the payload was discarded.
    Nothing,
    /// A message whose payload was read as decided.
    Message(Box<RxMessage>),
    /// A message that came whole, not decided yet.
    Whole(Box<RxMessage>),
}

/// Tells the deframer where the payload of the header just decided goes.
fn apply_decision(d: &mut Deframer, decision: RxDecision) -> Result<(), ConnEnd> {
    let decided = match decision {
        RxDecision::Close => return Err(ConnEnd::UpperLayer),
        RxDecision::Receive(buf) => d.receive_payload(buf),
        RxDecision::Discard => d.discard_payload(),
    };
    decided.map_err(|e| ConnEnd::Protocol(e.to_string()))
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

/// A header that does not encode: checked when its send was accepted, so it cannot happen.
fn cannot_encode(e: lnet::HeaderError) -> ConnEnd {
    ConnEnd::Protocol(format!("cannot encode header: {e}"))
}
