//! NID and net expressions, as UDSP rules write them (reference Part 3): a net expression
//! such as `tcp`, `o2ib1` or `o2ib[1-3]`, or a NID-range expression `ADDR@NET` such as
//! `10.0.0.[1-20]@o2ib1`, `*@tcp` or `[1-3]@gni`.
//!
//! A net expression is an LND name followed by nothing (network 0), a number, or a
//! bracketed list. An IP address expression has four dot-separated parts; a numeric
//! LND's address expression has one. Each part is `*` (anything), a number, or a
//! bracketed list of items `a`, `a-b` or `a-b/step`, separated by commas.
//!
//! Parsing is pure, bounded (at most [`MAX_ITEMS`] items per list and [`MAX_TEXT`] bytes of
//! text) and never panics; errors name the expression and what is wrong in it.

use std::fmt;

use crate::nid::{AddrForm, LndType, Net, NidAddr};
use crate::Nid;

/// Most items in one bracketed list.
pub const MAX_ITEMS: usize = 64;
/// Longest expression accepted.
pub const MAX_TEXT: usize = 256;

/// Why an expression was refused.
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
    /// The net part does not start with an LND name.
    #[error("{text:?}: {net:?} is not a net (an LND name such as tcp or o2ib, then a number or a [list])")]
    UnknownNet {
        /// The expression.
        text: String,
        /// Its net part.
        net: String,
    },
    /// A number, range or list is malformed.
    #[error("{text:?}: bad {what} {part:?}")]
    BadPart {
        /// The expression.
        text: String,
        /// Which part: `net number`, `address part`, `range`, `step`.
        what: &'static str,
        /// The part.
        part: String,
    },
    /// A value is above what its place allows (255 for an IPv4 part).
    #[error("{text:?}: {value} is above {max}")]
    OutOfRange {
        /// The expression.
        text: String,
        /// The value.
        value: u64,
        /// The largest allowed.
        max: u64,
    },
    /// A bracketed list has more than [`MAX_ITEMS`] items.
    #[error("{text:?}: a list of more than {max} items")]
    TooManyItems {
        /// The expression.
        text: String,
        /// The limit.
        max: usize,
    },
    /// The address has the wrong number of parts for the LND (4 for IP LNDs, 1 otherwise).
    #[error("{text:?}: {found} address part(s), the net's LND takes {expected}")]
    AddressParts {
        /// The expression.
        text: String,
        /// Parts given.
        found: usize,
        /// Parts the LND's addresses have.
        expected: usize,
    },
}

/// One item of a list: `lo..=hi` every `step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    lo: u32,
    hi: u32,
    step: u32,
}

impl Span {
    fn contains(self, v: u32) -> bool {
        v >= self.lo && v <= self.hi && (v - self.lo).is_multiple_of(self.step)
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

/// A number expression: anything, one number, or a list of spans.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NumExpr {
    Any,
    List(Vec<Span>),
}

impl NumExpr {
    fn contains(&self, v: u32) -> bool {
        match self {
            NumExpr::Any => true,
            NumExpr::List(spans) => spans.iter().any(|s| s.contains(v)),
        }
    }

    /// Parses `*`, `N` or `[items]`, each number at most `max`.
    fn parse(
        text: &str,
        part: &str,
        what: &'static str,
        max: u32,
        star: bool,
    ) -> Result<NumExpr, NidExprError> {
        let bad = || NidExprError::BadPart {
            text: text.to_owned(),
            what,
            part: part.to_owned(),
        };
        if part == "*" && star {
            return Ok(NumExpr::Any);
        }
        let number = |s: &str| -> Result<u32, NidExprError> {
            if s.is_empty() || s.len() > 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            let v: u64 = s.parse().map_err(|_| bad())?;
            if v > u64::from(max) {
                return Err(NidExprError::OutOfRange {
                    text: text.to_owned(),
                    value: v,
                    max: u64::from(max),
                });
            }
            u32::try_from(v).map_err(|_| bad())
        };
        let Some(inner) = part.strip_prefix('[').and_then(|p| p.strip_suffix(']')) else {
            let v = number(part)?;
            return Ok(NumExpr::List(vec![Span {
                lo: v,
                hi: v,
                step: 1,
            }]));
        };
        let items: Vec<&str> = inner.split(',').collect();
        if items.len() > MAX_ITEMS {
            return Err(NidExprError::TooManyItems {
                text: text.to_owned(),
                max: MAX_ITEMS,
            });
        }
        let mut spans = Vec::with_capacity(items.len());
        for item in items {
            let (range, step) = match item.split_once('/') {
                Some((r, s)) => (r, number(s)?),
                None => (item, 1),
            };
            if step == 0 {
                return Err(bad());
            }
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None => {
                    let v = number(range)?;
                    (v, v)
                }
            };
            if lo > hi {
                return Err(bad());
            }
            spans.push(Span { lo, hi, step });
        }
        Ok(NumExpr::List(spans))
    }
}

impl fmt::Display for NumExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NumExpr::Any => f.write_str("*"),
            NumExpr::List(spans) => match spans.as_slice() {
                [one] if one.lo == one.hi => write!(f, "{}", one.lo),
                _ => {
                    f.write_str("[")?;
                    for (i, s) in spans.iter().enumerate() {
                        if i > 0 {
                            f.write_str(",")?;
                        }
                        write!(f, "{s}")?;
                    }
                    f.write_str("]")
                }
            },
        }
    }
}

/// A net expression: an LND and its network numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetExpr {
    lnd: LndType,
    nums: NumExpr,
}

impl NetExpr {
    /// Whether `net` is one of the nets this expression names.
    pub fn matches(&self, net: Net) -> bool {
        net.lnd == self.lnd && self.nums.contains(u32::from(net.num))
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
        // The longest LND name the text starts with (`o2ib` before `o`, none is a prefix
        // of another today, but the rule keeps it so).
        let (lnd, name) = LndType::named()
            .filter(|t| *t != LndType::LOLND)
            .filter_map(|t| t.name().map(|n| (t, n)))
            .filter(|(_, n)| net.starts_with(n))
            .max_by_key(|(_, n)| n.len())
            .ok_or_else(unknown)?;
        let rest = &net[name.len()..];
        if rest.is_empty() {
            return Ok(NetExpr {
                lnd,
                nums: NumExpr::List(vec![Span {
                    lo: 0,
                    hi: 0,
                    step: 1,
                }]),
            });
        }
        let nums = NumExpr::parse(text, rest, "net number", u32::from(u16::MAX), false)?;
        Ok(NetExpr { lnd, nums })
    }
}

impl fmt::Display for NetExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.lnd.name().unwrap_or("?");
        match &self.nums {
            NumExpr::List(spans)
                if spans.as_slice()
                    == [Span {
                        lo: 0,
                        hi: 0,
                        step: 1,
                    }] =>
            {
                f.write_str(name)
            }
            nums => write!(f, "{name}{nums}"),
        }
    }
}

/// A net expression, or a NID-range expression (an address part, `@`, a net part).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NidExpr {
    /// The address parts (4 for IP LNDs, 1 for numeric ones); `None` for a net rule.
    addr: Option<Vec<NumExpr>>,
    net: NetExpr,
}

impl NidExpr {
    /// Parses an expression; see the module documentation.
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
        let Some((addr, net)) = text.rsplit_once('@') else {
            return Ok(NidExpr {
                addr: None,
                net: NetExpr::parse(text, text)?,
            });
        };
        let net = NetExpr::parse(text, net)?;
        let (expected, max) = match net.lnd.addr_form() {
            Some(AddrForm::Ip) => (4, 255),
            _ => (1, u32::MAX),
        };
        if addr == "*" {
            return Ok(NidExpr {
                addr: Some(vec![NumExpr::Any; expected]),
                net,
            });
        }
        let parts: Vec<&str> = addr.split('.').collect();
        if parts.len() != expected {
            return Err(NidExprError::AddressParts {
                text: text.to_owned(),
                found: parts.len(),
                expected,
            });
        }
        let addr = parts
            .into_iter()
            .map(|p| NumExpr::parse(text, p, "address part", max, true))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(NidExpr {
            addr: Some(addr),
            net,
        })
    }

    /// Whether this names nets only (no address part): a net rule.
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

    /// Whether `nid` is matched: its net by the net part and, for a NID-range expression,
    /// its address by the address part. A net rule matches every NID of its nets.
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
}

impl fmt::Display for NidExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(parts) = &self.addr {
            if parts.iter().all(|p| *p == NumExpr::Any) {
                f.write_str("*")?;
            } else {
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    write!(f, "{p}")?;
                }
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn e(s: &str) -> NidExpr {
        NidExpr::parse(s).unwrap()
    }

    fn nid(s: &str) -> Nid {
        s.parse().unwrap()
    }

    fn net(s: &str) -> Net {
        s.parse().unwrap()
    }

    #[test]
    fn net_expressions() {
        assert!(e("tcp").is_net_rule());
        assert!(e("tcp").matches_net(net("tcp")));
        assert!(!e("tcp").matches_net(net("tcp1")));
        assert!(e("o2ib1").matches_net(net("o2ib1")));
        let r = e("o2ib[1-3]");
        assert!(!r.matches_net(net("o2ib")));
        assert!(r.matches_net(net("o2ib2")) && r.matches_net(net("o2ib3")));
        assert!(!r.matches_net(net("tcp2")));
        assert!(e("tcp[0,2]").matches_net(net("tcp")));
        assert!(!e("tcp[0,2]").matches_net(net("tcp1")));
        // A net rule matches every NID on its nets.
        assert!(e("o2ib1").matches_nid(&nid("10.1.2.3@o2ib1")));
    }

    #[test]
    fn nid_range_expressions() {
        let r = e("10.0.0.[1-20]@o2ib1");
        assert!(!r.is_net_rule());
        assert!(r.matches_nid(&nid("10.0.0.1@o2ib1")));
        assert!(r.matches_nid(&nid("10.0.0.20@o2ib1")));
        assert!(!r.matches_nid(&nid("10.0.0.21@o2ib1")));
        assert!(!r.matches_nid(&nid("10.0.0.5@o2ib")));
        let stepped = e("192.168.[1,3].[2-10/4]@tcp");
        assert!(stepped.matches_nid(&nid("192.168.3.6@tcp")));
        assert!(!stepped.matches_nid(&nid("192.168.3.7@tcp")));
        assert!(!stepped.matches_nid(&nid("192.168.2.6@tcp")));
        assert!(e("*@tcp").matches_nid(&nid("1.2.3.4@tcp")));
        assert!(!e("*@tcp").matches_nid(&nid("1.2.3.4@tcp1")));
        let numeric = e("[1-3]@gni");
        assert!(numeric.matches_nid(&nid("2@gni")));
        assert!(!numeric.matches_nid(&nid("4@gni")));
    }

    #[test]
    fn expressions_print_back() {
        for s in [
            "tcp",
            "o2ib1",
            "o2ib[1-3]",
            "10.0.0.[1-20]@o2ib1",
            "*@tcp",
            "192.168.[1,3].[2-10/4]@tcp5",
            "[1-3]@gni",
            "10.*.0.1@tcp",
        ] {
            assert_eq!(e(s).to_string(), s);
        }
    }

    #[test]
    fn bad_expressions_are_refused_naming_the_part() {
        use NidExprError as E;
        assert_eq!(NidExpr::parse(""), Err(E::Empty));
        assert!(matches!(NidExpr::parse("eth0"), Err(E::UnknownNet { .. })));
        assert!(matches!(
            NidExpr::parse("10.0.0.1@foo"),
            Err(E::UnknownNet { .. })
        ));
        assert!(matches!(
            NidExpr::parse("10.0.0.256@tcp"),
            Err(E::OutOfRange {
                value: 256,
                max: 255,
                ..
            })
        ));
        assert!(matches!(
            NidExpr::parse("10.0.0@tcp"),
            Err(E::AddressParts {
                found: 3,
                expected: 4,
                ..
            })
        ));
        assert!(matches!(
            NidExpr::parse("10.0.0.[5-1]@tcp"),
            Err(E::BadPart { .. })
        ));
        assert!(matches!(
            NidExpr::parse("10.0.0.[1-5/0]@tcp"),
            Err(E::BadPart { .. })
        ));
        assert!(matches!(
            NidExpr::parse("10.0.0.[1-5@tcp"),
            Err(E::BadPart { .. })
        ));
        assert!(matches!(NidExpr::parse("tcp[1-2"), Err(E::BadPart { .. })));
        assert!(matches!(NidExpr::parse("tcp*"), Err(E::BadPart { .. })));
        assert!(matches!(
            NidExpr::parse("tcp70000"),
            Err(E::OutOfRange { .. })
        ));
        let long_list = format!("10.0.0.[{}]@tcp", vec!["1"; 65].join(","));
        assert!(matches!(
            NidExpr::parse(&long_list),
            Err(E::TooManyItems { max: 64, .. })
        ));
        let long = "1".repeat(300);
        assert!(matches!(NidExpr::parse(&long), Err(E::TooLong { .. })));
    }

    proptest! {
        #[test]
        fn any_text_parses_or_errs_without_panicking(s in ".{0,80}") {
            let _ = NidExpr::parse(&s);
        }

        #[test]
        fn a_nid_matches_its_own_expression(a in any::<u32>(), n in 0u16..100) {
            let nid = Nid::new(Net::new(LndType::SOCKLND, n), a);
            let text = nid.to_string();
            let expr = NidExpr::parse(&text).unwrap();
            prop_assert!(expr.matches_nid(&nid));
            prop_assert_eq!(expr.to_string(), text);
        }
    }
}
