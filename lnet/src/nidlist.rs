//! Nidlists as `lnetctl debug nidlist` reads them: a list of NID ranges parsed, printed back
//! in its normalized form, and matched against one NID.
//!
//! lnetctl 2.17 (`lustre_lnet_debug_nidlist` in liblnetconfig) runs the user-space libcfs
//! nidlist code (`cfs_parse_nidlist`, `cfs_print_nidlist`, `cfs_match_nid`, and
//! `libcfs_strnid` for the NID to match); this module reads the same text the same way,
//! including its leniencies, so that [`debug_nidlist`] prints what lnetctl prints.
//!
//! ```text
//! nidlist    := nidrange { ' '+ nidrange }        (only ' ' separates; empty items skipped)
//! nidrange   := addrrange '@' net                 (split at the first '@'; net trimmed)
//! net        := LND-name [ number ]               (lo, tcp, o2ib, gni, gip, ptlf, kfi, efa,
//!                                                  bxi3f; number as strtoul, base 0)
//! addrrange  := '*'                               (every address of the net)
//!             | netmask                           (has ':' or a '/' outside brackets)
//!             | numexpr '.' numexpr '.' numexpr '.' numexpr   (IP LNDs: tcp, o2ib, gip, efa)
//!             | numexpr                                       (lo, gni, ptlf, kfi, bxi3f)
//! netmask    := IPv4 '/' prefix | IPv6 [ '/' prefix ]          (tcp and efa only)
//! numexpr    := '*' | number | '[' item { ',' item } ']'
//! item       := '*' | number | number '-' number [ '/' step ]
//! ```
//!
//! Numbers are read as C's `strtoul` with base 0 (decimal, `0x` hex, `0` octal; a `-`
//! wraps; the value is cut to 32 bits), then checked against the range (0-255 for an IP
//! part). Entries of one net gather into one range of the list, in the order nets first
//! appear; a range prints its netmasks, then its address ranges.
//!
//! Where lnetctl's behaviour is undefined this module picks a defined one, and says so:
//!
//! * The printed list is cut to the length of the text given, the size of lnetctl's
//!   buffer. Where the normalized form is longer (a `*` part printed `[0-255]`, a
//!   negative number printed as its 32-bit value, an IPv6 address printed longer), lnetctl
//!   writes past that buffer or reads unwritten bytes; here the line ends at the buffer.
//! * `*@net` together with other ranges of the same net stops lnetctl on an assertion
//!   while printing; here that is the error [`PrintError::AllWithRanges`].
//! * A step of 0 (`[1-5/0]`, or a step the C parser leaves unset, `[1-5/]`) divides by
//!   zero in lnetctl when a NID is matched against it; here that is
//!   [`MatchError::ZeroStep`].
//! * Host names are not resolved (lnetctl asks the resolver for a name where an address
//!   goes); a name is an address that does not parse.
//!
//! Everything is pure, bounded by the length of the text, and never panics.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::nid::{AddrForm, LndType};

mod mask;
mod scan;

use mask::NidMask;
use scan::{gettok, is_space, num_check, scan_ipv4, scan_number, scan_uint};

/// One `lo-hi/step` item of a numeric expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RangeExpr {
    lo: u32,
    hi: u32,
    step: u32,
}

impl RangeExpr {
    /// libcfs' `cfs_range_expr_parse`, leniencies included: after `lo-hi/` whatever
    /// `strtoul` makes of the rest is the step, even when it is not a number.
    fn parse(src: &[u8], min: u32, max: u32, bracketed: bool) -> Option<RangeExpr> {
        if src == b"*" {
            return Some(RangeExpr {
                lo: min,
                hi: max,
                step: 1,
            });
        }
        let (lo, ok) = num_check(src, min, max);
        if ok {
            return Some(RangeExpr {
                lo,
                hi: lo,
                step: 1,
            });
        }
        if !bracketed {
            return None;
        }
        let mut rest = Some(src);
        let lo_text = gettok(&mut rest, b'-')?;
        let (lo, ok) = num_check(lo_text, min, max);
        if !ok {
            return None;
        }
        let rest = rest?;
        let (mut hi, ok) = num_check(rest, min, max);
        let mut step = 1;
        if !ok {
            step = 0;
            let mut after = Some(rest);
            if let Some(hi_text) = gettok(&mut after, b'/') {
                let (h, ok) = num_check(hi_text, min, max);
                if !ok {
                    return None;
                }
                hi = h;
                step = num_check(after?, min, max).0;
            }
        }
        (lo <= hi).then_some(RangeExpr { lo, hi, step })
    }

    /// libcfs' `cfs_expr_list_match` for one item.
    fn matches(self, value: u32) -> Result<bool, MatchError> {
        if value < self.lo || value > self.hi {
            return Ok(false);
        }
        match (value - self.lo).checked_rem(self.step) {
            Some(r) => Ok(r == 0),
            None => Err(MatchError::ZeroStep),
        }
    }

    fn print(self, out: &mut String, in_list: bool) {
        let (open, close) = if in_list { ("", "") } else { ("[", "]") };
        let RangeExpr { lo, hi, step } = self;
        let _ = if lo == hi {
            write!(out, "{lo}")
        } else if step == 1 {
            write!(out, "{open}{lo}-{hi}{close}")
        } else {
            write!(out, "{open}{lo}-{hi}/{step}{close}")
        };
    }
}

/// A numeric expression: one item, or a bracketed list of them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ExprList(Vec<RangeExpr>);

impl ExprList {
    /// libcfs' `cfs_expr_list_parse`.
    fn parse(s: &[u8], min: u32, max: u32) -> Option<ExprList> {
        if s.len() >= 2 && s.first() == Some(&b'[') && s.last() == Some(&b']') {
            let mut rest = s.get(1..s.len() - 1);
            let mut items = Vec::new();
            while rest.is_some() {
                let item = gettok(&mut rest, b',')?;
                items.push(RangeExpr::parse(item, min, max, true)?);
            }
            Some(ExprList(items))
        } else {
            RangeExpr::parse(s, min, max, false).map(|e| ExprList(vec![e]))
        }
    }

    fn matches(&self, value: u32) -> Result<bool, MatchError> {
        for e in &self.0 {
            if e.matches(value)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn print(&self, out: &mut String) {
        let many = self.0.len() > 1;
        if many {
            out.push('[');
        }
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            e.print(out, many);
        }
        if many {
            out.push(']');
        }
    }
}

/// The addresses of one entry: four parts of an IPv4 address, or one number.
#[derive(Debug, Clone, PartialEq, Eq)]
enum AddrRange {
    Ip(Box<[ExprList; 4]>),
    Number(ExprList),
}

impl AddrRange {
    fn parse(s: &[u8], form: Form) -> Option<AddrRange> {
        match form {
            Form::Number => ExprList::parse(s, 0, u32::MAX).map(AddrRange::Number),
            Form::Ip => {
                let mut rest = Some(s);
                let mut parts = Vec::with_capacity(4);
                while rest.is_some() {
                    let part = gettok(&mut rest, b'.')?;
                    parts.push(ExprList::parse(part, 0, 255)?);
                    if parts.len() > 4 {
                        return None;
                    }
                }
                let parts: [ExprList; 4] = parts.try_into().ok()?;
                Some(AddrRange::Ip(Box::new(parts)))
            }
        }
    }

    /// Whether the address (the NID's first 32-bit word) is in the range.
    fn matches(&self, addr: u32) -> Result<bool, MatchError> {
        match self {
            AddrRange::Number(e) => e.matches(addr),
            AddrRange::Ip(parts) => {
                // Last part first, as libcfs walks them.
                for (i, part) in parts.iter().enumerate().rev() {
                    let octet = (addr >> (8 * (3 - i))) & 0xff;
                    if !part.matches(octet)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
        }
    }

    fn print(&self, out: &mut String) {
        match self {
            AddrRange::Number(e) => e.print(out),
            AddrRange::Ip(parts) => {
                for (i, part) in parts.iter().enumerate() {
                    if i > 0 {
                        out.push('.');
                    }
                    part.print(out);
                }
            }
        }
    }
}

/// How an LND's nidlist addresses are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Ip,
    Number,
}

/// A named LND, as the nidlist code knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lnd(LndType);

impl Lnd {
    /// The first LND whose name starts `text` (libcfs compares name prefixes, in table
    /// order).
    fn by_prefix(text: &str) -> Option<(Lnd, &'static str)> {
        LndType::named().find_map(|t| {
            let name = t.name()?;
            text.starts_with(name).then_some((Lnd(t), name))
        })
    }

    fn name(self) -> &'static str {
        self.0.name().unwrap_or_default()
    }

    fn form(self) -> Form {
        match self.0.addr_form() {
            Some(AddrForm::Ip) => Form::Ip,
            _ => Form::Number,
        }
    }

    /// tcp and efa read addresses with `inet_pton` (IPv4 or IPv6), and take netmasks.
    fn sized_addresses(self) -> bool {
        self.0 == LndType::SOCKLND || self.0 == LndType::EFALND
    }

    /// tcp and o2ib match NIDs against netmasks (efa takes them but matches none).
    fn matches_netmasks(self) -> bool {
        self.0 == LndType::SOCKLND || self.0 == LndType::O2IBLND
    }
}

/// All the entries of one net.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NidRange {
    lnd: Lnd,
    /// As parsed: 32 bits, although a NID's net number has 16.
    netnum: u32,
    all: bool,
    masks: Vec<NidMask>,
    addrs: Vec<AddrRange>,
}

impl NidRange {
    fn print_net(&self, out: &mut String) {
        out.push('@');
        out.push_str(self.lnd.name());
        if self.netnum != 0 {
            let _ = write!(out, "{}", self.netnum);
        }
    }
}

/// Why a nidlist does not parse. Each names what lnetctl names in the lines it prints
/// ([`NidListError::lnetctl_lines`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NidListError {
    /// Nothing but spaces.
    #[error("the nidlist has no entry")]
    Empty,
    /// An entry without `@`.
    #[error("nidrange \"{0}\" doesn't contain '@'")]
    NoAt(String),
    /// The net after `@` is empty or has another `@`.
    #[error("net \"{0}\" is malformed")]
    MalformedNet(String),
    /// The net names no LND, or its number is not one.
    #[error("failed to add nidrange for network \"{0}\"")]
    UnknownNet(String),
    /// A netmask whose prefix length is missing or out of range (1-32, 1-128 for IPv6).
    #[error("Failed to parse prefix length from \"{0}\"")]
    PrefixLength(String),
    /// A netmask on an LND other than tcp and efa.
    #[error("Network type doesn't support nidmasks")]
    NoNetmasks {
        /// The address part of the entry.
        addrrange: String,
    },
    /// A netmask whose address is not an IPv4 or IPv6 address (or is loopback or
    /// link-local).
    #[error("Failed to convert \"{0}\" to address")]
    MaskAddress(String),
    /// An address range that does not parse.
    #[error("Failed to parse addrrange \"{0}\" rc = -22")]
    AddrRange(String),
}

impl NidListError {
    /// The lines lnetctl writes to standard error for this error, before its
    /// `Unable to parse nidlist from:` line.
    pub fn lnetctl_lines(&self) -> String {
        let failed =
            |addrrange: &str| format!("Failed to parse addrrange \"{addrrange}\" rc = -22\n");
        match self {
            NidListError::Empty => String::new(),
            NidListError::NoAt(_)
            | NidListError::MalformedNet(_)
            | NidListError::UnknownNet(_)
            | NidListError::AddrRange(_) => format!("{self}\n"),
            NidListError::PrefixLength(a) | NidListError::MaskAddress(a) => {
                format!("{self}\n{}", failed(a))
            }
            NidListError::NoNetmasks { addrrange } => format!("{self}\n{}", failed(addrrange)),
        }
    }
}

/// Why a parsed nidlist does not print.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PrintError {
    /// `*@net` with other entries of the same net (lnetctl stops on an assertion).
    #[error("cannot print nidlist: it has *@{net} and other ranges of {net}")]
    AllWithRanges {
        /// The net, printed.
        net: String,
    },
}

/// Why a NID cannot be matched against a nidlist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatchError {
    /// A range the NID falls in has a step of 0 (lnetctl divides by zero).
    #[error("cannot match NID: a range it falls in has a step of 0")]
    ZeroStep,
}

/// A parsed nidlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NidList {
    ranges: Vec<NidRange>,
}

impl NidList {
    /// Parses `text` as `cfs_parse_nidlist` does (the text ends at a NUL, as a C string).
    pub fn parse(text: &str) -> Result<NidList, NidListError> {
        let text = text.split('\0').next().unwrap_or_default();
        let mut list = NidList { ranges: Vec::new() };
        for entry in text.split(' ').filter(|e| !e.is_empty()) {
            list.add_entry(entry)?;
        }
        if list.ranges.is_empty() {
            return Err(NidListError::Empty);
        }
        Ok(list)
    }

    /// libcfs' `parse_nidrange` and `add_nidrange`.
    fn add_entry(&mut self, entry: &str) -> Result<(), NidListError> {
        let Some((addr, net)) = entry.split_once('@') else {
            return Err(NidListError::NoAt(entry.to_owned()));
        };
        let net = net.trim_matches(|c: char| c.is_ascii() && is_space(c as u8));
        if net.is_empty() || net.contains('@') {
            return Err(NidListError::MalformedNet(net.to_owned()));
        }
        let unknown = || NidListError::UnknownNet(net.to_owned());
        let (lnd, name) = Lnd::by_prefix(net).ok_or_else(unknown)?;
        let number = net.get(name.len()..).unwrap_or_default();
        let netnum = if number.is_empty() {
            0
        } else {
            let (n, ok) = num_check(number.as_bytes(), 0, u32::MAX);
            if !ok {
                return Err(unknown());
            }
            n
        };
        let index = match self
            .ranges
            .iter()
            .position(|r| r.lnd == lnd && r.netnum == netnum)
        {
            Some(i) => i,
            None => {
                self.ranges.push(NidRange {
                    lnd,
                    netnum,
                    all: false,
                    masks: Vec::new(),
                    addrs: Vec::new(),
                });
                self.ranges.len() - 1
            }
        };
        let Some(range) = self.ranges.get_mut(index) else {
            return Err(unknown());
        };
        let slash_outside_brackets = addr
            .find('/')
            .and_then(|i| addr.get(i..))
            .is_some_and(|after| !after.contains(']'));
        if addr.contains(':') || slash_outside_brackets {
            range.masks.push(NidMask::parse(addr, lnd)?);
        } else if addr == "*" {
            range.all = true;
        } else {
            let parsed = AddrRange::parse(addr.as_bytes(), lnd.form())
                .ok_or_else(|| NidListError::AddrRange(addr.to_owned()))?;
            range.addrs.push(parsed);
        }
        Ok(())
    }

    /// The list in its normalized form, uncut: per net (in the order nets first appear)
    /// its netmasks then its address ranges, each with its net, separated by spaces.
    pub fn normalized(&self) -> Result<String, PrintError> {
        let mut out = String::new();
        for range in &self.ranges {
            if !out.is_empty() {
                out.push(' ');
            }
            if range.all {
                if !range.masks.is_empty() || !range.addrs.is_empty() {
                    let mut net = String::new();
                    range.print_net(&mut net);
                    return Err(PrintError::AllWithRanges {
                        net: net.trim_start_matches('@').to_owned(),
                    });
                }
                out.push('*');
                range.print_net(&mut out);
                continue;
            }
            let mut first = true;
            for mask in &range.masks {
                if !first {
                    out.push(' ');
                }
                first = false;
                mask.print(&mut out);
                range.print_net(&mut out);
            }
            for addr in &range.addrs {
                if !first {
                    out.push(' ');
                }
                first = false;
                addr.print(&mut out);
                range.print_net(&mut out);
            }
        }
        Ok(out)
    }

    /// Whether `nid` is in the list (`cfs_match_nid`): a range of its LND and net number
    /// that has `*`, a netmask holding its address, or an address range holding its first
    /// 32 bits.
    pub fn matches(&self, nid: &ListNid) -> Result<bool, MatchError> {
        for range in &self.ranges {
            if range.lnd.0 .0 != nid.lnd || range.netnum != u32::from(nid.netnum) {
                continue;
            }
            if range.all {
                return Ok(true);
            }
            if range.lnd.matches_netmasks() && range.masks.iter().any(|m| m.matches(nid)) {
                return Ok(true);
            }
            for addr in &range.addrs {
                if addr.matches(nid.first_word())? {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

/// An address as tcp and efa read it (`inet_pton`, IPv4 first; loopback and IPv6
/// link-local refused).
enum SizedAddr {
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

fn sized_address(text: &str) -> Option<SizedAddr> {
    if let Ok(a) = text.parse::<Ipv4Addr>() {
        return (a != Ipv4Addr::LOCALHOST).then_some(SizedAddr::V4(a));
    }
    let a = text.parse::<Ipv6Addr>().ok()?;
    let link_local = a.segments().first().is_some_and(|s| s & 0xffc0 == 0xfe80);
    (!a.is_loopback() && !link_local).then_some(SizedAddr::V6(a))
}

/// The address bytes of a [`ListNid`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NidAddrBytes {
    Four([u8; 4]),
    Sixteen([u8; 16]),
}

/// A NID as `libcfs_strnid` reads it for matching: `ADDR@NET`, or `ADDR` on tcp.
///
/// Unlike [`crate::Nid`] it keeps libcfs' leniencies: any address on `lo` is 0, a net
/// number above 65535 spills into the LND type byte, numbers are read as `scanf` reads
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListNid {
    lnd: u8,
    netnum: u16,
    addr: NidAddrBytes,
}

impl ListNid {
    /// Parses `text` (up to a NUL); `None` where lnetctl says `Invalid nid for matching`.
    pub fn parse(text: &str) -> Option<ListNid> {
        let text = text.split('\0').next().unwrap_or_default();
        let (addr, lnd, number) = match text.split_once('@') {
            Some((addr, net)) => {
                let (lnd, name) = Lnd::by_prefix(net)?;
                let rest = net.get(name.len()..).unwrap_or_default();
                let number = if rest.is_empty() {
                    0
                } else if lnd.0 == LndType::LOLND {
                    return None;
                } else {
                    match scan_uint(rest.as_bytes(), 0, 10) {
                        Some((n, end)) if end == rest.len() => n,
                        _ => return None,
                    }
                };
                (addr, lnd, number)
            }
            None => (text, Lnd(LndType::SOCKLND), 0),
        };
        let net = (u32::from(lnd.0 .0) << 16) | number;
        let addr = if lnd.sized_addresses() {
            match sized_address(addr)? {
                SizedAddr::V4(a) => NidAddrBytes::Four(a.octets()),
                SizedAddr::V6(a) => NidAddrBytes::Sixteen(a.octets()),
            }
        } else if lnd.0 == LndType::LOLND {
            NidAddrBytes::Four([0; 4])
        } else if lnd.form() == Form::Ip {
            NidAddrBytes::Four(scan_ipv4(addr.as_bytes())?.to_be_bytes())
        } else {
            NidAddrBytes::Four(scan_number(addr.as_bytes())?.to_be_bytes())
        };
        Some(ListNid {
            lnd: ((net >> 16) & 0xff) as u8,
            netnum: (net & 0xffff) as u16,
            addr,
        })
    }

    fn first_word(&self) -> u32 {
        let b = match &self.addr {
            NidAddrBytes::Four(a) => a.as_slice(),
            NidAddrBytes::Sixteen(a) => a.as_slice(),
        };
        b.iter()
            .take(4)
            .fold(0u32, |acc, x| (acc << 8) | u32::from(*x))
    }
}

/// What `lnetctl debug nidlist` writes, and whether it succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugReport {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Whether the command succeeds (lnetctl returns 0; -22 otherwise).
    pub ok: bool,
}

/// `lnetctl debug nidlist NIDLIST [NID]`, `args` being what follows `nidlist`: the
/// normalized list (`nidlist parsed to: ...`) and, with a NID, whether it matches.
pub fn debug_nidlist(args: &[&str]) -> DebugReport {
    let mut report = DebugReport {
        stdout: String::new(),
        stderr: String::new(),
        ok: false,
    };
    let (list_text, nid_text) = match args {
        [] => {
            report.stderr.push_str("Missing nidlist argument\n");
            return report;
        }
        [list] => (*list, None),
        [list, nid] => (*list, Some(*nid)),
        _ => {
            report.stderr.push_str("Too many arguments\n");
            return report;
        }
    };
    let list_text = list_text.split('\0').next().unwrap_or_default();
    let list = match NidList::parse(list_text) {
        Ok(list) => list,
        Err(e) => {
            report.stderr = e.lnetctl_lines();
            let _ = writeln!(report.stderr, "Unable to parse nidlist from: {list_text}");
            return report;
        }
    };
    match list.normalized() {
        Ok(text) => {
            // lnetctl prints into a buffer as long as the text it was given.
            let cut = text.get(..list_text.len()).unwrap_or(&text);
            if !cut.is_empty() {
                let _ = writeln!(report.stdout, "nidlist parsed to: {cut}");
            }
        }
        Err(e) => {
            let _ = writeln!(report.stderr, "{e}");
            return report;
        }
    }
    if let Some(nid_text) = nid_text {
        let nid_text = nid_text.split('\0').next().unwrap_or_default();
        let Some(nid) = ListNid::parse(nid_text) else {
            let _ = writeln!(report.stderr, "Invalid nid for matching {nid_text}");
            return report;
        };
        match list.matches(&nid) {
            Ok(true) => {
                let _ = writeln!(report.stdout, "{nid_text} matches nidlist {list_text}");
            }
            Ok(false) => {
                let _ = writeln!(
                    report.stdout,
                    "{nid_text} does not match nidlist {list_text}"
                );
            }
            Err(e) => {
                let _ = writeln!(report.stderr, "{e}");
                return report;
            }
        }
    }
    report.ok = true;
    report
}

#[cfg(test)]
mod tests;
