//! Letter substitutions: ROT13, Atbash and leetspeak, and the English letter statistics
//! that tell a substituted word from an ordinary one.

pub(super) const fn rot13_letter(c: u8) -> u8 {
    match c {
        b'a'..=b'z' => (c - b'a' + 13) % 26 + b'a',
        b'A'..=b'Z' => (c - b'A' + 13) % 26 + b'A',
        c => c,
    }
}

pub(super) const fn atbash_letter(c: u8) -> u8 {
    match c {
        b'a'..=b'z' => b'z' - (c - b'a'),
        b'A'..=b'Z' => b'Z' - (c - b'A'),
        c => c,
    }
}

/// `text` with every ASCII letter replaced by `letter` (a substitution keeps every other
/// byte, so the result is as valid UTF-8 as `text`).
pub(super) fn substituted(text: &str, letter: fn(u8) -> u8) -> String {
    // Each byte's substitute is looked up (a call of `letter` per letter was most of the
    // work, and then writing each character): ASCII letters become ASCII letters, and
    // every other byte, those of non-ASCII characters too, stays as it is.
    let mut table: [u8; 256] = std::array::from_fn(|b| b as u8);
    for b in (b'a'..=b'z').chain(b'A'..=b'Z') {
        table[usize::from(b)] = letter(b);
    }
    let out: Vec<u8> = text.bytes().map(|b| table[usize::from(b)]).collect();
    // Only ASCII letters changed, into ASCII letters: still UTF-8, so never lossy.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The pieces of `line` between the characters `sep` accepts, as `line.split(sep)`
/// gives them; an ASCII character is tested without decoding the line.
pub(super) fn pieces<F: Fn(char) -> bool>(line: &str, sep: F) -> impl Iterator<Item = &str> {
    let b = line.as_bytes();
    let (mut start, mut i, mut done) = (0, 0, false);
    std::iter::from_fn(move || {
        while i < b.len() {
            let (c, len) = if b[i].is_ascii() {
                (char::from(b[i]), 1)
            } else {
                let c = line[i..].chars().next()?;
                (c, c.len_utf8())
            };
            i += len;
            if sep(c) {
                let piece = &line[start..i - len];
                start = i;
                return Some(piece);
            }
        }
        if done {
            return None;
        }
        done = true;
        Some(&line[start..])
    })
}

/// Leetspeak read back: in a word that has letters, digits and symbols read as the
/// letters they stand for (`1gn0r3` → `ignore`). `None` when no word changes.
pub(super) fn leet(line: &str) -> Option<String> {
    let mut changed = false;
    let mut out = String::with_capacity(line.len());
    for (i, word) in line.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let letters = word.chars().filter(char::is_ascii_alphabetic).count();
        let leet_chars = word.chars().filter(|c| leet_letter(*c).is_some()).count();
        if letters == 0 || leet_chars == 0 {
            out.push_str(word);
            continue;
        }
        changed = true;
        out.extend(word.chars().map(|c| leet_letter(c).unwrap_or(c)));
    }
    changed.then_some(out)
}

/// The line's whitespace-separated words, and those written in leetspeak: letters with
/// digits standing for letters in them (`1gn0r3`), which read back as words of letters
/// only. A line is leetspeak with at least three such words, and one in five.
pub(super) fn leet_counts(line: &str) -> (usize, usize) {
    // An ASCII line's whitespace is these bytes, and its words are split without
    // decoding it.
    if line.is_ascii() {
        let space = |b: &u8| matches!(b, b' ' | b'\t'..=b'\r');
        return leet_tally(line.as_bytes().split(space), line);
    }
    leet_tally(pieces(line, char::is_whitespace).map(str::as_bytes), line)
}

/// [`leet_counts`] of `line`, split into `words` (empty ones too).
fn leet_tally<'a>(words: impl Iterator<Item = &'a [u8]>, line: &str) -> (usize, usize) {
    let words = words.filter(|w| !w.is_empty());
    // Such a word has a digit: a line without one only has its words counted.
    if !line.bytes().any(|b| b.is_ascii_digit()) {
        return (words.count(), 0);
    }
    let (mut count, mut leet_words) = (0usize, 0usize);
    for w in words {
        count += 1;
        leet_words += usize::from(is_leet_word(w));
    }
    (count, leet_words)
}

/// Whether a word of [`leet_counts`] (whitespace-separated, not empty) is written in
/// leetspeak: trimmed of quotes and marks, letters and leetspeak letters only, at least
/// two of them letters and one a digit.
pub(super) fn is_leet_word(w: &[u8]) -> bool {
    // Most words have no digit, and are not looked at further (the marks trimmed are
    // not digits).
    if !w.iter().any(u8::is_ascii_digit) {
        return false;
    }
    // The marks trimmed are ASCII: a byte of another character is none of them, and is
    // neither a letter nor a leetspeak letter.
    let mark = |b: &u8| matches!(b, b'"' | b'\'' | b',' | b'.' | b':' | b'!' | b'?');
    let start = w.iter().position(|b| !mark(b)).unwrap_or(w.len());
    let end = w.iter().rposition(|b| !mark(b)).map_or(start, |p| p + 1);
    let w = &w[start..end];
    w.iter().filter(|b| b.is_ascii_alphabetic()).count() >= 2
        && w.iter()
            .all(|&b| b.is_ascii_alphabetic() || leet_letter(char::from(b)).is_some())
}

fn leet_letter(c: char) -> Option<char> {
    Some(match c {
        '0' => 'o',
        '1' | '!' => 'i',
        '|' => 'l',
        '2' => 'z',
        '3' => 'e',
        '4' | '@' => 'a',
        '5' | '$' => 's',
        '6' | '9' => 'g',
        '7' | '+' => 't',
        '8' => 'b',
        _ => return None,
    })
}

/// English letter frequencies (per cent, a to z).
pub(super) const LETTER_FREQ: [f32; 26] = [
    8.2, 1.5, 2.8, 4.3, 12.7, 2.2, 2.0, 6.1, 7.0, 0.15, 0.77, 4.0, 2.4, 6.7, 7.5, 1.9, 0.095, 6.0,
    6.3, 9.1, 2.8, 0.98, 2.4, 0.15, 2.0, 0.074,
];

/// Each letter's log-frequency as written, after ROT13 and after Atbash, side by side
/// with a fourth lane of nothing, so that one vector addition adds all three (each lane
/// is summed as alone). The logarithms once, not per letter (they were a tenth of judging
/// plain prose). A row for every byte, so a letter is looked up as it is (its case folded
/// in the table, and no bound to check); the rows of other bytes are never read.
static LOG_FREQ: std::sync::LazyLock<[[f32; 4]; 256]> = std::sync::LazyLock::new(|| {
    let log = LETTER_FREQ.map(|f| (f / 100.0).ln());
    let at = |letter: fn(u8) -> u8, i: u8| log[usize::from(letter(b'a' + i) - b'a')];
    let mut table = [[0.0; 4]; 256];
    for i in 0..26u8 {
        let row = [
            at(identity, i),
            at(rot13_letter, i),
            at(atbash_letter, i),
            0.0,
        ];
        table[usize::from(b'a' + i)] = row;
        table[usize::from(b'A' + i)] = row;
    }
    table
});

/// A word of at least two letters with a digit standing for a letter in it (`5y573m`).
pub(super) fn has_leet_word(line: &str) -> bool {
    // Words are split at every byte that is not an ASCII letter, digit or leetspeak
    // letter, as at every character: each byte of another character is one.
    let b = line.as_bytes();
    let split = |c: &u8| !(c.is_ascii_alphanumeric() || leet_letter(char::from(*c)).is_some());
    // Such a word has a digit: only the words around the line's digits are looked at,
    // each once (from its first digit).
    let mut from = 0;
    while let Some(d) = b[from..].iter().position(u8::is_ascii_digit) {
        let at = from + d;
        let start = b[..at].iter().rposition(split).map_or(0, |p| p + 1);
        let end = b[at..].iter().position(split).map_or(b.len(), |p| at + p);
        let w = &b[start..end];
        if w.iter().filter(|c| c.is_ascii_alphabetic()).count() >= 2
            && !w.iter().all(u8::is_ascii_hexdigit)
        {
            return true;
        }
        from = end;
    }
    false
}

/// How many of the line's words ROT13 and Atbash each turn into much more English-looking
/// words, and how many words of three letters or more it has: ordinary prose gets worse
/// under a substitution, an encoded line gets better. One pass over the words for both.
pub(super) fn english_turns(line: &str) -> ([usize; 2], usize) {
    let mut better = [0usize; 2];
    let mut words = 0;
    let is_word = |w: &&str| w.len() >= 3 && w.bytes().any(|b| b.is_ascii_alphabetic());
    for w in pieces(line, |c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '\'' | '(' | ')' | ',' | '.' | ':' | ';' | '!' | '?'
            )
    })
    .filter(is_word)
    {
        words += 1;
        // The substitution maps letters to letters and keeps every other character,
        // so it is read off `w` without writing the substituted word.
        if !w.bytes().all(|b| b.is_ascii_alphabetic()) {
            continue;
        }
        for (b, turned) in better.iter_mut().zip(word_scores(w.as_bytes()).0) {
            *b += usize::from(turned);
        }
    }
    (better, words)
}

/// What ROT13 and Atbash each make of a word of ASCII letters (not empty), from one pass
/// over its letters: whether the substitution makes it much more English-looking (the
/// mean log-frequency of its letters, English words about -2.9 and their ROT13 or Atbash
/// about -3.6, each summed in the word's order; [`english_turns`] counts such words),
/// and whether [`decoded_words`] decodes it ([`word_turns`]).
pub(super) fn word_scores(word: &[u8]) -> ([bool; 2], [bool; 2]) {
    let log_freq = &*LOG_FREQ;
    let mut sum = [0.0f32; 4];
    let mut plain = 0u32;
    let mut prev: Option<usize> = None;
    for &b in word {
        for (s, l) in sum.iter_mut().zip(&log_freq[usize::from(b)]) {
            *s += l;
        }
        let letter = LETTER_INDEX[usize::from(b)];
        if let Some(p) = prev {
            plain += u32::from(PAIR_SCORES[p][letter][0]);
        }
        prev = Some(letter);
    }
    let n = word.len() as f32;
    let before = sum[0] / n;
    let better = [sum[1] / n, sum[2] / n].map(|after| after >= -3.3 && after - before >= 0.5);
    (better, turns_scored(word, plain))
}

/// What [`names_a_cipher`] looks for.
pub(super) const CUES: [&str; 8] = [
    "rot13",
    "rot-13",
    "rot 13",
    "atbash",
    "cipher",
    "encode",
    "decode",
    "what does this mean",
];

/// The cues end to end as one Shift-And automaton (Baeza-Yates and Gonnet): bit `p` of
/// the state is set when the text read so far ends with the first `p - start + 1`
/// letters of the cue whose letters start at bit `start`. `(starts, ends, letters)`:
/// the bit of each cue's first and last letter, and for each byte the positions it
/// matches in either case.
const CUE_AUTOMATON: (u64, u64, [u64; 256]) = {
    let (mut starts, mut ends, mut letters) = (0u64, 0u64, [0u64; 256]);
    let (mut bit, mut i) = (0, 0);
    while i < CUES.len() {
        let cue = CUES[i].as_bytes();
        starts |= 1 << bit;
        let mut k = 0;
        while k < cue.len() {
            letters[cue[k].to_ascii_lowercase() as usize] |= 1 << bit;
            letters[cue[k].to_ascii_uppercase() as usize] |= 1 << bit;
            bit += 1;
            k += 1;
        }
        ends |= 1 << (bit - 1);
        i += 1;
    }
    // Every cue's letters fit in the state.
    assert!(bit <= 64);
    (starts, ends, letters)
};

/// Whether `line` says it holds an encoded or enciphered text (`ROT13`, `Atbash`,
/// `cipher`, `encoded`, `decode`, "what does this mean?"): such a line is read whole
/// through each substitution. ASCII case folded; one pass of a Shift-And automaton over
/// all the cues at once, a few instructions and no branch a byte (no lowercased copy of
/// the line).
pub(super) fn names_a_cipher(line: &str) -> bool {
    static LETTERS: [u64; 256] = CUE_AUTOMATON.2;
    let (starts, ends) = (CUE_AUTOMATON.0, CUE_AUTOMATON.1);
    let mut state = 0u64;
    let mut found = 0u64;
    for b in line.bytes() {
        // A cue's first bit is always allowed to start; a bit moves on to the next
        // letter of its cue only when this byte is that letter.
        state = ((state << 1) | starts) & LETTERS[usize::from(b)];
        found |= state;
    }
    found & ends != 0
}

/// The longest cue [`names_a_cipher`] looks for ("what does this mean").
pub(super) const LONGEST_CUE: usize = {
    let (mut longest, mut i) = (0, 0);
    while i < CUES.len() {
        if CUES[i].len() > longest {
            longest = CUES[i].len();
        }
        i += 1;
    }
    longest
};

/// How common each pair of adjacent letters is in English words (row: the first letter,
/// column: the second; `0` never seen, `1` about one pair in 100 000, each step about
/// twice as common, `9` one in 400 or more), counted over the licence texts of
/// `/usr/share/common-licenses` (145 711 pairs).
#[rustfmt::skip]
const BIGRAMS: [&[u8; 26]; 26] = [
    b"08870570826989073989665270", b"60118000750820610853800070", b"80609108705700901519800010",
    b"70069140920310800441632040", b"83998763700779476997375860", b"60007600800300900817600060",
    b"60008147700426430831500010", b"91019000900101800437401030", b"79978880303879961799480304",
    b"20005000000000210000400000", b"40006000500204000050200000", b"81169410900800700265731080",
    b"96209000700363870070610000", b"80898690715524931199660080", b"26785973403789580979987243",
    b"80028014700811770936700080", b"00000000000000000000700000", b"94769450908485950788555080",
    b"60629417903530872189801040", b"81019109900623930986507070", b"67765240600778250889100100",
    b"70009000700000400000000000", b"80006007800305800520003000", b"40606003300010050006000130",
    b"31004000500212930652000013", b"20003000300000010000000000",
];

/// Whether `word` (in any case) is a short word of ordinary prose whose letter pairs are
/// rare (`oh`, `go`, Roman numerals): never read as substituted on its own. One test of
/// its folded letters rather than a comparison with each (most words of prose are short).
pub(super) fn is_common_rare_pair(word: &[u8]) -> bool {
    let mut folded = [0u8; 3];
    match word.get(..word.len().min(3)) {
        Some(w) if w.len() == word.len() => {
            for (f, b) in folded.iter_mut().zip(w) {
                *f = b.to_ascii_lowercase();
            }
        }
        _ => return false,
    }
    matches!(
        &folded[..word.len()],
        b"oh"
            | b"ah"
            | b"go"
            | b"mr"
            | b"dr"
            | b"ok"
            | b"uh"
            | b"eh"
            | b"ii"
            | b"iii"
            | b"hm"
            | b"mm"
    )
}

/// The mean commonness of a word's letter pairs ([`BIGRAMS`], 0 to 9) after `letter`;
/// `None` for a single letter and for [`is_common_rare_pair`].
pub(super) fn pair_score(word: &[u8], letter: impl Fn(u8) -> u8) -> Option<f32> {
    // The common words are of two or three letters.
    if word.len() < 2 || is_common_rare_pair(word) {
        return None;
    }
    let index = |b: u8| usize::from(letter(b).to_ascii_lowercase() - b'a');
    let sum: u32 = word
        .windows(2)
        .map(|p| u32::from(BIGRAMS[index(p[0])][index(p[1])] - b'0'))
        .sum();
    Some(sum as f32 / (word.len() - 1) as f32)
}

/// Whether a word rare in English (its letter pairs' mean under 5) is common once
/// substituted by `letter` (6 or more, 2 better): a word [`decoded_words`] decodes.
fn turns(word: &[u8], before: Option<f32>, letter: impl Fn(u8) -> u8) -> bool {
    match before {
        Some(before) if before < 5.0 => {
            pair_score(word, letter).is_some_and(|after| after >= 6.0 && after - before >= 2.0)
        }
        _ => false,
    }
}

/// Whether [`decoded_words`] decodes a word of `line` by ROT13 and by Atbash: one pass
/// over the words for both, nothing written (most lines have no such word). Each word's
/// letter pairs are scored as written and after each substitution in one pass
/// ([`PAIR_SCORES`]); the sums, and what [`turns`] asks of them, are those of
/// [`pair_score`].
pub(super) fn turning_words(line: &str) -> [bool; 2] {
    let mut found = [false; 2];
    for word in line.as_bytes().split(|b| !b.is_ascii_alphabetic()) {
        for (f, turns) in found.iter_mut().zip(word_turns(word)) {
            *f |= turns;
        }
        if found == [true; 2] {
            break;
        }
    }
    found
}

/// Whether [`decoded_words`] decodes `word` (a run of ASCII letters, as [`turning_words`]
/// splits a line) by ROT13 and by Atbash.
pub(super) fn word_turns(word: &[u8]) -> [bool; 2] {
    let plain = word.windows(2).map(|p| u32::from(pair_scores(p)[0])).sum();
    turns_scored(word, plain)
}

/// The scores of the pair of letters `p` ([`PAIR_SCORES`]).
fn pair_scores(p: &[u8]) -> &'static [u8; 3] {
    &PAIR_SCORES[LETTER_INDEX[usize::from(p[0])]][LETTER_INDEX[usize::from(p[1])]]
}

/// [`word_turns`], given the sum of the word's pair scores as written (`plain`).
fn turns_scored(word: &[u8], plain: u32) -> [bool; 2] {
    let mut found = [false; 2];
    // Only a word rare in English before can turn: a mean of 5 or more is that before
    // it is divided (the quotient rounds to 5 or more too). Most words are common, and
    // their scores after a substitution are not summed.
    if word.len() < 2
        || u64::from(plain) >= 5 * (word.len() as u64 - 1)
        || is_common_rare_pair(word)
    {
        return found;
    }
    let pairs = (word.len() - 1) as f32;
    let before = plain as f32 / pairs;
    if before >= 5.0 {
        return found;
    }
    for (n, f) in found.iter_mut().enumerate() {
        let after: u32 = word
            .windows(2)
            .map(|p| u32::from(pair_scores(p)[n + 1]))
            .sum();
        let after = after as f32 / pairs;
        *f = after >= 6.0 && after - before >= 2.0;
    }
    found
}

/// Each ASCII letter's index (`a` and `A` are 0) in [`PAIR_SCORES`]; 0 for another byte.
static LETTER_INDEX: [usize; 256] = {
    let mut table = [0; 256];
    let mut i = 0;
    while i < 26 {
        table[b'a' as usize + i] = i;
        table[b'A' as usize + i] = i;
        i += 1;
    }
    table
};

/// [`BIGRAMS`] of each pair of letters (lower case, `a` = 0) as written, after ROT13
/// and after Atbash, side by side.
static PAIR_SCORES: [[[u8; 3]; 26]; 26] = {
    /// The index of letter `k` after the substitution `letter` (0: none, 1: ROT13,
    /// 2: Atbash).
    const fn index(letter: u8, k: usize) -> usize {
        let b = b'a' + k as u8;
        (match letter {
            0 => identity(b),
            1 => rot13_letter(b),
            _ => atbash_letter(b),
        } - b'a') as usize
    }
    const fn score(letter: u8, i: usize, j: usize) -> u8 {
        BIGRAMS[index(letter, i)][index(letter, j)] - b'0'
    }
    let mut table = [[[0u8; 3]; 26]; 26];
    let mut i = 0;
    while i < 26 {
        let mut j = 0;
        while j < 26 {
            table[i][j] = [score(0, i, j), score(1, i, j), score(2, i, j)];
            j += 1;
        }
        i += 1;
    }
    table
};

const fn identity(c: u8) -> u8 {
    c
}

/// `line` with only the words a substitution decodes substituted: a word whose letter
/// pairs are rare in English (mean under 5 of 9) and common once substituted (6 or more,
/// 2 better); the words between two such words at most two words apart; and every word
/// of a code span, quotation, bracket or clause that holds one, when the substitution
/// does not make that part less English on average. `None` when no word decodes. One pass
/// over the line's words, plus one over each part.
pub(super) fn decoded_words(line: &str, letter: fn(u8) -> u8) -> Option<String> {
    let bytes = line.as_bytes();
    // The line's words (runs of ASCII letters) and the part each belongs to.
    let mut words: Vec<(usize, usize, usize)> = Vec::new();
    let mut part = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_alphabetic() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
                i += 1;
            }
            words.push((start, i, part));
            continue;
        }
        let clause_end = matches!(b, b'.' | b':' | b';' | b'!' | b'?')
            && bytes.get(i + 1).is_none_or(u8::is_ascii_whitespace);
        if clause_end || matches!(b, b'`' | b'"' | b'(' | b')' | b'[' | b']' | b'{' | b'}') {
            part += 1;
        }
        i += 1;
    }
    let turns: Vec<usize> = words
        .iter()
        .enumerate()
        .filter(|(_, (s, e, _))| {
            let word = &bytes[*s..*e];
            // Only a word rare in English before can turn; most are not, and are not
            // substituted to find out.
            turns(word, pair_score(word, identity), letter)
        })
        .map(|(n, _)| n)
        .collect();
    if turns.is_empty() {
        return None;
    }
    let mut chosen = vec![false; words.len()];
    for pair in turns.windows(2) {
        if pair[1] - pair[0] <= 3 {
            chosen[pair[0]..pair[1]].iter_mut().for_each(|c| *c = true);
        }
    }
    for &n in &turns {
        chosen[n] = true;
    }
    // Whole parts: a part's words are consecutive, so each part is one run of `words`.
    let mut start = 0;
    while start < words.len() {
        let part = words[start].2;
        let end = start + words[start..].iter().take_while(|w| w.2 == part).count();
        if chosen[start..end].iter().any(|c| *c) {
            let mean = |f: fn(u8) -> u8| {
                let scores: Vec<f32> = words[start..end]
                    .iter()
                    .filter_map(|&(s, e, _)| pair_score(&bytes[s..e], f))
                    .collect();
                scores.iter().sum::<f32>() / scores.len().max(1) as f32
            };
            if mean(letter) >= mean(identity) {
                chosen[start..end].iter_mut().for_each(|c| *c = true);
            }
        }
        start = end;
    }
    let mut out = bytes.to_vec();
    for (&(s, e, _), _) in words.iter().zip(&chosen).filter(|(_, c)| **c) {
        out[s..e].iter_mut().for_each(|b| *b = letter(*b));
    }
    // Only ASCII letters changed, into ASCII letters: still UTF-8.
    String::from_utf8(out).ok()
}
