//! How likely a literal is to occur in a line of prose, from how often its bytes, and its
//! letters in pairs, occur in English. Only the order in which a rule's conditions are
//! evaluated depends on it ([`super::Graph`] watches a concatenation's least likely part), so
//! it is a speed matter, never a verdict: every answer is the same whatever it says.
//!
//! The frequencies were counted over the benign TUNE split of the third-party corpus
//! (`tests/rules/thirdparty/SOURCES.md`: Moby-Dick, State of the Union addresses, news
//! and book passages and fortunes; 197,234 bytes, ASCII-lowercased), and rounded. Bytes that
//! text of that kind hardly holds (`=`, `|`, `_`, digits) are floored at [`FLOOR`]: a
//! research packet holds more of them than a novel does.

/// Per printable ASCII byte from `' '` to `'~'`, lowercased: its occurrences per 100,000 bytes.
#[rustfmt::skip]
const BYTES: [u16; 95] = [
    16952, 62, 79, 1, 17, 1, 1, 136, 8, 8, 2, 1, 1047, 139, 723, 1,
    87, 57, 24, 26, 23, 22, 20, 18, 34, 23, 16, 126, 1, 1, 1, 35,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 3, 1, 2,
    1, 6208, 1278, 2388, 3014, 10230, 1931, 1565, 4347, 5791, 118, 426, 3072, 1927, 5863, 6227,
    1604, 105, 4839, 5124, 7856, 2422, 845, 1514, 159, 1379, 59, 1, 1, 1, 1,
];

/// Per letter `a`..=`z`, the chance in 1,000 that each letter `a`..=`z` follows it.
#[rustfmt::skip]
const PAIRS: [[u16; 26]; 26] = [
    [0, 24, 38, 37, 1, 9, 18, 3, 36, 1, 12, 92, 26, 199, 0, 16, 1, 103, 88, 158, 10, 29, 8, 1, 25, 1], // a
    [55, 8, 0, 0, 322, 0, 0, 0, 41, 19, 0, 125, 4, 0, 102, 0, 0, 42, 21, 13, 130, 1, 0, 0, 96, 0], // b
    [113, 0, 16, 0, 158, 0, 0, 136, 61, 0, 34, 34, 0, 0, 221, 0, 1, 36, 2, 107, 43, 0, 0, 0, 10, 0], // c
    [33, 0, 0, 9, 147, 1, 7, 1, 76, 3, 0, 8, 4, 3, 40, 0, 0, 16, 29, 0, 23, 4, 0, 0, 11, 0], // d
    [48, 2, 30, 75, 29, 11, 9, 1, 13, 0, 1, 29, 22, 97, 4, 10, 4, 116, 81, 23, 1, 16, 6, 14, 10, 0], // e
    [58, 0, 0, 0, 69, 46, 0, 0, 81, 0, 0, 19, 0, 0, 164, 0, 0, 61, 1, 22, 38, 0, 0, 0, 1, 0], // f
    [57, 0, 0, 1, 136, 0, 12, 116, 48, 0, 0, 18, 1, 20, 84, 0, 0, 104, 20, 7, 21, 0, 0, 0, 4, 0], // g
    [169, 0, 0, 1, 462, 0, 0, 0, 125, 0, 0, 1, 2, 1, 71, 0, 0, 11, 1, 27, 11, 0, 1, 0, 4, 0], // h
    [22, 9, 66, 28, 33, 19, 28, 0, 0, 0, 6, 53, 34, 255, 91, 12, 0, 38, 114, 132, 1, 25, 0, 1, 0, 7], // i
    [78, 0, 0, 0, 259, 0, 0, 0, 4, 0, 0, 0, 0, 0, 211, 0, 0, 0, 0, 0, 448, 0, 0, 0, 0, 0], // j
    [10, 1, 0, 0, 353, 1, 0, 0, 149, 0, 0, 13, 1, 60, 8, 0, 0, 5, 72, 0, 4, 0, 2, 0, 19, 0], // k
    [107, 0, 0, 59, 163, 11, 1, 0, 122, 0, 3, 134, 3, 1, 60, 5, 0, 3, 19, 20, 24, 6, 4, 0, 72, 0], // l
    [152, 24, 0, 0, 295, 1, 0, 0, 90, 0, 0, 1, 49, 1, 103, 62, 0, 2, 24, 0, 34, 0, 0, 0, 28, 0], // m
    [36, 1, 41, 154, 74, 8, 115, 1, 35, 2, 9, 7, 8, 7, 48, 0, 1, 1, 58, 109, 10, 5, 1, 0, 9, 0], // n
    [7, 9, 9, 17, 2, 129, 5, 2, 8, 0, 5, 25, 55, 184, 23, 24, 0, 118, 28, 39, 122, 22, 33, 1, 4, 0], // o
    [110, 0, 0, 0, 191, 0, 0, 11, 43, 0, 0, 91, 4, 0, 154, 53, 0, 184, 22, 31, 42, 0, 1, 0, 4, 0], // p
    [10, 0, 0, 0, 0, 0, 0, 0, 34, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 932, 0, 0, 0, 0, 0], // q
    [66, 5, 17, 24, 262, 3, 10, 1, 85, 0, 10, 11, 18, 23, 82, 9, 0, 13, 44, 49, 14, 10, 2, 0, 32, 0], // r
    [29, 1, 10, 2, 117, 3, 0, 38, 56, 0, 5, 8, 5, 2, 42, 25, 1, 1, 51, 140, 43, 0, 3, 0, 4, 0], // s
    [42, 0, 3, 0, 94, 1, 0, 320, 104, 0, 0, 9, 3, 1, 91, 0, 0, 33, 26, 12, 18, 0, 6, 0, 16, 0], // t
    [25, 29, 48, 20, 46, 6, 36, 0, 24, 0, 1, 87, 24, 126, 4, 42, 0, 186, 117, 125, 0, 0, 0, 1, 1, 0], // u
    [76, 0, 0, 0, 684, 0, 0, 0, 187, 0, 0, 0, 0, 0, 42, 0, 0, 0, 0, 0, 2, 0, 0, 0, 8, 0], // v
    [156, 0, 0, 1, 177, 1, 0, 204, 201, 0, 0, 6, 1, 30, 95, 0, 0, 9, 17, 1, 1, 0, 0, 0, 1, 0], // w
    [89, 0, 105, 0, 137, 0, 0, 16, 141, 0, 0, 0, 3, 0, 0, 256, 0, 0, 0, 179, 13, 0, 0, 0, 3, 0], // x
    [6, 1, 1, 0, 67, 1, 0, 1, 17, 0, 0, 2, 7, 1, 117, 3, 0, 2, 31, 6, 0, 0, 2, 0, 0, 0], // y
    [147, 0, 0, 0, 603, 0, 0, 0, 86, 0, 0, 26, 0, 0, 34, 0, 0, 0, 0, 0, 60, 9, 0, 0, 0, 26], // z
];

/// The least chance per byte given to a byte: the floor of the symbols and digits that
/// prose rarely holds, and of the bytes outside the table (non-ASCII).
const FLOOR: f64 = 2e-4;

/// The bytes of a line the chance is reckoned for: about a line of wrapped prose.
const LINE: f64 = 100.0;

/// The chance per byte of `b` (ASCII case-insensitive).
fn byte(b: u8) -> f64 {
    let b = b.to_ascii_lowercase();
    let counted = (b' '..=b'~')
        .contains(&b)
        .then(|| f64::from(BYTES[usize::from(b - b' ')]) / 100_000.0);
    counted.unwrap_or(0.0).max(FLOOR)
}

/// The chance that `b` follows `a`: from the letter pairs for two letters, else `b`'s own.
fn after(a: u8, b: u8) -> f64 {
    let (a, b) = (a.to_ascii_lowercase(), b.to_ascii_lowercase());
    if a.is_ascii_lowercase() && b.is_ascii_lowercase() {
        let per_mille = PAIRS[usize::from(a - b'a')][usize::from(b - b'a')];
        // A pair never counted still occurs (in names, in technical words).
        f64::from(per_mille).max(0.5) / 1000.0
    } else {
        byte(b)
    }
}

/// A rough chance that `literal` occurs (ASCII case-insensitively) in a line of prose.
pub(super) fn likely(literal: &str) -> f64 {
    let bytes = literal.as_bytes();
    let Some((&first, _)) = bytes.split_first() else {
        return 1.0;
    };
    let at_one = bytes
        .windows(2)
        .fold(byte(first), |p, pair| p * after(pair[0], pair[1]));
    // The literal's starts in a line, each a chance `at_one`.
    #[allow(clippy::cast_precision_loss)] // a literal's length is small
    let starts = (LINE - bytes.len() as f64 + 1.0).max(1.0);
    1.0 - (-at_one * starts).exp()
}

#[cfg(test)]
mod tests {
    use super::likely;

    /// Orders the rules' literals as prose has them: the evaluation watches the rarer.
    #[test]
    fn common_letters_and_words_are_likelier_than_symbols_and_rare_words() {
        let order = [
            ("e", "="),
            ("the", "ignore"),
            ("or", "="),
            ("nc", "-"),
            ("and", "|"),
            ("sh", "curl"),
            ("hi", "chatgpt"),
            ("ai", "assistant"),
            ("you", "jailbreak"),
        ];
        for (common, rare) in order {
            assert!(
                likely(common) > likely(rare),
                "{common:?} {} <= {rare:?} {}",
                likely(common),
                likely(rare)
            );
        }
        assert!(likely("e") > 0.99 && likely("qzx") < 0.01);
        assert!(likely("").eq(&1.0) && likely("\u{e9}t\u{e9}") > 0.0);
    }
}
