//! The network namespace a chaos run works in: `lnet-bench chaos` creates it, runs itself
//! again inside it (`ip netns exec`), and deletes it afterwards. Inside, loopback carries
//! the tcp side and a veth pair per tcp1 address (the address on one end) the tcp1 side, so
//! that a router's tcp1 link can really go down (`ip link set DEV down`) without touching
//! the host's interfaces.

use std::ffi::OsString;
use std::process::{Command, ExitStatus, Stdio};

use crate::BenchError;

/// Set in the environment of the run inside the namespace.
pub const INNER: &str = "LNET_BENCH_CHAOS_IN_NETNS";

/// Why the run cannot create a namespace here, if it cannot.
pub fn cannot_run() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .map(str::to_owned);
    if euid.as_deref() != Some("0") {
        return Some("creating a network namespace and veth interfaces needs root".to_owned());
    }
    let ip = Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !ip.is_ok_and(|s| s.success()) {
        return Some("the `ip` command (iproute2) is not available".to_owned());
    }
    None
}

/// Runs `ip ARGS`, failing on a non-zero exit.
pub fn ip(args: &[&str]) -> Result<(), BenchError> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| BenchError::Io {
            what: format!("ip {}", args.join(" ")),
            source,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(BenchError::Setup(format!(
            "ip {}: {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The namespace; on drop, the processes still in it are killed (by id) and it is
/// deleted.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        if let Ok(out) = Command::new("ip").args(["netns", "pids", &self.0]).output() {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("kill").args(["-KILL", pid]).status();
            }
        }
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

/// Creates a namespace, runs this program with the same arguments inside it (with
/// [`INNER`] set, and `--seed SEED` added when given) and returns how that ended.
pub fn run_inside(seed: Option<u64>) -> Result<ExitStatus, BenchError> {
    let ns = Netns(format!("lnet-chaos-{}", std::process::id()));
    ip(&["netns", "add", &ns.0])?;
    let exe = std::env::current_exe().map_err(|source| BenchError::Io {
        what: "this program's path".to_owned(),
        source,
    })?;
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if let Some(seed) = seed {
        args.push("--seed".into());
        args.push(seed.to_string().into());
    }
    let status = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(exe)
        .args(args)
        .env(INNER, "1")
        .status()
        .map_err(|source| BenchError::Io {
            what: "ip netns exec".to_owned(),
            source,
        })?;
    drop(ns);
    Ok(status)
}

/// Inside the namespace: loopback up, and for each `(device, address)` a veth pair
/// `device`/`device-p`, both ends up, the address (a /32) on `device`.
pub fn set_up(veths: &[(String, std::net::Ipv4Addr)]) -> Result<(), BenchError> {
    ip(&["link", "set", "lo", "up"])?;
    for (dev, addr) in veths {
        let peer = format!("{dev}-p");
        ip(&["link", "add", dev, "type", "veth", "peer", "name", &peer])?;
        ip(&["addr", "add", &format!("{addr}/32"), "dev", dev])?;
        ip(&["link", "set", &peer, "up"])?;
        ip(&["link", "set", dev, "up"])?;
    }
    Ok(())
}
