//! The JSON endpoints under `/api/v1`, each with its OpenAPI description: one module per
//! resource.

use lnet::Nid;

use crate::error::ApiError;

pub(crate) mod events;
pub(crate) mod export;
pub(crate) mod fault;
pub(crate) mod global;
pub(crate) mod health;
pub(crate) mod net_config;
pub(crate) mod nets;
pub(crate) mod peer_debug;
pub(crate) mod peers;
pub(crate) mod ping;
pub(crate) mod recovery;
pub(crate) mod routes;
pub(crate) mod routing;
pub(crate) mod stats;
pub(crate) mod tokens;
pub(crate) mod udsp;

/// The tag of the read-only documents.
pub(crate) const TAG_SHOW: &str = "show";
/// The tag of the changes.
pub(crate) const TAG_CHANGE: &str = "change";
/// The tag of the event endpoints.
pub(crate) const TAG_EVENTS: &str = "events";
/// The tag of the API token endpoints.
pub(crate) const TAG_TOKENS: &str = "tokens";

/// Reads `text` as a NID, or a 400 naming `field`.
pub(crate) fn parse_nid(field: &str, text: &str) -> Result<Nid, ApiError> {
    text.parse::<Nid>()
        .map_err(|e| ApiError::bad_request(field, format!("{text:?} is not a NID: {e}")))
}
