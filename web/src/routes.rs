//! The router: every endpoint, and the OpenAPI document generated from their
//! descriptions.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::state::AppState;
use crate::{api, metrics, stream};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "lnet-router REST API",
        description = "The live state of an LNet router as the `lnetctl ... show` documents, \
            its events, and the changes an operator makes (health resets, tunables, peers, \
            ping, discovery, fault rules). Changes need an admin token.",
        license(name = "Apache-2.0")
    ),
    tags(
        (name = "show", description = "The lnetctl show documents"),
        (name = "change", description = "Changes to the node (admin token)"),
        (name = "events", description = "Health, status, recovery and admin events"),
        (name = "tokens", description = "API tokens: made, listed and revoked with an admin token; whoami with any"),
        (name = "probes", description = "Metrics, liveness and readiness"),
    )
)]
struct ApiDoc;

/// The OpenAPI document (`GET /api/v1/openapi.json`).
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "probes",
    responses((status = 200, description = "This document", content_type = "application/json")))]
pub(crate) async fn openapi_json(State(s): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        s.shared.openapi.clone(),
    )
        .into_response()
}

/// A JSON 404 for every path the API does not have.
async fn not_found() -> ApiError {
    ApiError::NotFound {
        field: None,
        message: "no such endpoint".into(),
    }
}

/// The routes with their state type, and the OpenAPI document they describe.
pub(crate) fn build() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (router, mut doc) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(api::nets::get_nets, api::net_config::add_ni))
        .routes(routes!(api::net_config::delete_ni))
        .routes(routes!(api::net_config::set_ni_conns_per_peer))
        .routes(routes!(api::net_config::set_all_conns_per_peer))
        .routes(routes!(api::net_config::set_lnd_timeout))
        .routes(routes!(api::export::get_export))
        .routes(routes!(api::peers::get_peers, api::peers::add_peer))
        .routes(routes!(api::peers::delete_peer))
        .routes(routes!(api::peers::delete_peer_nid))
        .routes(routes!(api::peer_debug::debug_peer))
        .routes(routes!(api::stats::get_stats))
        .routes(routes!(api::stats::reset_stats))
        .routes(routes!(api::global::get_global, api::global::put_global))
        .routes(routes!(api::recovery::get_recovery_local))
        .routes(routes!(api::recovery::get_recovery_peer))
        .routes(routes!(api::stats::get_counters))
        .routes(routes!(api::events::get_events))
        .routes(routes!(stream::event_stream))
        .routes(routes!(api::health::reset_local_health))
        .routes(routes!(api::health::reset_peer_health))
        .routes(routes!(api::health::reset_all_local_health))
        .routes(routes!(api::health::reset_all_peer_health))
        .routes(routes!(api::ping::ping))
        .routes(routes!(api::ping::discover))
        .routes(routes!(
            api::fault::list_fault_rules,
            api::fault::add_fault_rule
        ))
        .routes(routes!(api::fault::remove_fault_rule))
        .routes(routes!(
            api::fault::list_all_fault_rules,
            api::fault::add_node_fault_rule
        ))
        .routes(routes!(api::fault::remove_node_fault_rule))
        .routes(routes!(api::fault::reset_fault_rules))
        .routes(routes!(api::routes::get_routes, api::routes::add_route))
        .routes(routes!(api::routes::del_route))
        .routes(routes!(
            api::routing::get_routing,
            api::routing::set_routing
        ))
        .routes(routes!(api::routing::drain))
        .routes(routes!(api::routing::set_buffers))
        .routes(routes!(
            api::udsp::list_udsp,
            api::udsp::add_udsp,
            api::udsp::delete_all_udsp
        ))
        .routes(routes!(api::udsp::delete_udsp))
        .routes(routes!(api::tokens::list_tokens, api::tokens::create_token))
        .routes(routes!(api::tokens::revoke_token))
        .routes(routes!(api::tokens::whoami))
        .routes(routes!(metrics::metrics))
        .routes(routes!(metrics::livez))
        .routes(routes!(metrics::readyz))
        .routes(routes!(openapi_json))
        .split_for_parts();
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
    );
    (
        router
            .merge(crate::dashboard::router())
            .fallback(not_found)
            .method_not_allowed_fallback(|| async { method_not_allowed() }),
        doc,
    )
}

/// The OpenAPI document of the API as JSON, as the server serves it.
pub fn openapi_document() -> String {
    build().1.to_pretty_json().unwrap_or_default()
}

/// A 405 answer for a path that has no such method, as JSON.
pub(crate) fn method_not_allowed() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        axum::Json(
            ApiError::BadRequest {
                field: None,
                message: "this path has no such method".into(),
            }
            .body(),
        ),
    )
        .into_response()
}
