//! Extractors that answer bad input with the API's structured errors, and the bearer-token
//! checks ([`Reader`], [`Admin`]).

use axum::extract::rejection::JsonRejection;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::HeaderMap;
use serde::de::DeserializeOwned;

use crate::auth::TokenIdentity;
use crate::error::ApiError;
use crate::guard::Refusal;
use crate::state::AppState;

/// The token of a request that may read: any valid token.
#[derive(Debug, Clone)]
pub(crate) struct Reader(#[allow(dead_code)] pub(crate) TokenIdentity);

/// The token of a request that may change the node: an admin token, on a server that
/// takes changes.
#[derive(Debug, Clone)]
pub(crate) struct Admin(pub(crate) TokenIdentity);

/// The token of a read only an admin may make (the list of tokens): an admin token, on
/// any server, a read-only one too.
#[derive(Debug, Clone)]
pub(crate) struct AdminRead(#[allow(dead_code)] pub(crate) TokenIdentity);

/// The source address of a request, when the server recorded it.
pub(crate) fn peer_ip(parts: &Parts) -> Option<IpAddr> {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
}

/// The secret of the request's `Authorization: Bearer SECRET` header.
pub(crate) fn bearer_secret(headers: &HeaderMap) -> Result<&str, ApiError> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Err(ApiError::Unauthorized {
            message: "a bearer token is needed (Authorization: Bearer TOKEN)".into(),
        });
    };
    let text = value.to_str().map_err(|_| ApiError::Unauthorized {
        message: "the Authorization header is not text".into(),
    })?;
    text.split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, s)| s.trim())
        .ok_or_else(|| ApiError::Unauthorized {
            message: "the Authorization header is not a bearer token".into(),
        })
}

/// The identity behind the request's `Authorization: Bearer SECRET` header. A secret no
/// token has is counted against the source address `peer`; an address in its back-off is
/// refused without its secret being checked ([`crate::guard::throttle`]).
pub(crate) fn identify(
    headers: &HeaderMap,
    peer: Option<IpAddr>,
    state: &AppState,
) -> Result<TokenIdentity, ApiError> {
    let secret = bearer_secret(headers)?;
    let shared = &state.shared;
    let now = shared.node.clock().now();
    if let Some(ip) = peer {
        if let Err(wait_ms) = shared.throttle.check(ip, now) {
            shared.guard.count(Refusal::AuthThrottled);
            tracing::debug!(%ip, wait_ms, "API: token refused unchecked: the address is in its back-off");
            return Err(ApiError::Throttled {
                message: format!(
                    "too many unknown tokens from this address: retry in {wait_ms} ms"
                ),
                retry_after_secs: wait_ms.div_ceil(1000),
            });
        }
    }
    match shared.tokens.verify(secret) {
        Some(id) => {
            if let Some(ip) = peer {
                shared.throttle.succeeded(ip);
            }
            Ok(id)
        }
        None => {
            shared.guard.count(Refusal::AuthFailed);
            let failures = peer.map(|ip| shared.throttle.failed(ip, now));
            tracing::warn!(?peer, ?failures, "API: unknown or revoked token");
            Err(ApiError::Unauthorized {
                message: "unknown or revoked token".into(),
            })
        }
    }
}

/// The request's source address, when the server recorded it (never refuses).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeerAddr(pub(crate) Option<IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for PeerAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<PeerAddr, Self::Rejection> {
        Ok(PeerAddr(peer_ip(parts)))
    }
}

impl FromRequestParts<AppState> for Reader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Reader, ApiError> {
        identify(&parts.headers, peer_ip(parts), state).map(Reader)
    }
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Admin, ApiError> {
        if !state.shared.mutations_allowed {
            return Err(ApiError::Forbidden {
                message: "this server is read-only (plain HTTP without mutations allowed)".into(),
            });
        }
        let id = identify(&parts.headers, peer_ip(parts), state)?;
        if !id.role.may_mutate() {
            return Err(ApiError::Forbidden {
                message: format!(
                    "token {:?} has role {}: changes need admin",
                    id.name, id.role
                ),
            });
        }
        Ok(Admin(id))
    }
}

impl FromRequestParts<AppState> for AdminRead {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<AdminRead, ApiError> {
        let id = identify(&parts.headers, peer_ip(parts), state)?;
        if id.role != crate::auth::Role::Admin {
            return Err(ApiError::Forbidden {
                message: format!("token {:?} has role {}: this needs admin", id.name, id.role),
            });
        }
        Ok(AdminRead(id))
    }
}

/// A JSON body; bad JSON is a 400, a body of the wrong shape a 422, another content type a
/// 415, each with the structured error.
#[derive(Debug, Clone)]
pub(crate) struct Body<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Body<T>, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Body(v)),
            Err(rej) => Err(json_rejection(&rej)),
        }
    }
}

/// The field a serde error names (`path.to.field: message`), if any.
fn split_field(text: &str) -> (Option<String>, String) {
    match text.split_once(": ") {
        Some((path, rest))
            if !path.is_empty()
                && path != "."
                && path.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'[' | b']')
                }) =>
        {
            (Some(path.to_owned()), rest.to_owned())
        }
        _ => (backticked_field(text), text.to_owned()),
    }
}

/// The field of serde's "missing field `x`" and "unknown field `x`" messages.
fn backticked_field(text: &str) -> Option<String> {
    let rest = text
        .strip_prefix("missing field `")
        .or_else(|| text.strip_prefix("unknown field `"))?;
    rest.split_once('`').map(|(f, _)| f.to_owned())
}

fn json_rejection(rej: &JsonRejection) -> ApiError {
    let text = rej.body_text();
    let detail = text
        .split_once("target type: ")
        .map_or(text.as_str(), |(_, d)| d);
    if rej.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::PayloadTooLarge {
            message: format!("the body is too large: {detail}"),
        };
    }
    match rej {
        JsonRejection::JsonDataError(_) => {
            let (field, message) = split_field(detail);
            ApiError::Unprocessable { field, message }
        }
        JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType {
            message: "the body must be JSON (Content-Type: application/json)".into(),
        },
        _ => ApiError::BadRequest {
            field: None,
            message: format!("the body is not valid JSON: {detail}"),
        },
    }
}

/// Path parameters; a segment that does not decode is a 400.
#[derive(Debug, Clone)]
pub(crate) struct PathParams<T>(pub(crate) T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for PathParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<PathParams<T>, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(v)) => Ok(PathParams(v)),
            Err(rej) => Err(ApiError::BadRequest {
                field: Some("path".into()),
                message: rej.body_text(),
            }),
        }
    }
}

/// Query parameters; a bad one is a 400 naming the query.
#[derive(Debug, Clone)]
pub(crate) struct QueryParams<T>(pub(crate) T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<QueryParams<T>, ApiError> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(v)) => Ok(QueryParams(v)),
            Err(rej) => {
                let text = rej.body_text();
                let detail = text
                    .split_once("Failed to deserialize query string: ")
                    .map_or(text.as_str(), |(_, d)| d);
                let (field, message) = split_field(detail);
                Err(ApiError::BadRequest {
                    field: field.or_else(|| Some("query".into())),
                    message,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_paths_become_fields() {
        assert_eq!(
            split_field("value: invalid type: string \"x\", expected u32 at line 1 column 12"),
            (
                Some("value".into()),
                "invalid type: string \"x\", expected u32 at line 1 column 12".into()
            )
        );
        assert_eq!(
            split_field("trigger.n: invalid value"),
            (Some("trigger.n".into()), "invalid value".into())
        );
        assert_eq!(
            split_field("missing field `nid` at line 1 column 2"),
            (
                Some("nid".into()),
                "missing field `nid` at line 1 column 2".into()
            )
        );
    }
}
