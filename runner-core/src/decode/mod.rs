//! What an attacker's encodings of a line decode to, for the forbidden-content scanner.
//! Each decoder is deterministic and linear in its input: base16/32/64/85 (and
//! Ascii85), hex and `\x` escapes, URL and quoted-printable escapes, uuencode, Morse,
//! Braille, the NATO alphabet, the letter substitutions ROT13, Atbash and
//! leetspeak, and text spelled in invisible characters ([`invisible::hidden`]). A [`Decoded`] reading says whether it came from a blob that only an
//! encoding explains (`encoded`): a run of base64 that decodes to words is itself a
//! finding in a result or a packet (`forbidden.encoded_payload`), whatever the words say.
//!
//! Bounds: readings are decoded again once (base64 of hex, ...), never deeper
//! ([`MAX_DEPTH`]); a line gives at most [`MAX_READINGS`] readings; decoding never
//! grows text (every decoder's output is at most as long as its input), so the work per
//! line is a constant times its length.

mod bases;
pub(crate) mod escapes;
pub mod invisible;
mod spelled;
mod substitution;

use bases::{ascii85, base32, base85, hex_bytes, uudecode};
use escapes::{escaped_hex, quoted_printable, spaced_hex};
use spelled::{braille, morse, nato};
use substitution::{
    atbash_letter, decoded_words, english_turns, has_leet_word, is_leet, leet, names_a_cipher,
    rot13_letter, substituted,
};

/// One reading of a line through an encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The decoder's name (`base64`, `hex`, `rot13`, ...).
    pub kind: &'static str,
    pub text: String,
    /// True when the text came from a blob that is only explained by the encoding (a
    /// base64 run decoding to text, a line of Morse, a line most of whose words a ROT13
    /// turns into English); false for a hint (a few words decoded within a line).
    pub encoded: bool,
}

/// How many times a reading is decoded again.
pub const MAX_DEPTH: usize = 2;
/// The most readings one line gives.
pub const MAX_READINGS: usize = 24;
/// How many starts after a space a uuencoded line is looked for at.
const MAX_UU_STARTS: usize = 8;
/// Shortest blob worth decoding (characters): 16 base64 characters are 12 bytes.
const MIN_RUN: usize = 16;

/// Every reading of `line` through the encodings above, decoded up to [`MAX_DEPTH`].
pub fn readings(line: &str) -> Vec<Decoded> {
    let mut out = Vec::new();
    let mut frontier = vec![line.to_owned()];
    for _ in 0..MAX_DEPTH {
        let mut next = Vec::new();
        for text in &frontier {
            for d in once(text) {
                if out.len() >= MAX_READINGS {
                    return out;
                }
                if d.encoded && d.text.len() >= MIN_RUN {
                    next.push(d.text.clone());
                }
                out.push(d);
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    out
}

/// The readings of `line` one decoding deep.
fn once(line: &str) -> Vec<Decoded> {
    let mut out = Vec::new();
    // Printable decodings are all read; those that read as words are evidence of an
    // encoding by themselves.
    let mut blob = |kind, text: Option<String>| {
        if let Some(text) = text.filter(|t| is_printable(t)) {
            out.push(Decoded {
                kind,
                encoded: is_text(&text),
                text,
            });
        }
    };
    let bytes = line.as_bytes();
    let has = |f: fn(&u8) -> bool, n: usize| bytes.iter().filter(|b| f(b)).count() >= n;
    for text in crate::normalize::base64_texts(line) {
        blob("base64", Some(text));
    }
    for run in runs(line, |c| c.is_ascii_hexdigit()) {
        if run.len() % 2 == 0 {
            blob("base16", hex_bytes(run.as_bytes()).and_then(utf8));
        }
    }
    if line.contains("\\x") || line.contains("0x") || line.contains("0X") {
        blob("hex_escapes", escaped_hex(line));
    }
    blob("hex_pairs", spaced_hex(line));
    for run in runs(line, |c| {
        c.is_ascii_uppercase() || matches!(c, '2'..='7' | '=')
    }) {
        blob("base32", base32(run.trim_end_matches('=')).and_then(utf8));
    }
    for token in line.split_ascii_whitespace() {
        if token.len() < MIN_RUN {
            continue;
        }
        let inner = token
            .strip_prefix("<~")
            .and_then(|t| t.strip_suffix("~>"))
            .unwrap_or(token);
        blob("ascii85", ascii85(inner).and_then(utf8));
        blob("base85", base85(inner).and_then(utf8));
    }
    if has(|b| *b == b'=', 3) {
        blob("quoted_printable", quoted_printable(line));
    }
    // A uuencoded line may follow a prefix ("What does this mean? M...."): each start
    // after one of the first spaces whose length character fits is tried.
    let uu_starts = std::iter::once(0).chain(
        line.match_indices(' ')
            .map(|(i, _)| i + 1)
            .take(MAX_UU_STARTS),
    );
    for start in uu_starts {
        if let Some(text) = uudecode(line[start..].trim_end()).and_then(utf8) {
            blob("uuencode", Some(text));
            break;
        }
    }
    blob("morse", morse(line));
    blob("braille", braille(line));
    blob("nato", nato(line));
    // Substitutions count as an encoding only when they turn enough of a line's words
    // from gibberish into English-looking ones; the line is then read whole, as is a
    // line that says it holds a cipher ("ROT13 encoded string: ...", "Encoded: ...",
    // "Decode the following ...", which the scanner also joins to the next line). Otherwise
    // only the words they decode are read (`Encoded: `yf -ny /`` reads `Encoded: `ls -al /``,
    // `Hbhgvn("oh -zo /")` reads `System("ls -al /")`), for the rules to judge what they
    // say but not as evidence of an encoding; a line with no such word gets no reading,
    // so ordinary prose costs the rules nothing. A leetspeak word is a hint by itself.
    let (better, words) = english_turns(line);
    // Asked once for both substitutions, and only of a line neither reads whole.
    let mut cipher_named = None;
    for (n, (kind, letter)) in [
        ("rot13", rot13_letter as fn(u8) -> u8),
        ("atbash", atbash_letter),
    ]
    .into_iter()
    .enumerate()
    {
        let encoded = better[n] >= 3 && better[n] * 5 >= words * 2;
        let text = if encoded || *cipher_named.get_or_insert_with(|| names_a_cipher(line)) {
            Some(substituted(line, letter))
        } else {
            decoded_words(line, letter)
        };
        if let Some(text) = text {
            out.push(Decoded {
                kind,
                encoded,
                text,
            });
        }
    }
    // The whole line is read back only when a word of it is leetspeak.
    let encoded = is_leet(line);
    if (encoded || has_leet_word(line))
        && let Some(text) = leet(line)
    {
        out.push(Decoded {
            kind: "leetspeak",
            encoded,
            text,
        });
    }
    out
}

/// Characters in all, and those that are not control characters (but line breaks).
fn printable(text: &str) -> (usize, usize) {
    text.chars().fold((0, 0), |(n, p), c| {
        (
            n + 1,
            p + usize::from(!c.is_control() || matches!(c, '\n' | '\t' | '\r')),
        )
    })
}

/// Text with at most one control character in ten (binary is another rule's business).
fn is_printable(text: &str) -> bool {
    let (total, printable) = printable(text);
    total >= 4 && printable * 10 >= total * 9
}

/// Printable text, mostly letters and spaces: what an encoded instruction decodes to
/// (hashes and random tokens do not).
fn is_text(text: &str) -> bool {
    let (total, printable) = printable(text);
    let wordy = text
        .chars()
        .filter(|c| c.is_alphabetic() || *c == ' ')
        .count();
    total >= 4 && printable * 20 >= total * 19 && wordy * 10 >= total * 6
}

fn utf8(bytes: Vec<u8>) -> Option<String> {
    String::from_utf8(bytes).ok()
}

/// Maximal runs of at least [`MIN_RUN`] characters satisfying `f`.
fn runs(line: &str, f: fn(char) -> bool) -> impl Iterator<Item = &str> {
    line.split(move |c: char| !f(c))
        .filter(|r| r.len() >= MIN_RUN)
}

fn hex_val(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests;
