//! `lnet-bench-fastpath COUNT [PAYLOAD [BATCH]]`: forwards COUNT messages through the
//! per-message path of [`bench::fastpath`] and prints what it did. Run it under
//! `valgrind --tool=callgrind` twice with different counts: the difference of the two
//! instruction totals divided by the difference of the counts is the cost of one message
//! (`scripts/bench-instructions`).

use std::process::ExitCode;

fn arg(n: usize, default: u64) -> Result<u64, String> {
    match std::env::args().nth(n) {
        None => Ok(default),
        Some(s) => s.parse().map_err(|_| format!("bad number {s:?}")),
    }
}

fn main() -> ExitCode {
    let parsed = (|| Ok::<_, String>((arg(1, 1000)?, arg(2, 0)?, arg(3, 16)?)))();
    let (count, payload, batch) = match parsed {
        Ok(v) => v,
        Err(e) => {
            eprintln!(
                "lnet-bench-fastpath: {e}; usage: lnet-bench-fastpath COUNT [PAYLOAD [BATCH]]"
            );
            return ExitCode::from(2);
        }
    };
    let payload = usize::try_from(payload).unwrap_or(0);
    let batch = usize::try_from(batch).unwrap_or(1);
    match bench::fastpath::run(count, payload, batch) {
        Ok(f) => {
            println!(
                "lnet-bench-fastpath: forwarded {} messages of {payload} payload bytes ({} bytes written)",
                f.messages, f.bytes
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lnet-bench-fastpath: {e}");
            ExitCode::FAILURE
        }
    }
}
