//! `ping NID[,NID...]` and `discover NID[,NID...]`: one request per NID, the answers
//! printed under `ping:` or `discover:` and the failures in a `manage:` list, as lnetctl
//! prints them.

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
    let cl = Client::new(c, "ping", "ping")?;
    let timeout_ms = timeout.map(|s| s.saturating_mul(1000));
    if timeout_ms == Some(0) {
        return Err(cl.err(-22, "--timeout: at least 1 second".to_owned()));
    }
    let mut answers = Vec::new();
    for nid in split(nids) {
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
    let cl = Client::new(c, "discover", "discover")?;
    let mut answers = Vec::new();
    for nid in split(nids) {
        answers.push(
            cl.post("/api/v1/discover", serde_json::json!({ "nid": nid }))
                .await?,
        );
    }
    print("discover", &cl, c.json, &answers)
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
