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
    let mark = |c: char| matches!(c, '.' | '-' | '·' | '•' | '∙' | '−' | '–' | '—' | '_');
    let letter_like = line
        .split_whitespace()
        .filter(|t| t.chars().any(mark) && t.chars().all(|c| mark(c) || matches!(c, '/' | '|')))
        .count();
    if letter_like < 5 {
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
    if !line.chars().any(|c| ('\u{2800}'..='\u{28ff}').contains(&c)) {
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
    const WORDS: [&str; 26] = [
        "alfa", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliett", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
        "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
    ];
    const SPELLINGS: [(&str, &str); 4] = [
        ("alpha", "alfa"),
        ("juliet", "juliett"),
        ("whisky", "whiskey"),
        ("x-ray", "xray"),
    ];
    // ASCII case folded in place: a lowercased copy of every token was most of the work.
    let letter = |w: &str| -> Option<char> {
        let w = SPELLINGS
            .iter()
            .find(|(other, _)| w.eq_ignore_ascii_case(other))
            .map_or(w, |(_, word)| word);
        WORDS
            .iter()
            .position(|n| w.eq_ignore_ascii_case(n))
            .map(|i| char::from(b'a' + i as u8))
    };
    let mut best = String::new();
    let mut current = String::new();
    for token in line.split(|c: char| !(c.is_ascii_alphabetic() || c == '-')) {
        if token.is_empty() {
            continue;
        }
        match letter(token) {
            Some(c) => current.push(c),
            None => {
                if current.len() > best.len() {
                    best = std::mem::take(&mut current);
                }
                current.clear();
            }
        }
    }
    if current.len() > best.len() {
        best = current;
    }
    (best.len() >= 5).then_some(best)
}
