//! Routes to remote nets, as an end node (or a router) that sends through gateways sees
//! them (reference: core 4.5 and 5.5, health 2.9).
//!
//! * [`RouteSpec`]: one configured route: remote net, gateway, hops, priority.
//! * [`GatewayView`]: what this node knows of a gateway: whether it answered its last
//!   check, and the NIs and flags its last ping reply or push carried.
//! * [`route_status`]: whether a route is alive, and if not, why ([`RouteDown`]), by the
//!   kernel's rule (`lnet_is_route_alive`), asymmetric route failure detection included.
//! * The choice among live routes is [`crate::selection::best_route`].
//!
//! Time never enters here: the actor that pings gateways decides when a gateway is dead.

use std::fmt;

use crate::health::HealthStatus;
use crate::nid::{Net, Nid};
use crate::ping::{Features, PingInfo};
use crate::time::Millis;

/// One route: messages for peers on `net` go to `gateway`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RouteSpec {
    /// The remote net.
    pub net: Net,
    /// The gateway: a NID on one of this node's nets.
    pub gateway: Nid,
    /// Hops to the remote net, 1..=255; `None`: undefined (`LNET_UNDEFINED_HOPS`),
    /// which counts as 1 when routes are compared.
    pub hops: Option<u32>,
    /// Lower is better; 0 by default.
    pub priority: u32,
}

/// Why a route cannot be added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    /// The remote net is one of this node's nets.
    #[error("route to {net}: the net is local")]
    LocalNet {
        /// The net.
        net: Net,
    },
    /// The gateway is on none of this node's nets.
    #[error("gateway {gateway} is not on a local net")]
    GatewayNotLocal {
        /// The gateway.
        gateway: Nid,
    },
    /// The gateway is on the route's own net.
    #[error("gateway {gateway} is on the route's own net {net}")]
    GatewayOnRemoteNet {
        /// The gateway.
        gateway: Nid,
        /// The net.
        net: Net,
    },
    /// The gateway is one of this node's NIDs.
    #[error("gateway {gateway} is this node")]
    GatewayIsLocal {
        /// The gateway.
        gateway: Nid,
    },
    /// Hops outside 1..=255.
    #[error("route to {net}: hops {hops} is outside 1..255")]
    Hops {
        /// The net.
        net: Net,
        /// The hops given.
        hops: u32,
    },
    /// The same net and gateway are routed already.
    #[error("route to {net} via {gateway} exists already")]
    Exists {
        /// The net.
        net: Net,
        /// The gateway.
        gateway: Nid,
    },
}

/// Checks a new route against this node's nets (`local_nets`) and NIDs, and the routes it
/// has.
pub fn check_route(
    route: &RouteSpec,
    local_nets: &[Net],
    local_nids: &[Nid],
    existing: &[RouteSpec],
) -> Result<(), RouteError> {
    if local_nets.contains(&route.net) {
        return Err(RouteError::LocalNet { net: route.net });
    }
    if local_nids.contains(&route.gateway) {
        return Err(RouteError::GatewayIsLocal {
            gateway: route.gateway,
        });
    }
    if route.gateway.net == route.net {
        return Err(RouteError::GatewayOnRemoteNet {
            gateway: route.gateway,
            net: route.net,
        });
    }
    if !local_nets.contains(&route.gateway.net) {
        return Err(RouteError::GatewayNotLocal {
            gateway: route.gateway,
        });
    }
    if let Some(hops) = route.hops.filter(|h| !(1..=255).contains(h)) {
        return Err(RouteError::Hops {
            net: route.net,
            hops,
        });
    }
    if existing
        .iter()
        .any(|r| r.net == route.net && r.gateway == route.gateway)
    {
        return Err(RouteError::Exists {
            net: route.net,
            gateway: route.gateway,
        });
    }
    Ok(())
}

/// The router-checker settings of a node that uses gateways (lnet module parameters,
/// reference core 5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterCheck {
    /// `alive_router_check_interval`: how often each gateway is pinged (and pushed to);
    /// zero disables the checker. Default 60 s.
    pub interval: Millis,
    /// How long a gateway ping may wait for its reply. The kernel uses the transaction
    /// timeout; default here 50 s (`router_ping_timeout`).
    pub ping_timeout: Millis,
    /// `avoid_asym_router_failure`: a single-hop route needs an UP gateway NI on the
    /// remote net. Default on.
    pub avoid_asym_router_failure: bool,
    /// `check_routers_before_use`: a gateway not yet checked is down. Default off.
    pub check_routers_before_use: bool,
}

impl Default for RouterCheck {
    fn default() -> RouterCheck {
        RouterCheck {
            interval: Millis::from_secs(60),
            ping_timeout: Millis::from_secs(50),
            avoid_asym_router_failure: true,
            check_routers_before_use: false,
        }
    }
}

/// Why a gateway is considered dead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GatewayDown {
    /// Its last ping got no reply in time.
    NoReply,
    /// A send to it failed with this status.
    SendFailed(HealthStatus),
    /// The LND lost its connection and could not set one up again.
    Unreachable(HealthStatus),
}

impl fmt::Display for GatewayDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GatewayDown::NoReply => f.write_str("no reply to ping"),
            GatewayDown::SendFailed(s) => write!(f, "send failed: {s}"),
            GatewayDown::Unreachable(s) => write!(f, "unreachable: {s}"),
        }
    }
}

/// Whether a gateway answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayAlive {
    /// Not checked yet.
    Unchecked,
    /// Its last check succeeded (or it sent us something since).
    Alive,
    /// It is dead, and why.
    Dead(GatewayDown),
}

/// What a gateway's last ping reply or push said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayPing {
    /// Its NIs (the loopback entry left out) and whether each is UP.
    pub nis: Vec<(Nid, bool)>,
    /// `RTE_DISABLED`: it does not forward.
    pub routing_disabled: bool,
    /// Whether it reported NI status at all (`NI_STATUS`); without it, statuses mean
    /// nothing and every NI counts as UP.
    pub ni_status: bool,
}

impl GatewayPing {
    /// The view of a gateway's ping info.
    pub fn from_info(info: &PingInfo) -> GatewayPing {
        let ni_status = info.features.contains(Features::NI_STATUS);
        GatewayPing {
            nis: info
                .statuses()
                .map(|(nid, s)| (nid, !ni_status || s.is_up()))
                .collect(),
            routing_disabled: info.features.contains(Features::RTE_DISABLED),
            ni_status,
        }
    }

    fn has_ni_on(&self, net: Net) -> bool {
        self.nis.iter().any(|(n, _)| n.net == net)
    }

    fn up_ni_on(&self, net: Net) -> bool {
        self.nis.iter().any(|(n, up)| n.net == net && *up)
    }
}

/// What this node knows of one gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayView {
    /// Whether it answers.
    pub alive: GatewayAlive,
    /// Its last ping info, if any came.
    pub ping: Option<GatewayPing>,
}

impl GatewayView {
    /// A gateway nothing is known of yet.
    pub const fn unchecked() -> GatewayView {
        GatewayView {
            alive: GatewayAlive::Unchecked,
            ping: None,
        }
    }
}

/// Why a route is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouteDown {
    /// `check_routers_before_use` is on and the gateway has not been checked yet.
    NotChecked,
    /// The gateway is dead.
    GatewayDead(GatewayDown),
    /// The gateway's ping info says it does not forward (`RTE_DISABLED`).
    RoutingDisabled,
    /// The gateway has no UP NI on the net this node reaches it on.
    NoUpNiOnLocalNet,
    /// Asymmetric route failure: the gateway has no UP NI on the remote net.
    NoUpNiOnRemoteNet,
}

impl fmt::Display for RouteDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteDown::NotChecked => f.write_str("gateway not checked yet"),
            RouteDown::GatewayDead(why) => write!(f, "gateway dead ({why})"),
            RouteDown::RoutingDisabled => f.write_str("gateway does not forward"),
            RouteDown::NoUpNiOnLocalNet => f.write_str("gateway has no UP NI on our net"),
            RouteDown::NoUpNiOnRemoteNet => {
                f.write_str("gateway has no UP NI on the remote net (asymmetric)")
            }
        }
    }
}

/// Whether `route` is alive given what is known of its gateway (`lnet_is_route_alive`).
pub fn route_status(
    route: &RouteSpec,
    gateway: &GatewayView,
    check: &RouterCheck,
) -> Result<(), RouteDown> {
    match gateway.alive {
        GatewayAlive::Dead(why) => return Err(RouteDown::GatewayDead(why)),
        GatewayAlive::Unchecked if check.check_routers_before_use => {
            return Err(RouteDown::NotChecked)
        }
        GatewayAlive::Unchecked | GatewayAlive::Alive => {}
    }
    let Some(ping) = &gateway.ping else {
        return Ok(());
    };
    if ping.routing_disabled {
        return Err(RouteDown::RoutingDisabled);
    }
    if !ping.up_ni_on(route.gateway.net) {
        return Err(RouteDown::NoUpNiOnLocalNet);
    }
    let single_hop = route.hops == Some(1) || ping.has_ni_on(route.net);
    if check.avoid_asym_router_failure && single_hop && !ping.up_ni_on(route.net) {
        return Err(RouteDown::NoUpNiOnRemoteNet);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ping::NiStatus;

    fn nid(s: &str) -> Nid {
        s.parse().unwrap()
    }

    fn net(s: &str) -> Net {
        s.parse().unwrap()
    }

    fn route(remote: &str, gw: &str) -> RouteSpec {
        RouteSpec {
            net: net(remote),
            gateway: nid(gw),
            hops: None,
            priority: 0,
        }
    }

    fn alive(nis: &[(&str, bool)]) -> GatewayView {
        GatewayView {
            alive: GatewayAlive::Alive,
            ping: Some(GatewayPing {
                nis: nis.iter().map(|(n, up)| (nid(n), *up)).collect(),
                routing_disabled: false,
                ni_status: true,
            }),
        }
    }

    #[test]
    fn checks_refuse_local_nets_foreign_gateways_and_duplicates() {
        let nets = [net("tcp1")];
        let nids = [nid("10.0.0.1@tcp1")];
        let ok = route("tcp2", "10.0.0.2@tcp1");
        assert_eq!(check_route(&ok, &nets, &nids, &[]), Ok(()));
        assert!(matches!(
            check_route(&route("tcp1", "10.0.0.2@tcp1"), &nets, &nids, &[]),
            Err(RouteError::LocalNet { .. })
        ));
        assert!(matches!(
            check_route(&route("tcp2", "10.0.0.2@tcp3"), &nets, &nids, &[]),
            Err(RouteError::GatewayNotLocal { .. })
        ));
        assert!(matches!(
            check_route(&route("tcp2", "10.0.0.2@tcp2"), &nets, &nids, &[]),
            Err(RouteError::GatewayOnRemoteNet { .. })
        ));
        assert!(matches!(
            check_route(&route("tcp2", "10.0.0.1@tcp1"), &nets, &nids, &[]),
            Err(RouteError::GatewayIsLocal { .. })
        ));
        assert!(matches!(
            check_route(&ok, &nets, &nids, &[ok]),
            Err(RouteError::Exists { .. })
        ));
        let mut bad = ok;
        bad.hops = Some(256);
        assert!(matches!(
            check_route(&bad, &nets, &nids, &[]),
            Err(RouteError::Hops { hops: 256, .. })
        ));
    }

    #[test]
    fn an_unchecked_gateway_is_used_unless_checked_before_use() {
        let r = route("tcp2", "10.0.0.2@tcp1");
        let mut check = RouterCheck::default();
        assert_eq!(route_status(&r, &GatewayView::unchecked(), &check), Ok(()));
        check.check_routers_before_use = true;
        assert_eq!(
            route_status(&r, &GatewayView::unchecked(), &check),
            Err(RouteDown::NotChecked)
        );
    }

    #[test]
    fn asymmetric_failure_downs_the_route_only_for_the_dead_remote_net() {
        let check = RouterCheck::default();
        let gw = alive(&[("10.0.0.2@tcp1", true), ("10.0.1.2@tcp2", false)]);
        assert_eq!(
            route_status(&route("tcp2", "10.0.0.2@tcp1"), &gw, &check),
            Err(RouteDown::NoUpNiOnRemoteNet)
        );
        // A multi-hop route beyond tcp2: the gateway lists no NI on tcp3.
        let mut far = route("tcp3", "10.0.0.2@tcp1");
        far.hops = Some(2);
        assert_eq!(route_status(&far, &gw, &check), Ok(()));
        let off = RouterCheck {
            avoid_asym_router_failure: false,
            ..check
        };
        assert_eq!(
            route_status(&route("tcp2", "10.0.0.2@tcp1"), &gw, &off),
            Ok(())
        );
    }

    #[test]
    fn routing_disabled_dead_gateway_and_down_local_ni_down_the_route() {
        let check = RouterCheck::default();
        let r = route("tcp2", "10.0.0.2@tcp1");
        let mut gw = alive(&[("10.0.0.2@tcp1", true), ("10.0.1.2@tcp2", true)]);
        assert_eq!(route_status(&r, &gw, &check), Ok(()));
        if let Some(p) = gw.ping.as_mut() {
            p.routing_disabled = true;
        }
        assert_eq!(
            route_status(&r, &gw, &check),
            Err(RouteDown::RoutingDisabled)
        );
        let gw2 = alive(&[("10.0.0.2@tcp1", false), ("10.0.1.2@tcp2", true)]);
        assert_eq!(
            route_status(&r, &gw2, &check),
            Err(RouteDown::NoUpNiOnLocalNet)
        );
        let dead = GatewayView {
            alive: GatewayAlive::Dead(GatewayDown::NoReply),
            ping: gw2.ping,
        };
        assert_eq!(
            route_status(&r, &dead, &check),
            Err(RouteDown::GatewayDead(GatewayDown::NoReply))
        );
    }

    #[test]
    fn ping_info_without_ni_status_counts_every_ni_up() {
        let info = PingInfo::new(
            12345,
            1,
            Features::MULTI_RAIL,
            vec![NiStatus::down(nid("10.0.0.2@tcp1"))],
        );
        let p = GatewayPing::from_info(&info);
        assert_eq!(p.nis, vec![(nid("10.0.0.2@tcp1"), true)]);
        let info = PingInfo::new(
            12345,
            1,
            Features::NI_STATUS | Features::RTE_DISABLED,
            vec![NiStatus::down(nid("10.0.0.2@tcp1"))],
        );
        let p = GatewayPing::from_info(&info);
        assert_eq!(p.nis, vec![(nid("10.0.0.2@tcp1"), false)]);
        assert!(p.routing_disabled);
    }
}
