//! `ping NID[,NID...]` and `discover NID[,NID...]`: one request per NID, the answers
//! printed under `ping:` or `discover:` and the failures in a `manage:` list, as lnetctl
//! prints them.

use lnet::config::ExecCommand;
use lnet::show::{PingFailureShow, PingShow};

use super::client::{at, json, strerror, Client, CtlError};
use super::Connect;

/// The NIDs of the arguments: each may hold several, separated by commas.
fn split(nids: &[String]) -> Vec<String> {
    nids.iter()
        .flat_map(|a| a.split(','))
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `ping`: `timeout` in seconds, as lnetctl's `--timeout`.
pub(super) async fn ping(
    c: &Connect,
    nids: &[String],
    timeout: Option<u64>,
    source: Option<&str>,
) -> Result<String, CtlError> {
    let timeout_ms = timeout.map(|s| s.saturating_mul(1000));
    if timeout_ms == Some(0) {
        let cl = Client::new(c, "ping", "ping")?;
        return Err(cl.err(-22, "--timeout: at least 1 second".to_owned()));
    }
    ping_ms(c, split(nids), timeout_ms, source).await
}

/// `ping` with the timeout in milliseconds (the API's unit, and `import --exec`'s).
async fn ping_ms(
    c: &Connect,
    nids: Vec<String>,
    timeout_ms: Option<u64>,
    source: Option<&str>,
) -> Result<String, CtlError> {
    let cl = Client::new(c, "ping", "ping")?;
    let mut answers = Vec::new();
    for nid in nids {
        answers.push(
            cl.post(
                "/api/v1/ping",
                serde_json::json!({ "nid": nid, "timeout_ms": timeout_ms, "source": source }),
            )
            .await?,
        );
    }
    print("ping", &cl, c.json, &answers)
}

/// `discover` (every discovery pings the peer again, as `--force` asks).
pub(super) async fn discover(c: &Connect, nids: &[String]) -> Result<String, CtlError> {
    discover_nids(c, split(nids)).await
}

async fn discover_nids(c: &Connect, nids: Vec<String>) -> Result<String, CtlError> {
    let cl = Client::new(c, "discover", "discover")?;
    let mut answers = Vec::new();
    for nid in nids {
        answers.push(
            cl.post("/api/v1/discover", serde_json::json!({ "nid": nid }))
                .await?,
        );
    }
    print("discover", &cl, c.json, &answers)
}

/// `import --exec FILE`: the file's `ping:` and `discover:` commands, in its order, their
/// documents printed one after the other. A failure of any makes the whole fail (with
/// every document as what is printed), as lnetctl's exit status says.
pub(super) async fn exec(c: &Connect, commands: &[ExecCommand]) -> Result<String, CtlError> {
    let mut printed = String::new();
    let mut first_error = None;
    for cmd in commands {
        let done = match cmd {
            ExecCommand::Ping {
                nids,
                timeout_ms,
                source,
            } => {
                let source = source.map(|s| s.to_string());
                ping_ms(
                    c,
                    nids.iter().map(ToString::to_string).collect(),
                    Some(*timeout_ms),
                    source.as_deref(),
                )
                .await
            }
            // Every discovery pings the peer again: `force` asks nothing more.
            ExecCommand::Discover { nids, .. } => {
                discover_nids(c, nids.iter().map(ToString::to_string).collect()).await
            }
            _ => continue,
        };
        match done {
            Ok(out) => printed.push_str(&out),
            Err(mut e) => match e.printed.take() {
                Some(out) => {
                    printed.push_str(&out);
                    first_error.get_or_insert(e);
                }
                // The API refused the request: stop here, after what ran before.
                None => {
                    if !printed.is_empty() {
                        e.printed = Some(printed);
                        e.error_too = true;
                    }
                    return Err(e);
                }
            },
        }
    }
    match first_error {
        None => Ok(printed),
        Some(mut e) => {
            e.printed = Some(printed);
            Err(e)
        }
    }
}

/// The document of the answers; an error (with the document as what is printed) when
/// some NID did not answer, as lnetctl exits non-zero then.
fn print(
    group: &'static str,
    cl: &Client,
    as_json: bool,
    answers: &[serde_json::Value],
) -> Result<String, CtlError> {
    let mut answered = Vec::new();
    let mut failed = Vec::new();
    for v in answers {
        let target = at(v, "/nid").as_str().unwrap_or("?");
        if !at(v, "/ok").as_bool().unwrap_or(false) {
            let errno = at(v, "/errno")
                .as_i64()
                .and_then(|e| i32::try_from(e).ok())
                .unwrap_or(-5);
            failed.push(PingFailureShow {
                errno,
                descr: format!("failed to {group} {target}: {}", strerror(errno)),
            });
            continue;
        }
        let nid = |x: &serde_json::Value| x.as_str().and_then(|s| s.parse().ok());
        answered.push(PingShow {
            primary_nid: nid(at(v, "/primary_nid"))
                .ok_or_else(|| cl.err(-5, format!("the reply of {target} names no primary NID")))?,
            multi_rail: at(v, "/multi_rail").as_bool().unwrap_or(false),
            peer_nis: at(v, "/peer_nis")
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| nid(at(n, "/nid")))
                .collect(),
        });
    }
    let out = if as_json {
        json(&serde_json::Value::Array(answers.to_vec()))
    } else {
        PingShow::list_to_yaml(group, &answered, &failed)
    };
    match failed.first() {
        None => Ok(out),
        Some(f) => {
            let mut e = cl.err(f.errno, f.descr.clone());
            e.printed = Some(out);
            Err(e)
        }
    }
}
