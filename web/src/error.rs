//! Errors: [`ApiError`], what a request gets back (a status and a structured JSON body),
//! and [`WebError`], why the server could not start.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use lnet::route::RouteError;
use serde::Serialize;
use utoipa::ToSchema;

/// The body of every error answer: `{"error": {"field": ..., "message": ...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong, and with which part of the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorDetail {
    /// The request field at fault (a body key, a path or query parameter, a header), or
    /// `null` when the request as a whole is refused.
    pub field: Option<String>,
    /// A sentence for a person.
    pub message: String,
}

/// Why a request was refused. Each variant has its HTTP status; bad input never gets a
/// 5xx.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// 400: the request cannot be read (bad JSON, a NID that does not parse).
    #[error("{message}")]
    BadRequest {
        /// The field at fault.
        field: Option<String>,
        /// Why.
        message: String,
    },
    /// 401: no bearer token, or one that no token matches.
    #[error("{message}")]
    Unauthorized {
        /// Why.
        message: String,
    },
    /// 401: the source address presented too many unknown tokens and must wait before
    /// presenting another (`Retry-After`).
    #[error("{message}")]
    Throttled {
        /// Why.
        message: String,
        /// Seconds to wait.
        retry_after_secs: u64,
    },
    /// 413: the body is larger than the server takes.
    #[error("{message}")]
    PayloadTooLarge {
        /// Why.
        message: String,
    },
    /// 403: the token's role may not do this, or the server is read-only.
    #[error("{message}")]
    Forbidden {
        /// Why.
        message: String,
    },
    /// 404: no such local NI, peer NI, fault rule or path.
    #[error("{message}")]
    NotFound {
        /// The field naming what is missing.
        field: Option<String>,
        /// Why.
        message: String,
    },
    /// 409: the request conflicts with the node's state (an NI that exists already, a full
    /// fault rule table).
    #[error("{message}")]
    Conflict {
        /// The field at fault.
        field: Option<String>,
        /// Why.
        message: String,
    },
    /// 415: the body is not `application/json`.
    #[error("{message}")]
    UnsupportedMediaType {
        /// Why.
        message: String,
    },
    /// 422: the request reads well but a value is outside what LNet accepts.
    #[error("{message}")]
    Unprocessable {
        /// The field at fault.
        field: Option<String>,
        /// Why.
        message: String,
    },
    /// 503: the node's actors are gone (the daemon is stopping).
    #[error("{message}")]
    Unavailable {
        /// Why.
        message: String,
    },
    /// 500: a document the server built does not match its own schema (a bug).
    #[error("{message}")]
    Internal {
        /// Why.
        message: String,
    },
}

impl ApiError {
    /// A 400 naming `field`.
    pub fn bad_request(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::BadRequest {
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    /// A 404 naming `field`.
    pub fn not_found(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::NotFound {
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    /// A 409 naming `field`.
    pub fn conflict(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::Conflict {
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    /// A 422 naming `field`.
    pub fn unprocessable(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::Unprocessable {
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized { .. } | ApiError::Throttled { .. } => StatusCode::UNAUTHORIZED,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Forbidden { .. } => StatusCode::FORBIDDEN,
            ApiError::NotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The JSON body of this error.
    pub fn body(&self) -> ErrorBody {
        let (field, message) = match self {
            ApiError::BadRequest { field, message }
            | ApiError::NotFound { field, message }
            | ApiError::Conflict { field, message }
            | ApiError::Unprocessable { field, message } => (field.clone(), message.clone()),
            ApiError::Unauthorized { message }
            | ApiError::Throttled { message, .. }
            | ApiError::PayloadTooLarge { message }
            | ApiError::Forbidden { message }
            | ApiError::UnsupportedMediaType { message }
            | ApiError::Unavailable { message }
            | ApiError::Internal { message } => (None, message.clone()),
        };
        ErrorBody {
            error: ErrorDetail { field, message },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), axum::Json(self.body())).into_response();
        if matches!(
            self,
            ApiError::Unauthorized { .. } | ApiError::Throttled { .. }
        ) {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"lnet-router\""),
            );
        }
        if let ApiError::Throttled {
            retry_after_secs, ..
        } = self
        {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
        }
        response
    }
}

impl From<actors::NodeError> for ApiError {
    /// Every variant has its status: 404 for a missing NI, 409 for a conflict with the
    /// node's state, 422 for a refused value, 503 when the node is stopped. A variant added
    /// to [`actors::NodeError`] after this mapping is a 500 naming it, until it is mapped.
    fn from(e: actors::NodeError) -> ApiError {
        use actors::NodeError as N;
        let conflict = |message: String| ApiError::Conflict {
            field: None,
            message,
        };
        match e {
            N::NoSuchNi { nid } => ApiError::not_found("nid", format!("no local NI {nid}")),
            N::NoSuchPeerNi { nid } => ApiError::not_found("nid", format!("no peer NI {nid}")),
            N::NoSuchPeer { nid } => {
                ApiError::not_found("primary_nid", format!("no peer with primary NID {nid}"))
            }
            N::PeerBusy { .. } => ApiError::conflict("primary_nid", e.to_string()),
            N::BadPeer {
                reason: actors::BadPeerReason::NidTaken { .. },
            } => ApiError::conflict("nids", e.to_string()),
            N::BadPeer { reason } => ApiError::unprocessable("nids", reason.to_string()),
            N::NiExists { nid } => ApiError::conflict("nid", format!("NI {nid} exists already")),
            N::Busy { max } => conflict(format!("too many messages in flight ({max}); try again")),
            N::FaultRule(e) => fault_add_error(e),
            N::Route { error } => route_error(&error),
            N::Stopped => ApiError::Unavailable {
                message: "the node is stopped".into(),
            },
            N::NiStart { .. } | N::Udsp { .. } => conflict(e.to_string()),
            _ => ApiError::Internal {
                message: format!("node error without an HTTP status: {e}"),
            },
        }
    }
}

/// A refused route as an API error.
fn route_error(e: &RouteError) -> ApiError {
    let field = match e {
        RouteError::LocalNet { .. } => "net",
        RouteError::Hops { .. } => "hop",
        RouteError::Exists { .. } => return ApiError::conflict("gateway", e.to_string()),
        _ => "gateway",
    };
    ApiError::unprocessable(field, e.to_string())
}

fn fault_add_error(e: lnet::fault::FaultAddError) -> ApiError {
    use lnet::fault::{FaultAddError, FaultRuleError as R};
    match e {
        FaultAddError::Rule(r) => {
            let field = match r {
                R::ZeroRate | R::ZeroInterval | R::Probability { .. } => "trigger",
                R::Portal { .. } | R::PortalWithoutPutOrGet => "portals",
                R::HealthErrorOnDelay | R::HealthErrorOnReceive => "health_error",
                R::Latency { .. } => "kind",
                R::ZeroLimit => "limit",
                _ => "rule",
            };
            ApiError::unprocessable(field, r.to_string())
        }
        other => ApiError::Conflict {
            field: None,
            message: other.to_string(),
        },
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A certificate or key file could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A certificate or key file is not PEM, or holds no item of the kind wanted.
    #[error("{path}: {source}")]
    Pem {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("{path}: no certificate")]
    NoCertificate {
        /// The file.
        path: std::path::PathBuf,
    },
    /// rustls refused the certificate and key.
    #[error("TLS configuration: {source}")]
    Tls {
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// The self-signed certificate could not be generated.
    #[error("self-signed certificate: {source}")]
    CertGen {
        /// Why.
        #[source]
        source: rcgen::Error,
    },
    /// The node did not answer while the server was starting.
    #[error("node: {0}")]
    Node(#[from] actors::NodeError),
}

#[cfg(test)]
mod tests {
    use actors::NodeError as N;
    use lnet::fault::{FaultAddError, FaultRuleError};
    use lnet::route::RouteError;
    use lnet::udsp::UdspError;
    use lnet::{Net, Nid};

    use super::*;

    #[test]
    fn every_node_error_has_its_status() {
        let nid: Nid = "10.0.0.1@tcp".parse().unwrap();
        let cases = [
            (
                N::Route {
                    error: RouteError::LocalNet { net: Net::LO },
                },
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
            (
                N::NiStart {
                    source: actors::LndStartError::new(std::io::Error::other("no such interface")),
                },
                StatusCode::CONFLICT,
            ),
            (N::NiExists { nid }, StatusCode::CONFLICT),
            (N::NoSuchNi { nid }, StatusCode::NOT_FOUND),
            (N::NoSuchPeerNi { nid }, StatusCode::NOT_FOUND),
            (N::NoSuchPeer { nid }, StatusCode::NOT_FOUND),
            (
                N::PeerBusy {
                    nid,
                    reason: actors::PeerBusyReason::Gateway,
                },
                StatusCode::CONFLICT,
            ),
            (
                N::BadPeer {
                    reason: actors::BadPeerReason::NoUsableNid,
                },
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
            (
                N::BadPeer {
                    reason: actors::BadPeerReason::NidTaken {
                        nid,
                        owner: "10.0.0.2@tcp".parse().unwrap(),
                    },
                },
                StatusCode::CONFLICT,
            ),
            (N::Busy { max: 8 }, StatusCode::CONFLICT),
            (N::Stopped, StatusCode::SERVICE_UNAVAILABLE),
            (
                N::FaultRule(FaultAddError::Full { max: 4 }),
                StatusCode::CONFLICT,
            ),
            (
                N::FaultRule(FaultAddError::Rule(FaultRuleError::ZeroRate)),
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
            (
                N::Udsp(UdspError::PriorityOnPreferred { index: 0 }),
                StatusCode::CONFLICT,
            ),
        ];
        for (error, status) in cases {
            let text = error.to_string();
            let api = ApiError::from(error);
            assert_eq!(api.status(), status, "{text}");
            assert!(!api.body().error.message.is_empty(), "{text}");
        }
    }
}
