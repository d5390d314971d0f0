//! `net add`, `net del` and `net set` (lnetctl's options; `net show` is in `show.rs`).

use clap::Args;

use super::client::{json, Client, CtlError};
use super::Connect;

/// `net add` (lnetctl's options).
#[derive(Debug, Clone, Args)]
pub struct NetAddArgs {
    /// The net (e.g. tcp1).
    #[arg(short = 'n', long)]
    pub net: Option<String>,
    /// The interface (e.g. eth1); the NI's NID is its IPv4 address unless `--nid` is given.
    #[arg(short = 'i', long = "if")]
    pub interface: Option<String>,
    /// Bring the NI up on the address of this NID (its net is the NI's net).
    #[arg(long)]
    pub nid: Option<String>,
    /// Networks from IP address patterns (not supported).
    #[arg(short = 'p', long)]
    pub ip2net: Option<String>,
    /// The net's `peer_timeout`, seconds (0 turns the peer NI aliveness rule off; not a
    /// number or negative: the LND's default, 180).
    #[arg(short = 't', long = "peer-timeout", allow_hyphen_values = true)]
    pub peer_timeout: Option<i64>,
    /// Per-peer tx credits.
    #[arg(short = 'c', long = "peer-credits")]
    pub peer_credits: Option<i64>,
    /// Router buffer credits per peer (not supported per NI: the node's setting).
    #[arg(short = 'b', long = "peer-buffer-credits")]
    pub peer_buffer_credits: Option<i64>,
    /// NI tx credits.
    #[arg(short = 'r', long)]
    pub credits: Option<i64>,
    /// CPU partitions of the NI (not supported).
    #[arg(short = 's', long)]
    pub cpt: Option<String>,
    /// Connections per peer (0 to 127): socklnd's of each direction, the ones o2iblnd
    /// opens to a peer.
    #[arg(short = 'm', long = "conns-per-peer")]
    pub conns_per_peer: Option<i64>,
    /// Do not add a Linux route for the NI (none is added here anyway).
    #[arg(short = 'k', long = "skip-mr-route-setup")]
    pub skip_mr_route_setup: bool,
    /// Network authorization key (kfilnd only; not supported).
    #[arg(short = 'a', long = "auth-key")]
    pub auth_key: Option<String>,
    /// Traffic class (kfilnd only; not supported).
    #[arg(short = 'T', long = "traffic-class")]
    pub traffic_class: Option<String>,
    /// The IP type of service of its sockets (-1 to 255; only -1 is supported).
    #[arg(long, allow_hyphen_values = true)]
    pub tos: Option<i64>,
}

/// `net del --net NET --if IFACE` or `net del --nid NID`.
#[derive(Debug, Clone, Args)]
pub struct NetDelArgs {
    /// The net.
    #[arg(short = 'n', long)]
    pub net: Option<String>,
    /// The NI's NID.
    #[arg(long)]
    pub nid: Option<String>,
    /// The NI's interface (with `--net`).
    #[arg(short = 'i', long = "if")]
    pub interface: Option<String>,
}

/// `net set --nid NID --health V`, `--all --health V`, `--net NET --lnd-timeout S`,
/// `--nid NID --conns-per-peer N`.
#[derive(Debug, Clone, Args)]
pub struct NetSetArgs {
    /// The NI.
    #[arg(short = 'n', long, conflicts_with = "all")]
    pub nid: Option<String>,
    /// Every local NI.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// The net whose LND takes `--lnd-timeout`.
    #[arg(short = 'i', long)]
    pub net: Option<String>,
    /// The health value (0 to 1000).
    #[arg(short = 't', long)]
    pub health: Option<u64>,
    /// The LND's timeout in seconds (with `--net`).
    #[arg(short = 'l', long = "lnd-timeout", allow_hyphen_values = true)]
    pub lnd_timeout: Option<i64>,
    /// Connections per peer (0 to 127): socklnd's of each direction, the ones o2iblnd
    /// opens to a peer.
    #[arg(short = 'm', long = "conns-per-peer")]
    pub conns_per_peer: Option<String>,
}

/// The API's refusal `detail` (`FIELD: message`) as lnetctl's description
/// `what: message`.
fn describe(detail: &str, what: &str) -> String {
    let message = match detail.split_once(": ") {
        Some((field, rest)) if field.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') => rest,
        _ => detail,
    };
    if message.starts_with(what) {
        message.to_owned()
    } else {
        format!("{what}: {message}")
    }
}

/// Whether a refusal of the API is one lnetctl reports as the kernel's (a refused value,
/// an NI that exists or not, a busy one), not a refusal of the token or the connection.
fn from_node(errno: i32) -> bool {
    matches!(errno, -2 | -16 | -17 | -22)
}

/// `net add`: starts the NI on the running router, kept in its store. Errors as lnetctl's
/// netlink path prints them (`add:` / `- net:`).
pub(super) async fn add(c: &Connect, a: &NetAddArgs) -> Result<String, CtlError> {
    let cl = Client::new(c, "add", "net")?;
    let unsupported =
        |option: &str, why: &str| cl.err(-95, format!("{option}: not supported: {why}"));
    if a.ip2net.is_some() {
        return Err(unsupported("--ip2net", "give --net and --if"));
    }
    if a.cpt.is_some() {
        return Err(unsupported(
            "--cpt",
            "an NI's peers are spread over every CPT",
        ));
    }
    if a.auth_key.is_some() || a.traffic_class.is_some() {
        let option = if a.auth_key.is_some() {
            "--auth-key"
        } else {
            "--traffic-class"
        };
        return Err(unsupported(option, "kfilnd only"));
    }
    if a.peer_buffer_credits.is_some() {
        return Err(unsupported(
            "--peer-buffer-credits",
            "router buffer credits per peer are the node's setting",
        ));
    }
    if let Some(tos) = a.tos {
        if !(-1..=255).contains(&tos) {
            return Err(cl.err(-22, "Invalid ToS argument".to_owned()));
        }
        if tos != -1 {
            return Err(unsupported(
                "--tos",
                "no type of service is set on this socklnd's sockets; use -1",
            ));
        }
    }
    if let Some(cpp) = a.conns_per_peer {
        if !(0..=127).contains(&cpp) {
            let ni = Client::new(c, "add", "ni")?;
            return Err(ni.err(
                -1,
                "invalid conns-per-peer value (valid range 0-127)".to_owned(),
            ));
        }
    }
    let net = match (&a.net, &a.nid) {
        (Some(_), Some(_)) => {
            return Err(cl.err(-22, "--net is invalid with --nid option".to_owned()))
        }
        (Some(n), None) => n.clone(),
        (None, Some(nid)) => match nid.parse::<lnet::Nid>() {
            Ok(n) => n.net.to_string(),
            Err(_) => return Err(cl.err(-22, "bad NID list".to_owned())),
        },
        (None, None) => {
            return Err(cl.err(
                -22,
                "missing mandatory parameters in NI config: 'network'".to_owned(),
            ))
        }
    };
    if a.interface.is_none() && a.nid.is_none() {
        return Err(cl.err(
            -22,
            "creating a local NI needs at least one interface".to_owned(),
        ));
    }
    // lnetctl ignores a credit that is not a number; here a negative one is ignored too.
    let positive = |v: Option<i64>| v.and_then(|v| u32::try_from(v).ok()).filter(|v| *v > 0);
    let body = serde_json::json!({
        "net": net,
        "interface": a.interface,
        "nid": a.nid,
        "credits": positive(a.credits),
        "peer_credits": positive(a.peer_credits),
        // lnetctl takes a negative timeout as none given (the LND's default).
        "peer_timeout": a.peer_timeout.and_then(|v| u32::try_from(v).ok()),
        "conns_per_peer": a.conns_per_peer.and_then(|v| u32::try_from(v).ok()),
    });
    let v = cl.post("/api/v1/nets", body).await.map_err(|mut e| {
        if from_node(e.errno) {
            e.descr = describe(&e.descr, "cannot add LNet NI");
        }
        e
    })?;
    Ok(if c.json { json(&v) } else { String::new() })
}

/// `net del`: stops the NI named by `--nid`, or by `--net` and `--if`, and removes it from
/// the store. Errors as lnetctl's netlink path prints them (`del:` / `- net:`).
pub(super) async fn del(c: &Connect, a: &NetDelArgs) -> Result<String, CtlError> {
    let cl = Client::new(c, "del", "net")?;
    let nid = match (&a.net, &a.nid, &a.interface) {
        (Some(_), Some(_), _) => {
            return Err(cl.err(-22, "--net is invalid with --nid option".to_owned()))
        }
        (_, Some(nid), _) => nid
            .parse::<lnet::Nid>()
            .map_err(|_| cl.err(-22, "bad NID list".to_owned()))?,
        (None, None, _) => {
            return Err(cl.err(
                -22,
                "missing mandatory parameters in NI config: 'network'".to_owned(),
            ))
        }
        (Some(_), None, None) => return Err(cl.err(-19, "interface / NID is missing".to_owned())),
        (Some(net), None, Some(name)) => {
            let net: lnet::Net = net
                .parse()
                .map_err(|_| cl.err(-19, "LNet net doesn't exist".to_owned()))?;
            let doc: lnet::show::NetShow = cl.model(cl.get("/api/v1/nets").await?)?;
            let Some(shown) = doc.nets.iter().find(|n| n.net_type == net) else {
                return Err(cl.err(-19, "LNet net doesn't exist".to_owned()));
            };
            shown
                .nis
                .iter()
                .find(|ni| ni.interfaces.iter().any(|i| i == name))
                .map(|ni| ni.nid)
                .ok_or_else(|| cl.err(-19, "interface invalid for deleting LNet NI".to_owned()))?
        }
    };
    let v = cl
        .delete(&format!("/api/v1/nis/{nid}"))
        .await
        .map_err(|mut e| {
            // The router's last NI: busy, the router needs it.
            if e.errno == -17 {
                e.errno = -16;
            }
            if from_node(e.errno) {
                e.descr = describe(&e.descr, "cannot del LNet NI");
            }
            e
        })?;
    Ok(if c.json { json(&v) } else { String::new() })
}

/// `net set`: `--health`, `--conns-per-peer` and `--lnd-timeout` through the API, checked
/// as lnetctl checks them first. `--conns-per-peer` sets the NI of `--nid`, or every tcp and
/// o2ib NI without it (as the kernel sets every NI when no NID is named); `--lnd-timeout` sets the
/// timeout of the LND of `--net` (socklnd or o2iblnd: every NI of that LND, as the kernel's
/// module parameter).
pub(super) async fn set(c: &Connect, a: &NetSetArgs) -> Result<String, CtlError> {
    let cl = Client::new(c, "set", "net")?;
    let cpp = match &a.conns_per_peer {
        Some(v) => match v.parse::<u32>() {
            Ok(v) if v <= 127 => Some(v),
            _ => {
                return Err(cl.err(
                    -1,
                    "invalid conns-per-peer value (valid range 0-127)".to_owned(),
                ))
            }
        },
        None => None,
    };
    let net = match &a.net {
        Some(n) => match n.parse::<lnet::Net>() {
            Ok(net) => Some(net),
            Err(_) => return Err(cl.err(-22, format!("Invalid network type: {n}"))),
        },
        None => None,
    };
    if let Some(t) = a.lnd_timeout {
        if t < 0 {
            return Err(cl.err(
                -22,
                format!("Invalid LND timeout value '{t}', must be >= 0"),
            ));
        }
        let Some(net) = net else {
            return Err(cl.err(
                -22,
                "Specified --lnd-timeout without --net option".to_owned(),
            ));
        };
        let timeout = Client::new(c, "set", "lnd_timeout")?;
        if net.lnd != lnet::LndType::SOCKLND && net.lnd != lnet::LndType::O2IBLND {
            return Err(timeout.err(
                -22,
                format!(
                    "Net {} does not accept a LND timeout",
                    net.lnd.name().unwrap_or("?")
                ),
            ));
        }
        if t == 0 {
            return Err(timeout.err(
                -95,
                "--lnd-timeout: not supported: 0 (LNet's derived lnd_timeout); give seconds"
                    .to_owned(),
            ));
        }
        let value = u32::try_from(t).unwrap_or(u32::MAX);
        let v = timeout
            .post(
                &format!("/api/v1/nets/{net}/lnd-timeout"),
                serde_json::json!({ "value": value }),
            )
            .await?;
        // lnetctl stops at the timeout: the other options of the command are not applied.
        return Ok(if c.json { json(&v) } else { String::new() });
    }
    if let Some(cpp) = cpp {
        if a.all && a.nid.is_some() {
            return Err(cl.err(-22, "give --nid NID or --all".to_owned()));
        }
        let path = match &a.nid {
            Some(nid) => {
                let parsed = nid
                    .parse::<lnet::Nid>()
                    .map_err(|_| cl.err(-22, "bad NID list".to_owned()))?;
                format!("/api/v1/nis/{parsed}/conns-per-peer")
            }
            None => "/api/v1/nis/conns-per-peer".to_owned(),
        };
        let v = cl
            .post(&path, serde_json::json!({ "value": cpp }))
            .await
            .map_err(|mut e| {
                if e.errno == -2 {
                    e.descr = describe(&e.descr, "cannot set LNet NI");
                }
                e
            })?;
        if a.health.is_none() {
            return Ok(if c.json { json(&v) } else { String::new() });
        }
    }
    let Some(health) = a.health else {
        return Ok(String::new());
    };
    let path = match (&a.nid, a.all) {
        (Some(nid), false) => format!("/api/v1/nis/{nid}/health"),
        (None, true) => "/api/v1/nis/health".to_owned(),
        _ => return Err(cl.err(-22, "give --nid NID or --all".to_owned())),
    };
    let v = cl
        .post(&path, serde_json::json!({ "value": health }))
        .await?;
    Ok(if c.json { json(&v) } else { String::new() })
}
