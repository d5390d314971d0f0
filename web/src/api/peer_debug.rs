//! `GET /api/v1/peer-nis/{nid}/debug`: what `lnetctl debug peer --nid NID` has the kernel
//! write to its debug log about a peer NI (its aliveness and credits), as a document.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{PathParams, Reader};
use crate::state::AppState;

use super::{parse_nid, TAG_SHOW};

/// One peer NI as `lnetctl debug peer` reports it (the kernel's `lnet_debug_peer` line:
/// NID, reference count, aliveness, the net's peer tx credits, router credits and their
/// low-water mark, tx credits and their low-water mark, bytes queued).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PeerNiDebug {
    /// The peer NI.
    #[schema(example = "10.0.1.1@tcp")]
    pub nid: String,
    /// The peer's primary NID.
    pub primary_nid: String,
    /// References held: 1 for the peer table, and one per message holding it (charged
    /// to its tx credits and not completed, or holding one of its router buffer credits),
    /// as `peer show -v` prints it.
    pub refcount: u32,
    /// `up` or `down` for a gateway, `NA` for any other peer NI (as the kernel, which
    /// tracks aliveness for routers only).
    pub aliveness: String,
    /// The tx credits of a peer NI on its net (`peer_credits`).
    pub peer_tx_credits: u32,
    /// Router buffer credits left.
    pub rtr_credits: u32,
    /// Their low-water mark.
    pub min_rtr_credits: u32,
    /// Tx credits left.
    pub tx_credits: u32,
    /// Their low-water mark.
    pub min_tx_credits: u32,
    /// Bytes queued for it: its messages charged to its tx credits and not yet sent,
    /// headers included (`tx_q_num_of_buf`).
    pub tx_q_nob: u32,
}

impl PeerNiDebug {
    /// The line the kernel writes to its debug log for it.
    pub fn line(&self) -> String {
        format!(
            "{:<24} {:>4} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {}",
            self.nid,
            self.refcount,
            self.aliveness,
            self.peer_tx_credits,
            self.rtr_credits,
            self.min_rtr_credits,
            self.tx_credits,
            self.min_tx_credits,
            self.tx_q_nob
        )
    }
}

/// What `lnetctl debug peer --nid NID` reports about peer NI `nid`.
#[utoipa::path(get, path = "/api/v1/peer-nis/{nid}/debug", tag = TAG_SHOW,
    security(("bearer" = [])),
    params(("nid" = String, Path, description = "The peer NI", example = "10.0.1.1@tcp")),
    responses(
        (status = 200, description = "The peer NI's aliveness and credits", body = PeerNiDebug),
        (status = 400, description = "Not a NID", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 404, description = "No peer NI has this NID", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn debug_peer(
    State(s): State<AppState>,
    _r: Reader,
    PathParams(nid): PathParams<String>,
) -> Result<Json<PeerNiDebug>, ApiError> {
    let nid = parse_nid("nid", &nid)?;
    let show = s.shared.node.peer_show().await?;
    let found = show.peers.iter().find_map(|p| {
        p.nis
            .iter()
            .find(|n| n.nid == nid)
            .map(|n| (p.primary_nid, n))
    });
    let Some((primary, ni)) = found else {
        return Err(ApiError::not_found("nid", format!("No peer {nid}")));
    };
    let c = &ni.credits;
    Ok(Json(PeerNiDebug {
        nid: nid.to_string(),
        primary_nid: primary.to_string(),
        refcount: c.refcount,
        aliveness: ni.state.as_str().to_owned(),
        peer_tx_credits: c.max_ni_tx_credits,
        rtr_credits: c.available_rtr_credits,
        min_rtr_credits: c.min_rtr_credits,
        tx_credits: c.available_tx_credits,
        min_tx_credits: c.min_tx_credits,
        tx_q_nob: c.tx_q_num_of_buf,
    }))
}
