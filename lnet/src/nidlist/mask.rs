//! Netmask entries of a nidlist (`a.b.c.d/prefix`, IPv6 addresses): parsed, matched and
//! printed as libcfs does, IPv6 printed as glibc's `inet_ntop`.

use std::fmt::Write as _;
use std::net::Ipv4Addr;

use super::scan::num_check;
use super::{sized_address, ListNid, Lnd, NidAddrBytes, NidListError, SizedAddr};

/// The address of a netmask entry, as given (not masked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MaskAddr {
    V4([u8; 4]),
    V6([u8; 16]),
}

/// A netmask entry: `192.168.0.0/16@tcp`, `2001:db8::/32@tcp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NidMask {
    addr: MaskAddr,
    prefix: u8,
}

/// The first `prefix` bits of `addr` equal those of `net`.
pub(super) fn same_prefix(addr: &[u8], net: &[u8], prefix: u8) -> bool {
    let mut bits = u32::from(prefix);
    for (a, n) in addr.iter().zip(net) {
        let mask: u8 = match bits {
            0 => 0,
            1..=7 => 0xff << (8 - bits),
            _ => 0xff,
        };
        if a & mask != n & mask {
            return false;
        }
        bits = bits.saturating_sub(8);
    }
    true
}

impl NidMask {
    /// libcfs' `parse_nidmask` for the address part `s` of an entry on `lnd`.
    pub(super) fn parse(s: &str, lnd: Lnd) -> Result<NidMask, NidListError> {
        let prefix_error = || NidListError::PrefixLength(s.to_owned());
        let has_colon = s.contains(':');
        let (addr_text, prefix) = match s.split_once('/') {
            None if has_colon => (s, 128),
            None => return Err(prefix_error()),
            Some((addr, prefix)) => {
                let max = if has_colon { 128 } else { 32 };
                let (p, ok) = num_check(prefix.as_bytes(), 1, max);
                if !ok {
                    return Err(prefix_error());
                }
                (addr, p)
            }
        };
        let prefix = u8::try_from(prefix).map_err(|_| prefix_error())?;
        if !lnd.sized_addresses() {
            return Err(NidListError::NoNetmasks {
                addrrange: s.to_owned(),
            });
        }
        let addr = match sized_address(addr_text) {
            Some(SizedAddr::V4(a)) => MaskAddr::V4(a.octets()),
            Some(SizedAddr::V6(a)) => MaskAddr::V6(a.octets()),
            None => return Err(NidListError::MaskAddress(addr_text.to_owned())),
        };
        Ok(NidMask { addr, prefix })
    }

    pub(super) fn matches(&self, nid: &ListNid) -> bool {
        match (self.addr, nid.addr) {
            (MaskAddr::V4(net), NidAddrBytes::Four(a)) => same_prefix(&a, &net, self.prefix),
            (MaskAddr::V6(net), NidAddrBytes::Sixteen(a)) => same_prefix(&a, &net, self.prefix),
            _ => false,
        }
    }

    pub(super) fn print(&self, out: &mut String) {
        let max = match self.addr {
            MaskAddr::V4(a) => {
                let _ = write!(out, "{}", Ipv4Addr::from(a));
                32
            }
            MaskAddr::V6(a) => {
                ntop6(out, &a);
                128
            }
        };
        if self.prefix < max {
            let _ = write!(out, "/{}", self.prefix);
        }
    }
}

/// An IPv6 address as glibc's `inet_ntop` writes it: the first longest run of two or more
/// zero groups as `::`, and the last 32 bits dotted when the address is IPv4-compatible
/// (`::a.b.c.d`, six zero groups first) or IPv4-mapped (`::ffff:a.b.c.d`).
pub(super) fn ntop6(out: &mut String, a: &[u8; 16]) {
    let mut words = [0u16; 8];
    for (w, pair) in words.iter_mut().zip(a.chunks_exact(2)) {
        *w = pair.iter().fold(0u16, |acc, b| (acc << 8) | u16::from(*b));
    }
    // The first longest run of zero words, if at least two long.
    let (mut best, mut best_len) = (None, 0usize);
    let mut i = 0;
    while i < 8 {
        let run = words.iter().skip(i).take_while(|w| **w == 0).count();
        if run > best_len {
            best = Some(i);
            best_len = run;
        }
        i += run.max(1);
    }
    if best_len < 2 {
        best = None;
    }
    let mut i = 0;
    while i < 8 {
        if best == Some(i) {
            out.push(':');
            i += best_len;
            if i == 8 {
                out.push(':');
            }
            continue;
        }
        if i > 0 {
            out.push(':');
        }
        let embedded_v4 = i == 6
            && best == Some(0)
            && (best_len == 6 || (best_len == 5 && words.get(5) == Some(&0xffff)));
        if embedded_v4 {
            let _ = write!(
                out,
                "{}.{}.{}.{}",
                a.get(12).copied().unwrap_or(0),
                a.get(13).copied().unwrap_or(0),
                a.get(14).copied().unwrap_or(0),
                a.get(15).copied().unwrap_or(0)
            );
            break;
        }
        let _ = write!(out, "{:x}", words.get(i).copied().unwrap_or(0));
        i += 1;
    }
}
