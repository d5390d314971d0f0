//! Global LNet tunables with their defaults, and the rules of `lnetctl set NAME VALUE`
//! (health reference 2.10, 2.6).
//!
//! [`Tunables::default`] is what `lnetctl global show` prints on a fresh kernel node.
//! Fields are private so that every change goes through a setter that applies the same
//! checks as the kernel; [`Tunables::set`] takes the `lnetctl set` name and a number.

use std::fmt;
use std::str::FromStr;

use crate::response::setting::ResponseTracking;

/// Default `lnet_retry_count`.
pub const DEFAULT_RETRY_COUNT: u32 = 2;
/// Default `lnet_transaction_timeout`, in seconds.
pub const DEFAULT_TRANSACTION_TIMEOUT: u32 = 150;
/// Default `lnet_health_sensitivity`.
pub const DEFAULT_HEALTH_SENSITIVITY: u32 = 100;
/// Largest `lnet_health_sensitivity`.
pub const MAX_HEALTH_SENSITIVITY: u32 = 1000;
/// Default `lnet_max_recovery_ping_interval`, in seconds.
pub const DEFAULT_MAX_RECOVERY_PING_INTERVAL: u32 = 900;
/// Default (and fallback) `lnet_interfaces_max`.
pub const DEFAULT_MAX_INTERFACES: u32 = 4096;
/// Smallest `lnet_interfaces_max` kept; smaller values fall back to the default.
pub const MIN_MAX_INTERFACES: u32 = 16;

/// A tunable that `lnetctl set` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TunableName {
    /// `tiny_buffers` (`tiny_router_buffers`).
    TinyBuffers,
    /// `small_buffers` (`small_router_buffers`).
    SmallBuffers,
    /// `large_buffers` (`large_router_buffers`).
    LargeBuffers,
    /// `routing`.
    Routing,
    /// `numa_range`.
    NumaRange,
    /// `max_interfaces` (alias `max_intf`).
    MaxInterfaces,
    /// `discovery`.
    Discovery,
    /// `drop_asym_route`.
    DropAsymRoute,
    /// `retry_count`.
    RetryCount,
    /// `transaction_timeout`.
    TransactionTimeout,
    /// `health_sensitivity`.
    HealthSensitivity,
    /// `recovery_interval` (deprecated, no effect).
    RecoveryInterval,
    /// `router_sensitivity` (no effect).
    RouterSensitivity,
    /// `response_tracking`.
    ResponseTracking,
    /// `recovery_limit`.
    RecoveryLimit,
    /// `max_recovery_ping_interval`.
    MaxRecoveryPingInterval,
}

impl TunableName {
    /// Every name, in the order of the reference table.
    pub const ALL: [TunableName; 16] = [
        TunableName::TinyBuffers,
        TunableName::SmallBuffers,
        TunableName::LargeBuffers,
        TunableName::Routing,
        TunableName::NumaRange,
        TunableName::MaxInterfaces,
        TunableName::Discovery,
        TunableName::DropAsymRoute,
        TunableName::RetryCount,
        TunableName::TransactionTimeout,
        TunableName::HealthSensitivity,
        TunableName::RecoveryInterval,
        TunableName::RouterSensitivity,
        TunableName::ResponseTracking,
        TunableName::RecoveryLimit,
        TunableName::MaxRecoveryPingInterval,
    ];

    /// The `lnetctl set` name.
    pub const fn as_str(self) -> &'static str {
        match self {
            TunableName::TinyBuffers => "tiny_buffers",
            TunableName::SmallBuffers => "small_buffers",
            TunableName::LargeBuffers => "large_buffers",
            TunableName::Routing => "routing",
            TunableName::NumaRange => "numa_range",
            TunableName::MaxInterfaces => "max_interfaces",
            TunableName::Discovery => "discovery",
            TunableName::DropAsymRoute => "drop_asym_route",
            TunableName::RetryCount => "retry_count",
            TunableName::TransactionTimeout => "transaction_timeout",
            TunableName::HealthSensitivity => "health_sensitivity",
            TunableName::RecoveryInterval => "recovery_interval",
            TunableName::RouterSensitivity => "router_sensitivity",
            TunableName::ResponseTracking => "response_tracking",
            TunableName::RecoveryLimit => "recovery_limit",
            TunableName::MaxRecoveryPingInterval => "max_recovery_ping_interval",
        }
    }
}

impl fmt::Display for TunableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TunableName {
    type Err = TunableError;

    fn from_str(s: &str) -> Result<TunableName, TunableError> {
        if s == "max_intf" {
            return Ok(TunableName::MaxInterfaces);
        }
        TunableName::ALL
            .into_iter()
            .find(|n| n.as_str() == s)
            .ok_or_else(|| TunableError::UnknownName { name: s.to_owned() })
    }
}

/// Why `lnetctl set` refused a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TunableError {
    /// No tunable has this name.
    #[error("unknown tunable {name:?}")]
    UnknownName {
        /// The name given.
        name: String,
    },
    /// The value is outside the tunable's range.
    #[error("{name} = {value} is outside {min}..={max}")]
    OutOfRange {
        /// The tunable.
        name: TunableName,
        /// The value given.
        value: i64,
        /// The smallest value accepted.
        min: i64,
        /// The largest value accepted.
        max: i64,
    },
    /// `transaction_timeout` must be greater than `retry_count`.
    #[error(
        "transaction_timeout {transaction_timeout} must be greater than retry_count {retry_count}"
    )]
    TransactionTimeoutNotAboveRetryCount {
        /// The transaction timeout given.
        transaction_timeout: u32,
        /// The current retry count.
        retry_count: u32,
    },
    /// `retry_count` must not exceed `transaction_timeout`.
    #[error("retry_count {retry_count} exceeds transaction_timeout {transaction_timeout}")]
    RetryCountAboveTransactionTimeout {
        /// The retry count given.
        retry_count: u32,
        /// The current transaction timeout.
        transaction_timeout: u32,
    },
    /// `retry_count` can only be above 0 while `health_sensitivity` is above 0.
    #[error("retry_count {retry_count} needs health: health_sensitivity is 0")]
    RetriesNeedHealth {
        /// The retry count given.
        retry_count: u32,
    },
}

/// The global LNet tunables (`lnetctl global show` and the router-buffer and routing
/// settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tunables {
    tiny_buffers: u32,
    small_buffers: u32,
    large_buffers: u32,
    routing: bool,
    numa_range: u32,
    max_interfaces: u32,
    discovery: bool,
    drop_asym_route: bool,
    retry_count: u32,
    transaction_timeout: u32,
    health_sensitivity: u32,
    recovery_interval: u32,
    router_sensitivity: u32,
    response_tracking: ResponseTracking,
    recovery_limit: u32,
    max_recovery_ping_interval: u32,
}

impl Default for Tunables {
    /// The kernel defaults.
    fn default() -> Tunables {
        Tunables {
            tiny_buffers: 0,
            small_buffers: 0,
            large_buffers: 0,
            routing: false,
            numa_range: 0,
            max_interfaces: DEFAULT_MAX_INTERFACES,
            discovery: true,
            drop_asym_route: false,
            retry_count: DEFAULT_RETRY_COUNT,
            transaction_timeout: DEFAULT_TRANSACTION_TIMEOUT,
            health_sensitivity: DEFAULT_HEALTH_SENSITIVITY,
            recovery_interval: 1,
            router_sensitivity: 100,
            response_tracking: ResponseTracking::Both,
            recovery_limit: 0,
            max_recovery_ping_interval: DEFAULT_MAX_RECOVERY_PING_INTERVAL,
        }
    }
}

fn in_range(name: TunableName, value: i64, min: i64, max: i64) -> Result<u32, TunableError> {
    if value < min || value > max {
        return Err(TunableError::OutOfRange {
            name,
            value,
            min,
            max,
        });
    }
    u32::try_from(value).map_err(|_| TunableError::OutOfRange {
        name,
        value,
        min,
        max,
    })
}

const U32_MAX: i64 = u32::MAX as i64;

impl Tunables {
    /// `lnetctl set NAME VALUE`: checks the value and applies it.
    pub fn set(&mut self, name: TunableName, value: i64) -> Result<(), TunableError> {
        use TunableName as N;
        match name {
            N::TinyBuffers => self.tiny_buffers = in_range(name, value, 0, U32_MAX)?,
            N::SmallBuffers => self.small_buffers = in_range(name, value, 0, U32_MAX)?,
            N::LargeBuffers => self.large_buffers = in_range(name, value, 0, U32_MAX)?,
            N::Routing => self.routing = in_range(name, value, 0, 1)? == 1,
            N::NumaRange => self.numa_range = in_range(name, value, 0, U32_MAX)?,
            N::MaxInterfaces => {
                let v = in_range(name, value, 0, U32_MAX)?;
                self.max_interfaces = if v < MIN_MAX_INTERFACES {
                    DEFAULT_MAX_INTERFACES
                } else {
                    v
                };
            }
            N::Discovery => self.discovery = in_range(name, value, 0, 1)? == 1,
            N::DropAsymRoute => self.drop_asym_route = in_range(name, value, 0, 1)? == 1,
            N::RetryCount => self.set_retry_count(in_range(name, value, 0, U32_MAX)?)?,
            N::TransactionTimeout => {
                self.set_transaction_timeout(in_range(name, value, 0, U32_MAX)?)?
            }
            N::HealthSensitivity => self.set_health_sensitivity(in_range(
                name,
                value,
                0,
                i64::from(MAX_HEALTH_SENSITIVITY),
            )?)?,
            N::RecoveryInterval => self.recovery_interval = in_range(name, value, 0, U32_MAX)?,
            N::RouterSensitivity => self.router_sensitivity = in_range(name, value, 0, 100)?,
            N::ResponseTracking => {
                self.response_tracking =
                    ResponseTracking::try_from(value).map_err(|_| TunableError::OutOfRange {
                        name,
                        value,
                        min: 0,
                        max: 3,
                    })?
            }
            N::RecoveryLimit => self.recovery_limit = in_range(name, value, 0, U32_MAX)?,
            N::MaxRecoveryPingInterval => {
                self.max_recovery_ping_interval = in_range(name, value, 1, U32_MAX)?
            }
        }
        Ok(())
    }

    /// Sets `retry_count`: at most `transaction_timeout`, and 0 while `health_sensitivity`
    /// is 0.
    pub fn set_retry_count(&mut self, retry_count: u32) -> Result<(), TunableError> {
        if retry_count > 0 && self.health_sensitivity == 0 {
            return Err(TunableError::RetriesNeedHealth { retry_count });
        }
        if retry_count > self.transaction_timeout {
            return Err(TunableError::RetryCountAboveTransactionTimeout {
                retry_count,
                transaction_timeout: self.transaction_timeout,
            });
        }
        self.retry_count = retry_count;
        Ok(())
    }

    /// Sets `transaction_timeout` (seconds): not 0, and greater than `retry_count`.
    pub fn set_transaction_timeout(&mut self, seconds: u32) -> Result<(), TunableError> {
        if seconds == 0 {
            return Err(TunableError::OutOfRange {
                name: TunableName::TransactionTimeout,
                value: 0,
                min: 1,
                max: U32_MAX,
            });
        }
        if seconds <= self.retry_count {
            return Err(TunableError::TransactionTimeoutNotAboveRetryCount {
                transaction_timeout: seconds,
                retry_count: self.retry_count,
            });
        }
        self.transaction_timeout = seconds;
        Ok(())
    }

    /// Sets `health_sensitivity` (0..=1000). 0 turns health off and also sets
    /// `retry_count` to 0.
    pub fn set_health_sensitivity(&mut self, sensitivity: u32) -> Result<(), TunableError> {
        if sensitivity > MAX_HEALTH_SENSITIVITY {
            return Err(TunableError::OutOfRange {
                name: TunableName::HealthSensitivity,
                value: i64::from(sensitivity),
                min: 0,
                max: i64::from(MAX_HEALTH_SENSITIVITY),
            });
        }
        self.health_sensitivity = sensitivity;
        if sensitivity == 0 {
            self.retry_count = 0;
        }
        Ok(())
    }

    /// The value of a tunable as `lnetctl global show` prints it (booleans as 0/1).
    pub fn get(&self, name: TunableName) -> u32 {
        use TunableName as N;
        match name {
            N::TinyBuffers => self.tiny_buffers,
            N::SmallBuffers => self.small_buffers,
            N::LargeBuffers => self.large_buffers,
            N::Routing => u32::from(self.routing),
            N::NumaRange => self.numa_range,
            N::MaxInterfaces => self.max_interfaces,
            N::Discovery => u32::from(self.discovery),
            N::DropAsymRoute => u32::from(self.drop_asym_route),
            N::RetryCount => self.retry_count,
            N::TransactionTimeout => self.transaction_timeout,
            N::HealthSensitivity => self.health_sensitivity,
            N::RecoveryInterval => self.recovery_interval,
            N::RouterSensitivity => self.router_sensitivity,
            N::ResponseTracking => self.response_tracking.to_u32(),
            N::RecoveryLimit => self.recovery_limit,
            N::MaxRecoveryPingInterval => self.max_recovery_ping_interval,
        }
    }

    /// `retry_count`.
    pub const fn retry_count(&self) -> u32 {
        self.retry_count
    }

    /// `transaction_timeout`, in seconds.
    pub const fn transaction_timeout(&self) -> u32 {
        self.transaction_timeout
    }

    /// `health_sensitivity`; 0 means health is off.
    pub const fn health_sensitivity(&self) -> u32 {
        self.health_sensitivity
    }

    /// Whether health is on (`health_sensitivity > 0`).
    pub const fn health_enabled(&self) -> bool {
        self.health_sensitivity > 0
    }

    /// `response_tracking`.
    pub const fn response_tracking(&self) -> ResponseTracking {
        self.response_tracking
    }

    /// `recovery_limit`, in seconds; 0 means no limit.
    pub const fn recovery_limit(&self) -> u32 {
        self.recovery_limit
    }

    /// `max_recovery_ping_interval`, in seconds.
    pub const fn max_recovery_ping_interval(&self) -> u32 {
        self.max_recovery_ping_interval
    }

    /// `numa_range`.
    pub const fn numa_range(&self) -> u32 {
        self.numa_range
    }

    /// Whether routing is enabled.
    pub const fn routing(&self) -> bool {
        self.routing
    }

    /// Whether discovery is enabled.
    pub const fn discovery(&self) -> bool {
        self.discovery
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_global_show() {
        let t = Tunables::default();
        let shown: Vec<(TunableName, u32)> = [
            TunableName::NumaRange,
            TunableName::MaxInterfaces,
            TunableName::Discovery,
            TunableName::DropAsymRoute,
            TunableName::RetryCount,
            TunableName::TransactionTimeout,
            TunableName::HealthSensitivity,
            TunableName::RecoveryInterval,
            TunableName::RouterSensitivity,
            TunableName::ResponseTracking,
            TunableName::RecoveryLimit,
            TunableName::MaxRecoveryPingInterval,
        ]
        .into_iter()
        .map(|n| (n, t.get(n)))
        .collect();
        use TunableName as N;
        assert_eq!(
            shown,
            [
                (N::NumaRange, 0),
                (N::MaxInterfaces, 4096),
                (N::Discovery, 1),
                (N::DropAsymRoute, 0),
                (N::RetryCount, 2),
                (N::TransactionTimeout, 150),
                (N::HealthSensitivity, 100),
                (N::RecoveryInterval, 1),
                (N::RouterSensitivity, 100),
                (N::ResponseTracking, 3),
                (N::RecoveryLimit, 0),
                (N::MaxRecoveryPingInterval, 900),
            ]
        );
        assert_eq!(t.lnd_timeout(), 49);
        assert_eq!(t.max_recovery_ping_count(), 9);
        assert_eq!(t.get(N::TinyBuffers), 0);
        assert!(!t.routing());
    }

    #[test]
    fn names_parse_and_print() {
        for n in TunableName::ALL {
            assert_eq!(n.to_string().parse::<TunableName>(), Ok(n));
        }
        assert_eq!("max_intf".parse(), Ok(TunableName::MaxInterfaces));
        assert_eq!(
            "bogus".parse::<TunableName>(),
            Err(TunableError::UnknownName {
                name: "bogus".into()
            })
        );
    }

    #[test]
    fn cfg_015_retry_count_is_configurable_and_0_turns_retries_off() {
        let mut t = Tunables::default();
        assert_eq!(t.set(TunableName::RetryCount, 0), Ok(()));
        assert_eq!(t.retry_count(), 0);
        assert_eq!(t.set(TunableName::RetryCount, 5), Ok(()));
        assert_eq!(t.retry_count(), 5);
        assert!(matches!(
            t.set(TunableName::RetryCount, -1),
            Err(TunableError::OutOfRange { value: -1, .. })
        ));
        assert_eq!(
            t.set(TunableName::RetryCount, 151),
            Err(TunableError::RetryCountAboveTransactionTimeout {
                retry_count: 151,
                transaction_timeout: 150
            })
        );
        assert_eq!(t.set(TunableName::RetryCount, 150), Ok(()));
    }

    #[test]
    fn cfg_025_sensitivity_range_and_zero_turns_health_and_retries_off() {
        let mut t = Tunables::default();
        assert!(matches!(
            t.set(TunableName::HealthSensitivity, 1001),
            Err(TunableError::OutOfRange { max: 1000, .. })
        ));
        assert_eq!(t.set(TunableName::HealthSensitivity, 1000), Ok(()));
        assert_eq!(t.set(TunableName::HealthSensitivity, 0), Ok(()));
        assert!(!t.health_enabled());
        assert_eq!(t.retry_count(), 0);
        assert_eq!(
            t.set(TunableName::RetryCount, 1),
            Err(TunableError::RetriesNeedHealth { retry_count: 1 })
        );
        assert_eq!(t.set(TunableName::RetryCount, 0), Ok(()));
    }

    #[test]
    fn cfg_030_transaction_timeout_is_configurable() {
        let mut t = Tunables::default();
        assert_eq!(t.set(TunableName::TransactionTimeout, 10), Ok(()));
        assert_eq!(t.transaction_timeout(), 10);
        assert_eq!(t.lnd_timeout(), 3);
        assert!(matches!(
            t.set(TunableName::TransactionTimeout, 0),
            Err(TunableError::OutOfRange { min: 1, .. })
        ));
        assert_eq!(
            t.set(TunableName::TransactionTimeout, 2),
            Err(TunableError::TransactionTimeoutNotAboveRetryCount {
                transaction_timeout: 2,
                retry_count: 2
            })
        );
        assert_eq!(t.set(TunableName::TransactionTimeout, 3), Ok(()));
        assert_eq!(t.transaction_timeout(), 3);
    }

    #[test]
    fn lnt_070_transaction_timeout_default_is_the_kernels_150_s() {
        // The seed asked for 5 s; the kernel this router must match ships 150 s (reference 2.6
        // and the defaults observed on a kernel node), which is what we use.
        assert_eq!(Tunables::default().transaction_timeout(), 150);
        assert_eq!(DEFAULT_TRANSACTION_TIMEOUT, 150);
    }

    #[test]
    fn other_ranges() {
        let mut t = Tunables::default();
        use TunableName as N;
        for (name, bad) in [
            (N::Routing, 2),
            (N::Discovery, 2),
            (N::DropAsymRoute, -1),
            (N::RouterSensitivity, 101),
            (N::ResponseTracking, 4),
            (N::MaxRecoveryPingInterval, 0),
            (N::NumaRange, -1),
            (N::RecoveryLimit, U32_MAX + 1),
            (N::TinyBuffers, -5),
        ] {
            assert!(
                matches!(t.set(name, bad), Err(TunableError::OutOfRange { .. })),
                "{name} {bad}"
            );
        }
        assert_eq!(t.set(N::MaxInterfaces, 15), Ok(()));
        assert_eq!(t.get(N::MaxInterfaces), 4096);
        assert_eq!(t.set(N::MaxInterfaces, 16), Ok(()));
        assert_eq!(t.get(N::MaxInterfaces), 16);
        assert_eq!(t.set(N::ResponseTracking, 1), Ok(()));
        assert_eq!(t.response_tracking(), ResponseTracking::Gets);
        assert_eq!(t.set(N::MaxRecoveryPingInterval, 60), Ok(()));
        assert_eq!(t.max_recovery_ping_count(), 5);
        assert_eq!(t.set(N::Routing, 1), Ok(()));
        assert!(t.routing());
        assert_eq!(t.set(N::Discovery, 0), Ok(()));
        assert!(!t.discovery());
        assert_eq!(t.set(N::RecoveryLimit, 30), Ok(()));
        assert_eq!(t.recovery_limit(), 30);
        assert_eq!(t.set(N::NumaRange, 20), Ok(()));
        assert_eq!(t.numa_range(), 20);
    }
}
