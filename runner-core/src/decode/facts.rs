//! What a line's decoders ask of it before decoding, found for an ASCII line in one pass
//! over its bytes. Almost every line of prose is read by no decoder, and each decoder's
//! question (its word counts, its screen) was a pass of its own: here one loop, one
//! table lookup a byte, splits the line into the words every word counter splits it
//! into, and notes which rare bytes (escapes, `=`, Morse marks, digits) the line holds,
//! so a decoder whose precondition needs a byte the line lacks is not asked at all.
//! A line with other characters is asked each question separately ([`Facts::of`]).

use super::spelled::{morse_tokens, nato_letter};
use super::substitution::{english_turns, is_leet_word, leet_counts, word_scores, word_turns};
use super::{MIN_RUN, Screens};

/// A byte that ends a word for [`english_turns`]: ASCII whitespace to
/// `char::is_whitespace`, and its marks.
const SEP: u16 = 1;
/// ASCII whitespace as [`leet_counts`] splits an ASCII line (`' '` and `\t` to `\r`).
const SPACE: u16 = 1 << 1;
const ALPHA: u16 = 1 << 2;
const HEX: u16 = 1 << 3;
const DIGIT: u16 = 1 << 4;
/// `\` or `0`: a hex escape (`\x41`, `0x41`) starts with one.
const ESCAPE: u16 = 1 << 5;
const EQUALS: u16 = 1 << 6;
/// `.`, `-` or `_`: an ASCII Morse mark.
const MARK: u16 = 1 << 7;
/// `-`, which the NATO spelling `x-ray` holds.
const DASH: u16 = 1 << 8;
/// `!`, a leetspeak letter that is a [`SEP`] byte.
const BANG: u16 = 1 << 9;

/// The classes of each byte (none for a byte of a non-ASCII character).
static CLASS: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        let mut class = 0;
        if matches!(
            c,
            b'\t'
                ..=b'\r'
                    | b' '
                    | b'"'
                    | b'\''
                    | b'('
                    | b')'
                    | b','
                    | b'.'
                    | b':'
                    | b';'
                    | b'!'
                    | b'?'
        ) {
            class |= SEP;
        }
        if matches!(c, b' ' | b'\t'..=b'\r') {
            class |= SPACE;
        }
        if c.is_ascii_alphabetic() {
            class |= ALPHA;
        }
        if c.is_ascii_hexdigit() {
            class |= HEX;
        }
        if c.is_ascii_digit() {
            class |= DIGIT;
        }
        if matches!(c, b'\\' | b'0') {
            class |= ESCAPE;
        }
        if c == b'=' {
            class |= EQUALS;
        }
        if matches!(c, b'.' | b'-' | b'_') {
            class |= MARK;
        }
        if c == b'-' {
            class |= DASH;
        }
        if c == b'!' {
            class |= BANG;
        }
        table[b] = class;
        b += 1;
    }
    table
};

/// What the decoders of [`super::once`] ask of a line before reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Facts {
    /// [`english_turns`] of the line.
    pub(super) english: ([usize; 2], usize),
    /// [`leet_counts`] of the line.
    pub(super) leet: (usize, usize),
    /// [`super::substitution::has_leet_word`] of the line, when the pass could tell (no
    /// such word where no piece has a digit and two letters, and there is no `!`).
    pub(super) has_leet_word: Option<bool>,
    /// [`super::substitution::turning_words`] of the line, when the pass found it.
    pub(super) turning: Option<[bool; 2]>,
    /// The whole-text decoders' screens, as [`Screens::of`] finds them.
    pub(super) screens: Screens,
    /// False only when the line has no [`MIN_RUN`] bytes in a row without a space: then
    /// no run of base64, base32, hex or Ascii85 (none of which holds a space) is long
    /// enough to decode.
    pub(super) long_run: bool,
}

impl Facts {
    /// The facts of `line`: of an ASCII line in one pass, of another each asked alone.
    pub(super) fn of(line: &str) -> Facts {
        if line.is_ascii() {
            return ascii_facts(line.as_bytes(), line);
        }
        Facts {
            english: english_turns(line),
            leet: leet_counts(line),
            has_leet_word: None,
            turning: None,
            screens: Screens::of(line),
            long_run: line.split(' ').any(|p| p.len() >= MIN_RUN),
        }
    }
}

/// What [`ascii_facts`] counts word by word.
#[derive(Default)]
struct Tally {
    better: [usize; 2],
    words: usize,
    turning: [bool; 2],
    hex_pairs: usize,
    nato: usize,
    /// Whether a piece has a digit and two letters or more (see [`ascii_facts`]).
    digit_and_letters: bool,
}

impl Tally {
    /// Counts a piece of the line between [`SEP`] bytes (`all` and `any`: the classes
    /// all of its bytes and any of them have).
    fn piece(&mut self, p: &[u8], all: u16, any: u16) {
        if p.len() == 2 && all & HEX != 0 {
            self.hex_pairs += 1;
        }
        if any & ALPHA == 0 {
            return;
        }
        // A piece of three bytes or more with a letter is a word to `english_turns`,
        // which scores it when it is all letters.
        if p.len() >= 3 {
            self.words += 1;
        }
        if all & ALPHA != 0 {
            if p.len() >= 3 {
                // Scored once for both questions.
                let (better, turns) = word_scores(p);
                for (b, turned) in self.better.iter_mut().zip(better) {
                    *b += usize::from(turned);
                }
                self.letters(p, Some(turns));
            } else {
                self.letters(p, None);
            }
        } else {
            self.digit_and_letters = self.digit_and_letters
                || (any & DIGIT != 0 && p.iter().filter(|b| b.is_ascii_alphabetic()).count() >= 2);
            for w in p
                .split(|b| !b.is_ascii_alphabetic())
                .filter(|w| !w.is_empty())
            {
                self.letters(w, None);
            }
        }
    }

    /// Counts a maximal run of letters (a word to `turning_words` and, unless a `-`
    /// adjoins it, a NATO token), given what [`word_turns`] says of it when known.
    fn letters(&mut self, w: &[u8], turns: Option<[bool; 2]>) {
        if self.turning != [true; 2] {
            let turns = turns.unwrap_or_else(|| word_turns(w));
            for (f, turns) in self.turning.iter_mut().zip(turns) {
                *f |= turns;
            }
        }
        self.nato += usize::from(nato_letter(w).is_some());
    }
}

/// [`Facts::of`] an ASCII line (`b` its bytes): one pass splits it into the pieces
/// between [`SEP`] bytes (the words of `english_turns`), each piece into its runs of
/// letters (those of `turning_words`, and the NATO words), and counts the runs without
/// [`SPACE`] (the words of `leet_counts`); the rare bytes seen decide which of the other
/// questions are asked at all.
fn ascii_facts(b: &[u8], line: &str) -> Facts {
    let mut tally = Tally::default();
    let mut seen = 0u16;
    // Words split at `SPACE`, whether the byte before is one (or the line's start), and
    // where the stretch since the last ' ' began; where the current word began, whether
    // it has a digit, and the words in leetspeak (each has a digit).
    let (mut spaced, mut after_space, mut since_space) = (0usize, true, 0usize);
    let (mut word, mut word_digit, mut leet_words) = (0usize, false, 0usize);
    let mut long_run = false;
    // Morse marks: a line with fewer than five has fewer than five Morse tokens.
    let mut marks = 0;
    let mut i = 0;
    while i < b.len() {
        let c = CLASS[usize::from(b[i])];
        if c & SEP != 0 {
            seen |= c;
            marks += usize::from(c & MARK != 0);
            if c & SPACE == 0 {
                if after_space {
                    (spaced, word) = (spaced + 1, i);
                }
                after_space = false;
            } else {
                if word_digit {
                    leet_words += usize::from(is_leet_word(&b[word..i]));
                    word_digit = false;
                }
                after_space = true;
                if b[i] == b' ' {
                    long_run |= i - since_space >= MIN_RUN;
                    since_space = i + 1;
                }
            }
            i += 1;
            continue;
        }
        if after_space {
            (spaced, word) = (spaced + 1, i);
        }
        after_space = false;
        let start = i;
        let (mut all, mut any) = (c, c);
        i += 1;
        while i < b.len() {
            let c = CLASS[usize::from(b[i])];
            if c & SEP != 0 {
                break;
            }
            all &= c;
            any |= c;
            i += 1;
        }
        seen |= any;
        word_digit |= any & DIGIT != 0;
        let piece = &b[start..i];
        if any & MARK != 0 {
            marks += piece
                .iter()
                .filter(|c| CLASS[usize::from(**c)] & MARK != 0)
                .count();
        }
        tally.piece(piece, all, any);
    }
    long_run |= b.len() - since_space >= MIN_RUN;
    if word_digit {
        leet_words += usize::from(is_leet_word(&b[word..]));
    }
    let screens = Screens {
        hex_escapes: seen & ESCAPE != 0
            && (line.contains("\\x") || line.contains("0x") || line.contains("0X")),
        equals: if seen & EQUALS != 0 {
            b.iter().filter(|c| **c == b'=').count()
        } else {
            0
        },
        hex_pairs: tally.hex_pairs,
        // What `morse_tokens` answers: an ASCII line's marks are the bytes it counts
        // first, and it counts the tokens only of a line with five or more.
        morse: if marks >= 5 {
            morse_tokens(line)
        } else {
            marks
        },
        nato: tally.nato + if seen & DASH != 0 { x_rays(b) } else { 0 },
        braille: false,
    };
    Facts {
        english: (tally.better, tally.words),
        leet: (spaced, leet_words),
        // Such a word has a digit and two letters, and is split only at bytes that are
        // not letters, digits or leetspeak letters: of those only `!` is a `SEP` byte,
        // so a line without `!` has the word within a piece.
        has_leet_word: (seen & DIGIT == 0 || (!tally.digit_and_letters && seen & BANG == 0))
            .then_some(false),
        turning: Some(tally.turning),
        screens,
        long_run,
    }
}

/// At least the spaced hex bytes of `line` (the tokens of two hex digits that
/// [`super::escapes::spaced_hex`] reads): its pieces between [`SEP`] bytes that are two hex digits. Such a
/// token lies between ` `, `,` or `:` (each a `SEP` byte) and holds none, so it is
/// such a piece. A space is a `SEP` byte: the bound of `a + " " + b` is the sum of theirs.
pub(super) fn hex_pair_bound(line: &str) -> usize {
    line.as_bytes()
        .split(|c| CLASS[usize::from(*c)] & SEP != 0)
        .filter(|p| p.len() == 2 && p.iter().all(u8::is_ascii_hexdigit))
        .count()
}

/// At least the NATO words of `line` (the tokens of letters and `-` that
/// [`super::spelled::nato`] reads): its runs of ASCII letters that are NATO words, and
/// its `x-r`s. A token without `-` is such a run; the one with (`x-ray`) holds an `x-r`.
/// The bound of `a + " " + b` is the sum of theirs (a space ends every token and run).
pub(super) fn nato_bound(line: &str) -> usize {
    let b = line.as_bytes();
    b.split(|c| !c.is_ascii_alphabetic())
        .filter(|w| nato_letter(w).is_some())
        .count()
        + x_rays(b)
}

/// The `x-r`s of `b` in any case (`X-Ray`, `x-RAY`).
fn x_rays(b: &[u8]) -> usize {
    b.windows(3)
        .filter(|w| w[1] == b'-' && (w[0] | 0x20) == b'x' && (w[2] | 0x20) == b'r')
        .count()
}
