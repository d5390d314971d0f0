//! One established socklnd connection: a writer task and a reader task (socklnd
//! reference §3.5, §3.6, §3.8).
//!
//! The writer sends what its peer task queues on it, in order, each frame within the
//! socklnd timeout. The reader follows the receive state machine: ksock header, LNet
//! header, then it stops reading until the upper layer has said where the payload goes,
//! reads the payload, acknowledges a zero-copy request, and delivers the message. A frame
//! started but not finished within the socklnd timeout closes the connection.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use lnet::{Header, HeaderForm, ProcessId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::peer::PeerCmd;
use super::status::TxFailure;
use super::wire::{ByteOrder, Csum, KsockHeader, KsockType, ZcAcks, KSOCK_HEADER_BYTES};
use crate::lnd::{LndHandler, RxDecision, RxHeader, RxMessage};

/// Frames up to this size are written with one write call (header and payload copied
/// together); larger payloads are written from their own buffer.
const COALESCE_BYTES: usize = 4096;
/// Chunk size when discarding a payload.
const DISCARD_CHUNK: usize = 64 * 1024;

/// What a writer sends.
#[derive(Debug)]
pub(crate) enum WriteItem {
    /// An LNET frame of the peer's send number `seq`.
    Lnet {
        seq: u64,
        header: Header,
        payload: Bytes,
    },
    /// A NOOP (ZC-ACK or keepalive).
    Noop(KsockHeader),
}

/// How far a writer got, shared with its peer task: frames go out in `seq` order, so
/// everything up to `done_through` is on the wire and `current` is being written.
#[derive(Debug, Default)]
pub(crate) struct WriterProgress {
    current: AtomicU64,
    done_through: AtomicU64,
}

impl WriterProgress {
    /// The send being written, if any.
    pub(crate) fn current(&self) -> Option<u64> {
        match self.current.load(Ordering::Acquire) {
            0 => None,
            seq => Some(seq),
        }
    }

    /// Whether send `seq` has been handed to TCP whole.
    pub(crate) fn is_done(&self, seq: u64) -> bool {
        seq <= self.done_through.load(Ordering::Acquire)
    }
}

/// Why a connection ended.
#[derive(Debug)]
pub(crate) enum ConnEnd {
    /// A write failed.
    WriteFailed(io::Error),
    /// A write made no progress for the socklnd timeout.
    WriteStalled,
    /// A read failed.
    ReadFailed(io::Error),
    /// A frame was started but not finished within the socklnd timeout.
    ReadStalled,
    /// The peer closed the connection (between frames or in the middle of one).
    PeerClosed { mid_frame: bool },
    /// The peer sent something invalid.
    Protocol(String),
    /// The upper layer asked to close it.
    UpperLayer,
    /// This side closed it (stale peer, stop).
    Local,
}

impl ConnEnd {
    /// The failure of the send that was being written when the connection ended this way.
    pub(crate) fn failure(&self) -> TxFailure {
        match self {
            ConnEnd::WriteFailed(e) => TxFailure::of_write_error(e),
            ConnEnd::WriteStalled | ConnEnd::ReadStalled => TxFailure::Stalled,
            ConnEnd::ReadFailed(_) | ConnEnd::PeerClosed { .. } => TxFailure::PeerClosed,
            ConnEnd::Protocol(_) | ConnEnd::UpperLayer | ConnEnd::Local => TxFailure::ClosedLocally,
        }
    }
}

impl std::fmt::Display for ConnEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnEnd::WriteFailed(e) => write!(f, "write failed: {e}"),
            ConnEnd::WriteStalled => f.write_str("write stalled for the socklnd timeout"),
            ConnEnd::ReadFailed(e) => write!(f, "read failed: {e}"),
            ConnEnd::ReadStalled => f.write_str("timeout receiving a frame"),
            ConnEnd::PeerClosed { mid_frame: false } => f.write_str("peer closed"),
            ConnEnd::PeerClosed { mid_frame: true } => f.write_str("peer closed mid-frame"),
            ConnEnd::Protocol(why) => write!(f, "protocol error: {why}"),
            ConnEnd::UpperLayer => f.write_str("closed by the upper layer"),
            ConnEnd::Local => f.write_str("closed by this side"),
        }
    }
}

/// What the writer task needs.
pub(crate) struct Writer {
    pub(crate) conn: u64,
    pub(crate) form: HeaderForm,
    pub(crate) timeout: Duration,
    pub(crate) peer: mpsc::Sender<PeerCmd>,
    pub(crate) progress: Arc<WriterProgress>,
}

impl Writer {
    /// Writes what comes in until the peer task drops the queue or a write fails.
    pub(crate) async fn run(self, mut w: OwnedWriteHalf, mut rx: mpsc::Receiver<WriteItem>) {
        while let Some(item) = rx.recv().await {
            let (seq, result) = match item {
                WriteItem::Noop(k) => (None, self.write(&mut w, &k.encode(), None).await),
                WriteItem::Lnet {
                    seq,
                    header,
                    payload,
                } => {
                    self.progress.current.store(seq, Ordering::Release);
                    let mut head = KsockHeader::lnet().encode().to_vec();
                    let result = match header.encode_into(self.form, &mut head) {
                        Err(e) => {
                            // Checked when the send was accepted; cannot happen.
                            Err(ConnEnd::Protocol(format!("cannot encode header: {e}")))
                        }
                        Ok(()) if head.len() + payload.len() <= COALESCE_BYTES => {
                            head.extend_from_slice(&payload);
                            self.write(&mut w, &head, None).await
                        }
                        Ok(()) => self.write(&mut w, &head, Some(&payload)).await,
                    };
                    (Some(seq), result)
                }
            };
            match (seq, result) {
                (Some(seq), Ok(())) => {
                    self.progress.done_through.store(seq, Ordering::Release);
                    if self
                        .peer
                        .send(PeerCmd::Sent {
                            conn: self.conn,
                            seq,
                        })
                        .await
                        .is_err()
                    {
                        return;
                    }
                    self.progress.current.store(0, Ordering::Release);
                }
                (None, Ok(())) => {}
                (_, Err(end)) => {
                    let _ = self
                        .peer
                        .send(PeerCmd::Closed {
                            conn: self.conn,
                            end,
                        })
                        .await;
                    return;
                }
            }
        }
        // The peer task dropped the queue: close our direction.
        let _ = tokio::time::timeout(self.timeout, w.shutdown()).await;
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
    pub(crate) form: HeaderForm,
    pub(crate) order: ByteOrder,
    pub(crate) timeout: Duration,
    pub(crate) peer: mpsc::Sender<PeerCmd>,
    pub(crate) alive: Arc<LastAlive>,
}

impl<H: LndHandler> Reader<H> {
    /// Reads frames until the connection ends, then tells the peer task why.
    pub(crate) async fn run(self, mut r: OwnedReadHalf) {
        let end = loop {
            if let Err(end) = self.frame(&mut r).await {
                break end;
            }
        };
        let _ = self
            .peer
            .send(PeerCmd::Closed {
                conn: self.conn,
                end,
            })
            .await;
    }

    /// Fills `buf` before `deadline`.
    async fn fill(
        &self,
        r: &mut OwnedReadHalf,
        buf: &mut [u8],
        deadline: Instant,
    ) -> Result<(), ConnEnd> {
        let mut got = 0;
        while got < buf.len() {
            let rest = buf.get_mut(got..).unwrap_or_default();
            match tokio::time::timeout_at(deadline, r.read(rest)).await {
                Err(_) => return Err(ConnEnd::ReadStalled),
                Ok(Err(e)) => return Err(ConnEnd::ReadFailed(e)),
                Ok(Ok(0)) => return Err(ConnEnd::PeerClosed { mid_frame: true }),
                Ok(Ok(n)) => {
                    got += n;
                    self.alive.touch();
                }
            }
        }
        Ok(())
    }

    async fn frame(&self, r: &mut OwnedReadHalf) -> Result<(), ConnEnd> {
        let mut kb = [0u8; KSOCK_HEADER_BYTES];
        // Idle between frames is fine; once a frame starts the timeout runs.
        let n = match r.read(&mut kb).await {
            Err(e) => return Err(ConnEnd::ReadFailed(e)),
            Ok(0) => return Err(ConnEnd::PeerClosed { mid_frame: false }),
            Ok(n) => n,
        };
        self.alive.touch();
        let deadline = Instant::now() + self.timeout;
        self.fill(r, kb.get_mut(n..).unwrap_or_default(), deadline)
            .await?;
        let ksock =
            KsockHeader::decode(&kb, self.order).map_err(|e| ConnEnd::Protocol(e.to_string()))?;
        // This side never asks for zero-copy, so no ACK may come back.
        match ksock.acks() {
            ZcAcks::None | ZcAcks::Keepalive => {}
            acks => {
                return Err(ConnEnd::Protocol(format!(
                    "ZC-ACK {acks:?} for a cookie never requested"
                )))
            }
        }
        if ksock.msg_type == KsockType::Noop {
            return match super::wire::verify_frame(&kb, ksock.csum) {
                Ok(()) => Ok(()),
                Err(e) => Err(ConnEnd::Protocol(e.to_string())),
            };
        }
        let mut hb = vec![0u8; self.form.size()];
        self.fill(r, &mut hb, deadline).await?;
        let header =
            Header::decode(&hb, self.form).map_err(|e| ConnEnd::Protocol(e.to_string()))?;
        header
            .check_lnet()
            .map_err(|e| ConnEnd::Protocol(e.to_string()))?;
        let len = usize::try_from(header.payload_length).unwrap_or(usize::MAX);
        // Nothing is read while the upper layer decides: back-pressure on this socket.
        let decision = self
            .handler
            .on_header(RxHeader {
                ni: self.ni,
                from: self.from,
                header,
            })
            .await;
        let deadline = Instant::now() + self.timeout;
        let mut csum = (ksock.csum != 0).then(|| {
            let mut c = Csum::new();
            let mut zeroed = kb;
            if let Some(field) = zeroed.get_mut(4..8) {
                field.fill(0);
            }
            c.update(&zeroed);
            c.update(&hb);
            c
        });
        let payload = match decision {
            RxDecision::Close => return Err(ConnEnd::UpperLayer),
            RxDecision::Receive(mut buf) => {
                buf.clear();
                buf.resize(len, 0);
                self.fill(r, &mut buf, deadline).await?;
                if let Some(c) = csum.as_mut() {
                    c.update(&buf);
                }
                Some(buf)
            }
            RxDecision::Discard => {
                let mut scratch = BytesMut::zeroed(DISCARD_CHUNK.min(len));
                let mut left = len;
                while left > 0 {
                    let chunk = scratch
                        .get_mut(..left.min(DISCARD_CHUNK))
                        .unwrap_or_default();
                    self.fill(r, chunk, deadline).await?;
                    if let Some(c) = csum.as_mut() {
                        c.update(chunk);
                    }
                    left -= chunk.len();
                }
                None
            }
        };
        if let Some(c) = csum {
            let computed = c.finish();
            if computed != ksock.csum {
                return Err(ConnEnd::Protocol(format!(
                    "ksock checksum mismatch: frame says {:#010x}, contents give {computed:#010x}",
                    ksock.csum
                )));
            }
        }
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
}
