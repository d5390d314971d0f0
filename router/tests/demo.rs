//! `lnet-router demo` (what the README's run command starts) brings up its routed topology
//! with every node's dashboard, a ping from A crosses the routers to B, and it stops by
//! itself after `--duration`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;
use support::{BIN, WAIT};

use std::process::{Command, Stdio};

#[test]
fn the_demo_runs_and_a_ping_crosses_the_routers() {
    let out = Command::new("timeout")
        .arg(WAIT.as_secs().to_string())
        .arg(BIN)
        .args(["demo", "--duration", "7", "--api-port", "28543"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    assert!(
        stdout.contains("ping 127.0.31.1@tcp1 from A: reply from 127.0.31.1@tcp1"),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("R1 forwarded"), "{stdout}");
    assert!(
        stdout.contains("dashboard of R1: https://127.0.0.1:28543/ admin token: "),
        "{stdout}"
    );
    assert!(stdout.contains("lnet-router demo: stopped"), "{stdout}");
}
