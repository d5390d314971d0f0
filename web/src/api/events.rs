//! `GET /api/v1/events`: the last events, paged.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorBody};
use crate::events::ApiEvent;
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
    /// Events with an id above this one (0 or absent: from the oldest kept).
    #[param(minimum = 0)]
    pub after: Option<u64>,
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
    /// Events after `after` that the server no longer keeps.
    pub missed: u64,
    /// The `after` of the next page.
    pub next_after: u64,
}

/// The last events (health, NI status, recovery, resends, routes, admin changes), paged.
#[utoipa::path(get, path = "/api/v1/events", tag = TAG_EVENTS,
    security(("bearer" = [])),
    params(EventsQuery),
    responses(
        (status = 200, description = "A page of events", body = EventPage),
        (status = 400, description = "A bad query parameter", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 422, description = "A limit out of range", body = ErrorBody),
    ))]
pub(crate) async fn get_events(
    State(s): State<AppState>,
    _r: Reader,
    QueryParams(q): QueryParams<EventsQuery>,
) -> Result<Json<EventPage>, ApiError> {
    let after = q.after.unwrap_or(0);
    let limit = match q.limit {
        None => EVENTS_PAGE,
        Some(n) => usize::try_from(n)
            .ok()
            .filter(|n| (1..=EVENTS_PAGE_MAX).contains(n))
            .ok_or_else(|| {
                ApiError::unprocessable("limit", format!("limit is 1..={EVENTS_PAGE_MAX}"))
            })?,
    };
    let ring = &s.shared.ring;
    let page = ring.after(after, limit);
    let next_after = page.events.last().map_or(after, |e| e.id);
    Ok(Json(EventPage {
        first_available_id: page.first_id,
        last_id: ring.last_id(),
        missed: page.missed,
        next_after,
        events: page.events,
    }))
}
