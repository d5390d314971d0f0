//! The REST API of the router daemon: the node's live state as JSON over HTTPS, its events
//! as server-sent events, Prometheus metrics, and the changes an operator makes.
//!
//! # Starting the server
//!
//! The daemon builds a [`WebConfig`] (listen address; HTTPS from PEM certificate and key
//! files, or plain HTTP, read-only unless mutations are allowed) and a [`WebContext`] (the
//! [`actors::Node`], a [`TokenVerifier`] over its tokens, an optional [`EventSink`] for the
//! event log, and the node's tunables), then calls [`start`] on a tokio runtime; the
//! returned [`WebServer`] gives the bound address and stops with [`WebServer::shutdown`].
//! [`SelfSigned`] makes a certificate for a demo.
//!
//! # Endpoints
//!
//! Under `/api/v1`, each described in the OpenAPI document served at
//! `/api/v1/openapi.json` ([`openapi_document`]):
//!
//! * reads (any token): `GET nets` (`lnetctl net show -v 4`), `peers` (`peer show -v 4`),
//!   `stats`, `global`, `recovery/local`, `recovery/peer`, `counters`,
//!   `fault-rules` and `nis/{nid}/fault-rules`, `routes` (`route show -v`), `routing` (`routing show`),
//!   `export` and `export?backup=1` (`lnetctl export [--backup]`, YAML),
//!   `events?after=ID&limit=N` or `events?before=ID&limit=N` (the event log, paged
//!   forward or back), and `events/stream` (server-sent events, resumable with
//!   `Last-Event-ID`);
//! * changes (admin token, recorded as admin events with the token's name):
//!   `POST nis/{nid}/health` and `peer-nis/{nid}/health` (health reset), `PUT global`
//!   (tunables, checked with the kernel's ranges), `POST peers`, `POST ping`,
//!   `POST discover`, `POST fault-rules`, `DELETE fault-rules/{id}`, `POST
//!   fault-rules/reset`, `POST nis/{nid}/fault-rules`, `DELETE nis/{nid}/fault-rules/{id}`,
//!   `POST routes`, `DELETE routes/{net}/{gateway}`, `PUT routing` (`set routing 0|1`;
//!   1 also ends a drain), `POST drain` (out of service without stopping);
//! * API tokens: `POST tokens` (the answer carries the new secret, shown once), `GET
//!   tokens` and `DELETE tokens/{name}` (admin token), `GET whoami` (any token);
//! * `GET /metrics` (Prometheus text; names of the Lustre exporters where they have one),
//!   `/livez`, `/readyz`.
//!
//! Errors are `{"error": {"field": ..., "message": ...}}` with 400, 401, 403, 404, 409,
//! 413, 415 or 422 ([`ApiError`]); bad input never gets a 5xx. Hostile clients (slow
//! heads, large bodies, many event streams, token guessing, old TLS) are cut off and
//! counted ([`guard`]).

mod api;
pub mod auth;
pub mod dashboard;
pub mod error;
pub mod events;
mod extract;
mod forward_drops;
pub mod guard;
pub mod metrics;
pub mod net_control;
pub mod persist;
mod routes;
mod server;
mod state;
mod stream;
pub mod tls;

pub use api::events::{EventPage, EventsQuery, EVENTS_PAGE, EVENTS_PAGE_MAX};
pub use api::fault::{
    FaultReset, FaultResetDoc, FaultRuleDoc, FaultRuleKind, FaultRuleList, FaultRules,
};
pub use api::global::GlobalUpdate;
pub use api::health::{HealthReset, HealthResetAll, HealthResetResult};
pub use api::net_config::{LndSetting, LndSettingChanged, NiAdd, NiChanged};
pub use api::peer_debug::PeerNiDebug;
pub use api::peers::{PeerAdd, PeerDeleted};
pub use api::ping::{PingNid, PingRequest, PingResult, DEFAULT_PING_TIMEOUT_MS};
pub use api::routes::{RouteAdd, RouteDoc, RouteList};
pub use api::routing::{
    BufferTotals, BuffersSet, CptPools, DrainDoc, NetAdvertDoc, PeerRtrCreditsDoc, PoolDoc,
    RoutingDoc, RoutingSet,
};
pub use api::stats::Counters;
pub use api::tokens::{TokenCreate, TokenCreated, TokenList, WhoAmI};
pub use api::udsp::{UdspAdd, UdspDeleted, UdspList, UdspRuleDoc};
pub use auth::{
    new_secret, MemoryTokens, Role, TokenEntry, TokenError, TokenIdentity, TokenVerifier,
};
pub use error::{ApiError, ErrorBody, ErrorDetail, WebError};
pub use events::{
    ApiEvent, EventBody, EventRing, EventSink, LogCursor, LogPage, NiKindDoc, SinkError,
};
pub use guard::{GuardStats, Refusal};
pub use net_control::{NiControl, NiControlError, NiFuture, NiSpec};
pub use persist::ConfigStore;
pub use routes::openapi_document;
pub use server::{start, start_metrics, Transport, WebConfig, WebContext, WebServer};
pub use stream::StreamQuery;
pub use tls::SelfSigned;
