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
mod facts;
pub mod invisible;
mod spelled;
mod substitution;

use bases::{ascii85, base32, base85, hex_bytes, uudecode};
use escapes::{escaped_hex, quoted_printable, spaced_hex};
use facts::Facts;
use spelled::{braille, morse, morse_tokens, nato};
use substitution::{
    LONGEST_CUE, atbash_letter, decoded_words, has_leet_word, leet, names_a_cipher, rot13_letter,
    substituted, turning_words,
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
/// The longest uuencoded line: a length character and 60 for 45 bytes, and one more.
const UU_LONGEST: usize = 62;
/// Shortest blob worth decoding (characters): 16 base64 characters are 12 bytes.
pub(crate) const MIN_RUN: usize = 16;

/// Every reading of `line` through the encodings above, decoded up to [`MAX_DEPTH`].
pub fn readings(line: &str) -> Vec<Decoded> {
    readings_counted(line).0
}

/// What the word-statistics decoders (ROT13, Atbash, leetspeak) counted in a line. Each
/// count is a sum over the line's words, and a space ends a word for every decoder, so
/// the counts of two lines joined by a space are the sums of theirs ([`join_readings`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    /// Words ROT13 and Atbash each turn English, and words of three letters or more.
    better: [usize; 2],
    words: usize,
    /// Whitespace-separated words, and those in leetspeak.
    spaced_words: usize,
    leet_words: usize,
    /// The line's length and what the whole-text decoders' screens found in it.
    len: usize,
    screens: Screens,
    /// Whether the line names a cipher ([`names_a_cipher`]), when that was asked.
    cipher_named: Option<bool>,
}

/// What tells, without decoding, that a whole-text decoder cannot read a text: each is
/// asked only when its screen allows, and the screens of `a + " " + b` are composed
/// from those of `a` and `b` ([`Screens::joined`]), so a joined pair is not scanned for
/// them again. A count is a bound that a space adds up: the count of `a + " " + b` is
/// at most the sum of theirs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Screens {
    /// Whether the text holds `\x`, `0x` or `0X` (a hex escape starts with one).
    hex_escapes: bool,
    /// `=` signs (quoted-printable needs three escapes).
    equals: usize,
    /// At least the spaced hex bytes ([`facts::hex_pair_bound`]; [`spaced_hex`] reads
    /// runs of six).
    hex_pairs: usize,
    /// At least the letter-like Morse tokens ([`morse_tokens`]; Morse needs five).
    morse: usize,
    /// At least the NATO words ([`facts::nato_bound`]; [`nato`] reads runs of five).
    nato: usize,
    /// Whether the text may hold a Braille cell (it has a byte 0xE2, with which each
    /// one's UTF-8 starts).
    braille: bool,
}

impl Screens {
    /// The screens of any text, each asked alone ([`Facts::of`] finds those of an ASCII
    /// line in its one pass).
    fn of(line: &str) -> Screens {
        Screens {
            hex_escapes: line.contains("\\x") || line.contains("0x") || line.contains("0X"),
            equals: line.bytes().filter(|b| *b == b'=').count(),
            hex_pairs: facts::hex_pair_bound(line),
            morse: morse_tokens(line),
            nato: facts::nato_bound(line),
            braille: line.as_bytes().contains(&0xe2),
        }
    }

    /// The screens of `a + " " + b`. The space starts no escape and is neither `=` nor a
    /// Morse mark nor a byte of a Braille cell, and it ends every token (Morse's, NATO's,
    /// a hex byte's), so counts add.
    fn joined(a: &Screens, b: &Screens) -> Screens {
        Screens {
            hex_escapes: a.hex_escapes || b.hex_escapes,
            equals: a.equals + b.equals,
            hex_pairs: a.hex_pairs + b.hex_pairs,
            morse: a.morse + b.morse,
            nato: a.nato + b.nato,
            braille: a.braille || b.braille,
        }
    }
}

impl Counts {
    /// Whether ROT13 (`n` = 0) or Atbash (1) reads the line whole.
    fn turned(&self, n: usize) -> bool {
        self.better[n] >= 3 && self.better[n] * 5 >= self.words * 2
    }

    fn is_leet(&self) -> bool {
        self.leet_words >= 3 && self.leet_words * 5 >= self.spaced_words
    }

    /// Whether [`readings_counted`] read the line whole through ROT13 and through Atbash
    /// as hints: it names a cipher, and neither substitution turns enough of its words
    /// to call it encoded. Such a line has those two readings, and may have others.
    pub fn reads_substituted(&self) -> bool {
        self.cipher_named == Some(true) && !self.turned(0) && !self.turned(1)
    }
}

/// [`readings`], and the line's own [`Counts`].
pub fn readings_counted(line: &str) -> (Vec<Decoded>, Counts) {
    let mut out = Vec::new();
    let mut counts = Counts::default();
    // The line itself is read in place (a copy of every line was a cost of its own).
    let mut frontier = Vec::new();
    if !take(once(line, &mut counts), &mut out, &mut frontier) {
        return (out, counts);
    }
    for _ in 1..MAX_DEPTH {
        if frontier.is_empty() {
            break;
        }
        let mut next = Vec::new();
        for text in &frontier {
            if !take(once(text, &mut Counts::default()), &mut out, &mut next) {
                return (out, counts);
            }
        }
        frontier = next;
    }
    (out, counts)
}

/// Moves `found` into `out` up to [`MAX_READINGS`], the encoded texts long enough to
/// decode again into `next`; false once `out` is full.
fn take(found: Vec<Decoded>, out: &mut Vec<Decoded>, next: &mut Vec<String>) -> bool {
    for d in found {
        if out.len() >= MAX_READINGS {
            return false;
        }
        if d.encoded && d.text.len() >= MIN_RUN {
            next.push(d.text.clone());
        }
        out.push(d);
    }
    true
}

/// The readings of `a + " " + b` (`joined`, ASCII), composed from the [`Counts`] of `a`
/// and `b` when each of them has no reading or only the whole-line hints of a line that
/// names a cipher ([`Counts::reads_substituted`]); `None` when another decoder might read
/// `joined` (false alarms are allowed, a wrong answer is not). Exact: the decoders that
/// read runs, tokens or words (base64/32/16, Ascii85, base85, the words ROT13 or Atbash
/// decode, leetspeak words) see the words of `a` and of `b`, as a space ends each; those
/// that count words are answered by the sums; the rest run on `joined` when the lines'
/// composed screens allow. So `joined` reads nothing, or, when it names a cipher (as it
/// does when `a` or `b` does), reads as ROT13 and Atbash whole, as hints: no other
/// decoder reads it, neither substitution turns enough of its words to be an encoding,
/// and a hint is not decoded again.
pub fn join_readings(a: &Counts, b: &Counts, joined: &str) -> Option<Vec<Decoded>> {
    let sum = Counts {
        better: [a.better[0] + b.better[0], a.better[1] + b.better[1]],
        words: a.words + b.words,
        spaced_words: a.spaced_words + b.spaced_words,
        leet_words: a.leet_words + b.leet_words,
        ..Counts::default()
    };
    // The lines' facts compose only for the text they were counted on.
    let composes = joined.len() == a.len + 1 + b.len && joined.as_bytes()[a.len] == b' ';
    let screens = if composes {
        Screens::joined(&a.screens, &b.screens)
    } else {
        Screens::of(joined)
    };
    let named = match (a.cipher_named, b.cipher_named) {
        // With neither line naming a cipher, a cue in `joined` crosses the join: only the
        // stretch around it is looked at.
        (Some(false), Some(false)) if composes => {
            let around =
                a.len.saturating_sub(LONGEST_CUE - 1)..(a.len + LONGEST_CUE).min(joined.len());
            joined.get(around).is_none_or(names_a_cipher)
        }
        // A cue in either line is in `joined`.
        (Some(true), _) | (_, Some(true)) if composes => true,
        _ => names_a_cipher(joined),
    };
    if sum.turned(0)
        || sum.turned(1)
        || sum.is_leet()
        || whole_text_decodings(joined, &screens)
            .iter()
            .any(|(_, text)| text.is_some())
    {
        return None;
    }
    Some(if named {
        SUBSTITUTIONS
            .iter()
            .map(|&(kind, letter)| Decoded {
                kind,
                text: substituted(joined, letter),
                encoded: false,
            })
            .collect()
    } else {
        Vec::new()
    })
}

/// A substitution of ASCII letters (ROT13's, Atbash's).
type Letter = fn(u8) -> u8;

/// The substitutions that read a line word by word or whole, in the order [`once`]
/// reads them.
const SUBSTITUTIONS: [(&str, Letter); 2] = [("rot13", rot13_letter), ("atbash", atbash_letter)];

/// The decoders that read a line as a whole rather than run by run or word by word, each
/// with what it decoded (before the printable test), those its `screens` rule out not
/// asked. [`once`] reads them all; [`join_readings`] asks them of a joined pair, so a
/// decoder added here is asked in both.
fn whole_text_decodings(line: &str, screens: &Screens) -> [(&'static str, Option<String>); 7] {
    // A uuencoded line may follow a prefix ("What does this mean? M...."): each start
    // after one of the first spaces whose length character fits is tried. One is at
    // most 62 characters (45 bytes), so a start further from the line's end is not.
    let uuencoded =
        uu_starts(line).find_map(|start| uudecode(line[start..].trim_end()).and_then(utf8));
    [
        (
            "hex_escapes",
            screens.hex_escapes.then(|| escaped_hex(line)).flatten(),
        ),
        (
            "hex_pairs",
            (screens.hex_pairs >= 6).then(|| spaced_hex(line)).flatten(),
        ),
        (
            "quoted_printable",
            (screens.equals >= 3)
                .then(|| quoted_printable(line))
                .flatten(),
        ),
        ("uuencode", uuencoded),
        ("morse", (screens.morse >= 5).then(|| morse(line)).flatten()),
        ("braille", screens.braille.then(|| braille(line)).flatten()),
        ("nato", (screens.nato >= 5).then(|| nato(line)).flatten()),
    ]
}

/// Where [`whole_text_decodings`] looks for a uuencoded line: the line's start and the
/// starts after its first [`MAX_UU_STARTS`] spaces, less those that read nothing. A start
/// more than [`UU_LONGEST`] bytes from the trimmed end reads nothing, nor does one at or
/// before a byte a uuencoded line cannot hold (outside ` `..=`` ` ``; but the line's last
/// byte, which [`uudecode`] may leave unread): the length character and every digit
/// read must be such bytes. Prose has a letter just before its end, so its starts are
/// not listed; the spaces before the first start that may read are counted, not listed,
/// and only when a space after it could be one.
fn uu_starts(line: &str) -> impl Iterator<Item = usize> {
    let b = line.as_bytes();
    let end = line.trim_end().len();
    let other = b[..end.saturating_sub(1)]
        .iter()
        .rposition(|c| !(b' '..=b'`').contains(c))
        .map_or(0, |q| q + 1);
    // The first start that may read, and the first space that may be before one.
    let first = end.saturating_sub(UU_LONGEST).max(other);
    let from = first.saturating_sub(1);
    let before = if b[from..].contains(&b' ') {
        b[..from].iter().filter(|c| **c == b' ').count()
    } else {
        0
    };
    (first == 0).then_some(0).into_iter().chain(
        b[from..]
            .iter()
            .enumerate()
            .filter(|(_, c)| **c == b' ')
            .map(move |(i, _)| from + i + 1)
            .take(MAX_UU_STARTS.saturating_sub(before)),
    )
}

/// The readings of `line` one decoding deep; its [`Counts`] into `counts`.
fn once(line: &str, counts: &mut Counts) -> Vec<Decoded> {
    once_with(line, Facts::of(line), counts)
}

/// [`once`], with the line's [`Facts`] given (a test gives them unscreened).
fn once_with(line: &str, facts: Facts, counts: &mut Counts) -> Vec<Decoded> {
    let mut out = Vec::new();
    let screens = facts.screens;
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
    ] = whole_text_decodings(line, &screens);
    // The runs below hold no space: a line without a long stretch between its spaces
    // has none of them.
    if facts.long_run {
        for text in crate::normalize::base64_texts(line) {
            blob("base64", Some(text));
        }
        for run in runs(line, |c| c.is_ascii_hexdigit()) {
            if run.len() % 2 == 0 {
                blob("base16", hex_bytes(run.as_bytes()).and_then(utf8));
            }
        }
    }
    blob(hex_escapes.0, hex_escapes.1);
    blob(hex_pairs.0, hex_pairs.1);
    if facts.long_run {
        for run in runs(line, |c| {
            c.is_ascii_uppercase() || matches!(c, b'2'..=b'7' | b'=')
        }) {
            blob("base32", base32(run.trim_end_matches('=')).and_then(utf8));
        }
        for token in runs(line, |c| !c.is_ascii_whitespace()) {
            let inner = token
                .strip_prefix("<~")
                .and_then(|t| t.strip_suffix("~>"))
                .unwrap_or(token);
            blob("ascii85", ascii85(inner).and_then(utf8));
            blob("base85", base85(inner).and_then(utf8));
        }
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
    let (better, words) = facts.english;
    let (spaced_words, leet_words) = facts.leet;
    *counts = Counts {
        better,
        words,
        spaced_words,
        leet_words,
        len: line.len(),
        screens,
        cipher_named: None,
    };
    // Asked once for both substitutions, and only of a line neither reads whole.
    let mut cipher_named = None;
    let mut turning = facts.turning;
    for (n, (kind, letter)) in SUBSTITUTIONS.into_iter().enumerate() {
        let encoded = counts.turned(n);
        let text = if encoded || *cipher_named.get_or_insert_with(|| names_a_cipher(line)) {
            Some(substituted(line, letter))
        } else if turning.get_or_insert_with(|| turning_words(line))[n] {
            decoded_words(line, letter)
        } else {
            None
        };
        if let Some(text) = text {
            out.push(Decoded {
                kind,
                encoded,
                text,
            });
        }
    }
    counts.cipher_named = cipher_named;
    // The whole line is read back only when a word of it is leetspeak.
    let encoded = counts.is_leet();
    if (encoded || facts.has_leet_word.unwrap_or_else(|| has_leet_word(line)))
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

/// Maximal runs of at least [`MIN_RUN`] bytes satisfying `f`, which answers alike for
/// every byte of a non-ASCII character (so a run's ends are character boundaries). Most
/// lines have none: a window of [`MIN_RUN`] bytes is looked at from its end, and the
/// first refused byte found skips the window up to it, so most bytes are not looked at.
pub(crate) fn runs(line: &str, f: impl Fn(u8) -> bool) -> impl Iterator<Item = &str> {
    let b = line.as_bytes();
    // A run may start at `i` (the byte before it is refused); `b[i..known]` are accepted.
    let (mut i, mut known) = (0, 0);
    std::iter::from_fn(move || {
        loop {
            let window = i + MIN_RUN;
            if window > b.len() {
                return None;
            }
            let from = known.max(i);
            match b[from..window].iter().rposition(|c| !f(*c)) {
                Some(q) => {
                    i = from + q + 1;
                    known = window;
                }
                None => {
                    let mut end = window;
                    while end < b.len() && f(b[end]) {
                        end += 1;
                    }
                    let run = &line[i..end];
                    i = end + 1;
                    known = i;
                    return Some(run);
                }
            }
        }
    })
}

fn hex_val(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests;
