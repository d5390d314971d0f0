//! `GET /api/v1/events/stream`: the event ring as server-sent events.
//!
//! Each event is sent with `id:` its ring id, `event:` its type (`health`, `admin`, ...)
//! and `data:` its JSON ([`ApiEvent`]). A client resumes after a reconnection with the
//! `Last-Event-ID` header (or `?after=ID`); without either it gets the events recorded
//! from now on. A client that fell further behind than the ring holds first gets an
//! `event: lagged` with `data: {"missed": N}`. Comments keep idle connections open. The
//! stream ends when the server stops, and as soon as the token that opened it is revoked.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use tokio::sync::{watch, OwnedSemaphorePermit};
use utoipa::IntoParams;

use crate::auth::{TokenIdentity, TokenVerifier};
use crate::error::{ApiError, ErrorBody};
use crate::events::{ApiEvent, EventRing};
use crate::extract::{bearer_secret, QueryParams, Reader};
use crate::guard::Refusal;
use crate::state::AppState;

/// Events read from the ring per wake-up.
const BATCH: usize = 256;

/// Where the stream starts.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// Send the events with an id above this one first (`Last-Event-ID` wins when both
    /// are given); absent: only events recorded from now on.
    #[param(minimum = 0)]
    pub after: Option<u64>,
}

struct Cursor {
    ring: Arc<EventRing>,
    after: u64,
    wake: watch::Receiver<u64>,
    stop: watch::Receiver<bool>,
    buf: VecDeque<SseEvent>,
    /// The token that opened the stream, checked again at every revocation.
    token: StreamToken,
    /// This stream's place among the streams the server allows; freed with it.
    _permit: OwnedSemaphorePermit,
}

/// The token an event stream was opened with, so that the stream ends once it is revoked.
struct StreamToken {
    /// Who it is.
    who: TokenIdentity,
    /// Its secret, as presented: the stream checks it again as a new request would.
    secret: String,
    /// The server's tokens.
    tokens: Arc<dyn TokenVerifier>,
    /// Bumped at every revocation.
    revocations: watch::Receiver<u64>,
    /// The count of revocations when the token was last checked.
    checked_at: u64,
}

impl StreamToken {
    /// Whether the token still verifies as the one that opened the stream.
    fn still_valid(&self) -> bool {
        self.tokens.verify(&self.secret).as_ref() == Some(&self.who)
    }

    /// False once a revocation since the last check left the token revoked.
    fn check(&mut self) -> bool {
        let now = *self.revocations.borrow_and_update();
        if now != self.checked_at {
            self.checked_at = now;
            if !self.still_valid() {
                tracing::info!(token = %self.who.name, "API: event stream ended: its token was revoked");
                return false;
            }
        }
        true
    }
}

fn sse_event(e: &ApiEvent) -> SseEvent {
    let data = serde_json::to_string(e).unwrap_or_else(|_| "{}".into());
    SseEvent::default()
        .id(e.id.to_string())
        .event(e.event.type_name())
        .data(data)
}

impl Cursor {
    /// Fills the buffer from the ring; whether anything came.
    fn fill(&mut self) -> bool {
        // Seen before reading: an event recorded after this read wakes the next wait.
        self.wake.borrow_and_update();
        let page = self.ring.after(self.after, BATCH);
        if page.missed > 0 {
            self.buf.push_back(
                SseEvent::default()
                    .event("lagged")
                    .data(format!("{{\"missed\":{}}}", page.missed)),
            );
            self.after = page.first_id.saturating_sub(1);
        }
        for e in &page.events {
            self.after = e.id;
            self.buf.push_back(sse_event(e));
        }
        !self.buf.is_empty()
    }
}

fn events(cursor: Cursor) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    stream::unfold(cursor, |mut c| async move {
        loop {
            if !c.token.check() {
                return None;
            }
            if let Some(e) = c.buf.pop_front() {
                return Some((Ok(e), c));
            }
            if *c.stop.borrow() {
                return None;
            }
            if c.fill() {
                continue;
            }
            tokio::select! {
                woke = c.wake.changed() => if woke.is_err() { return None },
                stopped = c.stop.changed() => {
                    if stopped.is_err() || *c.stop.borrow() {
                        return None;
                    }
                }
                // The token is checked at the top of the loop; without the server's
                // state there is nothing left to stream.
                revoked = c.token.revocations.changed() => if revoked.is_err() { return None },
            }
        }
    })
}

/// The events as server-sent events (`text/event-stream`), resumable by id.
#[utoipa::path(get, path = "/api/v1/events/stream", tag = crate::api::TAG_EVENTS,
    security(("bearer" = [])),
    params(
        StreamQuery,
        ("Last-Event-ID" = Option<u64>, Header, description = "The id of the last event the client has"),
    ),
    responses(
        (status = 200, description = "A stream of `id:`/`event:`/`data:` records; each `data:` is an event's JSON",
            body = ApiEvent, content_type = "text/event-stream"),
        (status = 400, description = "A bad Last-Event-ID or query parameter", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "As many event streams are open as the server allows", body = ErrorBody),
    ))]
pub(crate) async fn event_stream(
    State(s): State<AppState>,
    r: Reader,
    headers: HeaderMap,
    QueryParams(q): QueryParams<StreamQuery>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let ring = Arc::clone(&s.shared.ring);
    let last = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
                .ok_or_else(|| ApiError::bad_request("Last-Event-ID", "not an event id"))?,
        ),
        None => None,
    };
    let after = last.or(q.after).unwrap_or_else(|| ring.last_id());
    let permit = Arc::clone(&s.shared.streams)
        .try_acquire_owned()
        .map_err(|_| {
            s.shared.guard.count(Refusal::EventStreamsFull);
            let max = s.shared.max_streams;
            tracing::warn!(
                max,
                "API: event stream refused: as many are open as allowed"
            );
            ApiError::Unavailable {
                message: format!("{max} event streams are open, as many as the server allows"),
            }
        })?;
    let revocations = s.shared.revocations.subscribe();
    let checked_at = *revocations.borrow();
    let token = StreamToken {
        who: r.0,
        secret: bearer_secret(&headers)?.to_owned(),
        tokens: Arc::clone(&s.shared.tokens),
        checked_at,
        revocations,
    };
    // A revocation between the token's check and the subscription above: refused now.
    if !token.still_valid() {
        return Err(ApiError::Unauthorized {
            message: "unknown or revoked token".into(),
        });
    }
    let cursor = Cursor {
        token,
        _permit: permit,
        wake: ring.watch(),
        stop: s.shared.stop.clone(),
        ring,
        after,
        buf: VecDeque::new(),
    };
    Ok(Sse::new(events(cursor)).keep_alive(KeepAlive::default()))
}
