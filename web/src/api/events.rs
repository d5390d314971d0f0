//! `GET /api/v1/events`: the event log, paged forward (`after`) or back (`before`).

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorBody};
use crate::events::{ApiEvent, LogCursor, LogPage};
use crate::extract::{QueryParams, Reader};
use crate::state::AppState;

use super::TAG_EVENTS;

/// The default page size of `GET /api/v1/events`.
pub const EVENTS_PAGE: usize = 100;
/// The largest page size of `GET /api/v1/events`.
pub const EVENTS_PAGE_MAX: usize = 1000;

/// Where a page of events starts and how long it is.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Events with an id above this one, the oldest first (0 or absent: from the oldest
    /// kept). Not with `before`.
    #[param(minimum = 0)]
    pub after: Option<u64>,
    /// The newest events with an id below this one: a value above `last_id` (such as
    /// 9007199254740991) gives the newest events, and the `next_before` of a page the page
    /// of older events before it. Not with `after`.
    #[param(minimum = 0)]
    pub before: Option<u64>,
    /// At most this many (1..=1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
}

/// A page of events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventPage {
    /// The events, oldest first.
    pub events: Vec<ApiEvent>,
    /// The oldest id the server still keeps.
    pub first_available_id: u64,
    /// The newest id recorded so far (0: none yet).
    pub last_id: u64,
    /// Events after `after` that the server no longer keeps (0 for a page asked with
    /// `before`).
    pub missed: u64,
    /// The `after` of the next page.
    pub next_after: u64,
    /// The `before` of the page of older events: the oldest id in this page (`before`, or
    /// `after` + 1, when it is empty). Older events exist while it is above
    /// `first_available_id`.
    pub next_before: u64,
    /// The id of this run's first event: an event with a lower id was recorded before the
    /// server last started, and its `at_ms` is on the clock of that run (its `wall_ms`, when
    /// present, places it).
    pub run_first_id: u64,
    /// The node's clock now, in milliseconds: with the time the answer arrived, a client
    /// places every `at_ms` of this run on its own clock.
    pub now_ms: u64,
}

/// The last events (health, NI status, recovery, resends, routes, admin changes), paged.
/// The daemon serves its event log (which keeps the events of earlier runs, with their
/// wall-clock time in `wall_ms`); without one, the server's ring of the last events.
#[utoipa::path(get, path = "/api/v1/events", tag = TAG_EVENTS,
    security(("bearer" = [])),
    params(EventsQuery),
    responses(
        (status = 200, description = "A page of events", body = EventPage),
        (status = 400, description = "A bad query parameter, or both `after` and `before`", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 422, description = "A limit out of range", body = ErrorBody),
        (status = 503, description = "The event log cannot be read", body = ErrorBody),
    ))]
pub(crate) async fn get_events(
    State(s): State<AppState>,
    _r: Reader,
    QueryParams(q): QueryParams<EventsQuery>,
) -> Result<Json<EventPage>, ApiError> {
    let limit = match q.limit {
        None => EVENTS_PAGE,
        Some(n) => usize::try_from(n)
            .ok()
            .filter(|n| (1..=EVENTS_PAGE_MAX).contains(n))
            .ok_or_else(|| {
                ApiError::unprocessable("limit", format!("limit is 1..={EVENTS_PAGE_MAX}"))
            })?,
    };
    let cursor = match (q.after, q.before) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "before",
                "give `after` (page forward) or `before` (page back), not both",
            ))
        }
        (after, None) => LogCursor::After(after.unwrap_or(0)),
        (None, Some(before)) => LogCursor::Before(before),
    };
    let ring = &s.shared.ring;
    // The ring's newest id, read before the page: the page holds at least what it names.
    let last_id = ring.last_id();
    let logged = match &s.shared.sink {
        Some(sink) => sink
            .read(cursor, limit)
            .map_err(|e| ApiError::Unavailable {
                message: format!("the event log cannot be read: {e}"),
            })?,
        None => None,
    };
    let page = logged.unwrap_or_else(|| {
        let p = match cursor {
            LogCursor::After(after) => ring.after(after, limit),
            LogCursor::Before(before) => ring.before(before, limit),
        };
        LogPage {
            events: p.events,
            first_id: p.first_id,
        }
    });
    let (next_after, next_before, missed) = match cursor {
        LogCursor::After(after) => (
            page.events.last().map_or(after, |e| e.id),
            page.events
                .first()
                .map_or(after.saturating_add(1), |e| e.id),
            page.first_id.saturating_sub(after.saturating_add(1)),
        ),
        LogCursor::Before(before) => (
            page.events
                .last()
                .map_or(before.saturating_sub(1).min(last_id), |e| e.id),
            page.events.first().map_or(before, |e| e.id),
            0,
        ),
    };
    let newest = page.events.last().map_or(0, |e| e.id);
    Ok(Json(EventPage {
        first_available_id: page.first_id,
        last_id: last_id.max(newest),
        missed,
        next_after,
        next_before,
        run_first_id: ring.run_first_id(),
        now_ms: s.shared.node.clock().now().as_millis(),
        events: page.events,
    }))
}
