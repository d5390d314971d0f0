//! `GET/POST/DELETE /api/v1/udsp`, `DELETE /api/v1/udsp/{idx}`: the User Defined Selection
//! Policy rules of the running node (`lnetctl udsp show|add|del`). A change compiles the
//! whole new list, gives it to the node (every selection from then on reads it) and keeps
//! it in the store, so that a restart from the store alone runs the same rules.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use lnet::config::UdspRule;
use lnet::udsp::{UdspError, UdspNote, UdspPolicy};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Admin, Body, PathParams, Reader};
use crate::state::AppState;

use super::{TAG_CHANGE, TAG_SHOW};

/// One UDSP rule as `lnetctl udsp show` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UdspRuleDoc {
    /// Its position in the list (0 is looked at first).
    pub idx: u32,
    /// The local NIDs or net it matches.
    #[schema(example = "tcp1")]
    pub src: Option<String>,
    /// The peer NIDs or net it matches.
    pub dst: Option<String>,
    /// The gateways it matches.
    pub rte: Option<String>,
    /// The priority it gives (0 is the highest); none for a preferred-list rule.
    pub priority: Option<u32>,
}

/// The UDSP rules in force, in list order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UdspList {
    /// The rules.
    pub rules: Vec<UdspRuleDoc>,
}

/// A rule to add (`lnetctl udsp add --src --dst --rte --priority --idx`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UdspAdd {
    /// `--src`: local NIDs or a local net (`tcp1`, `10.0.0.[1-4]@tcp`).
    pub src: Option<String>,
    /// `--dst`: peer NIDs or a peer net.
    pub dst: Option<String>,
    /// `--rte`: gateway NIDs.
    pub rte: Option<String>,
    /// `--priority`: 0 is the highest. A `src` or `dst` rule without one gets 0, as the
    /// kernel gives it.
    pub priority: Option<u32>,
    /// `--idx`: the position to insert at (the rules from there move down); absent or past
    /// the end: appended.
    pub idx: Option<u32>,
}

/// The rules a deletion removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UdspDeleted {
    /// The rules removed, at the positions they had.
    pub deleted: Vec<UdspRuleDoc>,
    /// The rules left.
    pub rules: Vec<UdspRuleDoc>,
}

fn docs(rules: &[UdspRule]) -> Vec<UdspRuleDoc> {
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| UdspRuleDoc {
            idx: u32::try_from(i).unwrap_or(u32::MAX),
            src: r.src.clone(),
            dst: r.dst.clone(),
            rte: r.rte.clone(),
            priority: r.priority,
        })
        .collect()
}

/// The field a refused rule list names.
fn refused(e: &UdspError) -> ApiError {
    let field = match e {
        UdspError::Expression { field, .. } => *field,
        UdspError::PriorityOnPreferred { .. } => "priority",
        _ => "rule",
    };
    let message = e.to_string();
    // The message names the rule's place in the list; the request has one rule.
    let message = message
        .split_once(": ")
        .map_or(message.clone(), |(_, m)| m.to_owned());
    ApiError::unprocessable(field, message)
}

/// Gives `rules` to the node, then to the store; the node's rules are put back when the
/// store fails.
async fn apply(s: &AppState, old: &[UdspRule], rules: &[UdspRule]) -> Result<(), ApiError> {
    let node = &s.shared.node;
    node.set_udsp(rules).await?;
    if let Some(store) = &s.shared.config {
        if let Err(e) = store.set_udsp(rules) {
            node.set_udsp(old).await?;
            return Err(ApiError::Internal {
                message: format!("the UDSP rules could not be kept: {e}"),
            });
        }
    }
    Ok(())
}

/// The UDSP rules (`lnetctl udsp show`).
#[utoipa::path(get, path = "/api/v1/udsp", tag = TAG_SHOW,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The rules in list order", body = UdspList),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn list_udsp(
    State(s): State<AppState>,
    _r: Reader,
) -> Result<Json<UdspList>, ApiError> {
    let policy = s.shared.node.udsp().await?;
    Ok(Json(UdspList {
        rules: docs(policy.source_rules()),
    }))
}

/// Adds a UDSP rule (`lnetctl udsp add`). A rule with the same `src`, `dst` and `rte` as
/// one in the list replaces that rule's priority where it is, as the kernel merges it.
#[utoipa::path(post, path = "/api/v1/udsp", tag = TAG_CHANGE,
    security(("bearer" = [])),
    request_body = UdspAdd,
    responses(
        (status = 201, description = "The rules now in force", body = UdspList),
        (status = 400, description = "Bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "An expression that does not parse, or fields that make no rule", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn add_udsp(
    State(s): State<AppState>,
    admin: Admin,
    Body(req): Body<UdspAdd>,
) -> Result<(StatusCode, Json<UdspList>), ApiError> {
    let _one = s.shared.udsp.lock().await;
    let mut rule = UdspRule {
        idx: None,
        src: req.src,
        dst: req.dst,
        rte: req.rte,
        priority: req.priority,
    };
    // A priority rule (src or dst alone) without a priority gets 0, as the kernel gives it.
    if rule.rte.is_none() && rule.src.is_some() != rule.dst.is_some() && rule.priority.is_none() {
        rule.priority = Some(0);
    }
    UdspPolicy::new(std::slice::from_ref(&rule)).map_err(|e| refused(&e))?;
    let old = s.shared.node.udsp().await?.source_rules().to_vec();
    let at = req
        .idx
        .and_then(|i| usize::try_from(i).ok())
        .map_or(old.len(), |i| i.min(old.len()));
    let mut rules = old.clone();
    rules.insert(at, rule.clone());
    let policy = UdspPolicy::new(&rules).map_err(|e| refused(&e))?;
    // The same descriptors as a rule already there: that rule takes the new priority.
    let merged_into = policy.notes().iter().find_map(|n| match n {
        UdspNote::Merged { index, of } if *index == at => Some(*of),
        UdspNote::Merged { index, of } if *of == at => Some(*index),
        _ => None,
    });
    let placed = if let Some(other) = merged_into {
        rules = old.clone();
        let keep = if other > at { other - 1 } else { other };
        if let Some(r) = rules.get_mut(keep) {
            r.priority = rule.priority;
        }
        keep
    } else {
        at
    };
    apply(&s, &old, &rules).await?;
    s.admin_event(
        &admin.0,
        "add_udsp",
        Some(format!("udsp[{placed}]")),
        format!(
            "src={} dst={} rte={} priority={}",
            rule.src.as_deref().unwrap_or("-"),
            rule.dst.as_deref().unwrap_or("-"),
            rule.rte.as_deref().unwrap_or("-"),
            rule.priority.map_or("-".to_owned(), |p| p.to_string()),
        ),
    );
    Ok((
        StatusCode::CREATED,
        Json(UdspList {
            rules: docs(&rules),
        }),
    ))
}

async fn delete(s: &AppState, admin: &Admin, idx: Option<u32>) -> Result<UdspDeleted, ApiError> {
    let _one = s.shared.udsp.lock().await;
    let old = s.shared.node.udsp().await?.source_rules().to_vec();
    let before = docs(&old);
    let (deleted, rules) = match idx {
        None => (before, Vec::new()),
        Some(i) => {
            let at = usize::try_from(i)
                .ok()
                .filter(|at| *at < old.len())
                .ok_or_else(|| ApiError::not_found("idx", format!("no UDSP rule at {i}")))?;
            let mut rules = old.clone();
            rules.remove(at);
            let gone = before.into_iter().skip(at).take(1).collect();
            (gone, rules)
        }
    };
    apply(s, &old, &rules).await?;
    s.admin_event(
        &admin.0,
        "delete_udsp",
        Some(idx.map_or("udsp[*]".to_owned(), |i| format!("udsp[{i}]"))),
        format!("{} rule(s)", deleted.len()),
    );
    Ok(UdspDeleted {
        deleted,
        rules: docs(&rules),
    })
}

/// Deletes every UDSP rule (`lnetctl udsp del --all`).
#[utoipa::path(delete, path = "/api/v1/udsp", tag = TAG_CHANGE,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "What was deleted", body = UdspDeleted),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn delete_all_udsp(
    State(s): State<AppState>,
    admin: Admin,
) -> Result<Json<UdspDeleted>, ApiError> {
    Ok(Json(delete(&s, &admin, None).await?))
}

/// Deletes the UDSP rule at position `idx` (`lnetctl udsp del --idx N`); the rules after
/// it move up one.
#[utoipa::path(delete, path = "/api/v1/udsp/{idx}", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(("idx" = u32, Path, description = "The rule's position")),
    responses(
        (status = 200, description = "What was deleted", body = UdspDeleted),
        (status = 400, description = "Not a position", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No rule at this position", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn delete_udsp(
    State(s): State<AppState>,
    admin: Admin,
    PathParams(idx): PathParams<u32>,
) -> Result<Json<UdspDeleted>, ApiError> {
    Ok(Json(delete(&s, &admin, Some(idx)).await?))
}
