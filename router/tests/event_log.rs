//! The daemon's event log through the REST API: the `lnet-router` binary as a real process
//! with a real store serves `GET /api/v1/events` from that store, so a restart keeps the
//! events of the run before (with their wall-clock time) and the ids go on after them;
//! `before` pages back from the newest event.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;

use serde_json::{json, Value};

mod support;
use support::{sigterm, wait_listening, write_config, Daemon, WAIT};

const PORT: u16 = 21_120;
const API: u16 = 21_121;
const TOKEN: &str = "event-log-admin-secret-0123456789";
const ROUTER: &str = "127.0.5.30@tcp";
const NEWEST: &str = "/api/v1/events?before=9007199254740991&limit=1000";

async fn start(config: &Path, data: &Path, tokens: &Path) -> Daemon {
    let api = format!("127.0.0.1:{API}");
    let mut daemon = Daemon::start_args(&[
        "run".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "--data-dir".as_ref(),
        data.as_os_str(),
        "--tokens-file".as_ref(),
        tokens.as_os_str(),
        "--api-listen".as_ref(),
        api.as_ref(),
        "--plain-http".as_ref(),
        "--plain-http-mutations".as_ref(),
    ]);
    for addr in [
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 5, 30)), PORT),
        SocketAddr::from(([127, 0, 0, 1], API)),
    ] {
        tokio::time::timeout(WAIT, wait_listening(&mut daemon, addr))
            .await
            .expect("bounded");
    }
    daemon
}

async fn stop(mut daemon: Daemon) {
    sigterm(daemon.pid());
    let (status, out, err) = daemon.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
}

async fn get(client: &reqwest::Client, path: &str) -> Value {
    let got = client
        .get(format!("http://127.0.0.1:{API}{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), reqwest::StatusCode::OK, "{path}");
    got.json().await.unwrap()
}

/// A health set of the router's NI to `value`: an admin event (and a health event).
async fn set_health(client: &reqwest::Client, value: u32) {
    let got = client
        .post(format!("http://127.0.0.1:{API}/api/v1/nis/{ROUTER}/health"))
        .bearer_auth(TOKEN)
        .json(&json!({ "value": value }))
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), reqwest::StatusCode::OK);
}

fn ids(page: &Value) -> Vec<u64> {
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect()
}

fn admin_details(page: &Value) -> Vec<String> {
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"]["type"] == "admin")
        .map(|e| e["event"]["detail"].as_str().unwrap().to_owned())
        .collect()
}

#[actix::test]
async fn the_event_log_outlives_a_restart_and_pages_back_from_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "net:
    - net type: tcp
      local NI(s):
        - nid: {ROUTER}
lnet-router:
    acceptor_port: {PORT}
"
        ),
    );
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("ops admin {TOKEN}\n")).unwrap();
    let data = dir.path().join("data");
    let client = reqwest::Client::new();

    let daemon = start(&config, &data, &tokens).await;
    for v in [900, 800] {
        set_health(&client, v).await;
    }
    let first = get(&client, NEWEST).await;
    assert_eq!(first["run_first_id"], 1);
    assert_eq!(
        admin_details(&first),
        ["health set to 900", "health set to 800"]
    );
    let first_ids = ids(&first);
    let first_last = *first_ids.last().unwrap();
    stop(daemon).await;

    // Started again on the same store: the events of the first run are still served, with
    // the wall-clock time they were recorded at, and this run's ids go on after them.
    let daemon = start(&config, &data, &tokens).await;
    set_health(&client, 1000).await;
    let second = get(&client, NEWEST).await;
    // (The first run recorded more events after it was read, while it stopped.)
    let run_first = second["run_first_id"].as_u64().unwrap();
    assert!(run_first > first_last, "{run_first} after {first_last}");
    assert_eq!(
        admin_details(&second),
        [
            "health set to 900",
            "health set to 800",
            "health set to 1000"
        ]
    );
    let all = ids(&second);
    assert!(all.starts_with(&first_ids), "{all:?} after {first_ids:?}");
    assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
    let events = second["events"].as_array().unwrap();
    for e in events {
        let wall = e["wall_ms"]
            .as_u64()
            .expect("every logged event has wall_ms");
        assert!(wall > 1_600_000_000_000, "{e}");
    }
    assert!(
        all.contains(&(run_first - 1)),
        "the first run's last event: {all:?}"
    );
    assert!(all.iter().any(|&id| id >= run_first), "{all:?}");
    let newest = *all.last().unwrap();
    assert_eq!(second["last_id"].as_u64(), Some(newest));

    // Paging back, two at a time, from the newest to the oldest: every id once.
    let mut back = Vec::new();
    let mut before = u64::MAX;
    for _ in 0..all.len() {
        let page = get(&client, &format!("/api/v1/events?before={before}&limit=2")).await;
        let got = ids(&page);
        if got.is_empty() {
            break;
        }
        back.splice(0..0, got);
        before = page["next_before"].as_u64().unwrap();
    }
    assert_eq!(back, all);
    stop(daemon).await;
}
