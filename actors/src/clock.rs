//! The clock the actors read: tokio's, so that tests can pause it and step it.
//!
//! The rules in `lnet` take time as an argument ([`Millis`]); [`Clock::now`] is where
//! the actors get that argument. It counts milliseconds since the clock was made, on
//! tokio's monotonic clock (`tokio::time::pause` freezes it; `advance` moves it).

use lnet::time::Millis;
use tokio::time::Instant;

/// Milliseconds since this clock's origin, on tokio's clock.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: Instant,
}

impl Clock {
    /// A clock whose origin is now.
    pub fn new() -> Clock {
        Clock {
            origin: Instant::now(),
        }
    }

    /// Now, as [`Millis`] since the origin.
    pub fn now(&self) -> Millis {
        let ms = Instant::now().duration_since(self.origin).as_millis();
        Millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    /// Nanoseconds since the origin, for latencies below a millisecond.
    pub fn nanos(&self) -> u64 {
        let ns = Instant::now().duration_since(self.origin).as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// `t` as [`Millis`] since the origin (the origin if before it).
    pub fn at(&self, t: Instant) -> Millis {
        let ms = t.saturating_duration_since(self.origin).as_millis();
        Millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    /// How long from now until `at` (zero if it has passed).
    pub fn until(&self, at: Millis) -> std::time::Duration {
        std::time::Duration::from_millis(at.saturating_sub(self.now()).as_millis())
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn the_clock_follows_tokio_time() {
        let clock = Clock::new();
        assert_eq!(clock.now(), Millis::ZERO);
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(clock.now(), Millis(1500));
        assert_eq!(clock.until(Millis(2000)), Duration::from_millis(500));
        assert_eq!(clock.until(Millis(1000)), Duration::ZERO);
        assert_eq!(clock.at(Instant::now()), Millis(1500));
        assert_eq!(
            clock.at(Instant::now() - Duration::from_secs(9)),
            Millis::ZERO
        );
        // Whole milliseconds, the part of one left out.
        let later = Instant::now() + Duration::from_nanos(2_000_999_999);
        assert_eq!(clock.at(later), Millis(3500));
        assert_eq!(clock.at(later + Duration::from_nanos(1)), Millis(3501));
    }
}
