//! Time as a plain number: [`Millis`], milliseconds on a monotonic clock the caller owns.
//!
//! The rules in this crate never read a clock. Whoever applies them (an actor, a test)
//! passes "now" in as a [`Millis`]; durations are [`Millis`] too. Arithmetic saturates, so
//! no deadline computation can overflow or panic.

use std::fmt;

/// A point in time or a duration, in milliseconds on the caller's monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Millis(pub u64);

impl Millis {
    /// Zero: the clock's origin, or an empty duration.
    pub const ZERO: Millis = Millis(0);

    /// `ms` milliseconds.
    pub const fn from_millis(ms: u64) -> Millis {
        Millis(ms)
    }

    /// `secs` seconds (saturating at `u64::MAX` milliseconds).
    pub const fn from_secs(secs: u64) -> Millis {
        Millis(secs.saturating_mul(1000))
    }

    /// The value in milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// The value in whole seconds (rounded down).
    pub const fn as_secs(self) -> u64 {
        self.0 / 1000
    }

    /// `self + other`, saturating.
    pub const fn saturating_add(self, other: Millis) -> Millis {
        Millis(self.0.saturating_add(other.0))
    }

    /// `self - other`, saturating at zero.
    pub const fn saturating_sub(self, other: Millis) -> Millis {
        Millis(self.0.saturating_sub(other.0))
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Millis::from_secs(2), Millis(2000));
        assert_eq!(Millis::from_secs(u64::MAX), Millis(u64::MAX));
        assert_eq!(Millis(5).saturating_sub(Millis(7)), Millis::ZERO);
        assert_eq!(Millis(u64::MAX).saturating_add(Millis(1)), Millis(u64::MAX));
        assert_eq!(Millis(2999).as_secs(), 2);
        assert_eq!(Millis(7).to_string(), "7ms");
    }
}
