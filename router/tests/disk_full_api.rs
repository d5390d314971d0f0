//! The daemon on a full disk: `lnet-router run` with its data dir on a 4 MiB tmpfs that
//! only the daemon's mount namespace sees (`unshare -m`, so nothing is mounted on the
//! host), the filesystem then filled from outside through `/proc/PID/root`. A route added
//! through the API is refused with a 500 whose message names the full disk, and the node
//! does not keep it (the API acknowledges nothing the store did not keep); once room is
//! made, the same route is added. Needs root (CI runs as root); otherwise the test prints
//! why and passes without running.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

mod support;
use support::{sigterm, wait_listening, write_config, Daemon, BIN, WAIT};

const PORT: u16 = 21_130;
const API: u16 = 21_131;
const TOKEN: &str = "disk-admin-secret-0123456789";
const ROUTER: &str = "127.0.8.20@tcp";

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Fills the filesystem of `path` (as the daemon sees it) until a write fails.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let block = vec![0x5au8; 64 * 1024];
    for _ in 0..256 {
        if f.write_all(&block).and_then(|()| f.sync_all()).is_err() {
            return;
        }
    }
    panic!("a 4 MiB filesystem took 16 MiB");
}

async fn add_route(client: &reqwest::Client) -> (reqwest::StatusCode, Value) {
    let r = client
        .post(format!("http://127.0.0.1:{API}/api/v1/routes"))
        .bearer_auth(TOKEN)
        .json(&json!({"net": "tcp9", "gateway": "127.0.8.21@tcp", "hop": 1}))
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap_or(Value::Null))
}

async fn has_route(client: &reqwest::Client) -> bool {
    let r: Value = client
        .get(format!("http://127.0.0.1:{API}/api/v1/routes"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r.to_string().contains("tcp9")
}

#[actix::test]
async fn a_full_disk_refuses_api_changes_with_a_clear_error_and_keeps_none() {
    if !is_root() {
        println!("skipped: mounting a tmpfs needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "net:\n    - net type: tcp\n      local NI(s):\n        - nid: {ROUTER}\n\
             lnet-router:\n    acceptor_port: {PORT}\n"
        ),
    );
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("ops admin {TOKEN}\n")).unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let data = mnt.join("data");
    let api = format!("127.0.0.1:{API}");

    let mut command = Command::new("unshare");
    command
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg("mount -t tmpfs -o size=4m tmpfs \"$0\" && exec \"$@\"")
        .arg(&mnt)
        .arg(BIN)
        .args(["run", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .arg("--tokens-file")
        .arg(&tokens)
        .args([
            "--api-listen",
            &api,
            "--plain-http",
            "--plain-http-mutations",
        ]);
    let mut daemon = Daemon::start_command(command);
    for addr in [
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 8, 20)), PORT),
        SocketAddr::from(([127, 0, 0, 1], API)),
    ] {
        tokio::time::timeout(WAIT, wait_listening(&mut daemon, addr))
            .await
            .expect("bounded");
    }
    // The daemon's view of the tmpfs (the host's `mnt` stays an empty directory).
    let seen = Path::new("/proc")
        .join(daemon.pid().to_string())
        .join("root")
        .join(mnt.strip_prefix("/").unwrap());
    assert!(
        seen.join("data").is_dir(),
        "the data dir is not on the tmpfs"
    );
    let ballast = seen.join("ballast");
    fill(&ballast);

    let client = reqwest::Client::new();
    let (status, body) = add_route(&client).await;
    assert_eq!(status, reqwest::StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("could not be kept") && message.contains("No space left on device"),
        "{message}"
    );
    assert!(
        !has_route(&client).await,
        "the node kept a route the store refused"
    );

    std::fs::remove_file(&ballast).unwrap();
    let (status, body) = add_route(&client).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{body}");
    assert!(has_route(&client).await);

    sigterm(daemon.pid());
    let (status, out, err) = daemon.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
}
