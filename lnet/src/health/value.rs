//! The health value of a local NI or a peer NI, and its arithmetic (health reference 2.1,
//! 2.2 and 2.4).
//!
//! Every NI and peer NI starts at [`LNET_MAX_HEALTH_VALUE`] (1000, fully healthy). A failure
//! lowers it by `health_sensitivity`, never below 0; a success raises it by
//! `health_sensitivity`, never above 1000. A `health_sensitivity` of 0 turns health off:
//! nothing goes down (and nothing goes up by increments either). Routers and routing nodes
//! restore a peer NI straight to 1000 instead of incrementing (the message-status rules
//! decide which).

use std::fmt;

/// The largest (and initial) health value (`LNET_MAX_HEALTH_VALUE`).
pub const LNET_MAX_HEALTH_VALUE: u32 = 1000;

/// A health value that was out of range (`lnetctl net set --health` / `peer set --health`
/// accept 0..=1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HealthValueError {
    /// The value is above [`LNET_MAX_HEALTH_VALUE`].
    #[error("health value {value} is above the maximum {max}")]
    AboveMax {
        /// The value given.
        value: u32,
        /// The largest value allowed.
        max: u32,
    },
}

/// A health value, always in `0..=1000`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HealthValue(u32);

impl HealthValue {
    /// Fully healthy: 1000, the value every NI and peer NI starts with.
    pub const MAX: HealthValue = HealthValue(LNET_MAX_HEALTH_VALUE);
    /// No health left. A local NI at 0 is shown DOWN.
    pub const ZERO: HealthValue = HealthValue(0);

    /// A health value from a number; values above 1000 are refused.
    pub const fn new(value: u32) -> Result<HealthValue, HealthValueError> {
        if value > LNET_MAX_HEALTH_VALUE {
            Err(HealthValueError::AboveMax {
                value,
                max: LNET_MAX_HEALTH_VALUE,
            })
        } else {
            Ok(HealthValue(value))
        }
    }

    /// A health value from a number, clamped to 1000.
    pub const fn clamped(value: u32) -> HealthValue {
        if value > LNET_MAX_HEALTH_VALUE {
            HealthValue::MAX
        } else {
            HealthValue(value)
        }
    }

    /// The number.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// Whether this is 1000 (an NI at 1000 leaves its recovery queue).
    pub const fn is_max(self) -> bool {
        self.0 >= LNET_MAX_HEALTH_VALUE
    }

    /// Whether this is 0 (a local NI at 0 goes DOWN).
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// After a failure: `max(0, health − sensitivity)`. A sensitivity of 0 changes nothing.
    #[must_use]
    pub const fn decremented(self, sensitivity: u32) -> HealthValue {
        HealthValue(self.0.saturating_sub(sensitivity))
    }

    /// After a success: `min(1000, health + sensitivity)`.
    #[must_use]
    pub const fn incremented(self, sensitivity: u32) -> HealthValue {
        HealthValue::clamped(self.0.saturating_add(sensitivity))
    }
}

impl Default for HealthValue {
    /// Fully healthy (1000).
    fn default() -> HealthValue {
        HealthValue::MAX
    }
}

impl TryFrom<u32> for HealthValue {
    type Error = HealthValueError;

    fn try_from(value: u32) -> Result<HealthValue, HealthValueError> {
        HealthValue::new(value)
    }
}

impl From<HealthValue> for u32 {
    fn from(value: HealthValue) -> u32 {
        value.get()
    }
}

impl fmt::Display for HealthValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lnt_005_lnt_010_every_ni_starts_fully_healthy() {
        // One value type serves local NIs (lnt-005) and peer NIs (lnt-010); both start at 1000.
        assert_eq!(HealthValue::default(), HealthValue::MAX);
        assert_eq!(HealthValue::MAX.get(), 1000);
        assert!(HealthValue::MAX.is_max());
    }

    #[test]
    fn lnt_015_health_is_between_0_and_1000() {
        assert_eq!(HealthValue::new(0), Ok(HealthValue::ZERO));
        assert_eq!(HealthValue::new(1000), Ok(HealthValue::MAX));
        assert_eq!(
            HealthValue::new(1001),
            Err(HealthValueError::AboveMax {
                value: 1001,
                max: 1000
            })
        );
        assert_eq!(HealthValue::clamped(5000), HealthValue::MAX);
        assert_eq!(HealthValue::try_from(900).map(u32::from), Ok(900));
    }

    #[test]
    fn lnt_020_decrement_by_sensitivity_floor_zero() {
        let h = HealthValue::MAX.decremented(100);
        assert_eq!(h.get(), 900);
        assert_eq!(HealthValue::clamped(50).decremented(100), HealthValue::ZERO);
        assert!(HealthValue::clamped(50).decremented(100).is_zero());
    }

    #[test]
    fn lnt_025_increment_never_beyond_1000() {
        assert_eq!(HealthValue::clamped(950).incremented(100), HealthValue::MAX);
        assert_eq!(HealthValue::clamped(800).incremented(100).get(), 900);
        assert_eq!(HealthValue::MAX.incremented(u32::MAX), HealthValue::MAX);
    }

    #[test]
    fn cfg_025_sensitivity_zero_never_decrements() {
        let mut h = HealthValue::MAX;
        for _ in 0..100 {
            h = h.decremented(0);
        }
        assert_eq!(h, HealthValue::MAX);
    }

    #[test]
    fn ten_failures_at_sensitivity_100_take_an_ni_from_1000_to_0() {
        let mut h = HealthValue::MAX;
        let mut seen = Vec::new();
        for _ in 0..10 {
            assert!(!h.is_zero());
            h = h.decremented(100);
            seen.push(h.get());
        }
        assert_eq!(seen, [900, 800, 700, 600, 500, 400, 300, 200, 100, 0]);
        assert!(h.is_zero());
        // An eleventh failure stays at the floor.
        assert_eq!(h.decremented(100), HealthValue::ZERO);
        // And ten successes bring it back.
        for _ in 0..10 {
            h = h.incremented(100);
        }
        assert!(h.is_max());
    }

    proptest! {
        #[test]
        fn health_stays_in_range(start in 0u32..=1000, steps in proptest::collection::vec((any::<bool>(), 0u32..=2000), 0..64)) {
            let mut h = HealthValue::clamped(start);
            for (up, sens) in steps {
                let before = h;
                h = if up { h.incremented(sens) } else { h.decremented(sens) };
                prop_assert!(h.get() <= LNET_MAX_HEALTH_VALUE);
                if up { prop_assert!(h >= before) } else { prop_assert!(h <= before) }
            }
        }
    }
}
