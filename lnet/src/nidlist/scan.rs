//! How the C library reads the numbers and tokens of a nidlist: `isspace`, `strtoul`,
//! `sscanf`'s `%u`, and libcfs' token and number checks, leniencies included.

/// Whether C's `isspace` (C locale) takes byte `b`.
pub(super) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// C's `strtoul` on `s` in `base` (0: by prefix; 10; 16): the `unsigned long` value and
/// the bytes it took (0 when it converted nothing, as `strtoul` sets the end to the start).
/// An overflow gives `u64::MAX`; a leading `-` negates, wrapping.
pub(super) fn strtoul(s: &[u8], base: u32) -> (u64, usize) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = s.iter().take_while(|b| is_space(**b)).count();
    let negative = at(i) == b'-';
    if matches!(at(i), b'-' | b'+') {
        i += 1;
    }
    let mut base = base;
    if (base == 0 || base == 16) && at(i) == b'0' && matches!(at(i + 1), b'x' | b'X') {
        if !char::from(at(i + 2)).is_ascii_hexdigit() {
            // "0x" with no hex digit after it: only the 0 is taken.
            return (0, i + 1);
        }
        i += 2;
        base = 16;
    } else if base == 0 {
        base = if at(i) == b'0' { 8 } else { 10 };
    }
    let start = i;
    let mut value: u64 = 0;
    let mut overflow = false;
    while let Some(d) = char::from(at(i)).to_digit(base) {
        match value
            .checked_mul(u64::from(base))
            .and_then(|v| v.checked_add(u64::from(d)))
        {
            Some(v) => value = v,
            None => overflow = true,
        }
        i += 1;
    }
    if i == start {
        return (0, 0);
    }
    if overflow {
        (u64::MAX, i)
    } else if negative {
        (value.wrapping_neg(), i)
    } else {
        (value, i)
    }
}

/// libcfs' `cfs_str2num_check`: the number `strtoul` (base 0) reads from `s`, cut to an
/// `unsigned int` (set even when the check fails, as the C code sets it), and whether it
/// took a number followed only by white space, within `min..=max`.
pub(super) fn num_check(s: &[u8], min: u32, max: u32) -> (u32, bool) {
    let (value, end) = strtoul(s, 0);
    // The C code stores the `unsigned long` into an `unsigned int`.
    let num = value as u32;
    if end == 0 {
        return (num, false);
    }
    let rest_blank = s
        .get(end..)
        .unwrap_or_default()
        .iter()
        .all(|b| is_space(*b));
    (num, rest_blank && (min..=max).contains(&num))
}

/// glibc's `scanf` `%u` (base 10) or `%x` (base 16) from `s[at..]`: the value cut to
/// 32 bits and the index after it, or `None` when nothing converts.
pub(super) fn scan_uint(s: &[u8], at: usize, base: u32) -> Option<(u32, usize)> {
    let byte = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = at;
    while i < s.len() && is_space(byte(i)) {
        i += 1;
    }
    let number_start = i;
    if matches!(byte(i), b'-' | b'+') {
        i += 1;
    }
    let mut digits = false;
    let mut text: Vec<u8> = s.get(number_start..i).unwrap_or_default().to_vec();
    if i < s.len() && byte(i) == b'0' {
        digits = true;
        text.push(b'0');
        i += 1;
        if base == 16 && i < s.len() && matches!(byte(i), b'x' | b'X') {
            i += 1;
        }
    }
    while i < s.len() && char::from(byte(i)).is_digit(base) {
        digits = true;
        text.push(byte(i));
        i += 1;
    }
    if !digits {
        return None;
    }
    let (value, _) = strtoul(&text, base);
    // scanf stores the conversion into an `unsigned int`.
    Some((value as u32, i))
}

/// libcfs' `cfs_gettok`: the token of `next` before `delim`, white space trimmed at both
/// ends, moving `next` past the delimiter (`None` once there is none). `None` when the
/// rest is blank or starts with the delimiter.
pub(super) fn gettok<'a>(next: &mut Option<&'a [u8]>, delim: u8) -> Option<&'a [u8]> {
    let s = (*next)?;
    let start = s.iter().position(|b| !is_space(*b))?;
    let s = s.get(start..)?;
    if s.first() == Some(&delim) {
        return None;
    }
    let token = match s.iter().position(|b| *b == delim) {
        Some(end) => {
            *next = s.get(end + 1..);
            s.get(..end)?
        }
        None => {
            *next = None;
            s
        }
    };
    let last = token.iter().rposition(|b| !is_space(*b)).unwrap_or(0);
    token.get(..=last)
}

/// `%u.%u.%u.%u`, each part at most 255 (o2ib and gip addresses).
pub(super) fn scan_ipv4(s: &[u8]) -> Option<u32> {
    let mut at = 0;
    let mut addr = 0u32;
    for part in 0..4 {
        if part > 0 {
            if s.get(at) != Some(&b'.') {
                return None;
            }
            at += 1;
        }
        let (v, end) = scan_uint(s, at, 10)?;
        if v > 255 {
            return None;
        }
        addr = (addr << 8) | v;
        at = end;
    }
    (at == s.len()).then_some(addr)
}

/// `0x%x`, `0X%x` or `%u`, the whole text (gni, ptlf, kfi, bxi3f addresses).
pub(super) fn scan_number(s: &[u8]) -> Option<u32> {
    for prefix in [b"0x", b"0X"] {
        if let Some(rest) = s.strip_prefix(prefix) {
            if let Some((v, end)) = scan_uint(rest, 0, 16) {
                if end == rest.len() {
                    return Some(v);
                }
            }
        }
    }
    match scan_uint(s, 0, 10) {
        Some((v, end)) if end == s.len() => Some(v),
        _ => None,
    }
}
