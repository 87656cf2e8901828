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
    strip_bom(text).replace("\r\n", "\n").nfc().collect()
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
        | '\u{e0000}'..='\u{e007f}')
}

/// Control characters other than tab, LF and CR.
pub fn is_disallowed_control(c: char) -> bool {
    (c.is_control() && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Folds the commonest Cyrillic and Greek look-alikes of Latin letters (after NFKC and
/// lowercasing). Not a full confusables table: enough that "іgnоre" and "раssword"
/// written with Cyrillic letters still match the rules.
fn fold_homoglyph(c: char) -> char {
    match c {
        'а' => 'a',
        'в' => 'b',
        'е' | 'ё' => 'e',
        'һ' => 'h',
        'і' | 'ї' | 'ι' => 'i',
        'ј' => 'j',
        'к' | 'κ' => 'k',
        'м' => 'm',
        'н' | 'η' => 'n',
        'о' | 'ο' | 'σ' => 'o',
        'р' | 'ρ' => 'p',
        'с' | 'ϲ' => 'c',
        'т' | 'τ' => 't',
        'у' | 'γ' => 'y',
        'х' | 'χ' => 'x',
        'ѕ' => 's',
        'ԁ' => 'd',
        'ɡ' => 'g',
        'ԛ' => 'q',
        'ԝ' => 'w',
        'α' => 'a',
        'ε' => 'e',
        'ν' => 'v',
        'β' => 'b',
        'ℓ' => 'l',
        'ı' => 'i',
        _ => c,
    }
}

/// The scanner's view of one line of text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deobfuscated {
    /// NFKC, invisibles removed, homoglyphs folded, lowercase.
    pub folded: String,
    /// Runs of three or more single letters separated by spaces or punctuation
    /// ("p i p  i n s t a l l"), each joined into one word ("pipinstall").
    pub spaced_runs: Vec<String>,
    /// True when the line held invisible characters.
    pub had_invisible: bool,
}

impl Deobfuscated {
    pub fn of(line: &str) -> Self {
        let had_invisible = line.chars().any(is_invisible);
        let folded: String = line
            .nfkc()
            .filter(|c| !is_invisible(*c))
            .flat_map(char::to_lowercase)
            .map(fold_homoglyph)
            .collect();
        let spaced_runs = spaced_runs(&folded);
        Self {
            folded,
            spaced_runs,
            had_invisible,
        }
    }
}

/// Finds runs of ≥3 single alphanumeric characters separated by non-alphanumerics
/// (`p.i.p`, `c u r l`) and returns each run joined.
fn spaced_runs(text: &str) -> Vec<String> {
    let mut runs = Vec::new();
    let mut current = String::new();
    let mut count = 0;
    for token in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
    {
        if token.chars().count() == 1 {
            current.push_str(token);
            count += 1;
        } else {
            if count >= 3 {
                runs.push(std::mem::take(&mut current));
            }
            current.clear();
            count = 0;
        }
    }
    if count >= 3 {
        runs.push(current);
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn spaced_letters_rejoined() {
        let d = Deobfuscated::of("run p i p  i n s t a l l requests");
        assert_eq!(d.spaced_runs, vec!["pipinstall".to_string()]);
        // Single letters on both sides of a separator join into one run.
        let d = Deobfuscated::of("c.u.r.l x | s-h");
        assert_eq!(d.spaced_runs, vec!["curlxsh".to_string()]);
        let d = Deobfuscated::of("c u r l  and  s h");
        assert_eq!(d.spaced_runs, vec!["curl".to_string()]);
        assert!(Deobfuscated::of("a b").spaced_runs.is_empty());
    }
}
