//! The router process a soak runs: started from a configuration file, watched until it
//! answers, killed when dropped.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lnet::Nid;
use tokio::time::Instant;

use crate::BenchError;

/// The router process; killed when dropped.
pub(super) struct RouterProcess {
    child: Child,
}

impl RouterProcess {
    /// Starts `bin run --config CONFIG --metrics-listen METRICS`, its standard output
    /// to `out` and its log to `log`.
    pub(super) fn start(
        bin: &Path,
        config: &Path,
        metrics: SocketAddr,
        out: &Path,
        log: &Path,
    ) -> Result<Self, BenchError> {
        let create = |p: &Path| {
            std::fs::File::create(p).map_err(|source| BenchError::Io {
                what: format!("create {}", p.display()),
                source,
            })
        };
        let (out, err) = (create(out)?, create(log)?);
        let child = Command::new(bin)
            .arg("run")
            .arg("--config")
            .arg(config)
            .arg("--metrics-listen")
            .arg(metrics.to_string())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|source| BenchError::Io {
                what: format!("start {}", bin.display()),
                source,
            })?;
        Ok(RouterProcess { child })
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it still runs.
    pub(super) fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits (at most `bound`) until its standard output in `out` says that each of
    /// `nis` and the metrics listener listen; reading the output rather than connecting
    /// keeps the router's log free of refused probes.
    pub(super) async fn wait_ready(
        &mut self,
        out: &Path,
        nis: &[Nid],
        bound: Duration,
    ) -> Result<(), BenchError> {
        let end = Instant::now() + bound;
        loop {
            let text = std::fs::read_to_string(out).unwrap_or_default();
            let ready = text.contains("lnet-router: metrics listening on")
                && nis
                    .iter()
                    .all(|n| text.contains(&format!("lnet-router: NI {n} listening on")));
            if ready {
                return Ok(());
            }
            if !self.alive() {
                return Err(BenchError::Setup(format!("the router exited: {text}")));
            }
            if Instant::now() >= end {
                return Err(BenchError::Timeout(format!(
                    "the router is not ready: {text}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for RouterProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The router's configuration: an NI on tcp and one on tcp1, routing on.
pub(super) fn router_yaml(tcp: Nid, tcp1: Nid, port: u16) -> String {
    format!(
        "net:
    - net type: tcp
      local NI(s):
        - nid: {tcp}
    - net type: tcp1
      local NI(s):
        - nid: {tcp1}
routing:
    enable: 1
lnet-router:
    acceptor_port: {port}
"
    )
}
