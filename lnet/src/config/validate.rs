//! Checks across values of a parsed [`Config`]: what LNet refuses even though each value
//! is well-formed on its own.

use std::collections::HashMap;

use super::error::ValidationError;
use super::route::HOP_UNDEFINED;
use super::Config;
use crate::nid::{Net, Nid};
use crate::tunables::{TunableError, TunableName, Tunables, MAX_HEALTH_SENSITIVITY};

/// Largest explicit hop count.
const MAX_HOP: i64 = 255;

/// Checks a parsed configuration and returns every problem found, in document order.
///
/// - the same NID under two peers, or twice in one peer (cfg-080, snd-065);
/// - the same net twice under `net:`, the same local NID twice, a local NID off its net;
/// - a route to a local net, a gateway not on a local net, a gateway on the route's own
///   net, the same route twice, a hop outside 1..=255 other than -1 (undefined), a route
///   health sensitivity above 1000;
/// - global tunables, buffers and routing that `lnetctl set` refuses (reference 2.10),
///   including `retry_count` against `transaction_timeout` and `health_sensitivity`;
/// - `acceptor_port: 0`.
pub fn validate(config: &Config) -> Result<(), Vec<ValidationError>> {
    let mut errors = Vec::new();
    let local_nets = check_nets(config, &mut errors);
    check_routes(config, &local_nets, &mut errors);
    check_peers(config, &mut errors);
    check_tunables(config, &mut errors);
    if let Some(r) = &config.router {
        if r.acceptor_port == Some(0) {
            errors.push(ValidationError::AcceptorPortZero {
                field: "lnet-router.acceptor_port".to_owned(),
            });
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The local nets, after checking `net:`.
fn check_nets(config: &Config, errors: &mut Vec<ValidationError>) -> Vec<Net> {
    let mut nets: HashMap<Net, String> = HashMap::new();
    let mut nids: HashMap<Nid, String> = HashMap::new();
    let mut order = Vec::new();
    for (i, n) in config.nets.iter().enumerate() {
        let field = format!("net[{i}].net type");
        if let Some(first) = nets.get(&n.net_type) {
            errors.push(ValidationError::DuplicateNet {
                field,
                net: n.net_type,
                first_field: first.clone(),
            });
        } else {
            nets.insert(n.net_type, field);
            order.push(n.net_type);
        }
        for (j, ni) in n.local_nis.iter().enumerate() {
            let Some(nid) = ni.nid else { continue };
            let field = format!("net[{i}].local NI(s)[{j}].nid");
            if nid.net != n.net_type {
                errors.push(ValidationError::NidNotOnNet {
                    field: field.clone(),
                    nid,
                    net: n.net_type,
                });
            }
            if let Some(first) = nids.get(&nid) {
                errors.push(ValidationError::DuplicateLocalNid {
                    field,
                    nid,
                    first_field: first.clone(),
                });
            } else {
                nids.insert(nid, field);
            }
        }
    }
    order
}

fn check_routes(config: &Config, local_nets: &[Net], errors: &mut Vec<ValidationError>) {
    let mut seen: HashMap<(Net, Nid), String> = HashMap::new();
    for (i, r) in config.routes.iter().enumerate() {
        if local_nets.contains(&r.net) {
            errors.push(ValidationError::RouteToLocalNet {
                field: format!("route[{i}].net"),
                net: r.net,
            });
        }
        let gw_field = format!("route[{i}].gateway");
        if r.gateway.net == r.net {
            errors.push(ValidationError::GatewayOnRouteNet {
                field: gw_field.clone(),
                gateway: r.gateway,
                net: r.net,
            });
        } else if !local_nets.contains(&r.gateway.net) {
            errors.push(ValidationError::GatewayNotOnLocalNet {
                field: gw_field.clone(),
                gateway: r.gateway,
            });
        }
        if let Some(first) = seen.get(&(r.net, r.gateway)) {
            errors.push(ValidationError::DuplicateRoute {
                field: gw_field,
                net: r.net,
                gateway: r.gateway,
                first_field: first.clone(),
            });
        } else {
            seen.insert((r.net, r.gateway), gw_field);
        }
        if let Some(hop) = r.hop {
            if hop != HOP_UNDEFINED && !(1..=MAX_HOP).contains(&hop) {
                errors.push(ValidationError::HopOutOfRange {
                    field: format!("route[{i}].hop"),
                    hop,
                });
            }
        }
        if let Some(value) = r.health_sensitivity {
            if value > MAX_HEALTH_SENSITIVITY {
                errors.push(ValidationError::HealthSensitivityOutOfRange {
                    field: format!("route[{i}].health_sensitivity"),
                    value,
                });
            }
        }
    }
}

fn check_peers(config: &Config, errors: &mut Vec<ValidationError>) {
    // NID -> (peer index, field of its first occurrence).
    let mut owner: HashMap<Nid, (usize, String)> = HashMap::new();
    for (i, p) in config.peers.iter().enumerate() {
        let primary_field = format!("peer[{i}].primary nid");
        let mut nids = vec![(p.primary_nid, primary_field)];
        nids.extend(
            p.peer_nis
                .iter()
                .enumerate()
                .map(|(j, ni)| (ni.nid, format!("peer[{i}].peer ni[{j}].nid"))),
        );
        let mut primary_listed = false;
        for (k, (nid, field)) in nids.into_iter().enumerate() {
            // The primary NID is normally listed again as a peer NI of the same peer.
            if k > 0 && nid == p.primary_nid && !primary_listed {
                primary_listed = true;
                continue;
            }
            match owner.get(&nid) {
                Some((_, first)) => errors.push(ValidationError::DuplicatePeerNid {
                    field,
                    nid,
                    first_field: first.clone(),
                }),
                None => {
                    owner.insert(nid, (i, field));
                }
            }
        }
    }
}

/// The `global:` key a tunable error is about.
fn global_field(e: &TunableError) -> String {
    let name = match e {
        TunableError::OutOfRange { name, .. } => name.as_str(),
        TunableError::TransactionTimeoutNotAboveRetryCount { .. } => "transaction_timeout",
        TunableError::RetryCountAboveTransactionTimeout { .. }
        | TunableError::RetriesNeedHealth { .. } => "retry_count",
        TunableError::UnknownName { name } => name.as_str(),
    };
    format!("global.{name}")
}

fn check_tunables(config: &Config, errors: &mut Vec<ValidationError>) {
    let mut t = Tunables::default();
    if let Some(g) = &config.global {
        if let Err(source) = g.apply(&mut t) {
            errors.push(ValidationError::Tunable {
                field: global_field(&source),
                source,
            });
        }
    }
    if let Some(b) = &config.buffers {
        for (key, name, v) in [
            ("buffers.tiny", TunableName::TinyBuffers, b.tiny),
            ("buffers.small", TunableName::SmallBuffers, b.small),
            ("buffers.large", TunableName::LargeBuffers, b.large),
        ] {
            if let Some(v) = v {
                if let Err(source) = t.set(name, i64::from(v)) {
                    errors.push(ValidationError::Tunable {
                        field: key.to_owned(),
                        source,
                    });
                }
            }
        }
    }
}
