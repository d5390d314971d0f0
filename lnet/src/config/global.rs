//! `global:`, `routing:` and `buffers:` (reference 2.10, 4.4, 4.6).

use crate::tunables::{TunableError, TunableName, Tunables};

/// `global:`: the tunables of `lnetctl global show`, each optional on import, printed in
/// this order.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Global {
    /// `numa_range`.
    pub numa_range: Option<u32>,
    /// `max_interfaces` (import alias `max_intf`).
    pub max_interfaces: Option<u32>,
    /// `discovery` (0/1).
    pub discovery: Option<u32>,
    /// `drop_asym_route` (0/1).
    pub drop_asym_route: Option<u32>,
    /// `retry_count`.
    pub retry_count: Option<u32>,
    /// `transaction_timeout`, seconds.
    pub transaction_timeout: Option<u32>,
    /// `health_sensitivity`.
    pub health_sensitivity: Option<u32>,
    /// `recovery_interval` (deprecated).
    pub recovery_interval: Option<u32>,
    /// `router_sensitivity`.
    pub router_sensitivity: Option<u32>,
    /// `lnd_timeout`: derived by LNet; printed by export, ignored by import.
    pub lnd_timeout: Option<u32>,
    /// `response_tracking` (0..=3).
    pub response_tracking: Option<u32>,
    /// `recovery_limit`, seconds.
    pub recovery_limit: Option<u32>,
    /// `max_recovery_ping_interval`, seconds.
    pub max_recovery_ping_interval: Option<u32>,
}

impl Global {
    /// All 13 keys, as `lnetctl global show` prints them for these tunables.
    pub fn from_tunables(t: &Tunables) -> Global {
        use TunableName as N;
        Global {
            numa_range: Some(t.get(N::NumaRange)),
            max_interfaces: Some(t.get(N::MaxInterfaces)),
            discovery: Some(t.get(N::Discovery)),
            drop_asym_route: Some(t.get(N::DropAsymRoute)),
            retry_count: Some(t.get(N::RetryCount)),
            transaction_timeout: Some(t.get(N::TransactionTimeout)),
            health_sensitivity: Some(t.get(N::HealthSensitivity)),
            recovery_interval: Some(t.get(N::RecoveryInterval)),
            router_sensitivity: Some(t.get(N::RouterSensitivity)),
            lnd_timeout: Some(t.lnd_timeout()),
            response_tracking: Some(t.get(N::ResponseTracking)),
            recovery_limit: Some(t.get(N::RecoveryLimit)),
            max_recovery_ping_interval: Some(t.get(N::MaxRecoveryPingInterval)),
        }
    }

    /// The settable keys with their tunable, in print order (`lnd_timeout` is not one).
    pub fn settable(&self) -> [(TunableName, Option<u32>); 12] {
        use TunableName as N;
        [
            (N::NumaRange, self.numa_range),
            (N::MaxInterfaces, self.max_interfaces),
            (N::Discovery, self.discovery),
            (N::DropAsymRoute, self.drop_asym_route),
            (N::RetryCount, self.retry_count),
            (N::TransactionTimeout, self.transaction_timeout),
            (N::HealthSensitivity, self.health_sensitivity),
            (N::RecoveryInterval, self.recovery_interval),
            (N::RouterSensitivity, self.router_sensitivity),
            (N::ResponseTracking, self.response_tracking),
            (N::RecoveryLimit, self.recovery_limit),
            (N::MaxRecoveryPingInterval, self.max_recovery_ping_interval),
        ]
    }

    /// Applies the keys that are set with [`Tunables::set`], in an order that makes the
    /// result independent of key order: `health_sensitivity` first, then the rest, with
    /// `transaction_timeout` checked against the final `retry_count`. The final values must
    /// satisfy `retry_count < transaction_timeout`, and `retry_count == 0` when
    /// `health_sensitivity == 0` (reference 2.10).
    pub fn apply(&self, t: &mut Tunables) -> Result<(), TunableError> {
        use TunableName as N;
        if let Some(v) = self.health_sensitivity {
            t.set(N::HealthSensitivity, i64::from(v))?;
        }
        if let Some(tt) = self.transaction_timeout {
            if self.retry_count.is_some() {
                // The document's own retry count is set right after; drop the current one
                // so that it does not decide whether the new timeout is accepted.
                t.set(N::RetryCount, 0)?;
            }
            t.set(N::TransactionTimeout, i64::from(tt))?;
        }
        for (name, v) in self.settable() {
            if matches!(name, N::HealthSensitivity | N::TransactionTimeout) {
                continue;
            }
            if let Some(v) = v {
                t.set(name, i64::from(v))?;
            }
        }
        if let Some(tt) = self.transaction_timeout {
            // Again, now that the final retry count is known: it must stay below.
            t.set(N::TransactionTimeout, i64::from(tt))?;
        }
        Ok(())
    }
}

/// `routing:`: whether the node forwards. The `--backup` form is a map with `enable`;
/// the `routing show` form (a full export) is a list of `cpt[N]` pool items then `enable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routing {
    /// `enable`.
    pub enable: RoutingState,
    /// The `cpt[N]` items; empty for the `--backup` form.
    pub cpts: Vec<CptBuffers>,
}

/// `enable:` of `routing:` (reference 4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoutingState {
    /// 0: disabled.
    Disabled,
    /// 1: enabled.
    Enabled,
    /// 2: stopping.
    Stopping,
    /// 3: starting (seen right after `lnetctl set routing 1`).
    Starting,
}

impl RoutingState {
    /// The number lnetctl prints.
    pub const fn to_u32(self) -> u32 {
        match self {
            RoutingState::Disabled => 0,
            RoutingState::Enabled => 1,
            RoutingState::Stopping => 2,
            RoutingState::Starting => 3,
        }
    }

    /// The state for a printed number, `None` above 3.
    pub const fn from_u32(v: u32) -> Option<RoutingState> {
        match v {
            0 => Some(RoutingState::Disabled),
            1 => Some(RoutingState::Enabled),
            2 => Some(RoutingState::Stopping),
            3 => Some(RoutingState::Starting),
            _ => None,
        }
    }

    /// Whether importing this state turns forwarding on (enabled or starting).
    pub const fn forwards(self) -> bool {
        matches!(self, RoutingState::Enabled | RoutingState::Starting)
    }
}

/// One `cpt[N]:` item of `routing show`: the three router buffer pools of a CPT.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CptBuffers {
    /// `tiny:`.
    pub tiny: BufferPool,
    /// `small:`.
    pub small: BufferPool,
    /// `large:`.
    pub large: BufferPool,
}

/// One router buffer pool.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferPool {
    /// `npages`: pages per buffer.
    pub npages: u32,
    /// `nbuffers`.
    pub nbuffers: u32,
    /// `credits`: buffers free now (negative when messages wait).
    pub credits: i32,
    /// `mincredits`: the low-water mark.
    pub mincredits: i32,
}

/// `buffers:`: router buffer counts summed over CPTs (0 = the default).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Buffers {
    /// `tiny`.
    pub tiny: Option<u32>,
    /// `small`.
    pub small: Option<u32>,
    /// `large`.
    pub large: Option<u32>,
}
