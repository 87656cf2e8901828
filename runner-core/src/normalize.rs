//! Text normalization. Two different jobs live here and must not be confused:
//!
//! * [`for_hashing`]: the byte rules for hashing text (strip a UTF-8 BOM, CRLF → LF,
//!   Unicode NFC). Meaning-preserving; used for request, packet and lock hashes.
//! * [`Deobfuscated`]: a *view* of a line for the forbidden-content scanner (NFKC,
//!   invisible characters dropped, common homoglyphs folded to Latin, lowercase, and
//!   runs of spaced-out letters rejoined). Lossy on purpose; never hashed or shown.

use unicode_normalization::UnicodeNormalization;

/// Strips one leading UTF-8 byte-order mark.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// The project's text-hashing normalization: BOM stripped, CRLF → LF, NFC.
pub fn for_hashing(text: &str) -> String {
    let text = strip_bom(text).replace("\r\n", "\n");
    // NFC leaves text that is already in NFC as it is: ASCII, and text Unicode's quick
    // check says yes to (UAX #15), are returned without recomposing every character.
    if text.is_ascii()
        || unicode_normalization::is_nfc_quick(text.chars())
            == unicode_normalization::IsNormalized::Yes
    {
        return text;
    }
    text.nfc().collect()
}

/// Invisible characters that can hide or reorder text: zero-width characters, bidi
/// controls, soft hyphen, and the BOM when it is not the first character.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00ad}' | '\u{034f}' | '\u{061c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}'
        | '\u{180b}'..='\u{180f}'
        | '\u{200b}'..='\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}'
        | '\u{3164}' | '\u{feff}' | '\u{ffa0}'
        | '\u{fe00}'..='\u{fe0f}'
        | '\u{e0000}'..='\u{e007f}'
        | '\u{e0100}'..='\u{e01ef}')
}

/// Control characters other than tab and LF. A CR is allowed only as part of a CRLF
/// line ending, which the line splitter removes before this is asked: a lone CR is a
/// line break to YAML and a carriage return to a terminal, so it can hide text.
pub fn is_disallowed_control(c: char) -> bool {
    (c.is_control() && !matches!(c, '\t' | '\n')) || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Folds the commonest Cyrillic and Greek look-alikes of Latin letters (after NFKC and
/// lowercasing). Not a full confusables table: enough that "іgnоre" and "раssword"
/// written with Cyrillic letters still match the rules.
#[rustfmt::skip]
fn fold_homoglyph(c: char) -> char {
    match c {
        'а' => 'a', 'в' => 'b', 'е' | 'ё' => 'e', 'һ' => 'h', 'і' | 'ї' | 'ι' => 'i',
        'ј' => 'j', 'к' | 'κ' => 'k', 'м' => 'm', 'н' | 'η' => 'n', 'о' | 'ο' | 'σ' => 'o',
        'р' | 'ρ' => 'p', 'с' | 'ϲ' => 'c', 'т' | 'τ' => 't', 'у' | 'γ' => 'y', 'х' | 'χ' => 'x',
        'ѕ' => 's', 'ԁ' => 'd', 'ɡ' => 'g', 'ԛ' => 'q', 'ԝ' => 'w', 'α' => 'a', 'ε' => 'e',
        'ν' => 'v', 'β' => 'b', 'ℓ' => 'l', 'ı' => 'i',
        // Small capitals (IPA block), which NFKC leaves alone.
        'ᴀ' => 'a', 'ʙ' => 'b', 'ᴄ' => 'c', 'ᴅ' => 'd', 'ᴇ' => 'e', 'ꜰ' => 'f', 'ɢ' => 'g',
        'ʜ' => 'h', 'ɪ' => 'i', 'ᴊ' => 'j', 'ᴋ' => 'k', 'ʟ' => 'l', 'ᴍ' => 'm', 'ɴ' => 'n',
        'ᴏ' => 'o', 'ᴘ' => 'p', 'ǫ' => 'q', 'ʀ' => 'r', 'ꜱ' => 's', 'ᴛ' => 't', 'ᴜ' => 'u',
        'ᴠ' => 'v', 'ᴡ' => 'w', 'ʏ' => 'y', 'ᴢ' => 'z',
        // Blank-looking characters that are not whitespace to Unicode, and whitespace
        // that NFKC keeps (so `\s` and a plain space see the same thing).
        '\u{2800}' => ' ',
        c if c.is_whitespace() => ' ',
        c if !c.is_ascii() && c.is_alphanumeric() => confusable_latin(c).unwrap_or(c),
        _ => c,
    }
}

/// The Latin letter or digit a character is confusable with, from Unicode's confusables
/// table (UTS #39 skeleton): Armenian `օ`, Cherokee `Ꭺ`, mathematical and other scripts'
/// look-alikes. Only a single ASCII letter or digit counts; anything else stays itself.
fn confusable_latin(c: char) -> Option<char> {
    let mut buf = [0u8; 4];
    let mut skeleton = unicode_security::skeleton(c.encode_utf8(&mut buf));
    let first = skeleton.next()?;
    (skeleton.next().is_none() && first.is_ascii_alphanumeric()).then(|| first.to_ascii_lowercase())
}

/// Dashes and minus signs that read as a hyphen (Unicode's dash punctuation, Pd, and
/// the minus-like symbols NFKC keeps).
fn is_dash_like(c: char) -> bool {
    matches!(
        c,
        '\u{058a}' | '\u{05be}' | '\u{1400}' | '\u{1806}' | '\u{2010}'
            ..='\u{2015}'
                | '\u{2043}'
                | '\u{2212}'
                | '\u{02d7}'
                | '\u{2796}'
                | '\u{2e17}'
                | '\u{2e1a}'
                | '\u{2e3a}'
                | '\u{2e3b}'
                | '\u{2e40}'
                | '\u{301c}'
                | '\u{3030}'
                | '\u{30a0}'
                | '\u{fe31}'
                | '\u{fe32}'
                | '\u{fe58}'
                | '\u{fe63}'
                | '\u{ff0d}'
                | '\u{10ead}'
    )
}

/// The form in which two names of people or agents are compared (separation of
/// duties): the scanner's fold (NFKC, invisibles dropped, look-alike letters folded to
/// Latin, lowercase), every dash-like character read as `-`, and runs of whitespace as
/// one space, trimmed. "ｃore‐agent" (fullwidth c, U+2010) and "core-agent" compare
/// equal, as they look equal to a reader.
pub fn identity_key(name: &str) -> String {
    let folded = Deobfuscated::of(name).folded;
    let dashed: String = folded
        .chars()
        .map(|c| if is_dash_like(c) { '-' } else { c })
        .collect();
    dashed.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The scanner's view of one line of text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deobfuscated {
    /// NFKC, invisibles removed, homoglyphs folded, lowercase.
    pub folded: String,
    /// Runs of three or more single letters separated by spaces or punctuation
    /// ("p i p  i n s t a l l"), each joined into one word ("pipinstall").
    pub spaced_runs: Vec<String>,
    /// `folded` with each such run replaced by its joined word ("p i p install" →
    /// "pip install"); `None` when the line has no run.
    pub collapsed: Option<String>,
    /// Where each joined word sits in `collapsed` (byte ranges): the rest of `collapsed`
    /// is `folded` as it was.
    pub joined_at: Vec<std::ops::Range<usize>>,
    /// True when the line held invisible characters.
    pub had_invisible: bool,
}

impl Deobfuscated {
    pub fn of(line: &str) -> Self {
        // Fast path: ASCII is its own NFKC form and has no invisibles or homoglyphs.
        if line.is_ascii() {
            let folded = line.to_ascii_lowercase();
            let (spaced_runs, collapsed, joined_at) = spaced_runs(&folded);
            return Self {
                folded,
                spaced_runs,
                collapsed,
                joined_at,
                had_invisible: false,
            };
        }
        let had_invisible = line.chars().any(is_invisible);
        let folded: String = line
            .nfkc()
            .filter(|c| !is_invisible(*c))
            // Stacked combining marks (Zalgo text) hide nothing from a reader's eye
            // but split every word for a pattern.
            .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
            .flat_map(char::to_lowercase)
            .map(fold_homoglyph)
            .collect();
        let (spaced_runs, collapsed, joined_at) = spaced_runs(&folded);
        Self {
            folded,
            spaced_runs,
            collapsed,
            joined_at,
            had_invisible,
        }
    }
}

/// One other reading of a line ([`alternate_readings`]), folded like
/// [`Deobfuscated::folded`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    pub folded: String,
    /// Decoded from a blob that only an encoding explains ([`crate::decode::Decoded`]).
    pub encoded: bool,
}

/// Other readings of a line that a person or a program would take from it, each folded
/// like [`Deobfuscated::folded`]: what its encodings decode to ([`crate::decode`]:
/// base64 and the other bases, escapes, Morse, ROT13, ...), the line URL-decoded when it
/// holds percent escapes, and the line as markdown renders it (link targets dropped,
/// code spans and emphasis unwrapped, a list or quote marker removed). Empty when the
/// line has none of these. The scanner runs every rule over each.
pub fn alternate_readings(line: &str) -> Vec<Reading> {
    alternate_readings_counted(line).0
}

/// [`alternate_readings`], and the decoders' [`crate::decode::Counts`] of an ASCII line
/// whose readings a pair's are composed from ([`join_readings`]): one without readings,
/// or with only the whole-line ROT13 and Atbash hints of a line that names a cipher
/// (`None` for another).
pub fn alternate_readings_counted(line: &str) -> (Vec<Reading>, Option<crate::decode::Counts>) {
    let mut out = Vec::new();
    let ascii = line.is_ascii();
    // ASCII is its own NFKC form and holds no invisible or Braille character.
    let plain: std::borrow::Cow<'_, str> = if ascii {
        line.into()
    } else {
        line.nfkc()
            .filter(|c| !is_invisible(*c) && *c != '\u{2800}')
            .collect::<String>()
            .into()
    };
    let braille: String;
    // Braille's blank cell is a space to the fold, a letter gap to the decoder.
    let decode_from = if !ascii && line.contains('\u{2800}') {
        braille = line.nfkc().filter(|c| !is_invisible(*c)).collect();
        braille.as_str()
    } else {
        &plain
    };
    let (decoded, counts) = crate::decode::readings_counted(decode_from);
    for d in crate::decode::invisible::hidden(line)
        .into_iter()
        .chain(decoded)
    {
        out.push(Reading {
            folded: Deobfuscated::of(&d.text).folded,
            encoded: d.encoded,
        });
    }
    if let Some(shown) = as_displayed(line) {
        out.push(Reading {
            folded: Deobfuscated::of(&shown).folded,
            encoded: false,
        });
    }
    if let Some(decoded) = percent_decoded(&plain) {
        out.push(Reading {
            folded: Deobfuscated::of(&decoded).folded,
            encoded: false,
        });
    }
    if let Some(rendered) = markdown_plain_differs(&plain) {
        out.push(Reading {
            folded: Deobfuscated::of(&rendered).folded,
            encoded: false,
        });
    }
    // A line that reads substituted has those two readings: it has no other when it
    // has two.
    let composes = out.is_empty() || (out.len() == 2 && counts.reads_substituted());
    (out, (ascii && composes).then_some(counts))
}

/// The [`alternate_readings`] of the ASCII `joined` (`a + " " + b`), composed from the
/// counts [`alternate_readings_counted`] gave for `a` and `b`
/// ([`crate::decode::join_readings`]); `None` when it cannot tell. Exact: a backspace, a
/// percent escape or markdown in `joined` is looked for in it.
pub fn join_readings(
    a: &crate::decode::Counts,
    b: &crate::decode::Counts,
    joined: &str,
) -> Option<Vec<Reading>> {
    if !joined.is_ascii()
        || joined.contains('\u{8}')
        || percent_decoded(joined).is_some()
        || markdown_plain_differs(joined).is_some()
    {
        return None;
    }
    // ASCII text folds to its lower case.
    let decoded = crate::decode::join_readings(a, b, joined)?;
    Some(
        decoded
            .into_iter()
            .map(|d| Reading {
                folded: d.text.to_ascii_lowercase(),
                encoded: d.encoded,
            })
            .collect(),
    )
}

/// `line` as a terminal or a bidi-aware renderer shows it, when it holds a backspace or a
/// directional override: a backspace erases the character before it, and the text
/// between a right-to-left override (U+202E) and its pop (U+202C) is shown in reverse
/// order, an isolate (U+2066..U+2069 ... U+2069) counting as one unit. So
/// `Systeme\u{8}(` reads `System(` and `D\u{202e}\u{2066}O\u{2069}\u{2066}R\u{2069}\u{202c}P`
/// reads `DROP`. Linear in the line; `None` when the line has neither.
fn as_displayed(line: &str) -> Option<String> {
    // Two searches for one byte each (a search for either character looked at every
    // character of the line).
    if !line.contains('\u{8}') && !line.contains('\u{202e}') {
        return None;
    }
    let mut out: Vec<char> = Vec::with_capacity(line.len());
    // Units of the current right-to-left span (each an isolate's text or a character).
    let mut rtl: Option<Vec<String>> = None;
    let mut isolate: Option<String> = None;
    for c in line.chars() {
        match c {
            '\u{8}' => {
                if let Some(unit) = isolate.as_mut() {
                    unit.pop();
                } else if let Some(units) = rtl.as_mut() {
                    units.pop();
                } else {
                    out.pop();
                }
            }
            '\u{202e}' if rtl.is_none() => rtl = Some(Vec::new()),
            '\u{202c}' if isolate.is_none() => {
                if let Some(units) = rtl.take() {
                    out.extend(units.iter().rev().flat_map(|u| u.chars()));
                }
            }
            '\u{2066}'..='\u{2068}' if rtl.is_some() && isolate.is_none() => {
                isolate = Some(String::new())
            }
            '\u{2069}' if isolate.is_some() => {
                if let (Some(unit), Some(units)) = (isolate.take(), rtl.as_mut()) {
                    units.push(unit);
                }
            }
            c if is_invisible(c) => {}
            c => {
                if let Some(unit) = isolate.as_mut() {
                    unit.push(c);
                } else if let Some(units) = rtl.as_mut() {
                    units.push(c.to_string());
                } else {
                    out.push(c);
                }
            }
        }
    }
    if let Some(unit) = isolate {
        rtl.get_or_insert_with(Vec::new).push(unit);
    }
    if let Some(units) = rtl {
        out.extend(units.iter().rev().flat_map(|u| u.chars()));
    }
    Some(out.into_iter().collect())
}

/// The texts that runs of base64 (standard or URL-safe alphabet, padded or not) in
/// `line` decode to, when they decode to printable UTF-8 text (binary is another rule's
/// business: `forbidden.executable_payload` knows the encoded headers).
pub(crate) fn base64_texts(line: &str) -> Vec<String> {
    use base64::Engine;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const CONFIG: GeneralPurposeConfig = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    // Built at compile time: a line's call builds no decode table.
    static ENGINES: [GeneralPurpose; 2] = [
        GeneralPurpose::new(&base64::alphabet::STANDARD, CONFIG),
        GeneralPurpose::new(&base64::alphabet::URL_SAFE, CONFIG),
    ];
    let mut out = Vec::new();
    for run in base64_runs(line) {
        let Some(bytes) = ENGINES.iter().find_map(|e| e.decode(run).ok()) else {
            continue;
        };
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        let printable = text
            .chars()
            .filter(|c| !c.is_control() || matches!(c, '\n' | '\t' | '\r'))
            .count();
        if printable * 10 >= text.chars().count() * 9 {
            out.push(text);
        }
    }
    out
}

/// The stretches of `line` between characters outside both base64 alphabets that are
/// long enough to decode ([`crate::decode::MIN_RUN`] bytes or more), found without
/// looking at most bytes of a line that has none. Those characters are ASCII, so
/// splitting the bytes splits the characters.
fn base64_runs(line: &str) -> impl Iterator<Item = &str> {
    crate::decode::runs(line, |b| {
        b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')
    })
}

/// `line` with its percent escapes decoded, when it has at least two of them (a lone
/// `%20` in a URL is not an encoding of the line).
fn percent_decoded(line: &str) -> Option<String> {
    // Each escape starts with a `%`: fewer than two, and there is nothing to decode.
    let first = line.find('%')?;
    line[first + 1..].find('%')?;
    crate::decode::escapes::unescape(line, b'%', |c| c.is_ascii_hexdigit(), 2)
}

/// [`markdown_plain`] of `line` when it differs from `line`.
fn markdown_plain_differs(line: &str) -> Option<String> {
    if renders_as_itself(line) {
        return None;
    }
    Some(markdown_plain(line)).filter(|rendered| rendered != line)
}

/// True only when [`markdown_plain`] returns `line` unchanged, told without copying it:
/// no `](` (so no link is unwrapped), no backtick, `**` or `__`, and a first character
/// that is neither whitespace nor the start of a quote, list or number marker.
fn renders_as_itself(line: &str) -> bool {
    let plain_start = line.chars().next().is_none_or(|c| {
        !c.is_whitespace() && !c.is_ascii_digit() && !matches!(c, '>' | '-' | '*' | '+')
    });
    // One vectorized search each is quicker than one pass comparing every byte thrice.
    plain_start
        && !line.contains("](")
        && !line.contains("**")
        && !line.contains("__")
        && !line.contains('`')
}

/// `line` as markdown renders it, roughly: `[text](target)` becomes `text`, code-span
/// backticks and `**`/`__` emphasis go, and a leading list or quote marker is removed.
fn markdown_plain(line: &str) -> String {
    let mut text = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        match after.find("](") {
            Some(close) if !after[..close].contains('[') => {
                let target_end = after[close + 2..].find(')');
                text.push_str(&rest[..open]);
                text.push_str(&after[..close]);
                text.push(' ');
                rest = match target_end {
                    Some(end) => &after[close + 2 + end + 1..],
                    None => &after[close + 2..],
                };
            }
            _ => {
                text.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    text.push_str(rest);
    // Each removal only where there is something to remove (a copy each otherwise).
    for mark in ["`", "**", "__"] {
        if text.contains(mark) {
            text = text.replace(mark, "");
        }
    }
    let trimmed = text.trim_start();
    let unmarked = trimmed
        .strip_prefix("> ")
        .or_else(|| {
            trimmed
                .strip_prefix(['-', '*', '+'])
                .filter(|r| r.starts_with(' '))
        })
        .unwrap_or(trimmed);
    let unnumbered = unmarked
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .strip_prefix(['.', ')'])
        .filter(|r| r.starts_with(' ') && unmarked.starts_with(|c: char| c.is_ascii_digit()))
        .unwrap_or(unmarked);
    unnumbered.trim_start().to_owned()
}

/// Finds runs of ≥3 single alphanumeric characters separated by non-alphanumerics
/// (`p.i.p`, `c u r l`); returns each run joined, and the text with every run replaced
/// by its joined word (when there is one) and where each joined word sits in it.
type Runs = (Vec<String>, Option<String>, Vec<std::ops::Range<usize>>);
fn spaced_runs(text: &str) -> Runs {
    if !has_spaced_run(text) {
        return (Vec::new(), None, Vec::new());
    }
    joined_runs(text)
}

/// [`spaced_runs`] without the screen for a line that has none.
fn joined_runs(text: &str) -> Runs {
    let mut runs = Vec::new();
    // (start byte, end byte, joined) of each run.
    let mut spans: Vec<(usize, usize, String)> = Vec::new();
    let mut current = String::new();
    let mut start = 0;
    let mut end = 0;
    let mut count = 0;
    let mut flush = |current: &mut String, count: &mut usize, start: usize, end: usize| {
        if *count >= 3 {
            runs.push(current.clone());
            spans.push((start, end, std::mem::take(current)));
        }
        current.clear();
        *count = 0;
    };
    let mut token_start = None;
    let bytes_len = text.len();
    let mut tokens: Vec<(usize, usize)> = Vec::new();
    for (i, c) in text.char_indices() {
        if c.is_alphanumeric() {
            token_start.get_or_insert(i);
        } else if let Some(s0) = token_start.take() {
            tokens.push((s0, i));
        }
    }
    if let Some(s0) = token_start {
        tokens.push((s0, bytes_len));
    }
    for (s0, e0) in tokens {
        let token = &text[s0..e0];
        if token.chars().count() == 1 {
            if count == 0 {
                start = s0;
            }
            current.push_str(token);
            end = e0;
            count += 1;
        } else {
            flush(&mut current, &mut count, start, end);
        }
    }
    flush(&mut current, &mut count, start, end);
    if spans.is_empty() {
        return (runs, None, Vec::new());
    }
    let mut collapsed = String::with_capacity(text.len());
    let mut joined_at = Vec::with_capacity(spans.len());
    let mut at = 0;
    for (s0, e0, joined) in &spans {
        collapsed.push_str(&text[at..*s0]);
        joined_at.push(collapsed.len()..collapsed.len() + joined.len());
        collapsed.push_str(joined);
        at = *e0;
    }
    collapsed.push_str(&text[at..]);
    (runs, Some(collapsed), joined_at)
}

/// Whether [`spaced_runs`] finds a run in `text`: three single-character tokens in a row
/// (a token is a maximal stretch of alphanumerics). Without allocating, so the usual
/// line, which has none, costs no token list.
fn has_spaced_run(text: &str) -> bool {
    if text.is_ascii() {
        return has_spaced_run_ascii(text.as_bytes());
    }
    // Characters in the current token; single-character tokens just before it.
    let (mut len, mut singles) = (0usize, 0usize);
    for alphanumeric in text.chars().map(char::is_alphanumeric).chain([false]) {
        if alphanumeric {
            len += 1;
        } else if len > 0 {
            singles = if len == 1 { singles + 1 } else { 0 };
            if singles >= 3 {
                return true;
            }
            len = 0;
        }
    }
    false
}

/// [`has_spaced_run`] of ASCII text, 64 bytes at a time: a mask with a bit per
/// alphanumeric byte gives every token's end at once, and only a block with a
/// single-character token looks at its ends one by one (a byte-by-byte walk stalls on
/// every word boundary of prose).
fn has_spaced_run_ascii(text: &[u8]) -> bool {
    let mut singles = 0usize;
    // 1 when the block before ends with an alphanumeric byte.
    let mut carry = 0u64;
    let mut blocks = text.chunks(64).map(alphanumeric_mask).peekable();
    while let Some(mask) = blocks.next() {
        let next_first = blocks.peek().map_or(0, |next| next & 1);
        let before = (mask << 1) | carry;
        let after = (mask >> 1) | (next_first << 63);
        let ends = mask & !after;
        let single = ends & !before;
        if single == 0 {
            if ends != 0 {
                singles = 0;
            }
        } else {
            let mut rest = ends;
            while rest != 0 {
                let end = rest & rest.wrapping_neg();
                singles = if single & end != 0 { singles + 1 } else { 0 };
                if singles >= 3 {
                    return true;
                }
                rest ^= end;
            }
        }
        carry = mask >> 63;
    }
    false
}

/// Bit i set when byte i of `block` (ASCII, at most 64 bytes) is alphanumeric.
fn alphanumeric_mask(block: &[u8]) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // For bytes below 0x80, `x + (0x80 - lo)` has its high bit set when x >= lo and
    // `x + (0x7f - hi)` when x > hi, and no byte carries into the next.
    let in_range = |x: u64, lo: u8, hi: u8| {
        x.wrapping_add(ONES * u64::from(0x80 - lo)) & !x.wrapping_add(ONES * u64::from(0x7f - hi))
    };
    let mut mask = 0u64;
    let mut words = block.chunks_exact(8);
    let mut shift = 0;
    for word in words.by_ref() {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        let x = u64::from_le_bytes(bytes);
        let high =
            (in_range(x, b'0', b'9') | in_range(x | (ONES * 0x20), b'a', b'z')) & (ONES << 7);
        // The eight high bits gathered into the low eight, byte 0 lowest.
        mask |= ((high >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) << shift;
        shift += 8;
    }
    for &b in words.remainder() {
        mask |= u64::from(b.is_ascii_alphanumeric()) << shift;
        shift += 1;
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_key_folds_what_looks_the_same() {
        let base = identity_key("core-agent");
        for lookalike in [
            "ｃore-agent",       // fullwidth c
            "core\u{2010}agent", // hyphen
            "core\u{2212}agent", // minus sign
            "core\u{2011}agent", // non-breaking hyphen (NFKC → U+2010)
            "  Core-Agent ",
            "core-\u{200b}agent", // zero-width space
            "сore-agent",         // Cyrillic es
        ] {
            assert_eq!(identity_key(lookalike), base, "{lookalike:?}");
        }
        assert_ne!(identity_key("core-agent2"), base);
        assert_ne!(identity_key("core_agent"), base);
    }

    #[test]
    fn hashing_normalization() {
        assert_eq!(for_hashing("\u{feff}a\r\nb"), "a\nb");
        // NFD "é" → NFC.
        assert_eq!(for_hashing("e\u{301}"), "\u{e9}");
        assert_eq!(
            for_hashing("a\rb"),
            "a\rb",
            "a lone CR is not a line ending"
        );
    }

    #[test]
    fn deobfuscation_table() {
        let cases: &[(&str, &str)] = &[
            ("PIP INSTALL", "pip install"),
            ("p\u{200b}ip install", "pip install"),
            ("ｐｉｐ install", "pip install"),      // fullwidth
            ("іgnоre previous", "ignore previous"), // Cyrillic і, о
            ("curl\u{202e}x", "curlx"),
        ];
        for (input, want) in cases {
            assert_eq!(Deobfuscated::of(input).folded, *want, "input {input:?}");
        }
        assert!(Deobfuscated::of("a\u{200d}b").had_invisible);
        assert!(!Deobfuscated::of("plain").had_invisible);
    }

    #[test]
    fn alternate_readings_decode_and_unwrap() {
        let has = |line: &str, want: &str| {
            let readings = alternate_readings(line);
            assert!(
                readings.iter().any(|r| r.folded.contains(want)),
                "{line:?}: {readings:?}"
            );
        };
        has(
            "step: Y2FyZ28gaW5zdGFsbCByaXBncmVw",
            "cargo install ripgrep",
        );
        has("see gem%20install%20bundler", "gem install bundler");
        has(
            "[Enable the unit](https://x.example/) now",
            "enable the unit",
        );
        has("- `systemctl enable x`", "systemctl enable x");
        has("Systeme\u{8}(\"ls -al /\")", "system(\"ls -al /\")");
        has(
            "10; D\u{202d}\u{2066}\u{202e}\u{2066}O\u{2069}\u{2066}R\u{2069}\u{202c}\u{2069}\u{202c}P TABLE users",
            "drop table users",
        );
        // Neither binary base64 nor a plain line is encoded text.
        for line in [
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ",
            "plain words, 100% sure",
        ] {
            assert!(
                alternate_readings(line).iter().all(|r| !r.encoded),
                "{line}"
            );
        }
    }

    /// Every string of up to `max_len` characters drawn from `alphabet`, then `random`
    /// more of up to `random_len` characters (a fixed xorshift sequence).
    fn strings_of(
        alphabet: &[char],
        max_len: usize,
        (random, random_len): (usize, usize),
    ) -> Vec<String> {
        let mut out = crate::test_support::all_strings(alphabet, max_len);
        let mut sequence = crate::test_support::Xorshift::new(0x2545_f491_4f6c_dd1d);
        let mut next = |below: usize| sequence.below(below);
        for _ in 0..random {
            let len = next(random_len + 1);
            out.push((0..len).map(|_| alphabet[next(alphabet.len())]).collect());
        }
        out
    }

    #[test]
    fn hashing_fast_path_is_nfc() {
        // ASCII, CR and LF, a BOM, combining marks of different classes in and out of
        // order, precomposed letters, singletons (Ångström, Ohm, a CJK compatibility
        // ideograph), Hangul jamo and syllables, a compatibility character NFC keeps.
        let alphabet = [
            'a', 'E', ' ', '\r', '\n', '\u{feff}', '\u{301}', '\u{316}', '\u{327}', '\u{e9}',
            '\u{c5}', '\u{212b}', '\u{2126}', '\u{f900}', '\u{1100}', '\u{1161}', '\u{11a8}',
            '\u{ac00}', '\u{fb01}', '\u{201c}',
        ];
        let mut recomposed = 0;
        for text in strings_of(&alphabet, 3, (20_000, 24)) {
            let slow: String = strip_bom(&text).replace("\r\n", "\n").nfc().collect();
            let fast = for_hashing(&text);
            assert_eq!(fast, slow, "{text:?}");
            recomposed += usize::from(slow != strip_bom(&text).replace("\r\n", "\n"));
        }
        assert!(
            recomposed > 1000,
            "the inputs must include text NFC changes"
        );
    }

    #[test]
    fn spaced_run_screen_agrees_with_the_scan() {
        // ASCII and other letters and digits (one-byte and longer), separators, an
        // invisible character (a separator here).
        let alphabet = [
            'a', 'B', '7', ' ', '.', '-', '\u{e9}', '\u{663}', '\u{216b}', '\u{200b}',
        ];
        let mut with_run = 0;
        for text in strings_of(&alphabet, 6, (50_000, 24)) {
            let all = joined_runs(&text);
            assert_eq!(spaced_runs(&text), all, "{text:?}");
            // Not only safe but exact: a screen that says yes wrongly costs time.
            assert_eq!(has_spaced_run(&text), all.1.is_some(), "{text:?}");
            with_run += usize::from(all.1.is_some());
        }
        assert!(with_run > 10_000, "the inputs must include runs");
        // ASCII across the 64-byte blocks of the ASCII screen: every byte value, and
        // letters, digits and separators often enough to make runs and miss them.
        let mut ascii: Vec<char> = (0u8..0x80).map(char::from).collect();
        ascii.extend("aZ9 .aZ9 .aZ9 .".chars());
        let (mut with, mut without) = (0, 0);
        for text in strings_of(&ascii, 1, (100_000, 300)) {
            let all = joined_runs(&text);
            assert_eq!(spaced_runs(&text), all, "{text:?}");
            // Not only safe but exact: a screen that says yes wrongly costs time.
            assert_eq!(has_spaced_run(&text), all.1.is_some(), "{text:?}");
            with += usize::from(all.1.is_some());
            without += usize::from(all.1.is_none() && text.len() > 64);
        }
        assert!(
            with > 1000 && without > 1000,
            "{with} with a run, {without} without"
        );
    }

    #[test]
    fn markdown_screen_agrees_with_rendering() {
        let alphabet = [
            '[', ']', '(', ')', '`', '*', '_', '-', '+', '>', ' ', '\t', '1', '.', 'a', '\u{3000}',
            '\u{e9}',
        ];
        let mut differ = 0;
        for line in strings_of(&alphabet, 4, (100_000, 24)) {
            let rendered = markdown_plain(&line);
            let want = (rendered != line).then_some(rendered);
            assert_eq!(markdown_plain_differs(&line), want, "{line:?}");
            differ += usize::from(want.is_some());
        }
        assert!(
            differ > 10_000,
            "the inputs must include lines markdown changes"
        );
    }

    #[test]
    fn base64_runs_split_at_characters() {
        // Mostly base64 characters, so that long runs are common.
        let mut alphabet = vec!['a'; 4];
        alphabet.extend([
            'Z',
            '0',
            '+',
            '/',
            '-',
            '_',
            '=',
            ' ',
            '\u{e9}',
            '\u{2800}',
            '\u{1f600}',
        ]);
        let is_b64 = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '-' | '_');
        let mut long = 0;
        for line in strings_of(&alphabet, 4, (20_000, 48)) {
            let by_char: Vec<&str> = line
                .split(|c: char| !is_b64(c))
                .filter(|r| r.len() >= crate::decode::MIN_RUN)
                .collect();
            let by_byte: Vec<&str> = base64_runs(&line).collect();
            assert_eq!(by_byte, by_char, "{line:?}");
            long += by_char.len();
        }
        assert!(long > 100, "{long}");
    }

    #[test]
    fn spaced_letters_rejoined() {
        let d = Deobfuscated::of("run p i p  i n s t a l l requests");
        assert_eq!(d.spaced_runs, vec!["pipinstall".to_string()]);
        // Single letters on both sides of a separator join into one run.
        let d = Deobfuscated::of("c.u.r.l x | s-h");
        assert_eq!(d.spaced_runs, vec!["curlxsh".to_string()]);
        let d = Deobfuscated::of("c u r l  and  s h");
        assert_eq!(d.spaced_runs, vec!["curl".to_string()]);
        let d = Deobfuscated::of("p i p install x; then a b c");
        assert_eq!(d.collapsed.as_deref(), Some("pip install x; then abc"));
        assert_eq!(d.joined_at, vec![0..3, 20..23]);
        assert_eq!(Deobfuscated::of("plain words").collapsed, None);
        assert_eq!(Deobfuscated::of("ᴘɪᴘ ɪɴsᴛᴀʟʟ").folded, "pip install");
        assert_eq!(Deobfuscated::of("pip\u{2800}install").folded, "pip install");
        assert!(Deobfuscated::of("a b").spaced_runs.is_empty());
    }
}
