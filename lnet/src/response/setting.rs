//! The `lnet_response_tracking` setting (health reference 2.3): which requests are
//! tracked, as the value `lnetctl set response_tracking` takes.

/// The `lnet_response_tracking` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum ResponseTracking {
    /// 0: only LNet pings and discovery pushes.
    PingsOnly = 0,
    /// 1: GETs (and pings and pushes).
    Gets = 1,
    /// 2: PUTs (and pings and pushes).
    Puts = 2,
    /// 3: GETs and PUTs (the default).
    #[default]
    Both = 3,
}

/// A `response_tracking` value outside 0..=3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResponseTrackingError {
    /// The value is not one of 0, 1, 2, 3.
    #[error("response_tracking {value} is not in 0..=3")]
    OutOfRange {
        /// The value given.
        value: i64,
    },
}

impl ResponseTracking {
    /// The numeric setting (0..=3).
    pub const fn to_u32(self) -> u32 {
        self as u32
    }
}

impl TryFrom<i64> for ResponseTracking {
    type Error = ResponseTrackingError;

    fn try_from(value: i64) -> Result<ResponseTracking, ResponseTrackingError> {
        match value {
            0 => Ok(ResponseTracking::PingsOnly),
            1 => Ok(ResponseTracking::Gets),
            2 => Ok(ResponseTracking::Puts),
            3 => Ok(ResponseTracking::Both),
            _ => Err(ResponseTrackingError::OutOfRange { value }),
        }
    }
}
