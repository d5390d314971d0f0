//! `fault drop|delay add|del|show|reset` over the node's REST fault rules
//! (`/api/v1/fault-rules`), with lnetctl's options and its `fault:` document. A rule
//! without `--local_nid` applies at every NI, as in the kernel. What those rules cannot do
//! is refused, naming the option.

use clap::{Args, Subcommand};
use lnet::fault::{FaultHealthError, FaultKind, FaultMsgType, FaultRule, FaultTrigger, NidMatch};
use lnet::Nid;

use super::client::{json, Client, CtlError};
use super::Connect;

/// `fault drop|delay ...`.
#[derive(Debug, Clone, Subcommand)]
pub enum FaultCmd {
    /// Drop rules.
    Drop {
        /// What to do.
        #[command(subcommand)]
        what: FaultOp,
    },
    /// Delay rules.
    Delay {
        /// What to do.
        #[command(subcommand)]
        what: FaultOp,
    },
}

/// `add|del|show|reset`.
#[derive(Debug, Clone, Subcommand)]
pub enum FaultOp {
    /// Add a rule.
    Add(FaultAddArgs),
    /// Delete the rules from `--source` to `--dest`, or all (`--all`).
    Del {
        /// Every rule of this kind.
        #[arg(short = 'a', long, conflicts_with_all = ["source", "dest"])]
        all: bool,
        /// The rules' source.
        #[arg(short = 's', long, required_unless_present = "all")]
        source: Option<String>,
        /// The rules' destination.
        #[arg(short = 'd', long, required_unless_present = "all")]
        dest: Option<String>,
    },
    /// Show the rules and their counters.
    Show,
    /// Zero the rules' counters and restart their triggers.
    Reset,
}

/// The options of `fault drop|delay add`.
#[derive(Debug, Clone, Args)]
pub struct FaultAddArgs {
    /// Messages from this NID (`*`, `*@NET` or a NID).
    #[arg(short = 's', long)]
    source: Option<String>,
    /// Messages to this NID (`*`, `*@NET` or a NID).
    #[arg(short = 'd', long)]
    dest: Option<String>,
    /// One message in each window of this many.
    #[arg(short = 'r', long)]
    rate: Option<u32>,
    /// One message in each window of this many seconds.
    #[arg(short = 'i', long)]
    interval: Option<u32>,
    /// Delay, seconds (delay rules).
    #[arg(short = 'l', long)]
    latency: Option<u64>,
    /// Only PUTs and GETs to this portal (repeatable).
    #[arg(short = 'p', long)]
    portal: Vec<u32>,
    /// Only this message type: PUT, ACK, GET or REPLY (repeatable).
    #[arg(short = 'm', long)]
    message: Vec<String>,
    /// Fail the send with this health status instead of losing the message (drop rules).
    #[arg(short = 'e', long = "health_error", alias = "health-error")]
    health_error: Vec<String>,
    /// Only at this local NI (every NI when not given).
    #[arg(short = 'o', long = "local_nid", alias = "local-nid")]
    local_nid: Option<String>,
    /// With `--interval S`: drop each matching message with a chance of about one half
    /// (a draw in 0..S at least S/2), instead of one per interval.
    #[arg(short = 'n', long)]
    random: bool,
    /// Drop every matching message (drop rules).
    #[arg(short = 'x', long = "drop_all", alias = "drop-all")]
    drop_all: bool,
}

fn kind_name(drop: bool) -> &'static str {
    if drop {
        "drop"
    } else {
        "delay"
    }
}

fn msg_type(cl: &Client, text: &str) -> Result<FaultMsgType, CtlError> {
    match text.to_ascii_lowercase().as_str() {
        "put" => Ok(FaultMsgType::Put),
        "ack" => Ok(FaultMsgType::Ack),
        "get" => Ok(FaultMsgType::Get),
        "reply" => Ok(FaultMsgType::Reply),
        _ => Err(cl.err(-22, format!("--message: unknown message type {text}"))),
    }
}

fn health_error(cl: &Client, text: &str) -> Result<FaultHealthError, CtlError> {
    serde_json::from_value(serde_json::json!(text.to_ascii_lowercase()))
        .map_err(|_| cl.err(-22, format!("--health_error: unknown health status {text}")))
}

fn nid_match(cl: &Client, option: &str, text: &str) -> Result<NidMatch, CtlError> {
    text.parse()
        .map_err(|e| cl.err(-22, format!("--{option}: {e}")))
}

/// The rule `fault drop|delay add` asks for.
fn rule_of(cl: &Client, drop: bool, a: &FaultAddArgs) -> Result<FaultRule, CtlError> {
    let refuse = |option: &str, why: &str| cl.err(-95, format!("--{option}: {why}"));
    if !drop && (a.drop_all || !a.health_error.is_empty()) {
        let option = if a.drop_all {
            "drop_all"
        } else {
            "health_error"
        };
        return Err(cl.err(-22, format!("--{option}: drop rules only")));
    }
    let trigger = match (a.rate, a.interval) {
        (Some(r), None) if r > 0 => FaultTrigger::Rate(r),
        (None, Some(i)) if i > 0 => FaultTrigger::Interval(i),
        _ => {
            return Err(cl.err(
                -22,
                format!(
                    "please provide either {} rate or interval but not both at the same time",
                    kind_name(drop)
                ),
            ))
        }
    };
    // As lnetctl: `--random` is for drop rules (a delay rule ignores it) and needs
    // `--interval`.
    let trigger = match trigger {
        _ if a.drop_all => FaultTrigger::All,
        FaultTrigger::Interval(i) if drop && a.random => FaultTrigger::RandomInterval(i),
        _ if drop && a.random => {
            return Err(cl.err(-22, "please provide an interval to randomize".to_owned()))
        }
        t => t,
    };
    let (Some(source), Some(dest)) = (&a.source, &a.dest) else {
        return Err(cl.err(
            -22,
            format!(
                "Please provide both source and destination of {} rule",
                kind_name(drop)
            ),
        ));
    };
    let local: Option<Nid> = a
        .local_nid
        .as_deref()
        .map(|l| {
            l.parse()
                .map_err(|e| cl.err(-22, format!("--local_nid: {l}: {e}")))
        })
        .transpose()?;
    let source = nid_match(cl, "source", source)?;
    let dest = nid_match(cl, "dest", dest)?;
    let kind = if drop {
        FaultKind::Drop
    } else {
        let Some(latency) = a.latency.filter(|l| *l > 0) else {
            return Err(cl.err(-22, "latency cannot be zero".to_owned()));
        };
        FaultKind::Delay {
            latency_ms: latency.saturating_mul(1000),
        }
    };
    let mut types = Vec::new();
    for m in &a.message {
        let t = msg_type(cl, m)?;
        if !types.contains(&t) {
            types.push(t);
        }
    }
    let errors = a
        .health_error
        .iter()
        .map(|e| health_error(cl, e))
        .collect::<Result<Vec<_>, _>>()?;
    let health_error = match errors.as_slice() {
        [] => None,
        [one] => Some(*one),
        _ => {
            return Err(refuse(
                "health_error",
                "one status per rule here (or `random`)",
            ))
        }
    };
    Ok(FaultRule {
        kind,
        portals: a.portal.clone(),
        message_types: types,
        health_error,
        local_nid: local,
        ..FaultRule::drop(source, dest, trigger)
    })
}

/// Every fault rule of the node of kind drop (`drop`) or delay.
async fn listed(cl: &Client, drop: bool) -> Result<Vec<web::FaultRuleDoc>, CtlError> {
    let all: web::FaultRules = cl.model(cl.get("/api/v1/fault-rules").await?)?;
    Ok(all
        .rules
        .into_iter()
        .filter(|r| matches!(r.rule.kind, FaultKind::Drop) == drop)
        .collect())
}

/// A NID pattern as the kernel prints it.
fn kernel_nid(m: NidMatch) -> String {
    match m {
        NidMatch::Any => "<?>".to_owned(),
        NidMatch::Net(net) => format!("255.255.255.255@{net}"),
        NidMatch::Nid(nid) => nid.to_string(),
    }
}

/// The message type mask: every type when the rule names none, as the kernel fills it.
fn msg_mask(types: &[FaultMsgType]) -> u32 {
    let bit = |t: &FaultMsgType| match t {
        FaultMsgType::Ack => 1,
        FaultMsgType::Put => 2,
        FaultMsgType::Get => 4,
        FaultMsgType::Reply => 8,
    };
    if types.is_empty() {
        15
    } else {
        types.iter().map(bit).fold(0, |a, b| a | b)
    }
}

/// lnetctl's `fault:` document of these rules.
fn show_yaml(drop: bool, rules: &[web::FaultRuleDoc]) -> String {
    let mut out = String::from("fault:\n");
    for r in rules {
        let (rate, interval) = match r.rule.trigger {
            FaultTrigger::Rate(n) => (n, 0),
            FaultTrigger::Interval(s) | FaultTrigger::RandomInterval(s) => (0, s),
            _ => (0, 0),
        };
        let ptl_mask = r
            .rule
            .portals
            .iter()
            .filter(|p| **p < 64)
            .fold(0u64, |m, p| m | (1u64 << p));
        let kind = kind_name(drop);
        out.push_str(&format!("-     rule_type: {kind}\n"));
        let mut line = |k: &str, v: String| out.push_str(&format!("      {k}: {v}\n"));
        line("fa_src", kernel_nid(r.rule.source));
        line("fa_dst", kernel_nid(r.rule.dest));
        line("fa_ptl_mask", ptl_mask.to_string());
        line("fa_msg_mask", msg_mask(&r.rule.message_types).to_string());
        if drop {
            line("da_rate", rate.to_string());
            line("da_interval", interval.to_string());
            line("ds_dropped", r.fired.to_string());
        } else {
            let latency = match r.rule.kind {
                FaultKind::Delay { latency_ms } => latency_ms / 1000,
                FaultKind::Drop => 0,
            };
            line("la_rate", rate.to_string());
            line("la_interval", interval.to_string());
            line("la_latency", latency.to_string());
            line("ls_delayed", r.fired.to_string());
        }
        line("fs_count", r.matched.to_string());
        for k in ["fs_put", "fs_ack", "fs_get", "fs_reply"] {
            line(k, "0".to_owned());
        }
    }
    out
}

/// Runs a `fault` command.
pub(super) async fn run(c: &Connect, cmd: &FaultCmd) -> Result<String, CtlError> {
    let (drop, op) = match cmd {
        FaultCmd::Drop { what } => (true, what),
        FaultCmd::Delay { what } => (false, what),
    };
    let object = kind_name(drop);
    match op {
        FaultOp::Add(a) => {
            let cl = Client::new(c, "add", object)?;
            let rule = rule_of(&cl, drop, a)?;
            let body = serde_json::to_value(&rule)
                .map_err(|e| cl.err(-22, format!("the rule cannot be sent: {e}")))?;
            let v = cl.post("/api/v1/fault-rules", body).await?;
            Ok(if c.json { json(&v) } else { String::new() })
        }
        FaultOp::Del { all, source, dest } => {
            let cl = Client::new(c, "del", object)?;
            let source = source
                .as_deref()
                .map(|s| nid_match(&cl, "source", s))
                .transpose()?;
            let dest = dest
                .as_deref()
                .map(|d| nid_match(&cl, "dest", d))
                .transpose()?;
            let mut removed = Vec::new();
            for r in listed(&cl, drop).await? {
                let hit = *all || (Some(r.rule.source) == source && Some(r.rule.dest) == dest);
                if hit {
                    cl.delete(&format!("/api/v1/fault-rules/{}", r.id)).await?;
                    removed.push(serde_json::json!({ "id": r.id }));
                }
            }
            Ok(if c.json {
                json(&serde_json::json!({ "removed": removed }))
            } else {
                String::new()
            })
        }
        FaultOp::Show => {
            let cl = Client::new(c, "show", object)?;
            let rules = listed(&cl, drop).await?;
            if rules.is_empty() {
                return Err(cl.err(-2, format!("no {object} rules")));
            }
            if c.json {
                return Ok(json(&serde_json::json!({ "rules": rules })));
            }
            Ok(show_yaml(drop, &rules))
        }
        FaultOp::Reset => {
            let cl = Client::new(c, "reset", object)?;
            let v = cl
                .post(
                    "/api/v1/fault-rules/reset",
                    serde_json::json!({ "kind": object }),
                )
                .await?;
            Ok(if c.json { json(&v) } else { String::new() })
        }
    }
}
