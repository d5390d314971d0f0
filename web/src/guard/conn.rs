//! Every accepted connection goes through [`Guarded`]: a failed TLS handshake is counted
//! by its kind, and the connection's plaintext is watched by [`HeadTimer`], which cuts a
//! request head that is not complete within the head timeout.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum_server::accept::Accept;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use super::{GuardStats, Refusal};

/// The end of a request head.
const HEAD_END: &[u8; 4] = b"\r\n\r\n";

/// An acceptor around `A` (plain TCP, or TLS) that counts failed handshakes and wraps
/// each connection in a [`HeadTimer`].
#[derive(Debug, Clone)]
pub(crate) struct Guarded<A> {
    pub(crate) inner: A,
    pub(crate) stats: Arc<GuardStats>,
    pub(crate) header_timeout: Duration,
}

impl<A, S> Accept<TcpStream, S> for Guarded<A>
where
    A: Accept<TcpStream, S>,
    A::Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    A::Service: Send + 'static,
    A::Future: Send + 'static,
{
    type Stream = HeadTimer<A::Stream>;
    type Service = A::Service;
    type Future = Pin<Box<dyn Future<Output = io::Result<(Self::Stream, A::Service)>> + Send>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let peer = stream.peer_addr().ok();
        let handshake = self.inner.accept(stream, service);
        let stats = Arc::clone(&self.stats);
        let timeout = self.header_timeout;
        Box::pin(async move {
            match handshake.await {
                Ok((s, svc)) => Ok((HeadTimer::new(s, timeout, peer, stats), svc)),
                Err(e) => {
                    handshake_failed(&stats, peer, &e);
                    Err(e)
                }
            }
        })
    }
}

/// Counts and logs a failed handshake.
fn handshake_failed(stats: &GuardStats, peer: Option<SocketAddr>, e: &io::Error) {
    let tls = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    if let Some(rustls::Error::PeerIncompatible(why)) = tls {
        stats.count(Refusal::TlsIncompatible);
        tracing::warn!(?peer, ?why, "API: TLS handshake refused: {e}");
    } else if e.kind() == io::ErrorKind::TimedOut {
        stats.count(Refusal::TlsTimeout);
        tracing::warn!(
            ?peer,
            "API: TLS handshake not finished in time: connection closed"
        );
    } else {
        stats.count(Refusal::TlsFailed);
        tracing::debug!(?peer, "API: TLS handshake failed: {e}");
    }
}

/// Where a connection is in its request.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for a request head: `seen` bytes of it so far, the last three in `tail`.
    Head { seen: u64, tail: [u8; 3] },
    /// The head is complete: the request is read or handled, no deadline.
    Request,
}

/// A connection's stream that cuts a request head not complete within `timeout` of the
/// connection's start or of the last response write, with a counter and a log line (an
/// idle connection, which sent nothing of a head, is closed quietly). The deadline moves with every response write, so a stream
/// the server keeps writing to is never cut.
pub(crate) struct HeadTimer<S> {
    inner: S,
    phase: Phase,
    timeout: Duration,
    deadline: Pin<Box<Sleep>>,
    peer: Option<SocketAddr>,
    stats: Arc<GuardStats>,
}

impl<S> HeadTimer<S> {
    fn new(
        inner: S,
        timeout: Duration,
        peer: Option<SocketAddr>,
        stats: Arc<GuardStats>,
    ) -> HeadTimer<S> {
        HeadTimer {
            inner,
            phase: Phase::Head {
                seen: 0,
                tail: [0; 3],
            },
            timeout,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            peer,
            stats,
        }
    }

    /// Follows the head through newly read bytes.
    fn scan(&mut self, bytes: &[u8]) {
        let Phase::Head { seen, tail } = &mut self.phase else {
            return;
        };
        for &b in bytes {
            *seen += 1;
            if tail[0] == HEAD_END[0]
                && tail[1] == HEAD_END[1]
                && tail[2] == HEAD_END[2]
                && b == HEAD_END[3]
            {
                self.phase = Phase::Request;
                return;
            }
            *tail = [tail[1], tail[2], b];
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for HeadTimer<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Phase::Head { seen, .. } = this.phase {
            if this.deadline.as_mut().poll(cx).is_ready() {
                if seen > 0 {
                    this.stats.count(Refusal::SlowHeader);
                    tracing::warn!(peer = ?this.peer, bytes = seen, timeout = ?this.timeout,
                        "API: request head not complete in time: connection closed");
                } else {
                    this.stats.count(Refusal::Idle);
                    tracing::debug!(peer = ?this.peer, "API: idle connection closed");
                }
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "request head not complete in time",
                )));
            }
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let filled = buf.filled();
        if let Some(new) = filled.get(before..) {
            this.scan(new);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HeadTimer<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        if n > 0 {
            if let Phase::Request = this.phase {
                this.phase = Phase::Head {
                    seen: 0,
                    tail: [0; 3],
                };
            }
            if let Phase::Head { seen: 0, .. } = this.phase {
                let at = tokio::time::Instant::now() + this.timeout;
                this.deadline.as_mut().reset(at);
            }
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
