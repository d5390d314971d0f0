//! The node's fault rules, in the form of [`lnet::fault::FaultRule`] (`lnetctl fault
//! drop|delay add|del|show|reset`): `GET/POST /api/v1/fault-rules`, `DELETE
//! /api/v1/fault-rules/{id}` and `POST /api/v1/fault-rules/reset` for all of them (a rule
//! without `local_nid` applies at every NI, as lnetctl's without `--local_nid`), and
//! `GET/POST /api/v1/nis/{nid}/fault-rules`, `DELETE /api/v1/nis/{nid}/fault-rules/{id}`
//! for those of one local NI: the rules that name it as their `local_nid`, which a rule
//! added there always does.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use lnet::fault::{FaultKind, FaultRule, RuleId, RuleStats};
use lnet::Nid;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Admin, Body, PathParams, Reader};
use crate::state::AppState;

use super::{parse_nid, TAG_CHANGE, TAG_SHOW};

/// A fault rule of a local NI and what it has done (`lnetctl fault drop|delay show`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FaultRuleDoc {
    /// Its id, unique on the node.
    pub id: u64,
    /// The rule.
    pub rule: FaultRule,
    /// Messages its filters accepted.
    pub matched: u64,
    /// Messages it fired on (dropped, failed or delayed).
    pub fired: u64,
}

/// The fault rules of a local NI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultRuleList {
    /// The NI.
    pub nid: String,
    /// Its rules, in the order they were added.
    pub rules: Vec<FaultRuleDoc>,
}

fn rule_doc(r: &RuleStats) -> FaultRuleDoc {
    FaultRuleDoc {
        id: r.id.0,
        rule: r.rule.clone(),
        matched: r.matched,
        fired: r.fired,
    }
}

/// Whether the node has a local NI `nid`.
async fn is_local_ni(s: &AppState, nid: Nid) -> Result<bool, ApiError> {
    Ok(s.shared
        .node
        .local_nis()
        .await?
        .iter()
        .any(|v| v.nid == nid))
}

/// A local NI named by the path: 404 when the node has none with this NID.
async fn local_ni(s: &AppState, text: &str) -> Result<Nid, ApiError> {
    let nid = parse_nid("nid", text)?;
    if is_local_ni(s, nid).await? {
        Ok(nid)
    } else {
        Err(ApiError::not_found("nid", format!("no local NI {nid}")))
    }
}

/// Every fault rule of the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultRules {
    /// The rules, in the order they were added.
    pub rules: Vec<FaultRuleDoc>,
}

/// Which rules `POST /api/v1/fault-rules/reset` restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FaultRuleKind {
    /// The drop rules (`lnetctl fault drop reset`).
    Drop,
    /// The delay rules (`lnetctl fault delay reset`).
    Delay,
}

/// The body of `POST /api/v1/fault-rules/reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultReset {
    /// The rules to restart.
    pub kind: FaultRuleKind,
}

/// The answer to `POST /api/v1/fault-rules/reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultResetDoc {
    /// How many rules had their counters zeroed and their triggers restarted.
    pub reset: u64,
}

/// The rules of the node at local NI `nid`.
fn rules_at(s: &AppState, nid: Nid) -> Vec<RuleStats> {
    s.shared
        .node
        .fault_rules()
        .into_iter()
        .filter(|r| r.rule.local_nid == Some(nid))
        .collect()
}

/// The fault rules of a local NI (`lnetctl fault drop|delay show`).
#[utoipa::path(get, path = "/api/v1/nis/{nid}/fault-rules", tag = TAG_SHOW,
    security(("bearer" = [])),
    params(("nid" = String, Path, description = "The local NI", example = "10.0.0.1@tcp")),
    responses(
        (status = 200, description = "The NI's rules", body = FaultRuleList),
        (status = 400, description = "Not a NID", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 404, description = "No such local NI", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn list_fault_rules(
    State(s): State<AppState>,
    _r: Reader,
    PathParams(nid): PathParams<String>,
) -> Result<Json<FaultRuleList>, ApiError> {
    let nid = local_ni(&s, &nid).await?;
    Ok(Json(FaultRuleList {
        nid: nid.to_string(),
        rules: rules_at(&s, nid).iter().map(rule_doc).collect(),
    }))
}

/// Adds a fault rule on a local NI (`lnetctl fault drop|delay add --local_nid`): an
/// [`lnet::fault::FaultRule`] in its JSON form, e.g. `{"kind": "drop", "source": "*",
/// "dest": "*@o2ib1", "trigger": {"rate": 10}, "message_types": ["put"], "health_error":
/// "remote_timeout"}` or `{"kind": {"delay": {"latency_ms": 500}}, "source":
/// "10.0.0.7@tcp", "dest": "*", "trigger": {"interval": 5}}`. Its `local_nid`, when
/// given, is the NI of the path.
#[utoipa::path(post, path = "/api/v1/nis/{nid}/fault-rules", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(("nid" = String, Path, description = "The local NI", example = "10.0.0.1@tcp")),
    request_body = FaultRule,
    responses(
        (status = 201, description = "The rule added", body = FaultRuleDoc),
        (status = 400, description = "Not a NID, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No such local NI", body = ErrorBody),
        (status = 409, description = "The node holds as many rules as it may", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A rule that cannot work", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn add_fault_rule(
    State(s): State<AppState>,
    admin: Admin,
    PathParams(nid): PathParams<String>,
    Body(mut rule): Body<FaultRule>,
) -> Result<(StatusCode, Json<FaultRuleDoc>), ApiError> {
    let nid = local_ni(&s, &nid).await?;
    if rule.local_nid.is_some_and(|n| n != nid) {
        return Err(ApiError::unprocessable(
            "local_nid",
            format!("a rule added on NI {nid} applies at that NI"),
        ));
    }
    rule.local_nid = Some(nid);
    add_rule(&s, &admin, rule).await
}

/// Adds `rule` to the node and the store; the answer of both POSTs.
async fn add_rule(
    s: &AppState,
    admin: &Admin,
    rule: FaultRule,
) -> Result<(StatusCode, Json<FaultRuleDoc>), ApiError> {
    let node = &s.shared.node;
    let id = node.add_fault_rule(rule.clone())?;
    if let Some(store) = &s.shared.config {
        if let Err(e) = store.put_fault_rule(id, &rule) {
            node.remove_fault_rule(id);
            return Err(ApiError::Internal {
                message: format!("the fault rule could not be kept: {e}"),
            });
        }
    }
    let doc = node
        .fault_rules()
        .iter()
        .find(|r| r.id == id)
        .map(rule_doc)
        .ok_or_else(|| ApiError::Conflict {
            field: None,
            message: format!("rule {} was removed while it was added", id.0),
        })?;
    s.admin_event(
        &admin.0,
        "add_fault_rule",
        rule.local_nid.map(|n| n.to_string()),
        format!("rule {}: {rule:?}", id.0),
    );
    Ok((StatusCode::CREATED, Json(doc)))
}

/// Every fault rule of the node (`lnetctl fault drop|delay show`), those of every NI and
/// those of one local NI (its `local_nid`).
#[utoipa::path(get, path = "/api/v1/fault-rules", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The node's rules", body = FaultRules),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn list_all_fault_rules(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<FaultRules>, ApiError> {
    Ok(Json(FaultRules {
        rules: s.shared.node.fault_rules().iter().map(rule_doc).collect(),
    }))
}

/// Adds a fault rule (`lnetctl fault drop|delay add`): without `local_nid` it applies at
/// every NI, with one at that local NI only. The body is the rule's JSON form, as for
/// `POST /api/v1/nis/{nid}/fault-rules`.
#[utoipa::path(post, path = "/api/v1/fault-rules", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = FaultRule,
    responses(
        (status = 201, description = "The rule added", body = FaultRuleDoc),
        (status = 400, description = "Bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 409, description = "The node holds as many rules as it may", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A rule that cannot work, or a local_nid that is no local NI", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn add_node_fault_rule(
    State(s): State<AppState>,
    admin: Admin,
    Body(rule): Body<FaultRule>,
) -> Result<(StatusCode, Json<FaultRuleDoc>), ApiError> {
    if let Some(nid) = rule.local_nid {
        if !is_local_ni(&s, nid).await? {
            return Err(ApiError::unprocessable(
                "local_nid",
                format!("no local NI {nid}"),
            ));
        }
    }
    add_rule(&s, &admin, rule).await
}

/// Removes a fault rule of the node, whichever NI it applies at (`lnetctl fault
/// drop|delay del`).
#[utoipa::path(delete, path = "/api/v1/fault-rules/{id}", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(("id" = u64, Path, description = "The rule's id")),
    responses(
        (status = 204, description = "Removed"),
        (status = 400, description = "Not an id", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No such rule", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn remove_node_fault_rule(
    State(s): State<AppState>,
    admin: Admin,
    PathParams(id): PathParams<u64>,
) -> Result<StatusCode, ApiError> {
    let id = RuleId(id);
    let ni = s
        .shared
        .node
        .fault_rules()
        .into_iter()
        .find(|r| r.id == id)
        .map(|r| r.rule.local_nid);
    let Some(ni) = ni else {
        return Err(ApiError::not_found("id", format!("no fault rule {}", id.0)));
    };
    remove_rule(&s, &admin, ni, id)
}

/// Zeroes the counters of the node's drop or delay rules and restarts their triggers, as
/// the kernel does (`lnetctl fault drop|delay reset`); not kept (counters are not).
#[utoipa::path(post, path = "/api/v1/fault-rules/reset", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = FaultReset,
    responses(
        (status = 200, description = "How many rules were reset", body = FaultResetDoc),
        (status = 400, description = "Bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "kind is not drop or delay", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn reset_fault_rules(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<FaultReset>,
) -> Result<Json<FaultResetDoc>, ApiError> {
    let drops = req.kind == FaultRuleKind::Drop;
    let n = s
        .shared
        .node
        .reset_fault_rules(|r| matches!(r.kind, FaultKind::Drop) == drops);
    let kind = if drops { "drop" } else { "delay" };
    s.admin_event(
        &admin.0,
        "reset_fault_rules",
        None,
        format!("{n} {kind} rule(s) reset"),
    );
    Ok(Json(FaultResetDoc {
        reset: u64::try_from(n).unwrap_or(u64::MAX),
    }))
}

/// Removes a fault rule of a local NI (`lnetctl fault drop|delay del`).
#[utoipa::path(delete, path = "/api/v1/nis/{nid}/fault-rules/{id}", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(
        ("nid" = String, Path, description = "The local NI", example = "10.0.0.1@tcp"),
        ("id" = u64, Path, description = "The rule's id"),
    ),
    responses(
        (status = 204, description = "Removed"),
        (status = 400, description = "Not a NID, or not an id", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No such local NI or rule", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn remove_fault_rule(
    State(s): State<AppState>,
    admin: Admin,
    PathParams((nid, id)): PathParams<(String, u64)>,
) -> Result<StatusCode, ApiError> {
    let nid = local_ni(&s, &nid).await?;
    let id = RuleId(id);
    let ours = rules_at(&s, nid).iter().any(|r| r.id == id);
    if !ours {
        return Err(ApiError::not_found(
            "id",
            format!("NI {nid} has no rule {}", id.0),
        ));
    }
    remove_rule(&s, &admin, Some(nid), id)
}

/// Removes rule `id` (of local NI `ni`, or of every NI) from the node and the store.
fn remove_rule(
    s: &AppState,
    admin: &Admin,
    ni: Option<Nid>,
    id: RuleId,
) -> Result<StatusCode, ApiError> {
    if !s.shared.node.remove_fault_rule(id) {
        return Err(ApiError::not_found("id", format!("no fault rule {}", id.0)));
    }
    if let Some(store) = &s.shared.config {
        store
            .delete_fault_rule(id)
            .map_err(|e| ApiError::Internal {
                message: format!(
                    "the fault rule was removed but the removal could not be kept: {e}"
                ),
            })?;
    }
    s.admin_event(
        &admin.0,
        "remove_fault_rule",
        ni.map(|n| n.to_string()),
        format!("rule {}", id.0),
    );
    Ok(StatusCode::NO_CONTENT)
}
