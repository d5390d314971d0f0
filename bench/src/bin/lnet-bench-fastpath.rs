//! `lnet-bench-fastpath COUNT [PAYLOAD [BATCH [FAR_NIS]]]`: forwards COUNT messages through
//! the per-message path of [`bench::fastpath`] (a router with FAR_NIS NIs, default 2, on
//! the gateways' net) and prints what it did. Run it under
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
    let parsed = (|| Ok::<_, String>((arg(1, 1000)?, arg(2, 0)?, arg(3, 16)?, arg(4, 2)?)))();
    let (count, payload, batch, far_nis) = match parsed {
        Ok(v) => v,
        Err(e) => {
            eprintln!(
                "lnet-bench-fastpath: {e}; usage: lnet-bench-fastpath COUNT [PAYLOAD [BATCH [FAR_NIS]]]"
            );
            return ExitCode::from(2);
        }
    };
    let payload = usize::try_from(payload).unwrap_or(0);
    let batch = usize::try_from(batch).unwrap_or(1);
    let far_nis = u8::try_from(far_nis).unwrap_or(u8::MAX);
    match bench::fastpath::run(count, payload, batch, far_nis) {
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
