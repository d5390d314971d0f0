//! `udsp add|del|show`: the selection policy rules of the running router, printed as
//! `lnetctl udsp show` prints them.

use clap::Subcommand;
use lnet::config::{Config, UdspRule};

use super::client::{at, json, Client, CtlError};
use super::Connect;

/// `udsp ...`.
#[derive(Debug, Clone, Subcommand)]
pub enum UdspCmd {
    /// Add a rule.
    Add {
        /// Local NIDs or net to match (ip2nets syntax).
        #[arg(short = 's', long)]
        src: Option<String>,
        /// Peer NIDs or net to match.
        #[arg(short = 'd', long)]
        dst: Option<String>,
        /// Gateway NIDs to match.
        #[arg(short = 'r', long)]
        rte: Option<String>,
        /// Priority (0 is the highest).
        #[arg(short = 'p', long)]
        priority: Option<u32>,
        /// Insert at this position (default: at the end).
        #[arg(short = 'i', long)]
        idx: Option<u32>,
    },
    /// Delete a rule (`--idx N`) or all (`--all`).
    Del {
        /// The rule's position.
        #[arg(
            short = 'i',
            long,
            required_unless_present = "all",
            conflicts_with = "all"
        )]
        idx: Option<u32>,
        /// Every rule.
        #[arg(short = 'a', long)]
        all: bool,
    },
    /// Show the rules (`--idx N`: only that one).
    Show {
        /// Only the rule at this position.
        #[arg(short = 'i', long)]
        idx: Option<u32>,
    },
}

fn rule_of(v: &serde_json::Value) -> UdspRule {
    let text = |k: &str| at(v, k).as_str().map(str::to_owned);
    let number = |k: &str| at(v, k).as_u64().and_then(|n| u32::try_from(n).ok());
    UdspRule {
        idx: number("/idx"),
        src: text("/src"),
        dst: text("/dst"),
        rte: text("/rte"),
        priority: number("/priority"),
    }
}

/// The `udsp:` document of these rules; nothing when there are none, as lnetctl.
fn yaml(rules: Vec<UdspRule>) -> String {
    if rules.is_empty() {
        return String::new();
    }
    Config {
        udsp: rules,
        ..Config::default()
    }
    .to_yaml()
}

/// Runs a `udsp` command.
pub(super) async fn run(c: &Connect, cmd: &UdspCmd) -> Result<String, CtlError> {
    match cmd {
        UdspCmd::Add {
            src,
            dst,
            rte,
            priority,
            idx,
        } => {
            let cl = Client::new(c, "add", "udsp")?;
            if src.is_none() && dst.is_none() && rte.is_none() {
                return Err(cl.err(-22, "give --src, --dst or --rte".to_owned()));
            }
            let v = cl
                .post(
                    "/api/v1/udsp",
                    serde_json::json!({
                        "src": src, "dst": dst, "rte": rte, "priority": priority, "idx": idx,
                    }),
                )
                .await?;
            Ok(if c.json { json(&v) } else { String::new() })
        }
        UdspCmd::Del { idx, .. } => {
            let cl = Client::new(c, "del", "udsp")?;
            let path = match idx {
                Some(i) => format!("/api/v1/udsp/{i}"),
                None => "/api/v1/udsp".to_owned(),
            };
            let v = cl.delete(&path).await?;
            Ok(if c.json { json(&v) } else { String::new() })
        }
        UdspCmd::Show { idx } => {
            let cl = Client::new(c, "show", "udsp")?;
            let v = cl.get("/api/v1/udsp").await?;
            let mut rules: Vec<serde_json::Value> =
                at(&v, "/rules").as_array().cloned().unwrap_or_default();
            if let Some(i) = idx {
                rules.retain(|r| at(r, "/idx").as_u64() == Some(u64::from(*i)));
            }
            if c.json {
                return Ok(json(&serde_json::json!({ "rules": rules })));
            }
            Ok(yaml(rules.iter().map(rule_of).collect()))
        }
    }
}
