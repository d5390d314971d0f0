//! API tokens at run time: `POST /api/v1/tokens`, `GET /api/v1/tokens` and `DELETE
//! /api/v1/tokens/{name}` (admin token), and `GET /api/v1/whoami` (any token).
//!
//! A new token's secret is drawn by the server and is in the answer to its creation only:
//! the list shows names, roles and creation times, never a secret nor a hash, and the
//! token table keeps the secret's SHA-256 alone. A revoked token is refused from the next
//! request on, and the event streams it opened end.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::TAG_TOKENS;
use crate::auth::{new_secret, Role, TokenEntry, TokenError};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Admin, AdminRead, Body, PathParams, Reader};
use crate::state::AppState;

/// A token to make.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenCreate {
    /// Its name: 1 to 64 ASCII letters, digits, `.`, `_` or `-`, not in use.
    #[schema(example = "grafana")]
    pub name: String,
    /// Its role (default `reader`).
    pub role: Option<Role>,
}

/// A token just made, with its secret: the only time the secret is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenCreated {
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// When it was made, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The bearer secret (64 hex digits). It is not kept: it cannot be shown again.
    pub secret: String,
}

/// Every token, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenList {
    /// The tokens.
    pub tokens: Vec<TokenEntry>,
}

/// Who the presented token is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WhoAmI {
    /// The token's name.
    pub name: String,
    /// Its role.
    pub role: Role,
}

/// A refusal of the token table as an API error.
fn token_error(e: TokenError) -> ApiError {
    match e {
        TokenError::BadName { .. } => ApiError::unprocessable("name", e.to_string()),
        TokenError::Exists { .. } => ApiError::conflict("name", e.to_string()),
        TokenError::NotFound { .. } => ApiError::not_found("name", e.to_string()),
        other => {
            tracing::error!(error = %other, "API: token table");
            ApiError::Internal {
                message: other.to_string(),
            }
        }
    }
}

/// The wall-clock time now, in milliseconds since the Unix epoch (0 before it).
fn wall_ms() -> u64 {
    #[allow(clippy::disallowed_types)] // a token's creation time is wall-clock time
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    now
}

/// Makes a token; the answer carries its secret, shown this once.
#[utoipa::path(post, path = "/api/v1/tokens", tag = TAG_TOKENS,
    security(("bearer" = [])),
    request_body = TokenCreate,
    responses(
        (status = 201, description = "The token and its secret (shown once)", body = TokenCreated),
        (status = 400, description = "Bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 409, description = "A token has this name", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A bad name or an unknown role", body = ErrorBody),
    ))]
pub(crate) async fn create_token(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<TokenCreate>,
) -> Result<(StatusCode, Json<TokenCreated>), ApiError> {
    let role = req.role.unwrap_or(Role::Reader);
    let secret = new_secret().map_err(token_error)?;
    let created_ms = wall_ms();
    s.shared
        .tokens
        .create_token(&req.name, role, &secret, created_ms)
        .map_err(token_error)?;
    s.admin_event(
        &admin.0,
        "create_token",
        Some(req.name.clone()),
        format!("role={role}"),
    );
    Ok((
        StatusCode::CREATED,
        Json(TokenCreated {
            name: req.name,
            role,
            created_ms,
            secret,
        }),
    ))
}

/// Every token: names, roles and creation times, never a secret.
#[utoipa::path(get, path = "/api/v1/tokens", tag = TAG_TOKENS,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The tokens, by name", body = TokenList),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token", body = ErrorBody),
    ))]
pub(crate) async fn list_tokens(
    State(s): State<AppState>,
    _admin: AdminRead,
) -> Result<Json<TokenList>, ApiError> {
    let tokens = s.shared.tokens.tokens().map_err(token_error)?;
    Ok(Json(TokenList { tokens }))
}

/// Revokes a token: refused from the next request on; its event streams end.
#[utoipa::path(delete, path = "/api/v1/tokens/{name}", tag = TAG_TOKENS,
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The token's name", example = "grafana")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No such token", body = ErrorBody),
    ))]
pub(crate) async fn revoke_token(
    State(s): State<AppState>,
    admin: Admin,
    PathParams(name): PathParams<String>,
) -> Result<StatusCode, ApiError> {
    s.shared.tokens.revoke_token(&name).map_err(token_error)?;
    // Every open event stream checks its token again.
    s.shared.revocations.send_modify(|n| *n = n.wrapping_add(1));
    s.admin_event(&admin.0, "revoke_token", Some(name), String::new());
    Ok(StatusCode::NO_CONTENT)
}

/// The name and role of the presented token.
#[utoipa::path(get, path = "/api/v1/whoami", tag = TAG_TOKENS,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The token's name and role", body = WhoAmI),
        (status = 401, description = "No or unknown token", body = ErrorBody),
    ))]
pub(crate) async fn whoami(r: Reader) -> Json<WhoAmI> {
    Json(WhoAmI {
        name: r.0.name,
        role: r.0.role,
    })
}
