//! `debug nidlist NIDLIST [NID]`: lnetctl's check of the nidlist parser. It is a local
//! parse, as in lnetctl (which needs no LNet for it): the daemon is not asked.

use super::client::CtlError;

/// Prints what lnetctl prints: `nidlist parsed to: ...` and, with a NID, whether it
/// matches. A refusal is lnetctl's plain lines on standard error (no error YAML), after
/// whatever it printed on standard output first.
pub(super) fn debug(args: &[String]) -> Result<String, CtlError> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report = lnet::nidlist::debug_nidlist(&args);
    if report.ok {
        return Ok(report.stdout);
    }
    Err(CtlError {
        command: "debug",
        object: "nidlist",
        errno: -22,
        descr: report.stderr,
        printed: (!report.stdout.is_empty()).then_some(report.stdout),
        error_too: false,
        more: Vec::new(),
        plain: true,
    })
}
