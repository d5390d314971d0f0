//! `peer add` and `debug peer`.

use super::client::{json, Client, CtlError};
use super::Connect;

/// `peer add --prim_nid P [--nid N[,N...]] [--non_mr]`: creates the peer, or adds the
/// NIDs to it. Errors as lnetctl's ioctl path prints them (`add:` / `- peer_ni:`).
pub(super) async fn add(
    c: &Connect,
    prim_nid: &str,
    nids: Option<&str>,
    non_mr: bool,
    lock_prim: bool,
) -> Result<String, CtlError> {
    let cl = Client::new(c, "add", "peer_ni")?;
    if lock_prim {
        return Err(cl.err(
            -95,
            "--lock_prim: not supported: no primary NID is locked here".to_owned(),
        ));
    }
    let list: Vec<&str> = nids
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    let failed = |mut e: CtlError| {
        // A configured peer's Multi-Rail flag is not changed: EPERM, as the kernel.
        if e.errno == -17 && e.descr.starts_with("multi_rail:") {
            e.errno = -1;
        }
        e.descr = format!(
            "add peer ni operation failed: {} ({})",
            super::client::strerror(e.errno),
            e.descr
        );
        e
    };
    let v = cl
        .post(
            "/api/v1/peers",
            serde_json::json!({ "primary_nid": prim_nid, "nids": list, "multi_rail": !non_mr }),
        )
        .await
        .map_err(failed)?;
    Ok(if c.json { json(&v) } else { String::new() })
}

/// `debug peer --nid NID`: the kernel's debug log line for that peer NI, on stdout.
pub(super) async fn debug(c: &Connect, nid: &str) -> Result<String, CtlError> {
    let cl = Client::new(c, "debug", "peer")?;
    if nid.parse::<lnet::Nid>().is_err() {
        return Err(cl.err(-22, format!("badly formatted primary NID: {nid}")));
    }
    let v = cl.get(&format!("/api/v1/peer-nis/{nid}/debug")).await?;
    if c.json {
        return Ok(json(&v));
    }
    let d: web::PeerNiDebug = cl.model(v)?;
    Ok(format!("{}\n", d.line()))
}
