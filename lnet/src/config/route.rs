//! `route:`: remote nets and their gateways (reference 4.3).

use std::fmt;

use crate::nid::{Net, Nid};

/// `hop: -1`: the hop count is undefined (the default when none was given).
pub const HOP_UNDEFINED: i64 = -1;

/// One item of `route:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// `net`: the remote net.
    pub net: Net,
    /// `gateway`: the NID the route was added with.
    pub gateway: Nid,
    /// `hop`: 1..=255, or [`HOP_UNDEFINED`]; checked when the configuration is validated.
    pub hop: Option<i64>,
    /// `priority`: lower is better, 0 by default.
    pub priority: Option<u32>,
    /// `health_sensitivity` (declared by the kernel, never sent; read if given).
    pub health_sensitivity: Option<u32>,
    /// `state` (`route show -v`, not in `--backup`).
    pub state: Option<RouteState>,
    /// `type` (`route show -v`, not in `--backup`).
    pub route_type: Option<RouteType>,
}

/// `state:` of a route: whether it is alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteState {
    /// `up`.
    Up,
    /// `down`.
    Down,
}

impl RouteState {
    /// The lnetctl spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            RouteState::Up => "up",
            RouteState::Down => "down",
        }
    }
}

impl fmt::Display for RouteState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `type:` of a route, from the last gateway ping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteType {
    /// `single-hop`.
    SingleHop,
    /// `multi-hop`.
    MultiHop,
}

impl RouteType {
    /// The lnetctl spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            RouteType::SingleHop => "single-hop",
            RouteType::MultiHop => "multi-hop",
        }
    }
}

impl fmt::Display for RouteType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
