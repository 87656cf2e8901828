//! Text spelled in invisible characters: Unicode tag characters, variation selectors
//! and invisible operators as bits.

use super::{Decoded, is_printable, is_text};

/// What invisible characters in `line` spell: Unicode tag characters (U+E0020–E007E,
/// each the ASCII character 0xE0000 below it), variation selectors (U+E0100–E01EF and
/// U+FE00–FE0F as bytes: offset from U+E0100, and the 16 + offset convention), and
/// invisible times / invisible plus as the bits 0 / 1 of each character (a zero-width
/// space between words). Each needs at least four such characters; one linear pass each.
/// The scanner drops invisible characters from every other view, so this is the one
/// that reads them.
pub fn hidden(line: &str) -> Vec<Decoded> {
    if line.is_ascii() {
        return Vec::new();
    }
    let mut tags = String::new();
    let mut selectors = Vec::new();
    let mut selectors_16 = Vec::new();
    let mut bits = String::new();
    for c in line.chars() {
        let cp = c as u32;
        match cp {
            0xE0020..=0xE007E => tags.push(char::from((cp - 0xE0000) as u8)),
            0xE0100..=0xE01EF => {
                selectors.push((cp - 0xE0100) as u8);
                selectors_16.push((cp - 0xE0100 + 16) as u8);
            }
            0xFE00..=0xFE0F => selectors_16.push((cp - 0xFE00) as u8),
            0x2062 => bits.push('0'),
            0x2064 => bits.push('1'),
            0x200B if !bits.is_empty() => bits.push(' '),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut push = |kind, text: String| {
        if text.chars().count() >= 4 && is_printable(&text) {
            out.push(Decoded {
                kind,
                encoded: is_text(&text),
                text,
            });
        }
    };
    push("unicode_tags", tags);
    push(
        "variation_selectors",
        String::from_utf8_lossy(&selectors).into_owned(),
    );
    push(
        "variation_selectors",
        String::from_utf8_lossy(&selectors_16).into_owned(),
    );
    push("invisible_bits", invisible_bits(&bits));
    out
}

/// Characters written as their binary digits without leading zeros, one after another
/// (`1001001` `1100111` …, a space where a space was): a letter is seven digits, a digit
/// or punctuation mark six. Read greedily, a letter where seven digits make one.
fn invisible_bits(bits: &str) -> String {
    let mut out = String::new();
    for word in bits.split(' ') {
        let b = word.as_bytes();
        let value = |s: &[u8]| s.iter().fold(0u32, |v, &d| v * 2 + u32::from(d - b'0'));
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'1' {
                i += 1;
                continue;
            }
            let seven = b.get(i..i + 7).map(value);
            let six = b.get(i..i + 6).map(value);
            match (seven, six) {
                (Some(v), _) if char::from_u32(v).is_some_and(|c| c.is_ascii_alphabetic()) => {
                    out.push(char::from(v as u8));
                    i += 7;
                }
                (_, Some(v)) if (0x21..0x40).contains(&v) => {
                    out.push(char::from(v as u8));
                    i += 6;
                }
                _ => i += 1,
            }
        }
        out.push(' ');
    }
    out.trim_end().to_owned()
}
