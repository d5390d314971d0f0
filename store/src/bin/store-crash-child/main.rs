//! `store-crash-child STORE_DIR SEED FROM`: opens the store, applies the changes of the
//! crash-test stream for `SEED` from index `FROM` on (see `workload`), and prints `ack N`
//! once change `N` (1-based) is durable, then `done`. The crash test kills it with
//! SIGKILL at random points and checks what the store holds afterwards.

// The workload module is shared with the crash test, which uses parts this binary does not.
#[allow(dead_code)]
mod workload;

use std::io::Write;
use std::process::ExitCode;

/// Changes in the stream.
const STREAM_LEN: usize = 1000;

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, seed, from] = args.as_slice() else {
        return Err("usage: store-crash-child STORE_DIR SEED FROM".to_owned());
    };
    let seed: u64 = seed.parse().map_err(|e| format!("SEED: {e}"))?;
    let from: usize = from.parse().map_err(|e| format!("FROM: {e}"))?;
    let changes = workload::stream(seed, STREAM_LEN);
    let store = store::Store::open_with(dir, workload::options()).map_err(|e| e.to_string())?;
    let stdout = std::io::stdout();
    for (i, change) in changes.iter().enumerate().skip(from) {
        workload::apply(&store, change).map_err(|e| format!("change {}: {e}", i + 1))?;
        let mut out = stdout.lock();
        writeln!(out, "ack {}", i + 1).map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
    }
    let mut out = stdout.lock();
    writeln!(out, "done").map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("store-crash-child: {e}");
            ExitCode::FAILURE
        }
    }
}
