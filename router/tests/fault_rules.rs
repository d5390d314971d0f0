//! Fault rules added through the REST API are kept in the store and installed again when
//! the daemon restarts on the same data dir: the `lnet-router` binary as a real process
//! with a real store, a drop rule on its NI, an in-process node whose pings the rule
//! drops, before and after a restart (with and without the API); a rule removed through
//! the API stays removed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use actors::{Node, NodeConfig, NodeHandler};
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::fault::{FaultKind, FaultTrigger, NidMatch};
use lnet::Nid;
use serde_json::{json, Value};

mod support;
use support::{sigterm, wait_listening, write_config, Daemon, WAIT};

const PORT: u16 = 21_110;
const API: u16 = 21_111;
const TOKEN: &str = "fault-admin-secret-0123456789";
const ROUTER: &str = "127.0.5.20@tcp";
const ME: &str = "127.0.5.21@tcp";

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn url(path: &str) -> String {
    format!("http://127.0.0.1:{API}/api/v1/nis/{ROUTER}/fault-rules{path}")
}

/// The daemon on `data` without its API (no `--api-listen`): only its NI listens.
async fn start_without_api(config: &Path, data: &Path) -> Daemon {
    let mut daemon = Daemon::start_args(&[
        "run".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "--data-dir".as_ref(),
        data.as_os_str(),
    ]);
    let ni = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 5, 20)), PORT);
    tokio::time::timeout(WAIT, wait_listening(&mut daemon, ni))
        .await
        .expect("bounded");
    daemon
}

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
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 5, 20)), PORT),
        SocketAddr::from(([127, 0, 0, 1], API)),
    ] {
        tokio::time::timeout(WAIT, wait_listening(&mut daemon, addr))
            .await
            .expect("bounded");
    }
    daemon
}

async fn stop(mut daemon: Daemon) -> String {
    sigterm(daemon.pid());
    let (status, out, err) = daemon.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
    out
}

async fn rules(client: &reqwest::Client) -> Vec<Value> {
    let got = client.get(url("")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(got.status(), reqwest::StatusCode::OK);
    let list: Value = got.json().await.unwrap();
    list["rules"].as_array().unwrap().clone()
}

/// Whether a ping from `node` to the router is answered within 2 s.
async fn answered(node: &Node) -> bool {
    tokio::time::timeout(WAIT, node.ping(nid(ROUTER), Duration::from_secs(2)))
        .await
        .expect("bounded")
        .is_ok()
}

#[actix::test]
async fn a_fault_rule_added_through_the_api_survives_a_restart_and_drops_again() {
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

    let node = Node::start(NodeConfig::default());
    let mut c = SockLndConfig::new(nid(ME), 0x5EED_0515);
    c.listen = Some(SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(127, 0, 5, 21)),
        PORT,
    ));
    c.peer_port = PORT;
    node.add_ni::<SockLnd<NodeHandler>>(c, 8).await.unwrap();
    let client = reqwest::Client::new();

    let daemon = start(&config, &data, &tokens).await;
    assert!(answered(&node).await, "no rule yet");
    // `lnetctl fault drop add --local_nid ROUTER -s ME -d * -x`: dropped on receive.
    let added = client
        .post(url(""))
        .bearer_auth(TOKEN)
        .json(&json!({"kind": "drop", "source": ME, "dest": "*", "trigger": "all"}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), reqwest::StatusCode::CREATED);
    let added: Value = added.json().await.unwrap();
    let id = added["id"].as_u64().unwrap();
    assert!(!answered(&node).await, "the rule drops the ping");
    let now = rules(&client).await;
    assert_eq!(now.len(), 1);
    assert!(now[0]["fired"].as_u64().unwrap() >= 1, "{now:?}");
    let out = stop(daemon).await;
    assert!(!out.contains("fault rule(s) installed"), "{out}");

    // Restarted on the same data dir: the rule is back, under its id, and applied.
    let daemon = start(&config, &data, &tokens).await;
    let back = rules(&client).await;
    assert_eq!(back.len(), 1, "{back:?}");
    assert_eq!(back[0]["id"].as_u64(), Some(id));
    let rule: lnet::fault::FaultRule = serde_json::from_value(back[0]["rule"].clone()).unwrap();
    assert_eq!(rule.local_nid, Some(nid(ROUTER)));
    assert_eq!(rule.kind, FaultKind::Drop);
    assert_eq!(rule.source, NidMatch::Nid(nid(ME)));
    assert_eq!(rule.trigger, FaultTrigger::All);
    assert_eq!(back[0]["fired"].as_u64(), Some(0));
    assert!(!answered(&node).await, "the kept rule drops the ping");
    assert!(rules(&client).await[0]["fired"].as_u64().unwrap() >= 1);
    stop(daemon).await;

    // Without the API the store is still the daemon's: the kept rule applies there too.
    let daemon = start_without_api(&config, &data).await;
    assert!(
        !answered(&node).await,
        "the kept rule drops the ping without the API"
    );
    let out = stop(daemon).await;
    assert!(
        out.contains("1 fault rule(s) installed from the store"),
        "{out}"
    );
    let daemon = start(&config, &data, &tokens).await;

    // Removed through the API: gone, and still gone after the next restart.
    let removed = client
        .delete(url(&format!("/{id}")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), reqwest::StatusCode::NO_CONTENT);
    let out = stop(daemon).await;
    assert!(
        out.contains("1 fault rule(s) installed from the store"),
        "{out}"
    );
    let daemon = start(&config, &data, &tokens).await;
    assert!(rules(&client).await.is_empty());
    stop(daemon).await;
}
