//! Running the `lnet-router` binary from tests: start it, wait for its acceptor, signal
//! it, collect its output.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::ffi::OsString;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_lnet-router");
/// Every wait in these tests is bounded by this.
pub const WAIT: Duration = Duration::from_secs(30);
pub const STEP: Duration = Duration::from_millis(50);

/// The daemon's process; killed if the test ends without it having exited.
pub struct Daemon {
    child: Option<Child>,
}

impl Daemon {
    pub fn start(config: &Path) -> Daemon {
        Daemon::start_args(&["run".as_ref(), "--config".as_ref(), config.as_os_str()])
    }

    /// Starts `lnet-router` with these arguments.
    pub fn start_args(args: &[&std::ffi::OsStr]) -> Daemon {
        let child = Command::new(BIN)
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        Daemon { child: Some(child) }
    }

    /// Starts `command` (which runs `lnet-router` in the end).
    pub fn start_command(mut command: Command) -> Daemon {
        let child = command
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the command starts");
        Daemon { child: Some(child) }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut().unwrap().try_wait().unwrap()
    }

    /// Waits (bounded) for the process to exit; its status, stdout and stderr.
    pub async fn wait_exit(&mut self) -> (ExitStatus, String, String) {
        let mut waited = Duration::ZERO;
        let status = loop {
            if let Some(s) = self.exited() {
                break s;
            }
            assert!(waited < WAIT, "the daemon did not exit within {WAIT:?}");
            tokio::time::sleep(STEP).await;
            waited += STEP;
        };
        let child = self.child.as_mut().unwrap();
        let mut out = String::new();
        let mut err = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        // Already reaped by `try_wait`; this returns the same status.
        let status = child.wait().unwrap_or(status);
        self.child = None;
        (status, out, err)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn sigterm(pid: u32) {
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits (bounded) until something accepts TCP connections on `addr`, failing early if the
/// daemon exits.
pub async fn wait_listening(daemon: &mut Daemon, addr: SocketAddr) {
    let mut waited = Duration::ZERO;
    loop {
        if let Some(s) = daemon.exited() {
            let (_, out, err) = daemon.wait_exit().await;
            panic!("the daemon exited early ({s}):\n{out}\n{err}");
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        assert!(waited < WAIT, "nothing listens on {addr} after {WAIT:?}");
        tokio::time::sleep(STEP).await;
        waited += STEP;
    }
}

/// Writes the tokens file `tokens` in `dir` and returns the arguments of `lnet-router run`
/// with configuration `config`, the data directory `dir/data`, and the API over HTTPS on
/// 127.0.0.1:`api` with `cert` and `key`.
pub fn api_run_args(
    dir: &Path,
    config: &Path,
    tokens: &str,
    api: u16,
    cert: &Path,
    key: &Path,
) -> Vec<std::ffi::OsString> {
    let tokens_file = dir.join("tokens");
    std::fs::write(&tokens_file, tokens).unwrap();
    let mut args: Vec<std::ffi::OsString> = vec!["run".into(), "--config".into()];
    args.push(config.into());
    args.push("--data-dir".into());
    args.push(dir.join("data").into());
    args.push("--tokens-file".into());
    args.push(tokens_file.into());
    args.push("--api-listen".into());
    args.push(format!("127.0.0.1:{api}").into());
    args.push("--tls-cert".into());
    args.push(cert.into());
    args.push("--tls-key".into());
    args.push(key.into());
    args
}

pub fn write_config(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
    let path = dir.path().join("lnet.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Kills the process with SIGKILL (it cannot clean up).
pub fn sigkill(pid: u32) {
    let status = Command::new("kill")
        .arg("-KILL")
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Runs the CLI against the API on 127.0.0.1:`api` (HTTPS, `cert` its CA, `token` the
/// bearer): success, stdout, stderr.
pub fn ctl_at(api: u16, cert: &Path, token: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .arg("--api")
        .arg(format!("https://127.0.0.1:{api}"))
        .arg("--token")
        .arg(token)
        .arg("--ca-cert")
        .arg(cert)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`ctl_at`] on the blocking pool, so that the test's own nodes go on meanwhile.
pub async fn ctl_async(
    api: u16,
    cert: &Path,
    token: &str,
    args: &[&str],
) -> (bool, String, String) {
    let cert = cert.to_owned();
    let token = token.to_owned();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ctl_at(api, &cert, &token, &args)
    })
    .await
    .unwrap()
}

/// The actions of the admin events in the event log of the daemon whose API is on
/// 127.0.0.1:`api` (HTTPS, `cert` its CA, `token` the bearer), oldest first.
pub async fn admin_actions(api: u16, cert: &Path, token: &str) -> Vec<String> {
    let pem = std::fs::read(cert).unwrap();
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .build()
        .unwrap();
    let v: serde_json::Value = client
        .get(format!(
            "https://127.0.0.1:{api}/api/v1/events?before=9007199254740991&limit=1000"
        ))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut events: Vec<(u64, String)> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"]["type"] == "admin")
        .map(|e| {
            (
                e["id"].as_u64().unwrap(),
                e["event"]["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    events.sort();
    events.into_iter().map(|(_, a)| a).collect()
}

/// A daemon's files for a test of its API: a temporary directory, a self-signed
/// certificate, the tokens file (an admin and a reader token) and the `run` arguments.
pub struct ApiSetup {
    /// Removed when the setup is dropped.
    pub dir: tempfile::TempDir,
    /// The certificate, the CLI's CA.
    pub cert: std::path::PathBuf,
    /// `run --config ...` with the API on 127.0.0.1:`api` over HTTPS.
    pub args: Vec<std::ffi::OsString>,
}

/// An [`ApiSetup`] for configuration `config`, the API on `api`, tokens `admin` (role
/// ops, admin) and `reader` (role view, reader).
pub fn api_setup(config: &str, api: u16, admin: &str, reader: &str) -> ApiSetup {
    let dir = tempfile::tempdir().unwrap();
    let cert = web::SelfSigned::generate(&["127.0.0.1", "localhost"]).unwrap();
    let (cert_path, key_path) = cert.write(dir.path()).unwrap();
    let config_path = dir.path().join("lnet.yaml");
    std::fs::write(&config_path, config).unwrap();
    let args = api_run_args(
        dir.path(),
        &config_path,
        &format!("ops admin {admin}\nview reader {reader}\n"),
        api,
        &cert_path,
        &key_path,
    );
    ApiSetup {
        dir,
        cert: cert_path,
        args,
    }
}

/// Stops daemon `d` with SIGTERM and checks it exited cleanly.
pub async fn stop(mut d: Daemon) {
    sigterm(d.pid());
    let (status, out, err) = d.wait_exit().await;
    assert!(status.success(), "{status}\n{out}\n{err}");
}

/// The arguments without `--config FILE`: the daemon runs from its store alone.
pub fn store_only(args: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
        } else if a == "--config" {
            skip = true;
        } else {
            out.push(a.clone());
        }
    }
    out
}
