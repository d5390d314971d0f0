//! socklnd connection types.
//!
//! Each TCP connection to a peer has a type, seen from its owner's end. The active side
//! names its type in its HELLO; the passive side answers with the inverted type (what the
//! same connection is from its end), or with [`ConnType::None`] to refuse.

/// The type of a socklnd connection (`SOCKLND_CONN_*`), from the point of view of the
/// side that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnType {
    /// −1 (`0xFFFFFFFF`): only in a HELLO reply; the connection is refused ("retry").
    None,
    /// 0: untyped. Carries no traffic under V3/V4.
    Any,
    /// 1: small messages.
    Control,
    /// 2: I receive bulk on it and send only NOOPs (ZC-ACKs, keepalives). Alias `ACK`.
    BulkIn,
    /// 3: I send bulk on it.
    BulkOut,
}

impl ConnType {
    /// The wire value as a signed integer (−1 for [`ConnType::None`]).
    pub const fn to_i32(self) -> i32 {
        match self {
            ConnType::None => -1,
            ConnType::Any => 0,
            ConnType::Control => 1,
            ConnType::BulkIn => 2,
            ConnType::BulkOut => 3,
        }
    }

    /// The wire value as the u32 field of the HELLO (`0xFFFFFFFF` for [`ConnType::None`]).
    pub const fn to_u32(self) -> u32 {
        self.to_i32() as u32
    }

    /// The type for a wire value, if it is one of the five.
    pub const fn from_u32(value: u32) -> Option<ConnType> {
        match value {
            0xFFFF_FFFF => Some(ConnType::None),
            0 => Some(ConnType::Any),
            1 => Some(ConnType::Control),
            2 => Some(ConnType::BulkIn),
            3 => Some(ConnType::BulkOut),
            _ => None,
        }
    }

    /// The same connection seen from the other end: BULK_IN and BULK_OUT swap, the
    /// others stay as they are.
    pub const fn invert(self) -> ConnType {
        match self {
            ConnType::BulkIn => ConnType::BulkOut,
            ConnType::BulkOut => ConnType::BulkIn,
            other => other,
        }
    }

    /// Whether a connection request may carry this type (everything but NONE).
    pub const fn is_requestable(self) -> bool {
        !matches!(self, ConnType::None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ConnType; 5] = [
        ConnType::None,
        ConnType::Any,
        ConnType::Control,
        ConnType::BulkIn,
        ConnType::BulkOut,
    ];

    #[test]
    fn values_and_inversion() {
        assert_eq!(ConnType::None.to_u32(), 0xFFFF_FFFF);
        assert_eq!(ConnType::None.to_i32(), -1);
        assert_eq!(ConnType::BulkOut.to_u32(), 3);
        assert_eq!(ConnType::Control.invert(), ConnType::Control);
        assert_eq!(ConnType::Any.invert(), ConnType::Any);
        assert_eq!(ConnType::BulkIn.invert(), ConnType::BulkOut);
        assert_eq!(ConnType::BulkOut.invert(), ConnType::BulkIn);
        assert_eq!(ConnType::None.invert(), ConnType::None);
        for t in ALL {
            assert_eq!(ConnType::from_u32(t.to_u32()), Some(t));
            assert_eq!(t.invert().invert(), t);
        }
        assert_eq!(ConnType::from_u32(4), None);
        assert_eq!(ConnType::from_u32(0xFFFF_FFFE), None);
        assert!(!ConnType::None.is_requestable());
        assert!(ConnType::Any.is_requestable());
    }
}
