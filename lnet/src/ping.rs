//! Ping and push info: the buffer a node publishes about its NIs.
//!
//! A ping is an LNet GET on portal [`RESERVED_PORTAL`] with match bits
//! [`PING_MATCHBITS`]; the REPLY carries the responder's ping info. A discovery push is a
//! PUT to the same portal and match bits carrying the sender's own ping info. The layout,
//! all scalars in sender order (a receiver that reads the magic as `0x676E6970` swaps every
//! scalar; large NIDs are never swapped):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic [`PING_MAGIC`] |
//! | 4 | 4 | [`Features`] |
//! | 8 | 4 | pid |
//! | 12 | 4 | `nnis`: number of 16-byte nid4 entries that follow, 0@lo included |
//! | 16 | 16 × nnis | `{u64 nid4, u32 status, u32 msg_size}`; entry 0 is 0@lo, its status is the sequence number and, when `LARGE_ADDR` is set, its `msg_size` is the byte size of header + nid4 entries + large entries |
//! | … | | large entries (`LARGE_ADDR` only): `{u32 status, large NID}` cut to 4 + nid_size + 8 bytes rounded up to 4 (12 bytes for a 4-byte address, 24 for IPv6) |
//! | … | | anything after: the LND metadata block (`METADATA`: `u32` count, count × 40 bytes) and slack, kept as opaque bytes |
//!
//! [`PingInfo::decode`] checks the layout only and never panics; [`PingInfo::validate`]
//! applies the receiver checks that make a ping fail (`NI_STATUS` set, not too many
//! entries, entry 0 is 0@lo). A payload shorter than the info it starts is
//! [`PingError::Truncated`]: the kernel then pings again with a larger sink.
//!
//! [`PingInfo::encode`] writes little-endian. The 4th word of the nid4 entries (other than
//! entry 0 with `LARGE_ADDR`) is unused: decoding ignores it and encoding writes 0, as the
//! kernel does. Everything else round-trips exactly.

use std::fmt;
use std::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign};

use crate::nid::{LndType, Nid, NidError, LARGE_NID_BYTES};
use crate::order::{bytes_at, ByteOrder};

/// `LNET_PROTO_PING_MAGIC` ("ping"; little-endian bytes `67 6e 69 70`).
pub const PING_MAGIC: u32 = 0x7069_6E67;

/// `LNET_PROTO_PING_MATCHBITS`: the match bits of ping GETs and push PUTs.
pub const PING_MATCHBITS: u64 = 0x8000_0000_0000_0000;

/// `LNET_RESERVED_PORTAL`: the portal of ping GETs and push PUTs.
pub const RESERVED_PORTAL: u32 = 0;

/// Bytes of the ping info header (magic, features, pid, nnis).
pub const PING_INFO_HDR_SIZE: usize = 16;

/// Bytes of one nid4 entry (`struct lnet_ni_status`).
pub const NI_STATUS_SIZE: usize = 16;

/// `LNET_INTERFACES_MIN`: the number of entries the smallest ping sink holds.
pub const INTERFACES_MIN: u32 = 16;

/// `LNET_PING_INFO_MIN_SIZE` = 16 + 16 × 16: the smallest sink a node pings with.
pub const PING_INFO_MIN_SIZE: usize = PING_INFO_HDR_SIZE + NI_STATUS_SIZE * INTERFACES_MIN as usize;

/// Default `lnet_interfaces_max` in 2.15 and 2.16: the most nid4 entries a receiver takes.
pub const INTERFACES_MAX_DEFAULT_OLD: u32 = 200;

/// Default `lnet_interfaces_max` in 2.17 and later (`LNET_INTERFACES_MAX_DEFAULT`).
pub const INTERFACES_MAX_DEFAULT: u32 = 4096;

/// Bytes of a large entry's status word.
const LARGE_STATUS_SIZE: usize = 4;

/// The set of feature bits in a ping info (`pi_features`). Unknown bits are kept.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Features(u32);

impl Features {
    /// No bit set.
    pub const EMPTY: Features = Features(0);
    /// Legacy "plain ping"; current nodes do not set it.
    pub const BASE: Features = Features(0x01);
    /// The entries carry NI status; receivers reject an info without it.
    pub const NI_STATUS: Features = Features(0x02);
    /// Routing (forwarding) is disabled on the node.
    pub const RTE_DISABLED: Features = Features(0x04);
    /// The node is Multi-Rail capable.
    pub const MULTI_RAIL: Features = Features(0x08);
    /// Discovery is enabled on the node.
    pub const DISCOVERY: Features = Features(0x10);
    /// Large-NID entries follow the nid4 entries (2.16+).
    pub const LARGE_ADDR: Features = Features(0x20);
    /// The primary NID is the first large entry (2.16+).
    pub const PRIMARY_LARGE: Features = Features(0x40);
    /// An LND metadata block follows the entries (2.17+).
    pub const METADATA: Features = Features(0x80);
    /// Every bit this implementation knows.
    pub const ALL_KNOWN: Features = Features(0xFF);

    const NAMES: [(Features, &'static str); 8] = [
        (Features::BASE, "BASE"),
        (Features::NI_STATUS, "NI_STATUS"),
        (Features::RTE_DISABLED, "RTE_DISABLED"),
        (Features::MULTI_RAIL, "MULTI_RAIL"),
        (Features::DISCOVERY, "DISCOVERY"),
        (Features::LARGE_ADDR, "LARGE_ADDR"),
        (Features::PRIMARY_LARGE, "PRIMARY_LARGE"),
        (Features::METADATA, "METADATA"),
    ];

    /// The features with exactly these bits, unknown ones included.
    pub const fn from_bits(bits: u32) -> Features {
        Features(bits)
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: Features) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any bit of `other` is set.
    pub const fn intersects(self, other: Features) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The bits of both.
    pub const fn union(self, other: Features) -> Features {
        Features(self.0 | other.0)
    }

    /// These bits without those of `other`.
    pub const fn difference(self, other: Features) -> Features {
        Features(self.0 & !other.0)
    }

    /// The bits this implementation has no name for.
    pub const fn unknown(self) -> Features {
        self.difference(Features::ALL_KNOWN)
    }

    /// Sets the bits of `other`.
    pub fn insert(&mut self, other: Features) {
        self.0 |= other.0;
    }

    /// Clears the bits of `other`.
    pub fn remove(&mut self, other: Features) {
        self.0 &= !other.0;
    }

    /// Sets or clears the bits of `other`.
    pub fn set(&mut self, other: Features, on: bool) {
        if on {
            self.insert(other);
        } else {
            self.remove(other);
        }
    }
}

impl BitOr for Features {
    type Output = Features;

    fn bitor(self, rhs: Features) -> Features {
        self.union(rhs)
    }
}

impl BitOrAssign for Features {
    fn bitor_assign(&mut self, rhs: Features) {
        self.insert(rhs);
    }
}

impl BitAnd for Features {
    type Output = Features;

    fn bitand(self, rhs: Features) -> Features {
        Features(self.0 & rhs.0)
    }
}

impl BitAndAssign for Features {
    fn bitand_assign(&mut self, rhs: Features) {
        self.0 &= rhs.0;
    }
}

/// `NI_STATUS|MULTI_RAIL|DISCOVERY`, unknown bits in hex, `0` when empty.
impl fmt::Display for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("0");
        }
        let mut first = true;
        let mut sep = |f: &mut fmt::Formatter<'_>| {
            let r = if first { Ok(()) } else { f.write_str("|") };
            first = false;
            r
        };
        for (bit, name) in Features::NAMES {
            if self.contains(bit) {
                sep(f)?;
                f.write_str(name)?;
            }
        }
        let unknown = self.unknown();
        if !unknown.is_empty() {
            sep(f)?;
            write!(f, "{:#x}", unknown.0)?;
        }
        Ok(())
    }
}

impl fmt::Debug for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Features({:#04x}: {self})", self.0)
    }
}

/// The status word of a ping entry. Any value is kept; only three have a meaning.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NiStatusValue(pub u32);

impl NiStatusValue {
    /// `LNET_NI_STATUS_UP`.
    pub const UP: NiStatusValue = NiStatusValue(0x15AA_C0DE);
    /// `LNET_NI_STATUS_DOWN`.
    pub const DOWN: NiStatusValue = NiStatusValue(0xDEAD_FACE);
    /// `LNET_NI_STATUS_INVALID`.
    pub const INVALID: NiStatusValue = NiStatusValue(0);

    /// Whether the NI is reported up. Receivers treat every other value as not up.
    pub const fn is_up(self) -> bool {
        self.0 == NiStatusValue::UP.0
    }
}

impl fmt::Display for NiStatusValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            NiStatusValue::UP => f.write_str("up"),
            NiStatusValue::DOWN => f.write_str("down"),
            NiStatusValue::INVALID => f.write_str("invalid"),
            NiStatusValue(other) => write!(f, "{other:#010x}"),
        }
    }
}

impl fmt::Debug for NiStatusValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NiStatusValue({self})")
    }
}

/// A nid4 entry after entry 0: an NI and its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NiStatus {
    /// The NI's NID; it must have a 64-bit form.
    pub nid: Nid,
    /// Its status.
    pub status: NiStatusValue,
}

impl NiStatus {
    /// An entry with any status.
    pub const fn new(nid: Nid, status: NiStatusValue) -> NiStatus {
        NiStatus { nid, status }
    }

    /// An entry for an NI that is up.
    pub const fn up(nid: Nid) -> NiStatus {
        NiStatus::new(nid, NiStatusValue::UP)
    }

    /// An entry for an NI that is down.
    pub const fn down(nid: Nid) -> NiStatus {
        NiStatus::new(nid, NiStatusValue::DOWN)
    }
}

/// A large entry (`LARGE_ADDR`): a status and a NID in the 20-byte form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LargeNiStatus {
    /// Its status.
    pub status: NiStatusValue,
    /// The NI's NID (the kernel lists here the NIs that have no 64-bit form).
    pub nid: Nid,
}

impl LargeNiStatus {
    /// An entry with any status.
    pub const fn new(nid: Nid, status: NiStatusValue) -> LargeNiStatus {
        LargeNiStatus { status, nid }
    }

    /// Bytes of this entry on the wire: 4 + (nid_size + 8), rounded up to 4.
    pub fn wire_len(&self) -> usize {
        large_entry_len(self.nid.is_nid4())
    }
}

/// Which entry of a ping info an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryIndex {
    /// A nid4 entry; 0 is the 0@lo entry.
    Nid4(usize),
    /// A large entry, counted from the first one.
    Large(usize),
}

impl fmt::Display for EntryIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntryIndex::Nid4(i) => write!(f, "nid4 entry {i}"),
            EntryIndex::Large(i) => write!(f, "large entry {i}"),
        }
    }
}

/// Errors from decoding, validating or encoding a ping info.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PingError {
    /// The bytes stop before the end of the info their header announces. The kernel
    /// treats this apart from the others: it pings again with a sink of `needed` bytes.
    #[error("ping info truncated: needs {needed} bytes, got {got}")]
    Truncated {
        /// Bytes the info needs (as far as the bytes received tell).
        needed: usize,
        /// Bytes received.
        got: usize,
    },
    /// The first word is not the ping magic in either byte order.
    #[error("bad ping info magic {got:#010x}: expected {PING_MAGIC:#010x} in either byte order")]
    BadMagic {
        /// The first word, read little-endian.
        got: u32,
    },
    /// `pi_nnis` is 0: there is not even the 0@lo entry that carries the sequence number.
    #[error("ping info has no entries: expected at least the 0@lo entry")]
    NoEntries,
    /// `LARGE_ADDR` is set but entry 0's `msg_size` is not a multiple of 4 or is smaller
    /// than the header and nid4 entries.
    #[error("ping info msg_size {msg_size}: expected a multiple of 4 of at least {min}")]
    BadMsgSize {
        /// The `msg_size` received.
        msg_size: u32,
        /// Bytes of the header and the nid4 entries.
        min: usize,
    },
    /// A large entry runs past the end given by `msg_size`.
    #[error("large entry {index} at byte {offset} runs past the end of the info at byte {end}")]
    LargeEntryOverrun {
        /// Index of the large entry.
        index: usize,
        /// Byte offset of the entry.
        offset: usize,
        /// End of the info (`msg_size`).
        end: usize,
    },
    /// An entry's NID cannot be decoded.
    #[error("bad NID in ping info {entry}: {source}")]
    BadNid {
        /// The entry.
        entry: EntryIndex,
        /// Why the NID was refused.
        #[source]
        source: NidError,
    },
    /// An entry holds `LNET_NID_ANY` (or, in a large entry, the wildcard LND type).
    #[error("ping info {entry} holds LNET_NID_ANY")]
    AnyNid {
        /// The entry.
        entry: EntryIndex,
    },
    /// Validation: `NI_STATUS` is not set, so the entries carry no status.
    #[error("ping info features {features} lack NI_STATUS")]
    MissingNiStatus {
        /// The features received.
        features: Features,
    },
    /// Validation: more nid4 entries than `lnet_interfaces_max` allows.
    #[error("ping info has {got} nid4 entries: at most {max} allowed")]
    TooManyInterfaces {
        /// The receiver's `lnet_interfaces_max`.
        max: u32,
        /// Entries in the info, 0@lo included.
        got: usize,
    },
    /// Validation: entry 0 is not 0@lo.
    #[error("ping info entry 0 is {got}: expected 0@lo")]
    FirstNotLoopback {
        /// The NID found in entry 0.
        got: Nid,
    },
    /// Encoding: a nid4 entry holds a NID with no 64-bit form.
    #[error("ping info {entry} holds {nid}, which has no 64-bit form: use a large entry")]
    NotNid4 {
        /// The entry.
        entry: EntryIndex,
        /// The NID.
        nid: Nid,
    },
    /// Encoding: large entries without the `LARGE_ADDR` feature would be ignored.
    #[error("ping info has {count} large entries but LARGE_ADDR is not set")]
    LargeWithoutFeature {
        /// Number of large entries.
        count: usize,
    },
    /// Encoding: the info does not fit the 32-bit size fields.
    #[error("ping info of {size} bytes does not fit its 32-bit size fields")]
    TooLarge {
        /// Bytes of the info.
        size: usize,
    },
}

impl PingError {
    /// For [`PingError::Truncated`], the sink size to ping again with.
    pub fn needs_bigger_sink(&self) -> Option<usize> {
        match self {
            PingError::Truncated { needed, .. } => Some(*needed),
            _ => None,
        }
    }
}

/// A ping (or push) info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingInfo {
    /// `pi_features`.
    pub features: Features,
    /// `pi_pid`: the node's pid (12345 for kernel nodes).
    pub pid: u32,
    /// The NID of entry 0: 0@lo in every valid info ([`PingInfo::validate`] checks it).
    pub lo_nid: Nid,
    /// The status word of entry 0: the sequence number of the info, bumped each time the
    /// node rebuilds it.
    pub seqno: u32,
    /// The nid4 entries after entry 0, in wire order (the primary NID first).
    pub nis: Vec<NiStatus>,
    /// The large entries (only with `LARGE_ADDR`).
    pub large: Vec<LargeNiStatus>,
    /// Whatever follows the entries, as received: the LND metadata block when `METADATA`
    /// is set, and any slack after it. Never swapped, never interpreted.
    pub metadata: Vec<u8>,
}

impl PingInfo {
    /// An info with entry 0 = 0@lo carrying `seqno`, then `nis`; no large entries, no
    /// metadata. `features` are written as given (a kernel router uses
    /// `NI_STATUS | MULTI_RAIL | DISCOVERY`).
    pub fn new(pid: u32, seqno: u32, features: Features, nis: Vec<NiStatus>) -> PingInfo {
        PingInfo {
            features,
            pid,
            lo_nid: Nid::LO_0,
            seqno,
            nis,
            large: Vec::new(),
            metadata: Vec::new(),
        }
    }

    /// The same info with these large entries; sets `LARGE_ADDR` when there are any.
    pub fn with_large(mut self, large: Vec<LargeNiStatus>) -> PingInfo {
        if !large.is_empty() {
            self.features.insert(Features::LARGE_ADDR);
        }
        self.large = large;
        self
    }

    /// `pi_nnis`: the number of nid4 entries, 0@lo included.
    pub fn nnis(&self) -> usize {
        self.nis.len().saturating_add(1)
    }

    /// Bytes of the header, nid4 entries and large entries: what `msg_size` holds with
    /// `LARGE_ADDR`, and the sink a pinger needs (without the metadata).
    pub fn info_size(&self) -> usize {
        let nid4 = NI_STATUS_SIZE.saturating_mul(self.nnis());
        let large: usize = self.large.iter().map(LargeNiStatus::wire_len).sum();
        PING_INFO_HDR_SIZE
            .saturating_add(nid4)
            .saturating_add(large)
    }

    /// Bytes [`PingInfo::encode`] writes: [`PingInfo::info_size`] plus the metadata.
    pub fn encoded_len(&self) -> usize {
        self.info_size().saturating_add(self.metadata.len())
    }

    /// Every NI listed after 0@lo, nid4 entries then large entries, with its status.
    pub fn statuses(&self) -> impl Iterator<Item = (Nid, NiStatusValue)> + '_ {
        self.nis
            .iter()
            .map(|n| (n.nid, n.status))
            .chain(self.large.iter().map(|l| (l.nid, l.status)))
    }

    /// The status listed for `nid`, if the info lists it.
    pub fn status_of(&self, nid: &Nid) -> Option<NiStatusValue> {
        self.statuses().find(|(n, _)| n == nid).map(|(_, s)| s)
    }

    /// The receiver checks that make a ping fail: `NI_STATUS` set, at most
    /// `max_interfaces` nid4 entries (`lnet_interfaces_max`: [`INTERFACES_MAX_DEFAULT`] or
    /// [`INTERFACES_MAX_DEFAULT_OLD`]), entry 0 is 0@lo. (At least one entry is a layout
    /// rule that [`PingInfo::decode`] already enforces.)
    pub fn validate(&self, max_interfaces: u32) -> Result<(), PingError> {
        if !self.features.contains(Features::NI_STATUS) {
            return Err(PingError::MissingNiStatus {
                features: self.features,
            });
        }
        let nnis = self.nnis();
        if u64::try_from(nnis).unwrap_or(u64::MAX) > u64::from(max_interfaces) {
            return Err(PingError::TooManyInterfaces {
                max: max_interfaces,
                got: nnis,
            });
        }
        if self.lo_nid != Nid::LO_0 {
            return Err(PingError::FirstNotLoopback { got: self.lo_nid });
        }
        Ok(())
    }

    /// [`PingInfo::decode`] then [`PingInfo::validate`]: what a pinger does with a REPLY.
    pub fn decode_validated(buf: &[u8], max_interfaces: u32) -> Result<PingInfo, PingError> {
        let info = PingInfo::decode(buf)?;
        info.validate(max_interfaces)?;
        Ok(info)
    }

    /// The info's bytes, little-endian.
    pub fn encode(&self) -> Result<Vec<u8>, PingError> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Appends the info's bytes (little-endian) to `out`. On error nothing is appended.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), PingError> {
        let start = out.len();
        let result = self.write(out, ByteOrder::Little);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    fn write(&self, out: &mut Vec<u8>, order: ByteOrder) -> Result<(), PingError> {
        let large_addr = self.features.contains(Features::LARGE_ADDR);
        if !self.large.is_empty() && !large_addr {
            return Err(PingError::LargeWithoutFeature {
                count: self.large.len(),
            });
        }
        let info_size = self.info_size();
        let too_large = || PingError::TooLarge { size: info_size };
        let nnis = u32::try_from(self.nnis()).map_err(|_| too_large())?;
        let msg_size = u32::try_from(info_size).map_err(|_| too_large())?;
        let msg_size = if large_addr { msg_size } else { 0 };

        out.reserve(self.encoded_len());
        order.push_u32(out, PING_MAGIC);
        order.push_u32(out, self.features.bits());
        order.push_u32(out, self.pid);
        order.push_u32(out, nnis);

        order.push_u64(out, nid4_for_wire(&self.lo_nid, 0)?);
        order.push_u32(out, self.seqno);
        order.push_u32(out, msg_size);
        for (i, ni) in self.nis.iter().enumerate() {
            order.push_u64(out, nid4_for_wire(&ni.nid, i.saturating_add(1))?);
            order.push_u32(out, ni.status.0);
            order.push_u32(out, 0);
        }
        for (i, entry) in self.large.iter().enumerate() {
            if entry.nid.is_any() {
                return Err(PingError::AnyNid {
                    entry: EntryIndex::Large(i),
                });
            }
            order.push_u32(out, entry.status.0);
            let nid_len = entry.wire_len().saturating_sub(LARGE_STATUS_SIZE);
            let bytes = entry.nid.to_large_bytes();
            out.extend(bytes.iter().take(nid_len));
        }
        out.extend_from_slice(&self.metadata);
        Ok(())
    }

    /// Decodes an info (a REPLY or PUSH payload) in either byte order. Checks the layout
    /// only; see [`PingInfo::validate`] for the receiver checks.
    ///
    /// Bytes after the info (past `msg_size` with `LARGE_ADDR`, past the nid4 entries
    /// otherwise) are kept in [`PingInfo::metadata`].
    pub fn decode(buf: &[u8]) -> Result<PingInfo, PingError> {
        let got = buf.len();
        let truncated = |needed: usize| PingError::Truncated { needed, got };
        let magic = bytes_at::<4>(buf, 0).ok_or(truncated(PING_INFO_HDR_SIZE))?;
        let order = ByteOrder::detect(magic, PING_MAGIC).ok_or(PingError::BadMagic {
            got: u32::from_le_bytes(magic),
        })?;
        if got < PING_INFO_HDR_SIZE {
            return Err(truncated(PING_INFO_HDR_SIZE));
        }
        let rd = Reader { buf, order };
        let features = Features(rd.u32(4)?);
        let pid = rd.u32(8)?;
        let nnis = rd.u32(12)?;
        if nnis == 0 {
            return Err(PingError::NoEntries);
        }
        let nid4_end = usize::try_from(
            (PING_INFO_HDR_SIZE as u64).saturating_add((NI_STATUS_SIZE as u64) * u64::from(nnis)),
        )
        .unwrap_or(usize::MAX);
        let large_addr = features.contains(Features::LARGE_ADDR);
        let mut info_size = nid4_end;
        if large_addr {
            // Entry 0's msg_size, if the bytes reach it; without it the nid4 entries are
            // already missing and the error below says how many bytes are needed.
            if let Ok(msg_size) = rd.u32(PING_INFO_HDR_SIZE + 12) {
                let size = usize::try_from(msg_size).unwrap_or(usize::MAX);
                if msg_size % 4 != 0 || size < nid4_end {
                    return Err(PingError::BadMsgSize {
                        msg_size,
                        min: nid4_end,
                    });
                }
                info_size = size;
            }
        }
        if got < info_size {
            return Err(truncated(info_size));
        }

        let entries = buf
            .get(PING_INFO_HDR_SIZE..nid4_end)
            .ok_or(truncated(nid4_end))?;
        let mut nid4s = entries.chunks_exact(NI_STATUS_SIZE).enumerate();
        let (lo_nid, seqno) = match nid4s.next() {
            Some((_, entry)) => decode_nid4_entry(entry, 0, order)?,
            None => return Err(PingError::NoEntries),
        };
        let mut nis = Vec::with_capacity(entries.len() / NI_STATUS_SIZE);
        for (i, entry) in nid4s {
            let (nid, status) = decode_nid4_entry(entry, i, order)?;
            nis.push(NiStatus::new(nid, NiStatusValue(status)));
        }

        let mut large = Vec::new();
        let mut offset = nid4_end;
        while offset < info_size {
            let index = large.len();
            let rest = buf.get(offset..info_size).unwrap_or_default();
            let entry =
                decode_large_entry(rest, index, order).ok_or(PingError::LargeEntryOverrun {
                    index,
                    offset,
                    end: info_size,
                })??;
            offset = offset.saturating_add(entry.wire_len());
            large.push(entry);
        }

        Ok(PingInfo {
            features,
            pid,
            lo_nid,
            seqno,
            nis,
            large,
            metadata: buf.get(info_size..).unwrap_or_default().to_vec(),
        })
    }

    #[cfg(test)]
    fn encode_big_endian(&self) -> Result<Vec<u8>, PingError> {
        let mut out = Vec::new();
        self.write(&mut out, ByteOrder::Big)?;
        Ok(out)
    }
}

/// The 64-bit form of an entry's NID, refusing ANY and NIDs without one.
fn nid4_for_wire(nid: &Nid, index: usize) -> Result<u64, PingError> {
    let entry = EntryIndex::Nid4(index);
    if nid.is_any() {
        return Err(PingError::AnyNid { entry });
    }
    nid.to_nid4()
        .map_err(|_| PingError::NotNid4 { entry, nid: *nid })
}

/// Bytes of a large entry: 4 + (nid_size + 8) rounded up to 4, where nid_size is 0 for a
/// 4-byte address and 12 for a 16-byte one.
fn large_entry_len(nid4: bool) -> usize {
    if nid4 {
        LARGE_STATUS_SIZE + 8
    } else {
        LARGE_STATUS_SIZE + LARGE_NID_BYTES
    }
}

/// One 16-byte nid4 entry: its NID and status word (the 4th word is not read).
fn decode_nid4_entry(
    entry: &[u8],
    index: usize,
    order: ByteOrder,
) -> Result<(Nid, u32), PingError> {
    let at = EntryIndex::Nid4(index);
    let short = || PingError::BadNid {
        entry: at,
        source: NidError::Truncated {
            expected: NI_STATUS_SIZE,
            got: entry.len(),
        },
    };
    let raw = order.u64_at(entry, 0).ok_or_else(short)?;
    let status = order.u32_at(entry, 8).ok_or_else(short)?;
    let nid = Nid::from_nid4(raw).map_err(|source| PingError::BadNid { entry: at, source })?;
    if nid.is_any() {
        return Err(PingError::AnyNid { entry: at });
    }
    Ok((nid, status))
}

/// The large entry at the start of `rest` (which ends where the info ends); `None` when
/// the entry does not fit.
fn decode_large_entry(
    rest: &[u8],
    index: usize,
    order: ByteOrder,
) -> Option<Result<LargeNiStatus, PingError>> {
    let at = EntryIndex::Large(index);
    let status = NiStatusValue(order.u32_at(rest, 0)?);
    let nid_size = *rest.get(LARGE_STATUS_SIZE)?;
    let nid_type = *rest.get(LARGE_STATUS_SIZE + 1)?;
    if nid_type == LndType::ANY.0 {
        return Some(Err(PingError::AnyNid { entry: at }));
    }
    let len = (LARGE_STATUS_SIZE + usize::from(nid_size) + 8).next_multiple_of(4);
    let nid_bytes = rest.get(LARGE_STATUS_SIZE..len)?;
    let mut full = [0u8; LARGE_NID_BYTES];
    for (dst, src) in full.iter_mut().zip(nid_bytes) {
        *dst = *src;
    }
    Some(
        Nid::from_large_bytes(&full)
            .map(|nid| LargeNiStatus { status, nid })
            .map_err(|source| PingError::BadNid { entry: at, source }),
    )
}

/// Reads scalars of an info in its byte order; a read past the end is `Truncated`.
struct Reader<'a> {
    buf: &'a [u8],
    order: ByteOrder,
}

impl Reader<'_> {
    fn u32(&self, off: usize) -> Result<u32, PingError> {
        self.order
            .u32_at(self.buf, off)
            .ok_or(PingError::Truncated {
                needed: off.saturating_add(4),
                got: self.buf.len(),
            })
    }
}

#[cfg(test)]
mod tests;
