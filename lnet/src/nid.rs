//! Network identifiers: LND types, nets, NIDs and process ids.
//!
//! A NID names one network interface on one LNet network. It has two wire forms:
//! the classic 64-bit "nid4" (`type << 48 | netnum << 32 | addr`) and the 20-byte large
//! form (`struct lnet_nid`: size, type, big-endian net number, four big-endian address
//! words) that carries IPv6 addresses. [`Nid`] holds either; [`Nid::to_nid4`] and
//! [`Nid::to_large_bytes`] give the wire forms.
//!
//! Text forms follow `lnetctl`: `<addr>@<netname><netnum>` with the number left out when
//! it is 0 (`tcp` is `tcp0`), no `@` meaning an address on `tcp`, `0@lo` for loopback.
//! Unlike the kernel, the parser refuses net numbers above 65535 instead of letting them
//! spill into the LND type byte.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Errors from parsing or decoding a NID, net or process id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NidError {
    /// The text was empty.
    #[error("empty NID or net")]
    Empty,
    /// The net part names no known LND.
    #[error("unknown network type in {text:?}")]
    UnknownNet {
        /// The net text that was given.
        text: String,
    },
    /// The net number after the LND name is not a decimal number.
    #[error("bad network number {number:?} in {text:?}: expected a decimal number")]
    BadNetNumber {
        /// The whole net text.
        text: String,
        /// The part after the LND name.
        number: String,
    },
    /// The net number is larger than the 16 bits a NID has for it.
    #[error("network number {value} in {text:?} is out of range (0..=65535)")]
    NetNumberOutOfRange {
        /// The whole net text.
        text: String,
        /// The number that was given.
        value: u64,
    },
    /// `lo` takes no network number.
    #[error("the loopback net takes no number: {text:?}")]
    LoopbackNumber {
        /// The net text that was given.
        text: String,
    },
    /// The address part does not fit the LND's address form.
    #[error("bad address {text:?} for {lnd}: expected {expected}")]
    BadAddress {
        /// The LND name.
        lnd: String,
        /// The address text that was given.
        text: String,
        /// What form the LND expects.
        expected: &'static str,
    },
    /// A 64-bit NID had bits 63..56 set; only `LNET_NID_ANY` may.
    #[error("nid4 {raw:#018x} has its reserved top byte set")]
    TopByteSet {
        /// The raw 64-bit value.
        raw: u64,
    },
    /// A 64-bit NID had the wildcard LND type 0xFF without being `LNET_NID_ANY`.
    #[error("nid4 {raw:#018x} has the wildcard LND type 0xff but is not LNET_NID_ANY")]
    WildcardType {
        /// The raw 64-bit value.
        raw: u64,
    },
    /// A large NID had a `nid_size` this implementation does not know.
    #[error("large NID has nid_size {size}: expected 0 (4-byte address) or 12 (16-byte address)")]
    UnsupportedNidSize {
        /// The `nid_size` byte.
        size: u8,
    },
    /// A large NID was given where only a 64-bit NID fits.
    #[error("NID {nid} has a 16-byte address and no 64-bit form")]
    NotNid4 {
        /// The NID, printed.
        nid: String,
    },
    /// A buffer too short for a large NID.
    #[error("large NID needs {expected} bytes, got {got}")]
    Truncated {
        /// Bytes needed.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A process id whose pid part is not a number.
    #[error("bad pid {text:?} in process id")]
    BadPid {
        /// The pid text.
        text: String,
    },
}

/// How an LND writes the address part of its NIDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrForm {
    /// Dotted IPv4 (IPv6 text for large NIDs).
    Ip,
    /// An unsigned integer, decimal or `0x` hex.
    Number,
    /// Loopback: the address is always 0.
    Loopback,
}

/// An LND type number (bits 55..48 of a nid4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LndType(pub u8);

impl LndType {
    /// The TCP socket LND (`tcp`).
    pub const SOCKLND: LndType = LndType(2);
    /// The InfiniBand verbs LND (`o2ib`).
    pub const O2IBLND: LndType = LndType(5);
    /// Loopback (`lo`).
    pub const LOLND: LndType = LndType(9);
    /// Cray Gemini/Aries (`gni`).
    pub const GNILND: LndType = LndType(13);
    /// Cray IP (`gip`).
    pub const GNIIPLND: LndType = LndType(14);
    /// Portals 4 (`ptlf`).
    pub const PTL4LND: LndType = LndType(15);
    /// Kernel fabric interface (`kfi`).
    pub const KFILND: LndType = LndType(16);
    /// Tofu; has no name, prints as `<17:n>`.
    pub const TOFULND: LndType = LndType(17);
    /// AWS EFA (`efa`).
    pub const EFALND: LndType = LndType(18);
    /// BXI v3 (`bxi3f`).
    pub const BXI3LND: LndType = LndType(19);
    /// The wildcard type of `LNET_NID_ANY`.
    pub const ANY: LndType = LndType(0xFF);

    /// The table of named LNDs, in the order the parser tries them.
    const NAMED: [(LndType, &'static str, AddrForm); 9] = [
        (LndType::LOLND, "lo", AddrForm::Loopback),
        (LndType::SOCKLND, "tcp", AddrForm::Ip),
        (LndType::O2IBLND, "o2ib", AddrForm::Ip),
        (LndType::GNILND, "gni", AddrForm::Number),
        (LndType::GNIIPLND, "gip", AddrForm::Ip),
        (LndType::PTL4LND, "ptlf", AddrForm::Number),
        (LndType::KFILND, "kfi", AddrForm::Number),
        (LndType::EFALND, "efa", AddrForm::Ip),
        (LndType::BXI3LND, "bxi3f", AddrForm::Number),
    ];

    /// The LND's net name (`tcp`, `o2ib`, ...), or `None` for a type without one.
    pub fn name(self) -> Option<&'static str> {
        Self::NAMED
            .iter()
            .find(|(t, _, _)| *t == self)
            .map(|(_, n, _)| *n)
    }

    /// How this LND writes addresses; `None` for a type without a name.
    pub fn addr_form(self) -> Option<AddrForm> {
        Self::NAMED
            .iter()
            .find(|(t, _, _)| *t == self)
            .map(|(_, _, f)| *f)
    }

    /// Every LND type that has a name, in parser order.
    pub fn named() -> impl Iterator<Item = LndType> {
        Self::NAMED.iter().map(|(t, _, _)| *t)
    }
}

/// An LNet network: an LND type and a network number (`tcp1`, `o2ib`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Net {
    /// The LND type.
    pub lnd: LndType,
    /// The network number (`tcp` == `tcp0`).
    pub num: u16,
}

/// A net is hashed as its 32-bit id (one word, where its fields would be two).
impl std::hash::Hash for Net {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u32(self.to_u32());
    }
}

/// A NID with a 4-byte address is hashed as one word, its 64-bit form but for `ANY`
/// (where its fields, the address's kind among them, would be four): every message
/// forwarded looks NIDs up in several maps. Equal NIDs write the same.
impl std::hash::Hash for Nid {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let net = u64::from(self.net.to_u32());
        match self.addr {
            NidAddr::V4(addr) => state.write_u64((net << 32) | u64::from(addr)),
            NidAddr::V6(addr) => {
                state.write_u64(net);
                state.write(&addr);
            }
        }
    }
}

impl Net {
    /// `LNET_NET_ANY`.
    pub const ANY: Net = Net {
        lnd: LndType(0xFF),
        num: 0xFFFF,
    };
    /// The loopback net, `lo`.
    pub const LO: Net = Net {
        lnd: LndType::LOLND,
        num: 0,
    };

    /// A net from its LND type and number.
    pub const fn new(lnd: LndType, num: u16) -> Net {
        Net { lnd, num }
    }

    /// The 32-bit net id, `type << 16 | num`.
    pub const fn to_u32(self) -> u32 {
        ((self.lnd.0 as u32) << 16) | self.num as u32
    }

    /// A net from its 32-bit id. The top byte of the id is ignored unless the id is `LNET_NET_ANY`.
    pub const fn from_u32(id: u32) -> Net {
        if id == u32::MAX {
            return Net::ANY;
        }
        Net {
            lnd: LndType((id >> 16) as u8),
            num: id as u16,
        }
    }

    /// Whether this is `LNET_NET_ANY`.
    pub fn is_any(self) -> bool {
        self.lnd == LndType::ANY
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_any() {
            return f.write_str("<?>");
        }
        match self.lnd.name() {
            Some(name) if self.num == 0 => f.write_str(name),
            Some(name) => write!(f, "{name}{}", self.num),
            None => write!(f, "<{}:{}>", self.lnd.0, self.num),
        }
    }
}

impl FromStr for Net {
    type Err = NidError;

    fn from_str(s: &str) -> Result<Net, NidError> {
        parse_net(s)
    }
}

fn parse_net(text: &str) -> Result<Net, NidError> {
    if text.is_empty() {
        return Err(NidError::Empty);
    }
    if let Some(inner) = text.strip_prefix('<').and_then(|t| t.strip_suffix('>')) {
        return parse_numbered_net(text, inner);
    }
    let Some((lnd, name)) = LndType::NAMED
        .iter()
        .find(|(_, name, _)| text.starts_with(name))
        .map(|(t, n, _)| (*t, *n))
    else {
        return Err(NidError::UnknownNet {
            text: text.to_owned(),
        });
    };
    let rest = &text[name.len()..];
    if rest.is_empty() {
        return Ok(Net::new(lnd, 0));
    }
    if lnd == LndType::LOLND {
        return Err(NidError::LoopbackNumber {
            text: text.to_owned(),
        });
    }
    let num = parse_net_number(text, rest)?;
    Ok(Net::new(lnd, num))
}

/// `<type:num>`, the form unnamed LND types print as.
fn parse_numbered_net(text: &str, inner: &str) -> Result<Net, NidError> {
    let unknown = || NidError::UnknownNet {
        text: text.to_owned(),
    };
    let (t, n) = inner.split_once(':').ok_or_else(unknown)?;
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(unknown());
    }
    let lnd: u8 = t.parse().map_err(|_| unknown())?;
    // Only types without a name print this way; a named type is written by its name.
    if lnd == LndType::ANY.0 || LndType(lnd).name().is_some() {
        return Err(unknown());
    }
    let num = parse_net_number(text, n)?;
    Ok(Net::new(LndType(lnd), num))
}

fn parse_net_number(text: &str, number: &str) -> Result<u16, NidError> {
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NidError::BadNetNumber {
            text: text.to_owned(),
            number: number.to_owned(),
        });
    }
    // Digits only, so the only failure left is overflow.
    let value: u64 = number.parse().unwrap_or(u64::MAX);
    u16::try_from(value).map_err(|_| NidError::NetNumberOutOfRange {
        text: text.to_owned(),
        value,
    })
}

/// The address part of a NID. Its tag is a word, so that the 16 bytes of a `V6` address
/// lie word-aligned after it: a NID is copied in aligned words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum NidAddr {
    /// A 4-byte address: an IPv4 address in host order for IP LNDs, an integer for others.
    V4(u32),
    /// A 16-byte address (IPv6), only in large NIDs.
    V6([u8; 16]),
}

/// A network identifier: a net and an address on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nid {
    /// The net.
    pub net: Net,
    /// The address on that net.
    pub addr: NidAddr,
}

/// Bytes of a large NID on the wire.
pub const LARGE_NID_BYTES: usize = 20;

impl Nid {
    /// `LNET_NID_ANY`.
    pub const ANY: Nid = Nid {
        net: Net::ANY,
        addr: NidAddr::V4(u32::MAX),
    };
    /// `0@lo`.
    pub const LO_0: Nid = Nid {
        net: Net::LO,
        addr: NidAddr::V4(0),
    };

    /// A NID with a 4-byte address.
    pub const fn new(net: Net, addr: u32) -> Nid {
        Nid {
            net,
            addr: NidAddr::V4(addr),
        }
    }

    /// A NID for an IPv4 address on `net`.
    pub fn from_ipv4(net: Net, ip: Ipv4Addr) -> Nid {
        Nid::new(net, u32::from(ip))
    }

    /// Whether this is `LNET_NID_ANY`.
    pub fn is_any(&self) -> bool {
        self.net.is_any()
    }

    /// Whether this NID has a 64-bit form.
    pub fn is_nid4(&self) -> bool {
        matches!(self.addr, NidAddr::V4(_))
    }

    /// The 4-byte address, if the NID has one.
    pub fn addr_u32(&self) -> Option<u32> {
        match self.addr {
            NidAddr::V4(a) => Some(a),
            NidAddr::V6(_) => None,
        }
    }

    /// The 64-bit wire form.
    pub fn to_nid4(&self) -> Result<u64, NidError> {
        if self.is_any() {
            return Ok(u64::MAX);
        }
        match self.addr {
            NidAddr::V4(addr) => Ok((u64::from(self.net.to_u32()) << 32) | u64::from(addr)),
            NidAddr::V6(_) => Err(NidError::NotNid4 {
                nid: self.to_string(),
            }),
        }
    }

    /// A NID from its 64-bit wire form. A set top byte is an error unless the value is ANY.
    pub fn from_nid4(raw: u64) -> Result<Nid, NidError> {
        if raw == u64::MAX {
            return Ok(Nid::ANY);
        }
        if raw >> 56 != 0 {
            return Err(NidError::TopByteSet { raw });
        }
        if (raw >> 48) as u8 == LndType::ANY.0 {
            return Err(NidError::WildcardType { raw });
        }
        Ok(Nid::new(Net::from_u32((raw >> 32) as u32), raw as u32))
    }

    /// The 20-byte `struct lnet_nid` form (net number and address words big-endian).
    pub fn to_large_bytes(&self) -> [u8; LARGE_NID_BYTES] {
        let mut out = [0u8; LARGE_NID_BYTES];
        if self.is_any() {
            return [0xFF; LARGE_NID_BYTES];
        }
        out[1] = self.net.lnd.0;
        out[2..4].copy_from_slice(&self.net.num.to_be_bytes());
        match self.addr {
            NidAddr::V4(a) => {
                out[0] = 0;
                out[4..8].copy_from_slice(&a.to_be_bytes());
            }
            NidAddr::V6(bytes) => {
                out[0] = 12;
                out[4..20].copy_from_slice(&bytes);
            }
        }
        out
    }

    /// A NID from the 20-byte `struct lnet_nid` form. Type 0xFF is ANY whatever the other bytes.
    pub fn from_large_bytes(bytes: &[u8]) -> Result<Nid, NidError> {
        let b: &[u8; LARGE_NID_BYTES] = bytes
            .get(..LARGE_NID_BYTES)
            .and_then(|s| s.try_into().ok())
            .ok_or(NidError::Truncated {
                expected: LARGE_NID_BYTES,
                got: bytes.len(),
            })?;
        if b[1] == LndType::ANY.0 {
            return Ok(Nid::ANY);
        }
        let net = Net::new(LndType(b[1]), u16::from_be_bytes([b[2], b[3]]));
        match b[0] {
            0 => Ok(Nid::new(net, u32::from_be_bytes([b[4], b[5], b[6], b[7]]))),
            12 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(&b[4..20]);
                Ok(Nid {
                    net,
                    addr: NidAddr::V6(a),
                })
            }
            size => Err(NidError::UnsupportedNidSize { size }),
        }
    }

    /// Which of `ncpts` CPTs this NID belongs to, as the kernel spreads peers, their
    /// connections and their messages' state over its CPTs (`lnet_nid_cpt_hash`): for a
    /// NID with a 4-byte address, the sum of the eight bytes of its 64-bit form (a
    /// multiplicative hash of that form for the gni and kfi LNDs); for a larger one, a
    /// multiplicative hash of its address words and net. Neighbouring addresses land on
    /// different CPTs.
    ///
    /// The byte sum is inlined where it is called (with a constant `ncpts`, its remainder
    /// is a mask); the hashes are not.
    #[inline]
    pub fn cpt(&self, ncpts: u32) -> u32 {
        if ncpts <= 1 {
            return 0;
        }
        let hashed = matches!(self.net.lnd, LndType::GNILND | LndType::KFILND) || self.is_any();
        if let (NidAddr::V4(addr), false) = (self.addr, hashed) {
            // The bytes of the 64-bit form (the LND type, the net number's two, the
            // address's four; the top byte is 0) summed: each pair into a 16-bit lane
            // (at most 510), then the four lanes into the top one (at most 2040, so no
            // lane carries into the next).
            let nid4 = (u64::from(self.net.to_u32()) << 32) | u64::from(addr);
            let bytes = 0x00FF_00FF_00FF_00FF;
            let pairs = (nid4 & bytes) + ((nid4 >> 8) & bytes);
            let sum = pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48;
            return u32::try_from(sum).unwrap_or(0) % ncpts;
        }
        self.hashed_cpt(ncpts)
    }

    /// [`Nid::cpt`] by a multiplicative hash (`ncpts` above 1).
    #[inline(never)]
    fn hashed_cpt(&self, ncpts: u32) -> u32 {
        // `LNET_CPT_BITS`: the fewest bits that count the CPTs.
        let bits = u32::BITS - ncpts.saturating_sub(1).leading_zeros();
        match self.to_nid4() {
            // ANY: all eight bytes 0xFF.
            Ok(u64::MAX) => 2040 % ncpts,
            Ok(key) => {
                let cpt = hash64(key, bits);
                if cpt < ncpts {
                    cpt
                } else {
                    let spread = key.wrapping_add(u64::from(cpt) + u64::from(cpt >> 1));
                    u32::try_from(spread % u64::from(ncpts)).unwrap_or(0)
                }
            }
            Err(_) => {
                let large = self.to_large_bytes();
                let h = large
                    .chunks_exact(4)
                    .skip(1)
                    .map(|w| w.try_into().map_or(0, u32::from_le_bytes))
                    .fold(0u32, |h, w| hash32(w ^ h, 32));
                let cpt = hash32(self.net.to_u32() ^ h, bits);
                if cpt < ncpts {
                    cpt
                } else {
                    h.wrapping_add(cpt).wrapping_add(cpt >> 1) % ncpts
                }
            }
        }
    }

    /// `nidhash()`: the value o2iblnd (2.16+) compares to break connection races.
    ///
    /// The net id XOR each of the four address words read raw from their big-endian
    /// storage on a little-endian host.
    pub fn nidhash(&self) -> u32 {
        let large = self.to_large_bytes();
        let mut h =
            (u32::from(large[1]) << 16) | u32::from(u16::from_be_bytes([large[2], large[3]]));
        for w in large.chunks_exact(4).skip(1) {
            h ^= w.try_into().map_or(0, u32::from_le_bytes);
        }
        h
    }
}

/// The kernel's multiplicative hash of a 32-bit value to `bits` bits (`hash_32`).
fn hash32(val: u32, bits: u32) -> u32 {
    let h = val.wrapping_mul(0x61C8_8647);
    h.checked_shr(32 - bits.min(32)).unwrap_or(0)
}

/// The kernel's multiplicative hash of a 64-bit value to `bits` bits (`hash_64`).
fn hash64(val: u64, bits: u32) -> u32 {
    let h = val.wrapping_mul(0x61C8_8646_80B5_83EB);
    u32::try_from(h.checked_shr(64 - bits.min(64)).unwrap_or(0)).unwrap_or(u32::MAX)
}

/// NIDs order as the kernel compares them: byte-wise over the large form.
impl Ord for Nid {
    fn cmp(&self, other: &Nid) -> std::cmp::Ordering {
        self.to_large_bytes().cmp(&other.to_large_bytes())
    }
}

impl PartialOrd for Nid {
    fn partial_cmp(&self, other: &Nid) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Nid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_any() {
            return f.write_str("<?>");
        }
        let form = self.net.lnd.addr_form();
        match (self.addr, form) {
            (NidAddr::V4(a), Some(AddrForm::Ip)) => write!(f, "{}", Ipv4Addr::from(a))?,
            (NidAddr::V4(a), Some(AddrForm::Number | AddrForm::Loopback)) => write!(f, "{a}")?,
            (NidAddr::V4(a), None) => write!(f, "{a:x}")?,
            (NidAddr::V6(a), _) => write!(f, "{}", Ipv6Addr::from(a))?,
        }
        write!(f, "@{}", self.net)
    }
}

impl FromStr for Nid {
    type Err = NidError;

    fn from_str(s: &str) -> Result<Nid, NidError> {
        parse_nid(s)
    }
}

fn parse_nid(text: &str) -> Result<Nid, NidError> {
    if text.is_empty() {
        return Err(NidError::Empty);
    }
    if text == "*" || text == "<?>" {
        return Ok(Nid::ANY);
    }
    let (addr, net) = match text.split_once('@') {
        Some((a, n)) => (a, parse_net(n)?),
        None => (text, Net::new(LndType::SOCKLND, 0)),
    };
    let lnd_name = || net.to_string();
    let addr = match net.lnd.addr_form() {
        Some(AddrForm::Loopback) => NidAddr::V4(0),
        Some(AddrForm::Ip) => parse_ip_addr(addr).ok_or_else(|| NidError::BadAddress {
            lnd: lnd_name(),
            text: addr.to_owned(),
            expected: "a dotted IPv4 address or an IPv6 address",
        })?,
        Some(AddrForm::Number) => {
            NidAddr::V4(parse_number(addr).ok_or_else(|| NidError::BadAddress {
                lnd: lnd_name(),
                text: addr.to_owned(),
                expected: "a decimal or 0x-hex 32-bit number",
            })?)
        }
        None => NidAddr::V4(parse_hex(addr).ok_or_else(|| NidError::BadAddress {
            lnd: lnd_name(),
            text: addr.to_owned(),
            expected: "a hex 32-bit number",
        })?),
    };
    Ok(Nid { net, addr })
}

/// `%u.%u.%u.%u` with each part at most 255 and nothing left over, or IPv6 text.
fn parse_ip_addr(text: &str) -> Option<NidAddr> {
    if text.contains(':') {
        return text.parse::<Ipv6Addr>().ok().map(|a| {
            // An IPv4-mapped IPv6 address is still a 16-byte address on the wire.
            NidAddr::V6(a.octets())
        });
    }
    let mut parts = text.split('.');
    let mut addr = 0u32;
    for _ in 0..4 {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 10 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let v: u32 = part.parse().ok()?;
        if v > 255 {
            return None;
        }
        addr = (addr << 8) | v;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(NidAddr::V4(addr))
}

fn parse_number(text: &str) -> Option<u32> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return parse_hex(hex);
    }
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn parse_hex(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(text, 16).ok()
}

/// `LNET_PID_LUSTRE`: the pid of every kernel LNet instance.
pub const PID_LUSTRE: u32 = 12345;
/// `LNET_PID_ANY`.
pub const PID_ANY: u32 = u32::MAX;
/// `LNET_PID_RESERVED`: reserved pid bits.
pub const PID_RESERVED: u32 = 0xF000_0000;
/// `LNET_PID_USERFLAG`: set on the pids of userspace peers.
pub const PID_USERFLAG: u32 = 0x8000_0000;

/// A process id: a NID and a pid. socklnd keys peers by both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessId {
    /// The NID.
    pub nid: Nid,
    /// The pid (12345 for kernel nodes and for lnet-router).
    pub pid: u32,
}

impl ProcessId {
    /// A process id with the kernel's pid, 12345.
    pub const fn lustre(nid: Nid) -> ProcessId {
        ProcessId {
            nid,
            pid: PID_LUSTRE,
        }
    }
}

impl fmt::Display for ProcessId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pid == PID_ANY {
            write!(f, "LNET_PID_ANY-{}", self.nid)
        } else if self.pid & PID_USERFLAG != 0 {
            write!(f, "U{}-{}", self.pid & !PID_USERFLAG, self.nid)
        } else {
            write!(f, "{}-{}", self.pid, self.nid)
        }
    }
}

impl FromStr for ProcessId {
    type Err = NidError;

    /// `pid-nid`, `U<pid>-nid`, `LNET_PID_ANY-nid`, or a bare NID (pid 12345).
    fn from_str(s: &str) -> Result<ProcessId, NidError> {
        let Some((pid_text, nid_text)) = s.split_once('-') else {
            return Ok(ProcessId::lustre(s.parse()?));
        };
        let bad = || NidError::BadPid {
            text: pid_text.to_owned(),
        };
        let pid = if pid_text == "LNET_PID_ANY" {
            PID_ANY
        } else if let Some(user) = pid_text.strip_prefix('U') {
            let v: u32 = parse_decimal(user).ok_or_else(bad)?;
            if v & PID_USERFLAG != 0 {
                return Err(bad());
            }
            v | PID_USERFLAG
        } else {
            parse_decimal(pid_text).ok_or_else(bad)?
        };
        Ok(ProcessId {
            nid: nid_text.parse()?,
            pid,
        })
    }
}

fn parse_decimal(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A net serializes as its lnetctl spelling (`tcp`, `o2ib1`), so JSON shows what YAML shows.
impl serde::Serialize for Net {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A NID serializes as its text form (`10.0.0.1@tcp`).
impl serde::Serialize for Nid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A NID deserializes from its text form.
impl<'de> serde::Deserialize<'de> for Nid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Nid, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A net deserializes from its text form.
impl<'de> serde::Deserialize<'de> for Net {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Net, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
