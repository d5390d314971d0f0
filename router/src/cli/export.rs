//! `export [FILE] [--backup]`: the running node's state as the YAML `lnetctl export`
//! prints and `lnetctl import` reads, from `GET /api/v1/export`.

use std::path::Path;

use super::client::{Client, CtlError};
use super::Connect;

/// The export document (`backup`: only what import needs); written to `file` when one is
/// given, which then prints nothing, as lnetctl.
pub(super) async fn export(
    c: &Connect,
    file: Option<&Path>,
    backup: bool,
) -> Result<String, CtlError> {
    let cl = Client::new(c, "export", "export")?;
    let path = if backup {
        "/api/v1/export?backup=1"
    } else {
        "/api/v1/export"
    };
    let doc = cl.get_text(path).await?;
    match file {
        None => Ok(doc),
        Some(f) => {
            std::fs::write(f, doc).map_err(|e| {
                let errno = e.raw_os_error().map_or(-5, |n| -n);
                cl.err(errno, format!("cannot open '{}': {e}", f.display()))
            })?;
            Ok(String::new())
        }
    }
}
