//! Blobs in a base: base16, base32, Ascii85 and RFC 1924 base85, and uuencode.

use super::hex_val;

pub(super) fn hex_bytes(hex: &[u8]) -> Option<Vec<u8>> {
    hex.chunks(2)
        .map(|p| Some(hex_val(p[0])? * 16 + hex_val(*p.get(1)?)?))
        .collect()
}

/// RFC 4648 base32 without padding (the caller strips it).
pub(super) fn base32(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 5 / 8);
    let (mut acc, mut bits) = (0u64, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'2'..=b'7' => c - b'2' + 26,
            _ => return None,
        };
        acc = (acc << 5) | u64::from(v);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Ascii85 (Adobe/btoa alphabet `!`..`u`, `z` for four zero bytes).
pub(super) fn ascii85(s: &str) -> Option<Vec<u8>> {
    base85_with(s, |c| match c {
        b'!'..=b'u' => Some(c - b'!'),
        _ => None,
    })
}

/// Base85 with the RFC 1924 alphabet (Python's `b85encode`, git's binary patches).
pub(super) fn base85(s: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] =
        b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";
    base85_with(s, |c| {
        ALPHABET.iter().position(|&a| a == c).map(|p| p as u8)
    })
}

fn base85_with(s: &str, digit: impl Fn(u8) -> Option<u8>) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 4 / 5);
    let mut group = [0u8; 5];
    let mut n = 0;
    for c in s.bytes() {
        if c == b'z' && n == 0 && digit(b'z').is_none() {
            out.extend_from_slice(&[0; 4]);
            continue;
        }
        group[n] = digit(c)?;
        n += 1;
        if n == 5 {
            out.extend_from_slice(&group_value(&group)?.to_be_bytes());
            n = 0;
        }
    }
    if n > 0 {
        // A short final group is padded with the highest digit and cut.
        for g in group.iter_mut().skip(n) {
            *g = 84;
        }
        let bytes = group_value(&group)?.to_be_bytes();
        out.extend_from_slice(&bytes[..n - 1]);
    }
    Some(out)
}

fn group_value(group: &[u8; 5]) -> Option<u32> {
    group.iter().try_fold(0u32, |acc, &d| {
        acc.checked_mul(85)?.checked_add(u32::from(d))
    })
}

/// One uuencoded line: a length character, then four characters per three bytes.
pub(super) fn uudecode(line: &str) -> Option<Vec<u8>> {
    let b = line.as_bytes();
    let first = *b.first()?;
    if !(b'!'..=b'M').contains(&first) {
        return None;
    }
    let n = usize::from(first - b' ');
    let want = n.div_ceil(3) * 4;
    let body = &b[1..];
    // Trailing spaces (zero digits) may have been trimmed by an editor.
    if body.len() > want + 1 || body.len() + 3 < want || n < 8 {
        return None;
    }
    let digit = |i: usize| -> Option<u32> {
        match body.get(i).copied().unwrap_or(b' ') {
            b'`' => Some(0),
            c @ b' '..=b'_' => Some(u32::from(c - b' ')),
            _ => None,
        }
    };
    let mut out = Vec::with_capacity(n);
    for q in 0..want / 4 {
        let v = (digit(q * 4)? << 18)
            | (digit(q * 4 + 1)? << 12)
            | (digit(q * 4 + 2)? << 6)
            | digit(q * 4 + 3)?;
        out.extend_from_slice(&v.to_be_bytes()[1..]);
    }
    out.truncate(n);
    Some(out)
}
