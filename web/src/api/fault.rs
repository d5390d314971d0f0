//! `GET/POST /api/v1/nis/{nid}/fault-rules`, `DELETE /api/v1/nis/{nid}/fault-rules/{id}`:
//! the fault rules of a local NI.

use std::time::Duration;

use actors::fault::{
    FaultAction, FaultRule, Hooks, MsgTypes, NidMatch, RuleId, RuleStats, Trigger,
};
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use lnet::health::HealthStatus;
use lnet::{MsgType, Net, Nid};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Admin, Body, PathParams, Reader};
use crate::state::AppState;

use super::{parse_nid, TAG_CHANGE, TAG_SHOW};

/// A message type a fault rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MsgTypeName {
    /// PUT.
    Put,
    /// ACK.
    Ack,
    /// GET.
    Get,
    /// REPLY.
    Reply,
}

/// Which matching messages a rule fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TriggerSpec {
    /// Every matching message (`-x`).
    Always,
    /// The Nth, 2Nth, ... matching message.
    EveryNth {
        /// N (at least 1).
        #[schema(minimum = 1)]
        n: u32,
    },
    /// One at a random position in each window of N (`-r N`).
    OneInWindow {
        /// N (at least 1).
        #[schema(minimum = 1)]
        n: u32,
    },
    /// Each with probability `per_million` / 1 000 000.
    Probability {
        /// The chance in millionths.
        #[schema(maximum = 1000000)]
        per_million: u32,
    },
}

/// What a rule does to a message it fires on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActionSpec {
    /// Drop it (`lnetctl fault drop add`).
    Drop,
    /// Hold it this long (`lnetctl fault delay add -l`).
    Delay {
        /// Milliseconds (at most one hour).
        #[schema(maximum = 3600000)]
        ms: u64,
    },
    /// Fail its send with this health status (`lnetctl fault drop add -e`):
    /// `local_interrupt`, `local_dropped`, `local_aborted`, `local_no_route`,
    /// `local_error`, `local_timeout`, `remote_error`, `remote_dropped`,
    /// `remote_timeout` or `network_timeout`.
    Fail {
        /// The status.
        #[schema(example = "local_timeout")]
        health_status: String,
    },
}

/// Where a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HooksName {
    /// Messages the NI sends.
    Send,
    /// Messages the NI receives.
    Receive,
    /// Both.
    Both,
}

/// A fault rule to add on a local NI (`lnetctl fault drop|delay add`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultRuleSpec {
    /// The source NID matched: `*` (any), `*@NET` or `255.255.255.255@NET` (any on a net),
    /// or a NID. Default `*`.
    #[schema(example = "*")]
    pub src: Option<String>,
    /// The destination NID matched, in the same forms. Default `*`.
    #[schema(example = "10.0.1.1@tcp")]
    pub dst: Option<String>,
    /// The portal matched (PUTs and GETs only); absent: any.
    pub portal: Option<u32>,
    /// The message types matched; absent: all.
    pub msg_types: Option<Vec<MsgTypeName>>,
    /// Which matching messages it fires on.
    pub trigger: TriggerSpec,
    /// What it does.
    pub action: ActionSpec,
    /// Where it applies; absent: receive for a drop, send for a failure, both for a delay.
    pub hooks: Option<HooksName>,
    /// The seed of its generator (default 1).
    pub seed: Option<u64>,
}

/// A fault rule of a local NI and what it has done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultRuleDoc {
    /// Its id on the NI.
    pub id: u64,
    /// The source NID matched.
    pub src: String,
    /// The destination NID matched.
    pub dst: String,
    /// The portal matched.
    pub portal: Option<u32>,
    /// The message types matched.
    pub msg_types: Vec<MsgTypeName>,
    /// Which matching messages it fires on.
    pub trigger: TriggerSpec,
    /// What it does.
    pub action: ActionSpec,
    /// Where it applies.
    pub hooks: HooksName,
    /// Its seed.
    pub seed: u64,
    /// Messages its filters accepted.
    pub matched: u64,
    /// Messages it fired on.
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

fn nid_match(field: &str, text: Option<&str>) -> Result<NidMatch, ApiError> {
    let text = text.unwrap_or("*").trim();
    if text == "*" {
        return Ok(NidMatch::Any);
    }
    if let Some(net) = text
        .strip_prefix("*@")
        .or_else(|| text.strip_prefix("255.255.255.255@"))
    {
        return net
            .parse::<Net>()
            .map(NidMatch::Net)
            .map_err(|e| ApiError::bad_request(field, format!("{net:?} is not a net: {e}")));
    }
    parse_nid(field, text).map(NidMatch::Nid)
}

fn nid_match_text(m: NidMatch) -> String {
    match m {
        NidMatch::Any => "*".into(),
        NidMatch::Net(net) => format!("*@{net}"),
        NidMatch::Nid(nid) => nid.to_string(),
    }
}

const MSG_TYPES: [(MsgTypeName, MsgType, MsgTypes); 4] = [
    (MsgTypeName::Put, MsgType::Put, MsgTypes::PUT),
    (MsgTypeName::Ack, MsgType::Ack, MsgTypes::ACK),
    (MsgTypeName::Get, MsgType::Get, MsgTypes::GET),
    (MsgTypeName::Reply, MsgType::Reply, MsgTypes::REPLY),
];

fn health_status(name: &str) -> Result<HealthStatus, ApiError> {
    HealthStatus::ALL
        .into_iter()
        .filter(|s| *s != HealthStatus::Ok)
        .find(|s| s.name().eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            ApiError::unprocessable(
                "action.health_status",
                format!("{name:?} is not a failure status (local_timeout, remote_error, ...)"),
            )
        })
}

/// The longest delay a rule may ask for.
const MAX_DELAY_MS: u64 = 3_600_000;

impl FaultRuleSpec {
    fn to_rule(&self) -> Result<FaultRule, ApiError> {
        let src = nid_match("src", self.src.as_deref())?;
        let dst = nid_match("dst", self.dst.as_deref())?;
        let trigger = match self.trigger {
            TriggerSpec::Always => Trigger::Always,
            TriggerSpec::EveryNth { n } => Trigger::EveryNth(n),
            TriggerSpec::OneInWindow { n } => Trigger::OneInWindow(n),
            TriggerSpec::Probability { per_million } => Trigger::Probability { per_million },
        };
        let action = match &self.action {
            ActionSpec::Drop => FaultAction::Drop,
            ActionSpec::Delay { ms } => {
                if *ms > MAX_DELAY_MS {
                    return Err(ApiError::unprocessable(
                        "action.ms",
                        format!("a delay is at most {MAX_DELAY_MS} ms"),
                    ));
                }
                FaultAction::Delay(Duration::from_millis(*ms))
            }
            ActionSpec::Fail { health_status: h } => FaultAction::Fail(health_status(h)?),
        };
        let hooks = match (self.hooks, action) {
            (Some(HooksName::Send), _) => Hooks::Send,
            (Some(HooksName::Receive), _) => Hooks::Receive,
            (Some(HooksName::Both), _) => Hooks::Both,
            (None, FaultAction::Drop) => Hooks::Receive,
            (None, FaultAction::Fail(_)) => Hooks::Send,
            (None, FaultAction::Delay(_)) => Hooks::Both,
        };
        let mut rule = FaultRule::new(src, dst, trigger, action, hooks);
        rule.portal = self.portal;
        if let Some(types) = &self.msg_types {
            if types.is_empty() {
                return Err(ApiError::unprocessable(
                    "msg_types",
                    "a rule matches at least one message type",
                ));
            }
            let mut set: Option<MsgTypes> = None;
            for t in types {
                let bits = MSG_TYPES
                    .iter()
                    .find(|(n, _, _)| n == t)
                    .map_or(MsgTypes::ALL, |(_, _, b)| *b);
                set = Some(set.map_or(bits, |s| s.union(bits)));
            }
            rule.types = set.unwrap_or(MsgTypes::ALL);
        }
        if let Some(seed) = self.seed {
            rule.seed = seed;
        }
        rule.validate().map_err(|e| {
            let field = match e {
                lnd::lnd::fault::FaultRuleError::ZeroRate
                | lnd::lnd::fault::FaultRuleError::Probability { .. } => "trigger",
                lnd::lnd::fault::FaultRuleError::FailOnReceive => "hooks",
                _ => "action",
            };
            ApiError::unprocessable(field, e.to_string())
        })?;
        Ok(rule)
    }
}

fn rule_doc(r: &RuleStats) -> FaultRuleDoc {
    let rule = &r.rule;
    FaultRuleDoc {
        id: r.id.0,
        src: nid_match_text(rule.src),
        dst: nid_match_text(rule.dst),
        portal: rule.portal,
        msg_types: MSG_TYPES
            .iter()
            .filter(|(_, t, _)| rule.types.contains(*t))
            .map(|(n, _, _)| *n)
            .collect(),
        trigger: match rule.trigger {
            Trigger::Always => TriggerSpec::Always,
            Trigger::EveryNth(n) => TriggerSpec::EveryNth { n },
            Trigger::OneInWindow(n) => TriggerSpec::OneInWindow { n },
            Trigger::Probability { per_million } => TriggerSpec::Probability { per_million },
        },
        action: match rule.action {
            FaultAction::Drop => ActionSpec::Drop,
            FaultAction::Delay(d) => ActionSpec::Delay {
                ms: u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
            },
            FaultAction::Fail(s) => ActionSpec::Fail {
                health_status: s.name().to_ascii_lowercase(),
            },
        },
        hooks: match rule.hooks {
            Hooks::Send => HooksName::Send,
            Hooks::Receive => HooksName::Receive,
            Hooks::Both => HooksName::Both,
        },
        seed: rule.seed,
        matched: r.matched,
        fired: r.fired,
    }
}

/// A local NI named by the path: 404 when the node has none with this NID.
async fn local_ni(s: &AppState, text: &str) -> Result<Nid, ApiError> {
    let nid = parse_nid("nid", text)?;
    let known = s
        .shared
        .node
        .local_nis()
        .await?
        .iter()
        .any(|v| v.nid == nid);
    if known {
        Ok(nid)
    } else {
        Err(ApiError::not_found("nid", format!("no local NI {nid}")))
    }
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
        (status = 409, description = "The NI's LND takes no fault rules", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn list_fault_rules(
    State(s): State<AppState>,
    _r: Reader,
    PathParams(nid): PathParams<String>,
) -> Result<Json<FaultRuleList>, ApiError> {
    let nid = local_ni(&s, &nid).await?;
    let rules = s.shared.node.fault_rules(nid)?;
    Ok(Json(FaultRuleList {
        nid: nid.to_string(),
        rules: rules.iter().map(rule_doc).collect(),
    }))
}

/// Adds a fault rule on a local NI (`lnetctl fault drop|delay add`).
#[utoipa::path(post, path = "/api/v1/nis/{nid}/fault-rules", tag = TAG_CHANGE,
    security(("bearer" = [])),
    params(("nid" = String, Path, description = "The local NI", example = "10.0.0.1@tcp")),
    request_body = FaultRuleSpec,
    responses(
        (status = 201, description = "The rule added", body = FaultRuleDoc),
        (status = 400, description = "Not a NID, or bad JSON", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin token, or a read-only server", body = ErrorBody),
        (status = 404, description = "No such local NI", body = ErrorBody),
        (status = 409, description = "The NI's LND takes no fault rules, or its table is full", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 422, description = "A rule that cannot work", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn add_fault_rule(
    State(s): State<AppState>,
    admin: Admin,
    PathParams(nid): PathParams<String>,
    Body(spec): Body<FaultRuleSpec>,
) -> Result<(StatusCode, Json<FaultRuleDoc>), ApiError> {
    let nid = local_ni(&s, &nid).await?;
    let rule = spec.to_rule()?;
    let node = &s.shared.node;
    let id = node.add_fault_rule(nid, rule)?;
    let doc = node
        .fault_rules(nid)?
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
        Some(nid.to_string()),
        format!("rule {}: {rule:?}", id.0),
    );
    Ok((StatusCode::CREATED, Json(doc)))
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
        (status = 409, description = "The NI's LND takes no fault rules", body = ErrorBody),
        (status = 503, description = "The node is stopping", body = ErrorBody),
    ))]
pub(crate) async fn remove_fault_rule(
    State(s): State<AppState>,
    admin: Admin,
    PathParams((nid, id)): PathParams<(String, u64)>,
) -> Result<StatusCode, ApiError> {
    let nid = local_ni(&s, &nid).await?;
    if !s.shared.node.remove_fault_rule(nid, RuleId(id))? {
        return Err(ApiError::not_found(
            "id",
            format!("NI {nid} has no rule {id}"),
        ));
    }
    s.admin_event(
        &admin.0,
        "remove_fault_rule",
        Some(nid.to_string()),
        format!("rule {id}"),
    );
    Ok(StatusCode::NO_CONTENT)
}
