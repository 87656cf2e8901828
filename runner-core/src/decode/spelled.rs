//! Letters spelled in other alphabets: Morse code, Braille and the NATO spelling
//! alphabet.

/// A line of Morse code (at least five letters; `/` or three spaces between words).
pub(super) fn morse(line: &str) -> Option<String> {
    const TABLE: [(&str, char); 36] = [
        (".-", 'a'),
        ("-...", 'b'),
        ("-.-.", 'c'),
        ("-..", 'd'),
        (".", 'e'),
        ("..-.", 'f'),
        ("--.", 'g'),
        ("....", 'h'),
        ("..", 'i'),
        (".---", 'j'),
        ("-.-", 'k'),
        (".-..", 'l'),
        ("--", 'm'),
        ("-.", 'n'),
        ("---", 'o'),
        (".--.", 'p'),
        ("--.-", 'q'),
        (".-.", 'r'),
        ("...", 's'),
        ("-", 't'),
        ("..-", 'u'),
        ("...-", 'v'),
        (".--", 'w'),
        ("-..-", 'x'),
        ("-.--", 'y'),
        ("--..", 'z'),
        ("-----", '0'),
        (".----", '1'),
        ("..---", '2'),
        ("...--", '3'),
        ("....-", '4'),
        (".....", '5'),
        ("-....", '6'),
        ("--...", '7'),
        ("---..", '8'),
        ("----.", '9'),
    ];
    // Each letter is a token of dots and dashes (then `/` or `|`): a line with fewer than
    // five such tokens is no Morse, and is not rewritten to find out.
    if morse_tokens(line) < 5 {
        return None;
    }
    let norm: String = line
        .chars()
        .map(|c| match c {
            '·' | '•' | '∙' => '.',
            '−' | '–' | '—' | '_' => '-',
            c => c,
        })
        .collect();
    // Runs of whitespace-separated Morse tokens; `/` (or `|`) between words.
    let mut best = (String::new(), 0usize);
    let mut current = (String::new(), 0usize);
    for token in norm.split_whitespace() {
        if token.chars().all(|c| matches!(c, '/' | '|')) {
            if !current.0.ends_with(' ') && !current.0.is_empty() {
                current.0.push(' ');
            }
            continue;
        }
        let word = token.trim_end_matches(['/', '|']);
        match TABLE.iter().find(|(m, _)| *m == word) {
            Some((_, ch)) => {
                current.0.push(*ch);
                current.1 += 1;
                if word.len() < token.len() {
                    current.0.push(' ');
                }
            }
            None => {
                if current.1 > best.1 {
                    best = std::mem::take(&mut current);
                }
                current = (String::new(), 0);
            }
        }
    }
    if current.1 > best.1 {
        best = current;
    }
    let (best, best_letters) = best;
    (best_letters >= 5).then_some(best)
}

/// At least the number of the line's letter-like Morse tokens (whitespace-separated, of
/// dots and dashes and perhaps `/` or `|`), exact when it is five or more. Each such
/// token holds a mark, and each mark's first byte is one of five (`.`, `-`, `_` and the
/// lead bytes of the others), so a line with fewer such bytes is not split to count its
/// tokens. The bound of `a + " " + b` is the sum of theirs.
pub(super) fn morse_tokens(line: &str) -> usize {
    let starts = line
        .bytes()
        .filter(|b| matches!(b, b'.' | b'-' | b'_' | 0xc2 | 0xe2))
        .count();
    if starts < 5 {
        return starts;
    }
    let mark = |c: char| matches!(c, '.' | '-' | '·' | '•' | '∙' | '−' | '–' | '—' | '_');
    line.split_whitespace()
        .filter(|t| t.chars().any(mark) && t.chars().all(|c| mark(c) || matches!(c, '/' | '|')))
        .count()
}

/// Grade-1 Braille (at least four letters): letters, the number sign, the capital sign
/// and English Braille's punctuation (so `⠑⠭⠑⠉⠶⠇⠎⠶` reads `exec(ls)`).
pub(super) fn braille(line: &str) -> Option<String> {
    const PUNCTUATION: [(u8, char); 10] = [
        (0x32, '.'),
        (0x02, ','),
        (0x04, '\''),
        (0x24, '-'),
        (0x0c, '/'),
        (0x16, '!'),
        (0x26, '?'),
        (0x12, ':'),
        (0x06, ';'),
        (0x36, '('),
    ];
    const LETTERS: [u8; 26] = [
        0x01, 0x03, 0x09, 0x19, 0x11, 0x0b, 0x1b, 0x13, 0x0a, 0x1a, 0x05, 0x07, 0x0d, 0x1d, 0x15,
        0x0f, 0x1f, 0x17, 0x0e, 0x1e, 0x25, 0x27, 0x3a, 0x2d, 0x3d, 0x35,
    ];
    // Without a Braille cell there is no letter to read (and no copy of the line to make).
    if line.is_ascii() || !line.chars().any(|c| ('\u{2800}'..='\u{28ff}').contains(&c)) {
        return None;
    }
    let mut out = String::new();
    let mut letters = 0;
    let mut number = false;
    // One sign opens and closes a parenthesis: read it as each in turn.
    let mut open = false;
    for c in line.chars() {
        let u = c as u32;
        if !(0x2800..=0x28ff).contains(&u) {
            out.push(c);
            number = false;
            continue;
        }
        let dots = (u - 0x2800) as u8;
        match dots {
            0 => {
                out.push(' ');
                number = false;
            }
            0x3c => number = true,
            0x20 => {}
            _ => match LETTERS.iter().position(|&l| l == dots) {
                Some(i) if number && i < 10 => out.push(char::from(b"1234567890"[i])),
                Some(i) => {
                    out.push(char::from(b'a' + i as u8));
                    letters += 1;
                }
                None => match PUNCTUATION.iter().find(|(d, _)| *d == dots) {
                    Some((0x36, _)) => {
                        out.push(if open { ')' } else { '(' });
                        open = !open;
                    }
                    Some((_, p)) => out.push(*p),
                    None => out.push(' '),
                },
            },
        }
    }
    (letters >= 4).then_some(out)
}

/// Runs of at least five NATO spelling-alphabet words, each read as its letter.
pub(super) fn nato(line: &str) -> Option<String> {
    let (longest, best) = nato_runs(line);
    if longest < 5 {
        return None;
    }
    // Every token of the first longest run is a NATO word.
    Some(
        line[best]
            .split(|c: char| !(c.is_ascii_alphabetic() || c == '-'))
            .filter(|t| !t.is_empty())
            .filter_map(|t| nato_letter(t.as_bytes()).map(char::from))
            .collect(),
    )
}

/// A byte of a NATO token (a run of ASCII letters and `-`; any other character ends one).
fn is_nato_byte(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'-'
}

/// The letter a NATO spelling-alphabet word (any ASCII case) stands for. A word and its
/// other spellings start with their letter, so only that letter's are compared; every
/// one has four to eight letters, so most of prose's words are not compared at all.
#[inline]
pub(super) fn nato_letter(w: &[u8]) -> Option<u8> {
    const WORDS: [&str; 26] = [
        "alfa", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliett", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
        "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
    ];
    const SPELLINGS: [&str; 4] = ["alpha", "juliet", "whisky", "x-ray"];
    if !(4..=8).contains(&w.len()) {
        return None;
    }
    let first = w.first()?.to_ascii_lowercase();
    if !first.is_ascii_lowercase() {
        return None;
    }
    let word = WORDS[usize::from(first - b'a')];
    (w.eq_ignore_ascii_case(word.as_bytes())
        || SPELLINGS
            .iter()
            .any(|s| s.as_bytes()[0] == first && w.eq_ignore_ascii_case(s.as_bytes())))
    .then_some(first)
}

/// The line's longest run of NATO words, in tokens, and the byte range of its first
/// longest run (runs of at least five are read by [`nato`]). Byte by byte: a non-ASCII
/// character ends a token as any other non-letter does.
fn nato_runs(line: &str) -> (usize, std::ops::Range<usize>) {
    let b = line.as_bytes();
    let mut longest = 0;
    let mut best = 0..0;
    let (mut current, mut start) = (0usize, 0usize);
    let mut i = 0;
    while i < b.len() {
        if !is_nato_byte(b[i]) {
            i += 1;
            continue;
        }
        let token = i;
        while i < b.len() && is_nato_byte(b[i]) {
            i += 1;
        }
        if nato_letter(&b[token..i]).is_some() {
            if current == 0 {
                start = token;
            }
            current += 1;
            if current > longest {
                longest = current;
                best = start..i;
            }
        } else {
            current = 0;
        }
    }
    (longest, best)
}
