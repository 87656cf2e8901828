//! Escapes within a line: `\x41` and `0x41`, spaced hex pairs, quoted-printable and
//! URL percent escapes.

use super::hex_val;

/// `\x41\x42…` or `0x41 0x42 …` (at least four escapes), the rest of the line kept.
pub(super) fn escaped_hex(line: &str) -> Option<String> {
    let b = line.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut escapes = 0;
    let mut i = 0;
    while i < b.len() {
        let prefixed = (b[i] == b'\\' && b.get(i + 1) == Some(&b'x'))
            || (b[i] == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X')));
        if prefixed
            && let (Some(hi), Some(lo)) = (
                b.get(i + 2).and_then(|c| hex_val(*c)),
                b.get(i + 3).and_then(|c| hex_val(*c)),
            )
        {
            out.push(hi * 16 + lo);
            escapes += 1;
            i += 4;
            // `0x41, 0x42` and `0x41 0x42`: the separators are not text.
            while i < b.len() && matches!(b[i], b',' | b' ') && escapes > 0 {
                if b.get(i + 1)
                    .is_some_and(|c| matches!(c, b'0' | b'\\' | b' '))
                {
                    i += 1;
                } else {
                    break;
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    (escapes >= 4).then(|| String::from_utf8_lossy(&out).into_owned())
}

/// Runs of at least six space-separated two-digit hex bytes (`69 67 6e 6f 72 65`).
pub(super) fn spaced_hex(line: &str) -> Option<String> {
    // Most lines have no such run, and are not decoded to find out.
    if hex_pair_run(line) < 6 {
        return None;
    }
    let mut best = String::new();
    let mut current = Vec::new();
    let mut flush = |current: &mut Vec<u8>| {
        if current.len() >= 6
            && let Ok(t) = String::from_utf8(std::mem::take(current))
            && t.len() > best.len()
        {
            best = t;
        }
        current.clear();
    };
    for token in line.split([' ', ',', ':']) {
        match token.as_bytes() {
            [a, b] if a.is_ascii_hexdigit() && b.is_ascii_hexdigit() => {
                current.push(hex_val(*a).unwrap_or(0) * 16 + hex_val(*b).unwrap_or(0))
            }
            [] => {}
            _ => flush(&mut current),
        }
    }
    flush(&mut current);
    (!best.is_empty()).then_some(best)
}

/// The line's longest run of spaced hex bytes as [`spaced_hex`] reads them (tokens
/// between ` `, `,` and `:` of two hex digits; an empty token does not end a run), in
/// tokens.
fn hex_pair_run(line: &str) -> usize {
    let (mut longest, mut current) = (0, 0);
    for token in line.as_bytes().split(|c| matches!(c, b' ' | b',' | b':')) {
        match token {
            [a, b] if a.is_ascii_hexdigit() && b.is_ascii_hexdigit() => {
                current += 1;
                longest = longest.max(current);
            }
            [] => {}
            _ => current = 0,
        }
    }
    longest
}

/// Quoted-printable (`=XX` escapes with upper-case hex, at least three).
pub(super) fn quoted_printable(line: &str) -> Option<String> {
    let soft = line.strip_suffix('=').unwrap_or(line);
    unescape(
        soft,
        b'=',
        |c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c),
        3,
    )
}

/// `line` with every `marker` followed by two hex digits (the first accepted by `first`)
/// read as that byte, when it has at least `min` such escapes: quoted-printable's `=41`,
/// a URL's `%41`.
pub(crate) fn unescape(
    line: &str,
    marker: u8,
    first: fn(u8) -> bool,
    min: usize,
) -> Option<String> {
    let b = line.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut escapes = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] == marker
            && let (Some(hi), Some(lo)) = (
                b.get(i + 1)
                    .filter(|c| first(**c))
                    .and_then(|c| hex_val(*c)),
                b.get(i + 2).and_then(|c| hex_val(*c)),
            )
        {
            out.push(hi * 16 + lo);
            escapes += 1;
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    (escapes >= min).then(|| String::from_utf8_lossy(&out).into_owned())
}
