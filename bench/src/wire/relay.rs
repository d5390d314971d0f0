//! The strongest plain relay we can write, as a process of its own (`lnet-bench
//! wire-relay`, started by `lnet-bench wire`): for each connection accepted on a listen
//! address, one onward connection to the target from the dialler's own address and a
//! reserved port (`connect_reserved`, as socklnd dials), then one thread per direction
//! moving the bytes with splice(2) through a 1 MiB pipe (no copy through user space), or
//! with `--mode copy`, read/write through a 1 MiB buffer. It reads no byte of what it
//! carries. It exits by itself after `--lifetime` seconds.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use lnd::socklnd::handshake::connect_reserved;
use serde::Serialize;

use super::sys::{pipe, set_pipe_size, splice};
use crate::BenchError;

/// The relay's pipe or buffer per direction.
pub const RELAY_CHUNK: usize = 1 << 20;

/// How the relay moves bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RelayMode {
    /// splice(2) socket -> pipe -> socket, a 1 MiB pipe per direction.
    Splice,
    /// read(2)/write(2) through a 1 MiB buffer per direction.
    Copy,
}

impl RelayMode {
    /// How the report names it.
    pub fn describe(self) -> &'static str {
        match self {
            RelayMode::Splice => {
                "splice(2) through a 1 MiB pipe, one thread per direction, TCP_NODELAY"
            }
            RelayMode::Copy => {
                "read/write with a 1 MiB buffer, one thread per direction, TCP_NODELAY"
            }
        }
    }
}

/// `lnet-bench wire-relay`.
#[derive(Debug, Clone, clap::Args)]
pub struct RelayArgs {
    /// LISTEN=TARGET: connections accepted on LISTEN are relayed to TARGET.
    #[arg(long = "pair", value_name = "LISTEN=TARGET", required = true)]
    pub pairs: Vec<String>,
    /// How bytes are moved.
    #[arg(long, value_enum, default_value_t = RelayMode::Splice)]
    pub mode: RelayMode,
    /// Seconds after which the relay exits by itself.
    #[arg(long, default_value_t = 600)]
    pub lifetime: u64,
}

fn parse_pair(p: &str) -> Result<(SocketAddr, SocketAddr), BenchError> {
    let bad = || BenchError::Usage(format!("--pair {p}: expected LISTEN=TARGET addresses"));
    let (l, t) = p.split_once('=').ok_or_else(bad)?;
    Ok((l.parse().map_err(|_| bad())?, t.parse().map_err(|_| bad())?))
}

/// Runs the relay until its lifetime is over.
pub fn run(args: RelayArgs) -> Result<(), BenchError> {
    let pairs = args
        .pairs
        .iter()
        .map(|p| parse_pair(p))
        .collect::<Result<Vec<_>, _>>()?;
    let (_done, wait) = std::sync::mpsc::channel::<()>();
    for (listen, target) in pairs {
        let listener = TcpListener::bind(listen).map_err(|source| BenchError::Io {
            what: format!("relay: listen on {listen}"),
            source,
        })?;
        let mode = args.mode;
        std::thread::spawn(move || accept_loop(listener, target, mode));
    }
    // Nothing ever sends: this waits out the lifetime.
    let _ = wait.recv_timeout(Duration::from_secs(args.lifetime));
    Ok(())
}

fn accept_loop(listener: TcpListener, target: SocketAddr, mode: RelayMode) {
    for accepted in listener.incoming() {
        match accepted {
            Ok(inbound) => {
                std::thread::spawn(move || {
                    if let Err(e) = relay_one(inbound, target, mode) {
                        tracing::warn!(%target, "relay: {e}");
                    }
                });
            }
            Err(e) => tracing::warn!(%target, "relay: accept: {e}"),
        }
    }
}

fn relay_one(inbound: TcpStream, target: SocketAddr, mode: RelayMode) -> io::Result<()> {
    let IpAddr::V4(from) = inbound.peer_addr()?.ip() else {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let onward = runtime
        .block_on(connect_reserved(from, target, Duration::from_secs(5)))
        .map_err(io::Error::other)?
        .into_std()?;
    onward.set_nonblocking(false)?;
    inbound.set_nodelay(true)?;
    onward.set_nodelay(true)?;
    let (a, b) = (inbound.try_clone()?, onward.try_clone()?);
    std::thread::spawn(move || direction(a, b, mode));
    direction(onward, inbound, mode);
    Ok(())
}

/// Moves bytes from `from` to `to` until `from` ends, then ends `to`'s sending side.
fn direction(mut from: TcpStream, mut to: TcpStream, mode: RelayMode) {
    let r = match mode {
        RelayMode::Splice => splice_all(&from, &to),
        RelayMode::Copy => copy_all(&mut from, &mut to),
    };
    if let Err(e) = r {
        tracing::debug!("relay direction ended: {e}");
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

fn splice_all(from: &TcpStream, to: &TcpStream) -> io::Result<()> {
    let (pr, pw) = pipe()?;
    // A smaller pipe still works, only with more calls.
    let _ = set_pipe_size(&pw, RELAY_CHUNK);
    loop {
        let n = splice(from, &pw, RELAY_CHUNK)?;
        if n == 0 {
            return Ok(());
        }
        let mut left = n;
        while left > 0 {
            let m = splice(&pr, to, left)?;
            if m == 0 {
                return Err(io::Error::from(io::ErrorKind::WriteZero));
            }
            left -= m;
        }
    }
}

fn copy_all(from: &mut TcpStream, to: &mut TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; RELAY_CHUNK];
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        to.write_all(buf.get(..n).unwrap_or(&[]))?;
    }
}
