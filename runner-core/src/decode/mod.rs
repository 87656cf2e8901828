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
    atbash_letter, decoded_words, english_turns, has_leet_word, leet, leet_counts, names_a_cipher,
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
    readings_counted(line).0
}

/// What the word-statistics decoders (ROT13, Atbash, leetspeak) counted in a line. Each
/// count is a sum over the line's words, and a space ends a word for every decoder, so
/// the counts of two lines joined by a space are the sums of theirs ([`join_is_quiet`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    /// Words ROT13 and Atbash each turn English, and words of three letters or more.
    better: [usize; 2],
    words: usize,
    /// Whitespace-separated words, and those in leetspeak.
    spaced_words: usize,
    leet_words: usize,
}

impl Counts {
    /// Whether ROT13 (`n` = 0) or Atbash (1) reads the line whole.
    fn turned(&self, n: usize) -> bool {
        self.better[n] >= 3 && self.better[n] * 5 >= self.words * 2
    }

    fn is_leet(&self) -> bool {
        self.leet_words >= 3 && self.leet_words * 5 >= self.spaced_words
    }
}

/// [`readings`], and the line's own [`Counts`].
pub fn readings_counted(line: &str) -> (Vec<Decoded>, Counts) {
    let mut out = Vec::new();
    let mut counts = Counts::default();
    let mut frontier = vec![line.to_owned()];
    for depth in 0..MAX_DEPTH {
        let mut next = Vec::new();
        for text in &frontier {
            let mut scratch = Counts::default();
            let c = if depth == 0 {
                &mut counts
            } else {
                &mut scratch
            };
            for d in once(text, c) {
                if out.len() >= MAX_READINGS {
                    return (out, counts);
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
    (out, counts)
}

/// Whether `a + " " + b` (`joined`, ASCII) has no reading, given that neither `a` nor `b`
/// has one and their [`Counts`]. Exact: the decoders that read runs, tokens or words
/// (base64/32/16, Ascii85, base85, the words ROT13 or Atbash decode, leetspeak words)
/// see the words of `a` and of `b`, as a space ends each; those that count words are
/// answered by the sums; the rest run on `joined` (false whenever one might read it).
pub fn join_is_quiet(a: &Counts, b: &Counts, joined: &str) -> bool {
    let sum = Counts {
        better: [a.better[0] + b.better[0], a.better[1] + b.better[1]],
        words: a.words + b.words,
        spaced_words: a.spaced_words + b.spaced_words,
        leet_words: a.leet_words + b.leet_words,
    };
    !(sum.turned(0)
        || sum.turned(1)
        || sum.is_leet()
        || names_a_cipher(joined)
        || whole_text_decodings(joined)
            .iter()
            .any(|(_, text)| text.is_some()))
}

/// The decoders that read a line as a whole rather than run by run or word by word, each
/// with what it decoded (before the printable test). [`once`] reads them all;
/// [`join_is_quiet`] asks them of a joined pair, so a decoder added here is asked in both.
fn whole_text_decodings(line: &str) -> [(&'static str, Option<String>); 7] {
    let hex_escapes = line.contains("\\x") || line.contains("0x") || line.contains("0X");
    let equals = line.bytes().filter(|b| *b == b'=').count();
    // A uuencoded line may follow a prefix ("What does this mean? M...."): each start
    // after one of the first spaces whose length character fits is tried.
    let uuencoded = std::iter::once(0)
        .chain(
            line.match_indices(' ')
                .map(|(i, _)| i + 1)
                .take(MAX_UU_STARTS),
        )
        .find_map(|start| uudecode(line[start..].trim_end()).and_then(utf8));
    [
        (
            "hex_escapes",
            hex_escapes.then(|| escaped_hex(line)).flatten(),
        ),
        ("hex_pairs", spaced_hex(line)),
        (
            "quoted_printable",
            (equals >= 3).then(|| quoted_printable(line)).flatten(),
        ),
        ("uuencode", uuencoded),
        ("morse", morse(line)),
        ("braille", braille(line)),
        ("nato", nato(line)),
    ]
}

/// The readings of `line` one decoding deep; its [`Counts`] into `counts`.
fn once(line: &str, counts: &mut Counts) -> Vec<Decoded> {
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
    let [
        hex_escapes,
        hex_pairs,
        quoted,
        uuencoded,
        morse,
        braille,
        nato,
    ] = whole_text_decodings(line);
    for text in crate::normalize::base64_texts(line) {
        blob("base64", Some(text));
    }
    for run in runs(line, |c| c.is_ascii_hexdigit()) {
        if run.len() % 2 == 0 {
            blob("base16", hex_bytes(run.as_bytes()).and_then(utf8));
        }
    }
    blob(hex_escapes.0, hex_escapes.1);
    blob(hex_pairs.0, hex_pairs.1);
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
    for (kind, text) in [quoted, uuencoded, morse, braille, nato] {
        blob(kind, text);
    }
    // Substitutions count as an encoding only when they turn enough of a line's words
    // from gibberish into English-looking ones; the line is then read whole, as is a
    // line that says it holds a cipher ("ROT13 encoded string: ...", "Encoded: ...",
    // "Decode the following ...", which the scanner also joins to the next line). Otherwise
    // only the words they decode are read (`Encoded: `yf -ny /`` reads `Encoded: `ls -al /``,
    // `Hbhgvn("oh -zo /")` reads `System("ls -al /")`), for the rules to judge what they
    // say but not as evidence of an encoding; a line with no such word gets no reading,
    // so ordinary prose costs the rules nothing. A leetspeak word is a hint by itself.
    let (better, words) = english_turns(line);
    let (spaced_words, leet_words) = leet_counts(line);
    *counts = Counts {
        better,
        words,
        spaced_words,
        leet_words,
    };
    // Asked once for both substitutions, and only of a line neither reads whole.
    let mut cipher_named = None;
    for (n, (kind, letter)) in [
        ("rot13", rot13_letter as fn(u8) -> u8),
        ("atbash", atbash_letter),
    ]
    .into_iter()
    .enumerate()
    {
        let encoded = counts.turned(n);
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
    let encoded = counts.is_leet();
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
