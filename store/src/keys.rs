//! Key encodings. Every key is a fixed-layout big-endian binary form (or a validated name),
//! so the engine's byte order is the order a reader expects: nets by their 32-bit id,
//! NIDs as the kernel compares them (the 20-byte `struct lnet_nid` form), numbers
//! ascending. Decoding checks the length and that the bytes are the canonical encoding of
//! what they decode to, so a damaged key is reported, never misread.

use lnet::nid::LARGE_NID_BYTES;
use lnet::{Net, Nid};

use crate::error::DecodeError;

/// Bytes of a net key.
pub(crate) const NET_KEY_BYTES: usize = 4;
/// Bytes of a route key: the net then the gateway.
pub(crate) const ROUTE_KEY_BYTES: usize = NET_KEY_BYTES + LARGE_NID_BYTES;
/// Bytes of a fault rule key: the NI's NID then the rule id.
pub(crate) const FAULT_KEY_BYTES: usize = LARGE_NID_BYTES + 4;
/// Longest token name.
pub const MAX_TOKEN_NAME: usize = 64;

fn exact<const N: usize>(bytes: &[u8]) -> Result<[u8; N], DecodeError> {
    bytes.try_into().map_err(|_| DecodeError::Length {
        expected: N,
        found: bytes.len(),
    })
}

/// A net as its 32-bit id, big-endian.
pub(crate) fn net_key(net: Net) -> [u8; NET_KEY_BYTES] {
    net.to_u32().to_be_bytes()
}

/// The net of a net key.
pub(crate) fn decode_net(bytes: &[u8]) -> Result<Net, DecodeError> {
    let raw = u32::from_be_bytes(exact::<NET_KEY_BYTES>(bytes)?);
    let net = Net::from_u32(raw);
    if net.to_u32() != raw {
        return Err(DecodeError::Nid {
            reason: format!("net id {raw:#010x} is not a canonical net"),
        });
    }
    Ok(net)
}

/// A NID in its 20-byte binary form.
pub(crate) fn nid_key(nid: &Nid) -> [u8; LARGE_NID_BYTES] {
    nid.to_large_bytes()
}

/// The NID of a 20-byte key.
pub(crate) fn decode_nid(bytes: &[u8]) -> Result<Nid, DecodeError> {
    let raw = exact::<LARGE_NID_BYTES>(bytes)?;
    let nid = Nid::from_large_bytes(&raw).map_err(|e| DecodeError::NidBytes {
        source: Box::new(e),
    })?;
    if nid.to_large_bytes() != raw {
        return Err(DecodeError::Nid {
            reason: "bytes are not the canonical form of a NID".to_owned(),
        });
    }
    Ok(nid)
}

/// A route: the remote net, then the gateway.
pub(crate) fn route_key(net: Net, gateway: &Nid) -> [u8; ROUTE_KEY_BYTES] {
    let mut out = [0u8; ROUTE_KEY_BYTES];
    let (a, b) = out.split_at_mut(NET_KEY_BYTES);
    a.copy_from_slice(&net_key(net));
    b.copy_from_slice(&nid_key(gateway));
    out
}

/// The net and gateway of a route key.
pub(crate) fn decode_route(bytes: &[u8]) -> Result<(Net, Nid), DecodeError> {
    let raw = exact::<ROUTE_KEY_BYTES>(bytes)?;
    let (a, b) = raw.split_at(NET_KEY_BYTES);
    Ok((decode_net(a)?, decode_nid(b)?))
}

/// A position or id as 4 big-endian bytes.
pub(crate) fn u32_key(n: u32) -> [u8; 4] {
    n.to_be_bytes()
}

/// The number of a 4-byte key.
pub(crate) fn decode_u32(bytes: &[u8]) -> Result<u32, DecodeError> {
    Ok(u32::from_be_bytes(exact::<4>(bytes)?))
}

/// An event id as 8 big-endian bytes.
pub(crate) fn u64_key(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

/// The number of an 8-byte key.
pub(crate) fn decode_u64(bytes: &[u8]) -> Result<u64, DecodeError> {
    Ok(u64::from_be_bytes(exact::<8>(bytes)?))
}

/// A fault rule: the NID of the local NI it applies at, then its id.
pub(crate) fn fault_key(ni: &Nid, id: u32) -> [u8; FAULT_KEY_BYTES] {
    let mut out = [0u8; FAULT_KEY_BYTES];
    let (a, b) = out.split_at_mut(LARGE_NID_BYTES);
    a.copy_from_slice(&nid_key(ni));
    b.copy_from_slice(&u32_key(id));
    out
}

/// The NI and id of a fault rule key.
pub(crate) fn decode_fault(bytes: &[u8]) -> Result<(Nid, u32), DecodeError> {
    let raw = exact::<FAULT_KEY_BYTES>(bytes)?;
    let (a, b) = raw.split_at(LARGE_NID_BYTES);
    Ok((decode_nid(a)?, decode_u32(b)?))
}

/// Whether `name` may name a token: 1 to [`MAX_TOKEN_NAME`] bytes of ASCII letters,
/// digits, `.`, `_` and `-`.
pub(crate) fn check_token_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > MAX_TOKEN_NAME {
        return Err("a token name has 1 to 64 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("a token name has only ASCII letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

/// The token name of a key.
pub(crate) fn decode_token_name(bytes: &[u8]) -> Result<String, DecodeError> {
    let text = String::from_utf8_lossy(bytes).into_owned();
    check_token_name(&text).map_err(|reason| DecodeError::Name {
        text: text.clone(),
        reason,
    })?;
    Ok(text)
}

/// The tunable named by a key (its `lnetctl set` name).
pub(crate) fn decode_tunable(bytes: &[u8]) -> Result<lnet::tunables::TunableName, DecodeError> {
    let text = String::from_utf8_lossy(bytes).into_owned();
    match text.parse::<lnet::tunables::TunableName>() {
        Ok(name) if name.as_str() == text => Ok(name),
        _ => Err(DecodeError::Name {
            text,
            reason: "not the name of a tunable",
        }),
    }
}

/// Key bytes as lowercase hex, for error messages.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
