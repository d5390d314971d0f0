//! NID and net expressions, the descriptors of UDSP rules (reference Part 3): a net
//! expression such as `tcp`, `o2ib1`, `o2ib[1-3]` or `tcp*`, or a NID-range expression
//! `ADDR@NET` such as `10.0.0.[1-20]@o2ib1`, `*.*.*.*@tcp` or `[1-3]@gni`.
//!
//! The syntax is the one `lnetctl udsp add` accepts (its parser lives in libcfs'
//! user-space nidstrings, `cfs_parse_nid_parts`):
//!
//! ```text
//! expr     := net | addr '@' net          (split at the first '@')
//! net      := LND-name [ numexpr ]        (no number: network 0 only)
//! addr     := numexpr '.' numexpr '.' numexpr '.' numexpr   (IP LNDs: tcp, o2ib, gip, efa)
//!           | numexpr                                       (numeric LNDs: gni, kfi, ptlf, bxi3f, lo)
//! numexpr  := '*' | number | '[' item { ',' item } ']'
//! item     := '*' | number | number '-' number [ '/' number ]
//! number   := decimal | 0x-hex | 0-octal  (as C's strtoul with base 0)
//! ```
//!
//! A range `a-b` or `a-b/step` is only allowed inside brackets. An IPv4 part is at most
//! 255, a numeric address at most `u32::MAX`, a net number at most 65535.
//!
//! Where this parser differs from lnetctl's, it is on purpose:
//!
//! * `*@tcp` (a lone `*` for the whole address of an IP LND, as ip2nets and nidlists
//!   write it) is accepted and means `*.*.*.*@tcp`; lnetctl's UDSP parser wants four parts
//!   there. It prints back as `*.*.*.*@tcp`, which both accept.
//! * A step of 0 is refused (the C parser takes it, and matching then divides by zero).
//! * Text between the LND name and a `[` (`tcpfoo[1]`, which the C parser skips over),
//!   surrounding white space, and net numbers above 65535 (which no net has) are refused.
//!
//! Parsing is pure, bounded (at most [`MAX_ITEMS`] items per list and [`MAX_TEXT`] bytes of
//! text) and never panics; each error names the expression and what is wrong in it.

use std::fmt;

use crate::nid::{AddrForm, LndType, Net, NidAddr};
use crate::Nid;

/// Most items in one bracketed list.
pub const MAX_ITEMS: usize = 64;
/// Longest expression accepted, in bytes.
pub const MAX_TEXT: usize = 256;

/// The largest net number (the low 16 bits of a net id).
const MAX_NET_NUM: u32 = u16::MAX as u32;

/// Why an expression was refused. Every variant but [`Empty`](Self::Empty) and
/// [`TooLong`](Self::TooLong) carries the whole expression as `text`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NidExprError {
    /// Nothing was given.
    #[error("empty expression")]
    Empty,
    /// Longer than [`MAX_TEXT`].
    #[error("expression of {len} bytes is longer than {max}")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The net part does not start with a known LND name.
    #[error("{text:?}: {net:?} is not a net expression (an LND name such as tcp or o2ib, then nothing, a number, * or a [list])")]
    UnknownNet {
        /// The expression.
        text: String,
        /// Its net part.
        net: String,
    },
    /// The address part is empty (`@tcp`).
    #[error("{text:?}: nothing before '@'")]
    EmptyAddress {
        /// The expression.
        text: String,
    },
    /// A number, range, step or list is malformed.
    #[error("{text:?}: bad {what} {part:?}")]
    BadPart {
        /// The expression.
        text: String,
        /// Which place: `net number`, `address part`, `list item`, `step`, ...
        what: &'static str,
        /// The offending text.
        part: String,
    },
    /// A range whose start is above its end (`[5-1]`).
    #[error("{text:?}: {what} range {part:?} starts above its end")]
    Reversed {
        /// The expression.
        text: String,
        /// Which place.
        what: &'static str,
        /// The range as written.
        part: String,
    },
    /// A number above what its place allows (255 for an IPv4 part).
    #[error("{text:?}: {what} {number} is above {max}")]
    OutOfRange {
        /// The expression.
        text: String,
        /// Which place: `net number`, `address part`, `step`.
        what: &'static str,
        /// The number as written.
        number: String,
        /// The largest allowed.
        max: u32,
    },
    /// A bracketed list has more than [`MAX_ITEMS`] items.
    #[error("{text:?}: a {what} list of more than {max} items")]
    TooManyItems {
        /// The expression.
        text: String,
        /// Which place.
        what: &'static str,
        /// The limit.
        max: usize,
    },
    /// The address has the wrong number of dot-separated parts for the LND (4 for IP
    /// LNDs, 1 for numeric ones).
    #[error("{text:?}: {found} address part(s), but {lnd} addresses have {expected}")]
    AddressParts {
        /// The expression.
        text: String,
        /// The LND's name.
        lnd: &'static str,
        /// Parts given.
        found: usize,
        /// Parts the LND's addresses have.
        expected: usize,
    },
}

/// One item of a list: `lo..=hi`, every `step`-th value from `lo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    lo: u32,
    hi: u32,
    step: u32,
}

impl Span {
    fn contains(self, v: u32) -> bool {
        // `step` is never 0 (refused when parsing).
        v >= self.lo && v <= self.hi && (v - self.lo).checked_rem(self.step) == Some(0)
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else if self.step == 1 {
            write!(f, "{}-{}", self.lo, self.hi)
        } else {
            write!(f, "{}-{}/{}", self.lo, self.hi, self.step)
        }
    }
}

/// A number expression: one or more spans, each value at most `max`. `*` is the span
/// `0..=max`, as in the C parser, so `*` and `[0-255]` are the same expression.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NumExpr {
    spans: Vec<Span>,
    max: u32,
}

/// What the parser is reading, for error messages, and its bound.
#[derive(Clone, Copy)]
struct Place {
    what: &'static str,
    max: u32,
}

const NET_NUMBER: Place = Place {
    what: "net number",
    max: MAX_NET_NUM,
};
const IP_PART: Place = Place {
    what: "address part",
    max: 255,
};
const NUMERIC_ADDR: Place = Place {
    what: "address",
    max: u32::MAX,
};

/// Parses one number as C's `strtoul(s, _, 0)` reads it, whole: `0x`/`0X` hex, a leading
/// `0` octal, else decimal.
fn parse_number(text: &str, s: &str, place: Place) -> Result<u32, NidExprError> {
    let bad = || NidExprError::BadPart {
        text: text.to_owned(),
        what: place.what,
        part: s.to_owned(),
    };
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if let Some(o) = s.strip_prefix('0').filter(|o| !o.is_empty()) {
        (o, 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(bad());
    }
    let mut value: u64 = 0;
    for c in digits.chars() {
        let d = u64::from(c.to_digit(radix).ok_or_else(bad)?);
        value = value.saturating_mul(u64::from(radix)).saturating_add(d);
    }
    match u32::try_from(value) {
        Ok(v) if v <= place.max => Ok(v),
        _ => Err(NidExprError::OutOfRange {
            text: text.to_owned(),
            what: place.what,
            number: s.to_owned(),
            max: place.max,
        }),
    }
}

impl NumExpr {
    fn any(max: u32) -> NumExpr {
        NumExpr {
            spans: vec![Span {
                lo: 0,
                hi: max,
                step: 1,
            }],
            max,
        }
    }

    fn is_any(&self) -> bool {
        self.spans
            .iter()
            .any(|s| s.lo == 0 && s.hi == self.max && s.step == 1)
    }

    fn contains(&self, v: u32) -> bool {
        self.spans.iter().any(|s| s.contains(v))
    }

    /// Parses `*`, `N` or `[items]`.
    fn parse(text: &str, part: &str, place: Place) -> Result<NumExpr, NidExprError> {
        if part == "*" {
            return Ok(NumExpr::any(place.max));
        }
        let Some(inner) = part.strip_prefix('[').and_then(|p| p.strip_suffix(']')) else {
            let v = parse_number(text, part, place)?;
            return Ok(NumExpr {
                spans: vec![Span {
                    lo: v,
                    hi: v,
                    step: 1,
                }],
                max: place.max,
            });
        };
        let mut spans = Vec::new();
        for item in inner.split(',') {
            if spans.len() == MAX_ITEMS {
                return Err(NidExprError::TooManyItems {
                    text: text.to_owned(),
                    what: place.what,
                    max: MAX_ITEMS,
                });
            }
            spans.push(Self::item(text, item, place)?);
        }
        Ok(NumExpr {
            spans,
            max: place.max,
        })
    }

    /// One list item: `*`, `a`, `a-b` or `a-b/step`.
    fn item(text: &str, item: &str, place: Place) -> Result<Span, NidExprError> {
        if item == "*" {
            return Ok(Span {
                lo: 0,
                hi: place.max,
                step: 1,
            });
        }
        if item.is_empty() {
            return Err(NidExprError::BadPart {
                text: text.to_owned(),
                what: "list item",
                part: item.to_owned(),
            });
        }
        let Some((lo, rest)) = item.split_once('-') else {
            let v = parse_number(text, item, place)?;
            return Ok(Span {
                lo: v,
                hi: v,
                step: 1,
            });
        };
        let (hi, step) = match rest.split_once('/') {
            Some((hi, step)) => {
                let step_place = Place {
                    what: "step",
                    max: place.max,
                };
                (hi, Some(parse_number(text, step, step_place)?))
            }
            None => (rest, None),
        };
        let lo = parse_number(text, lo, place)?;
        let hi = parse_number(text, hi, place)?;
        if lo > hi {
            return Err(NidExprError::Reversed {
                text: text.to_owned(),
                what: place.what,
                part: item.to_owned(),
            });
        }
        let step = match step {
            Some(0) => {
                return Err(NidExprError::BadPart {
                    text: text.to_owned(),
                    what: "step (0)",
                    part: item.to_owned(),
                })
            }
            Some(s) if lo < hi => s,
            _ => 1,
        };
        Ok(Span { lo, hi, step })
    }
}

impl fmt::Display for NumExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.spans.as_slice() {
            [one] if one.lo == 0 && one.hi == self.max && one.step == 1 => f.write_str("*"),
            [one] if one.lo == one.hi => write!(f, "{}", one.lo),
            spans => {
                f.write_str("[")?;
                for (i, s) in spans.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{s}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// A net expression: an LND and which of its network numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetExpr {
    lnd: LndType,
    /// `None`: no number was written, which names network 0 only (`tcp`).
    nums: Option<NumExpr>,
}

impl NetExpr {
    /// Whether `net` is one of the nets this expression names.
    pub fn matches(&self, net: Net) -> bool {
        net.lnd == self.lnd
            && match &self.nums {
                None => net.num == 0,
                Some(n) => n.contains(u32::from(net.num)),
            }
    }

    /// The LND of the nets named.
    pub fn lnd(&self) -> LndType {
        self.lnd
    }

    fn parse(text: &str, net: &str) -> Result<NetExpr, NidExprError> {
        let unknown = || NidExprError::UnknownNet {
            text: text.to_owned(),
            net: net.to_owned(),
        };
        // The longest LND name the text starts with (no name is a prefix of another
        // today; the C parser takes the first in its table).
        let (lnd, name) = LndType::named()
            .filter_map(|t| t.name().map(|n| (t, n)))
            .filter(|(_, n)| net.starts_with(n))
            .max_by_key(|(_, n)| n.len())
            .ok_or_else(unknown)?;
        let rest = net.get(name.len()..).unwrap_or("");
        if rest.is_empty() {
            return Ok(NetExpr { lnd, nums: None });
        }
        let nums = NumExpr::parse(text, rest, NET_NUMBER)?;
        Ok(NetExpr {
            lnd,
            nums: Some(nums),
        })
    }
}

impl fmt::Display for NetExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.lnd.name() {
            Some(name) => f.write_str(name)?,
            None => write!(f, "<{}>", self.lnd.0)?,
        }
        match &self.nums {
            None => Ok(()),
            Some(n) => write!(f, "{n}"),
        }
    }
}

/// A parsed UDSP descriptor: a net expression (a *net rule*), or a NID-range expression
/// (an address part, `@`, a net part).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NidExpr {
    /// The address parts (4 for IP LNDs, 1 for numeric ones); `None` for a net rule.
    addr: Option<Vec<NumExpr>>,
    net: NetExpr,
}

impl NidExpr {
    /// Parses an expression; see the module documentation for the syntax.
    pub fn parse(text: &str) -> Result<NidExpr, NidExprError> {
        if text.is_empty() {
            return Err(NidExprError::Empty);
        }
        if text.len() > MAX_TEXT {
            return Err(NidExprError::TooLong {
                len: text.len(),
                max: MAX_TEXT,
            });
        }
        let Some((addr, net)) = text.split_once('@') else {
            return Ok(NidExpr {
                addr: None,
                net: NetExpr::parse(text, text)?,
            });
        };
        if addr.is_empty() {
            return Err(NidExprError::EmptyAddress {
                text: text.to_owned(),
            });
        }
        let net = NetExpr::parse(text, net)?;
        let (expected, place) = match net.lnd.addr_form() {
            Some(AddrForm::Ip) => (4, IP_PART),
            _ => (1, NUMERIC_ADDR),
        };
        if addr == "*" {
            return Ok(NidExpr {
                addr: Some(vec![NumExpr::any(place.max); expected]),
                net,
            });
        }
        let parts: Vec<&str> = addr.splitn(expected.saturating_add(1), '.').collect();
        if parts.len() != expected {
            return Err(NidExprError::AddressParts {
                text: text.to_owned(),
                lnd: net.lnd.name().unwrap_or("?"),
                found: addr.split('.').count(),
                expected,
            });
        }
        let addr = parts
            .into_iter()
            .map(|p| NumExpr::parse(text, p, place))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(NidExpr {
            addr: Some(addr),
            net,
        })
    }

    /// Whether this names nets only (no address part): a *net rule*.
    pub fn is_net_rule(&self) -> bool {
        self.addr.is_none()
    }

    /// The net part.
    pub fn net(&self) -> &NetExpr {
        &self.net
    }

    /// Whether `net` is one of the nets named (the address part is not looked at).
    pub fn matches_net(&self, net: Net) -> bool {
        self.net.matches(net)
    }

    /// Whether `nid` is named: its net by the net part and, for a NID-range expression,
    /// its address by the address part. A net expression names every NID of its nets.
    /// Only 4-byte addresses (IPv4, numeric) can match an address part; an IPv6 NID
    /// never does (the kernel compares the nid4 address only).
    pub fn matches_nid(&self, nid: &Nid) -> bool {
        if !self.net.matches(nid.net) {
            return false;
        }
        let Some(parts) = &self.addr else {
            return true;
        };
        let NidAddr::V4(a) = nid.addr else {
            return false;
        };
        match parts.as_slice() {
            [one] => one.contains(a),
            [p0, p1, p2, p3] => {
                let [b0, b1, b2, b3] = a.to_be_bytes();
                p0.contains(u32::from(b0))
                    && p1.contains(u32::from(b1))
                    && p2.contains(u32::from(b2))
                    && p3.contains(u32::from(b3))
            }
            _ => false,
        }
    }

    /// Whether the address part, if any, matches every address (`*`, `*.*.*.*`).
    pub fn matches_any_address(&self) -> bool {
        self.addr
            .as_ref()
            .is_none_or(|parts| parts.iter().all(NumExpr::is_any))
    }
}

impl fmt::Display for NidExpr {
    /// The canonical text: numbers in decimal, a single value without brackets, a list as
    /// `[a,b-c,d-e/s]`, a full range as `*`; it parses back to an equal expression.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(parts) = &self.addr {
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    f.write_str(".")?;
                }
                write!(f, "{p}")?;
            }
            f.write_str("@")?;
        }
        write!(f, "{}", self.net)
    }
}

impl std::str::FromStr for NidExpr {
    type Err = NidExprError;

    fn from_str(s: &str) -> Result<NidExpr, NidExprError> {
        NidExpr::parse(s)
    }
}

#[cfg(test)]
mod tests;
