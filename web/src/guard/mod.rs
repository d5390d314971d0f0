//! Protection against hostile API clients, each with a counter in [`GuardStats`] (served
//! as `lnet_router_api_refused_total{reason}` on `/metrics`) and a log line:
//!
//! | reason | what | limit |
//! | --- | --- | --- |
//! | `slow_header` | a request head (request line and headers) not complete in time | [`WebConfig::header_timeout`](crate::WebConfig) |
//! | `idle` | a connection silent both ways for as long (closed quietly, logged at debug) | the same |
//! | `tls_incompatible` | a TLS handshake the server refuses as incompatible: TLS below 1.2, no common cipher | rustls offers TLS 1.2 and 1.3 only |
//! | `tls_timeout` | a TLS handshake not finished in time | [`TLS_HANDSHAKE_TIMEOUT`] |
//! | `tls_failed` | any other failed TLS handshake (logged at debug) | |
//! | `body_too_large` | a request body over the limit, answered 413 | [`WebConfig::max_body_bytes`](crate::WebConfig) |
//! | `event_streams_full` | an event stream over the limit, answered 503 | [`WebConfig::max_event_streams`](crate::WebConfig) |
//! | `auth_failed` | a bearer token no token matches, answered 401 | |
//! | `auth_throttled` | a request with a token from an address that failed too often, answered 401 with `Retry-After` without checking the token | [`throttle`] |
//!
//! A slow body (after a complete head) is not cut by the head timeout; the body limit
//! bounds what it can send.

pub(crate) mod conn;
pub mod throttle;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a TLS handshake may take.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`WebConfig::header_timeout`](crate::WebConfig): longer than the event
/// stream's keep-alive comments (15 s), so an idle stream is never cut.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// Default of [`WebConfig::max_body_bytes`](crate::WebConfig): the API's largest body (a
/// peer with its NIDs, a fault rule) is well under a kilobyte.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024;
/// Default of [`WebConfig::max_event_streams`](crate::WebConfig).
pub const DEFAULT_MAX_EVENT_STREAMS: usize = 256;

/// Why the server refused or cut off a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// A request head not complete in time.
    SlowHeader,
    /// A connection idle both ways for the head timeout.
    Idle,
    /// A TLS handshake refused as incompatible (version below 1.2, no common cipher).
    TlsIncompatible,
    /// A TLS handshake not finished in time.
    TlsTimeout,
    /// Another failed TLS handshake.
    TlsFailed,
    /// A body over the limit (413).
    BodyTooLarge,
    /// An event stream over the limit (503).
    EventStreamsFull,
    /// An unknown token (401).
    AuthFailed,
    /// A token from an address in its back-off (401, `Retry-After`).
    AuthThrottled,
}

impl Refusal {
    /// Every reason, in order.
    pub const ALL: [Refusal; 9] = [
        Refusal::SlowHeader,
        Refusal::Idle,
        Refusal::TlsIncompatible,
        Refusal::TlsTimeout,
        Refusal::TlsFailed,
        Refusal::BodyTooLarge,
        Refusal::EventStreamsFull,
        Refusal::AuthFailed,
        Refusal::AuthThrottled,
    ];

    /// The `reason` label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Refusal::SlowHeader => "slow_header",
            Refusal::Idle => "idle",
            Refusal::TlsIncompatible => "tls_incompatible",
            Refusal::TlsTimeout => "tls_timeout",
            Refusal::TlsFailed => "tls_failed",
            Refusal::BodyTooLarge => "body_too_large",
            Refusal::EventStreamsFull => "event_streams_full",
            Refusal::AuthFailed => "auth_failed",
            Refusal::AuthThrottled => "auth_throttled",
        }
    }

    fn index(self) -> usize {
        Refusal::ALL
            .iter()
            .position(|r| *r == self)
            .unwrap_or_default()
    }
}

/// The refusal counters of one server.
#[derive(Debug, Default)]
pub struct GuardStats {
    counts: [AtomicU64; Refusal::ALL.len()],
}

impl GuardStats {
    /// Counts one refusal.
    pub(crate) fn count(&self, reason: Refusal) {
        if let Some(c) = self.counts.get(reason.index()) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The refusals of `reason` so far.
    pub fn get(&self, reason: Refusal) -> u64 {
        self.counts
            .get(reason.index())
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
}
