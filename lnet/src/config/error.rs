//! Errors of the configuration model: parse errors with a position, validation errors
//! naming the field.

use std::fmt;

use crate::nid::{Net, Nid, NidError};
use crate::tunables::TunableError;

/// A position in the YAML text, 1-based. Line 0 means the parser did not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Position {
    /// The line, from 1.
    pub line: u64,
    /// The column, from 1.
    pub column: u64,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            f.write_str("at an unknown position")
        } else {
            write!(f, "line {}, column {}", self.line, self.column)
        }
    }
}

/// Why a YAML document could not be read into a [`Config`](super::Config).
///
/// `field` is the path of the value, such as `route[1].gateway` or
/// `net[0].local NI(s)[0].nid`; `key` is the bare key as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The text is not well-formed YAML, or has a shape no key explains.
    #[error("{at}: YAML error: {message}")]
    Syntax {
        /// What the parser said.
        message: String,
        /// Where.
        at: Position,
    },
    /// A key that this section does not have.
    #[error("{at}: unknown key `{key}` (expected one of: {})", expected.join(", "))]
    UnknownKey {
        /// The key as written.
        key: String,
        /// The keys the section has.
        expected: Vec<String>,
        /// Where.
        at: Position,
    },
    /// A key the section needs is absent.
    #[error("{at}: missing key `{key}`")]
    MissingKey {
        /// The missing key.
        key: String,
        /// The mapping that lacks it.
        at: Position,
    },
    /// A key is given twice in one mapping.
    #[error("{at}: duplicate key `{key}`")]
    DuplicateKey {
        /// The repeated key.
        key: String,
        /// Where.
        at: Position,
    },
    /// A value of the wrong YAML type (a string where a number goes, a map for a list ...),
    /// or a number the key does not take (`routing: enable: 7`).
    #[error("{at}: wrong type: expected {expected}, found {found}")]
    WrongType {
        /// What the key takes.
        expected: String,
        /// What was there.
        found: String,
        /// Where.
        at: Position,
    },
    /// A NID that does not parse.
    #[error("{at}: {field}: invalid NID {value:?}: {source}")]
    InvalidNid {
        /// The field.
        field: String,
        /// The text given.
        value: String,
        /// Why (boxed to keep the error small).
        source: Box<NidError>,
        /// Where.
        at: Position,
    },
    /// A net that does not parse.
    #[error("{at}: {field}: invalid net {value:?}: {source}")]
    InvalidNet {
        /// The field.
        field: String,
        /// The text given.
        value: String,
        /// Why (boxed to keep the error small).
        source: Box<NidError>,
        /// Where.
        at: Position,
    },
    /// A value outside the set the field takes.
    #[error("{at}: {field}: invalid value {value:?}: expected {expected}")]
    InvalidValue {
        /// The field.
        field: String,
        /// The value given.
        value: String,
        /// What the field takes.
        expected: &'static str,
        /// Where.
        at: Position,
    },
    /// A global tunable outside its range (the rules of `lnetctl set`).
    #[error("{at}: {field}: {source}")]
    Tunable {
        /// The field.
        field: String,
        /// The range error.
        source: TunableError,
        /// Where.
        at: Position,
    },
}

impl ConfigError {
    /// Where in the text the error is.
    pub fn position(&self) -> Position {
        match self {
            ConfigError::Syntax { at, .. }
            | ConfigError::UnknownKey { at, .. }
            | ConfigError::MissingKey { at, .. }
            | ConfigError::DuplicateKey { at, .. }
            | ConfigError::WrongType { at, .. }
            | ConfigError::InvalidNid { at, .. }
            | ConfigError::InvalidNet { at, .. }
            | ConfigError::InvalidValue { at, .. }
            | ConfigError::Tunable { at, .. } => *at,
        }
    }
}

impl ValidationError {
    /// The path of the offending value, such as `route[0].gateway`.
    pub fn field(&self) -> &str {
        match self {
            ValidationError::DuplicatePeerNid { field, .. }
            | ValidationError::DuplicateLocalNid { field, .. }
            | ValidationError::DuplicateNet { field, .. }
            | ValidationError::NidNotOnNet { field, .. }
            | ValidationError::RouteToLocalNet { field, .. }
            | ValidationError::GatewayNotOnLocalNet { field, .. }
            | ValidationError::GatewayOnRouteNet { field, .. }
            | ValidationError::DuplicateRoute { field, .. }
            | ValidationError::HopOutOfRange { field, .. }
            | ValidationError::HealthSensitivityOutOfRange { field, .. }
            | ValidationError::Tunable { field, .. }
            | ValidationError::AcceptorPortZero { field } => field,
        }
    }
}

/// A relation between values of a parsed [`Config`](super::Config) that LNet refuses.
/// `field` is the path of the offending value, such as `route[0].gateway`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// The same NID under two peers, or twice in one peer (cfg-080, snd-065).
    #[error("{field}: NID {nid} is already configured at {first_field}")]
    DuplicatePeerNid {
        /// The second occurrence.
        field: String,
        /// The NID.
        nid: Nid,
        /// The first occurrence.
        first_field: String,
    },
    /// The same NID on two local NIs.
    #[error("{field}: local NID {nid} is already configured at {first_field}")]
    DuplicateLocalNid {
        /// The second occurrence.
        field: String,
        /// The NID.
        nid: Nid,
        /// The first occurrence.
        first_field: String,
    },
    /// The same net listed twice under `net:`.
    #[error("{field}: net {net} is already configured at {first_field}")]
    DuplicateNet {
        /// The second occurrence.
        field: String,
        /// The net.
        net: Net,
        /// The first occurrence.
        first_field: String,
    },
    /// A local NI whose NID is on another net than its `net type`.
    #[error("{field}: NID {nid} is not on net {net}")]
    NidNotOnNet {
        /// The NI's `nid` field.
        field: String,
        /// The NID.
        nid: Nid,
        /// The `net type` it is listed under.
        net: Net,
    },
    /// A route to a net this node is on.
    #[error("{field}: {net} is a local net; a route to it is not allowed")]
    RouteToLocalNet {
        /// The route's `net` field.
        field: String,
        /// The net.
        net: Net,
    },
    /// A gateway that is not on any local net.
    #[error("{field}: gateway {gateway} is not on a local net")]
    GatewayNotOnLocalNet {
        /// The route's `gateway` field.
        field: String,
        /// The gateway.
        gateway: Nid,
    },
    /// A gateway on the net the route leads to.
    #[error("{field}: gateway {gateway} is on the route's own net {net}")]
    GatewayOnRouteNet {
        /// The route's `gateway` field.
        field: String,
        /// The gateway.
        gateway: Nid,
        /// The route's net.
        net: Net,
    },
    /// The same net and gateway twice.
    #[error("{field}: route to {net} via {gateway} is already configured at {first_field}")]
    DuplicateRoute {
        /// The second occurrence.
        field: String,
        /// The net.
        net: Net,
        /// The gateway.
        gateway: Nid,
        /// The first occurrence.
        first_field: String,
    },
    /// A hop count outside 1..=255 that is not -1 (undefined).
    #[error("{field}: hop {hop} is outside 1..=255 (or -1 for undefined)")]
    HopOutOfRange {
        /// The route's `hop` field.
        field: String,
        /// The value.
        hop: i64,
    },
    /// A route health sensitivity above 1000.
    #[error("{field}: health sensitivity {value} is outside 0..=1000")]
    HealthSensitivityOutOfRange {
        /// The field.
        field: String,
        /// The value.
        value: u32,
    },
    /// A global tunable refused by the rules of `lnetctl set` (reference 2.10).
    #[error("{field}: {source}")]
    Tunable {
        /// The section (`global`, `buffers`, `routing`).
        field: String,
        /// The refusal.
        source: TunableError,
    },
    /// `acceptor_port: 0`.
    #[error("{field}: port 0 cannot be listened on")]
    AcceptorPortZero {
        /// The field.
        field: String,
    },
}
