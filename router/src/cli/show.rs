//! The show commands and their lnetctl filters: `net show --net`, `peer show --nid`,
//! `peer list`, `route show --net --gateway --hop --priority -v`, `routing show`.

use lnet::config::{
    BufferPool, Buffers, Config, CptBuffers, Route, RouteState, RouteType, Routing,
};
use lnet::show::{NetShow, PeerShow, Verbosity};
use lnet::{Net, Nid};

use super::client::{at, json, Client, CtlError};
use super::Connect;

fn parse_net(cl: &Client, text: &str) -> Result<Net, CtlError> {
    text.parse()
        .map_err(|_| cl.err(-22, format!("Invalid net: {text}")))
}

fn parse_nid(cl: &Client, text: &str) -> Result<Nid, CtlError> {
    text.parse()
        .map_err(|_| cl.err(-22, format!("Invalid NID: {text}")))
}

/// `net show [--net NET] [-v N]`.
pub(super) async fn net(c: &Connect, net: Option<&str>, verbose: u8) -> Result<String, CtlError> {
    let cl = Client::new(c, "show", "net")?;
    let only = net.map(|n| parse_net(&cl, n)).transpose()?;
    let v = cl.get("/api/v1/nets").await?;
    if c.json && only.is_none() {
        return Ok(json(&v));
    }
    let mut m: NetShow = cl.model(v)?;
    if let Some(only) = only {
        m.nets.retain(|n| n.net_type == only);
        if m.nets.is_empty() {
            return Err(cl.err(-2, format!("no local NI on net {only}")));
        }
    }
    if c.json {
        return Ok(json(&serde_json::to_value(&m).unwrap_or_default()));
    }
    Ok(m.to_yaml(Verbosity(verbose)))
}

/// `peer show [--nid NID] [-v N]`: with `--nid`, the peer that has that NID.
pub(super) async fn peer(c: &Connect, nid: Option<&str>, verbose: u8) -> Result<String, CtlError> {
    let cl = Client::new(c, "show", "peer")?;
    let only = nid.map(|n| parse_nid(&cl, n)).transpose()?;
    let v = cl.get("/api/v1/peers").await?;
    if c.json && only.is_none() {
        return Ok(json(&v));
    }
    let mut m: PeerShow = cl.model(v)?;
    if let Some(only) = only {
        m.peers
            .retain(|p| p.primary_nid == only || p.nis.iter().any(|n| n.nid == only));
        if m.peers.is_empty() {
            return Err(cl.err(
                -2,
                "cannot get peer information: No such file or directory".to_owned(),
            ));
        }
    }
    if c.json {
        return Ok(json(&serde_json::to_value(&m).unwrap_or_default()));
    }
    Ok(m.to_yaml(Verbosity(verbose)))
}

/// `peer list`: the primary NID of every peer, in cYAML layout.
pub(super) async fn peer_list(c: &Connect) -> Result<String, CtlError> {
    let cl = Client::new(c, "list", "peer")?;
    let v = cl.get("/api/v1/peers").await?;
    let m: PeerShow = cl.model(v)?;
    if c.json {
        let list: Vec<String> = m.peers.iter().map(|p| p.primary_nid.to_string()).collect();
        return Ok(json(&serde_json::json!({ "peer_list": list })));
    }
    let mut out = String::from("peer list:\n");
    for p in &m.peers {
        out.push_str(&format!("    - nid: {}\n", p.primary_nid));
    }
    Ok(out)
}

/// The filters of `route show`.
#[derive(Debug, Clone, Default)]
pub(super) struct RouteFilter {
    /// `--net`.
    pub(super) net: Option<String>,
    /// `--gateway`.
    pub(super) gateway: Option<String>,
    /// `--hop`.
    pub(super) hop: Option<i64>,
    /// `--priority`.
    pub(super) priority: Option<u32>,
}

fn route_of(v: &serde_json::Value, verbose: bool) -> Option<Route> {
    Some(Route {
        net: at(v, "/net").as_str()?.parse().ok()?,
        gateway: at(v, "/gateway").as_str()?.parse().ok()?,
        hop: at(v, "/hop").as_i64(),
        priority: at(v, "/priority")
            .as_u64()
            .and_then(|p| u32::try_from(p).ok()),
        health_sensitivity: None,
        state: verbose
            .then(|| match at(v, "/state").as_str() {
                Some("up") => Some(RouteState::Up),
                Some("down") => Some(RouteState::Down),
                _ => None,
            })
            .flatten(),
        route_type: verbose
            .then(|| match at(v, "/type").as_str() {
                Some("single-hop") => Some(RouteType::SingleHop),
                Some("multi-hop") => Some(RouteType::MultiHop),
                _ => None,
            })
            .flatten(),
    })
}

/// `route show [--net N] [--gateway G] [--hop H] [--priority P] [-v]`.
pub(super) async fn route(c: &Connect, f: &RouteFilter, verbose: bool) -> Result<String, CtlError> {
    let cl = Client::new(c, "show", "route")?;
    let net = f.net.as_deref().map(|n| parse_net(&cl, n)).transpose()?;
    let gateway = f
        .gateway
        .as_deref()
        .map(|g| parse_nid(&cl, g))
        .transpose()?;
    let v = cl.get("/api/v1/routes").await?;
    let keep = |r: &Route| {
        net.is_none_or(|n| r.net == n)
            && gateway.is_none_or(|g| r.gateway == g)
            && f.hop.is_none_or(|h| r.hop == Some(h))
            && f.priority.is_none_or(|p| r.priority.unwrap_or(0) == p)
    };
    let routes: Vec<Route> = at(&v, "/routes")
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| route_of(r, verbose))
                .filter(keep)
                .collect()
        })
        .unwrap_or_default();
    if c.json {
        let kept: Vec<&serde_json::Value> = at(&v, "/routes")
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|r| route_of(r, false).is_some_and(|m| keep(&m)))
                    .collect()
            })
            .unwrap_or_default();
        return Ok(json(&serde_json::json!({ "routes": kept })));
    }
    Ok(Config {
        routes,
        ..Config::default()
    }
    .to_yaml())
}

fn pool_of(v: &serde_json::Value) -> BufferPool {
    let n = |k: &str| v[k].as_i64().unwrap_or(0);
    BufferPool {
        npages: u32::try_from(n("npages")).unwrap_or(0),
        nbuffers: u32::try_from(n("nbuffers")).unwrap_or(0),
        credits: i32::try_from(n("credits")).unwrap_or(0),
        mincredits: i32::try_from(n("mincredits")).unwrap_or(0),
    }
}

/// `routing show`.
pub(super) async fn routing(c: &Connect) -> Result<String, CtlError> {
    let cl = Client::new(c, "show", "routing")?;
    let v = cl.get("/api/v1/routing").await?;
    if c.json {
        return Ok(json(&v));
    }
    let cpts = at(&v, "/cpts")
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| CptBuffers {
                    tiny: pool_of(at(p, "/tiny")),
                    small: pool_of(at(p, "/small")),
                    large: pool_of(at(p, "/large")),
                })
                .collect()
        })
        .unwrap_or_default();
    let enable = if at(&v, "/enable").as_bool().unwrap_or(false) {
        lnet::config::RoutingState::Enabled
    } else {
        lnet::config::RoutingState::Disabled
    };
    let total = |k: &str| {
        at(&v, "/buffers")[k]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
    };
    Ok(Config {
        routing: Some(Routing { enable, cpts }),
        buffers: Some(Buffers {
            tiny: total("tiny"),
            small: total("small"),
            large: total("large"),
        }),
        ..Config::default()
    }
    .to_yaml())
}
