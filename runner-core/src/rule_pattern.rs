//! A forbidden-content rule's regular expression, compiled when first used, and compiled
//! cheaply for ASCII text.
//!
//! Compiling the built-in rules with Unicode classes costs about 60 ms (request rules
//! 18 ms, of which `forbidden.package_install` alone is 16 ms; measured on the 2-core
//! bench machine), more than everything else the parent does before a run: every `\s`,
//! `\S`, `\b` and `[^.\n]{0,80}` becomes a Unicode automaton, repeated per count. Most
//! lines judged are ASCII, and on an ASCII line a Unicode class matches exactly the ASCII
//! characters its ASCII counterpart matches. So each pattern has two compiled forms:
//!
//! - the **ASCII form**, the same source built as a byte regex with Unicode off (about
//!   7× cheaper to build, and its `\b` needs no fallback from the lazy DFA), used for a
//!   text that is all ASCII;
//! - the **Unicode form**, the pattern as written, used for every other text.
//!
//! Both are built on first use. The ASCII form gives the same answer as the Unicode form
//! on any ASCII text, with two exceptions this module excludes: under case-insensitive
//! Unicode matching, KELVIN SIGN (U+212A) and LONG S (U+017F) fold to ASCII `k` and `s`,
//! so a pattern containing a non-ASCII character that folds to ASCII, or an escape that
//! can name any code point (`\x`, `\u`, `\U`, `\p`, `\P`), gets no ASCII form; and a
//! pattern the byte regex rejects (a non-ASCII character in a class) gets none either.
//! `tests::ascii_form_agrees_with_unicode_form` compares both forms on every document of
//! the corpora under `tests/` and on generated edge strings.
//!
//! A request needs only the request rules to be judged; the result rules are needed once
//! the guest has run, so the pipeline compiles them on a second thread while the worker
//! runs (`runner::policy::Policy::warm`). A policy file is still compiled whole (Unicode
//! form) at load time, so a bad rule fails before any request is judged; the built-in
//! policy is compiled whole by a unit test instead.

use regex::{Regex, RegexBuilder};
use std::fmt;
use std::sync::{Arc, OnceLock};

/// A rule's pattern: its source and, once compiled, its regexes. Clones share them, so a
/// rule listed under several targets is compiled once.
#[derive(Clone)]
pub struct RulePattern {
    source: Arc<str>,
    compiled: Arc<Compiled>,
}

#[derive(Default)]
struct Compiled {
    unicode: OnceLock<Regex>,
    /// `None` when the pattern has no ASCII form (see the module documentation).
    ascii: OnceLock<Option<regex::bytes::Regex>>,
}

impl RulePattern {
    /// Compiles `source` now: an invalid pattern is an error here, never later.
    pub fn compile(source: &str) -> Result<Self, regex::Error> {
        let pattern = Self::deferred(source);
        let regex = build(source)?;
        let _ = pattern.compiled.unicode.set(regex);
        Ok(pattern)
    }

    /// Compiles `source` when it is first matched. Only for patterns known to compile
    /// (the built-in policy, which a unit test compiles whole).
    pub fn deferred(source: &str) -> Self {
        Self {
            source: source.into(),
            compiled: Arc::default(),
        }
    }

    /// The pattern as written in the policy.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the pattern matches anywhere in `text` (compiling it first if needed).
    pub fn is_match(&self, text: &str) -> bool {
        if text.is_ascii()
            && let Some(ascii) = self.ascii()
        {
            return ascii.is_match(text.as_bytes());
        }
        self.unicode().is_match(text)
    }

    /// Compiles now what an ASCII text needs (the ASCII form, or the Unicode form for a
    /// pattern without one). The Unicode form of the others is built on the first
    /// non-ASCII text.
    pub fn warm(&self) {
        if self.ascii().is_none() {
            let _ = self.unicode();
        }
    }

    fn unicode(&self) -> &Regex {
        // `deferred` is only given patterns that compile (the built-in policy, checked
        // by `policy::tests::builtin_policy_parses`), so this cannot fail at run time.
        #[allow(clippy::expect_used)]
        self.compiled
            .unicode
            .get_or_init(|| build(&self.source).expect("a built-in rule compiles"))
    }

    fn ascii(&self) -> Option<&regex::bytes::Regex> {
        self.compiled
            .ascii
            .get_or_init(|| build_ascii(&self.source))
            .as_ref()
    }
}

impl fmt::Debug for RulePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RulePattern").field(&&*self.source).finish()
    }
}

fn build(source: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(source)
        .case_insensitive(true)
        .multi_line(true)
        .size_limit(1 << 22)
        .build()
}

/// The ASCII form of `source`, or `None` when it has none: an escape that can name a
/// non-ASCII code point, a non-ASCII character whose case folds to ASCII, or a pattern
/// the byte regex rejects. A non-ASCII character listed alone in a class that is not
/// negated (`ejec[uú]t`) is dropped from it: on ASCII text it can never match.
fn build_ascii(source: &str) -> Option<regex::bytes::Regex> {
    let ascii_source = ascii_source(source)?;
    regex::bytes::RegexBuilder::new(&ascii_source)
        .unicode(false)
        .case_insensitive(true)
        .multi_line(true)
        .size_limit(1 << 22)
        .build()
        .ok()
}

/// `source` for the ASCII form (see [`build_ascii`]), or `None`.
fn ascii_source(source: &str) -> Option<String> {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    // Bracket depth inside a class, whether the outermost class is negated, and where
    // its first member starts (a `]` there is a literal).
    let (mut depth, mut negated, mut first) = (0usize, false, 0usize);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            let next = *chars.get(i + 1)?;
            if matches!(next, 'x' | 'u' | 'U' | 'p' | 'P') {
                return None;
            }
            out.push(c);
            out.push(next);
            i += 2;
            continue;
        }
        if !c.is_ascii() && folds_to_ascii(c) {
            return None;
        }
        if depth == 0 {
            if c == '[' {
                depth = 1;
                negated = chars.get(i + 1) == Some(&'^');
                first = i + 1 + usize::from(negated);
            }
            out.push(c);
        } else if c == '[' {
            depth += 1;
            out.push(c);
        } else if c == ']' && i != first {
            depth -= 1;
            out.push(c);
        } else if !c.is_ascii()
            && depth == 1
            && !negated
            && !matches!(chars.get(i + 1), Some('-' | '&' | '~'))
            && !matches!(chars.get(i.wrapping_sub(1)), Some('-' | '&' | '~'))
            && (i + 1 < chars.len() && chars[i + 1] != ']' || out.ends_with(|p: char| p != '['))
        {
            // A member of a plain class, not next to a range or a set operator: never
            // matched by ASCII text. (Kept when it is the class's last member, so no empty
            // class appears; the byte regex then rejects the pattern.)
        } else {
            out.push(c);
        }
        i += 1;
    }
    Some(out)
}

/// Whether a case mapping of `c` contains an ASCII character (U+212A KELVIN SIGN, U+017F
/// LONG S, and, conservatively, U+0130 whose lowercase is `i` + a combining dot).
fn folds_to_ascii(c: char) -> bool {
    c.to_lowercase().any(|l| l.is_ascii()) || c.to_uppercase().any(|u| u.is_ascii())
}

#[cfg(test)]
// reason: the differential test reads every corpus file under tests/ from the checkout.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn deferred_and_eager_agree_and_clones_share_the_regex() {
        let eager = RulePattern::compile(r"\bsudo\b").unwrap();
        let lazy = RulePattern::deferred(r"\bsudo\b");
        let clone = lazy.clone();
        assert!(lazy.compiled.ascii.get().is_none());
        assert!(lazy.compiled.unicode.get().is_none());
        for text in ["run SUDO now", "pseudo", "sudo", "ſudo", "süDO sudo"] {
            assert_eq!(eager.is_match(text), lazy.is_match(text), "{text}");
        }
        assert!(
            clone.compiled.ascii.get().is_some() && clone.compiled.unicode.get().is_some(),
            "the clone shares the compiled regexes"
        );
        assert_eq!(lazy.as_str(), r"\bsudo\b");
        assert!(RulePattern::compile("(").is_err());
    }

    #[test]
    fn an_ascii_text_does_not_build_the_unicode_form() {
        let p = RulePattern::deferred(r"\bpip\s+install\b(?:[^.\n]|\.\S){0,80}\bnow\b");
        assert!(p.is_match("PIP  install it now"));
        assert!(!p.is_match("pip install. now"));
        assert!(p.compiled.unicode.get().is_none(), "ASCII texts only");
        assert!(p.is_match("pip install é now"));
        assert!(p.compiled.unicode.get().is_some());
        p.warm();
    }

    #[test]
    fn patterns_that_fold_to_ascii_or_name_code_points_have_no_ascii_form() {
        for source in [
            "\u{17f}udo",
            "\u{212a}ey",
            r"\x{17F}udo",
            r"\u017Fudo",
            r"\p{Latin}+",
            r"\PLx",
            "[^\u{e9}e]t\u{e9}",
        ] {
            assert!(build_ascii(source).is_none(), "{source}");
            // And they still judge ASCII text by the Unicode form.
            let p = RulePattern::deferred(source);
            assert_eq!(
                p.is_match("sudo key"),
                build(source).unwrap().is_match("sudo key")
            );
        }
        // `\\x` is an escaped backslash, then a literal `x`.
        assert!(build_ascii(r"\\x7felf").is_some());
        // A lone non-ASCII member of a plain class is dropped; anything else is kept (and
        // a class the byte regex cannot hold leaves the pattern without an ASCII form).
        assert_eq!(ascii_source("ejec[u\u{fa}]t").as_deref(), Some("ejec[u]t"));
        assert_eq!(ascii_source("[\u{e9}]x").as_deref(), Some("[\u{e9}]x"));
        assert_eq!(ascii_source("[^\u{e9}]x").as_deref(), Some("[^\u{e9}]x"));
        assert_eq!(ascii_source("[a-\u{e9}]").as_deref(), Some("[a-\u{e9}]"));
        assert_eq!(ascii_source("[]\u{e9}]").as_deref(), Some("[]]"));
        // `\[` is a literal bracket; `\\` an escaped backslash, then a class.
        assert_eq!(ascii_source("\\[\u{e9}]").as_deref(), Some("\\[\u{e9}]"));
        assert_eq!(ascii_source("\\\\[\u{e9}a]").as_deref(), Some("\\\\[a]"));
        assert_eq!(ascii_source("[a&&\u{e9}]").as_deref(), Some("[a&&\u{e9}]"));
        assert!(build_ascii("[^\u{e9}]x").is_none());
        assert!(build_ascii("[a-\u{e9}]").is_none());
        let p = RulePattern::deferred("ejec[u\u{fa}]t");
        assert!(p.is_match("EJECUTA") && !p.is_match("ejecat"));
        assert!(p.is_match("ejec\u{da}ta"));
        assert!(RulePattern::deferred("\u{17f}udo").is_match("SUDO"));
        assert!(RulePattern::deferred("\u{212a}ey").is_match("key"));
        assert!(RulePattern::deferred(r"t\u{e9}l\u{e9}chargez").is_match("TÉLÉCHARGEZ"));
    }

    /// Every text file under the repository's `tests/` and `runner/tests/corpus/`.
    fn corpus_texts() -> Vec<(std::path::PathBuf, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut dirs = vec![root.join("../tests"), root.join("../runner/tests/corpus")];
        let mut out = Vec::new();
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if let Ok(text) = std::fs::read_to_string(&path) {
                    out.push((path, text));
                }
            }
        }
        out
    }

    /// Strings around the rules' edges: runs of the words each pattern names, joined
    /// the ways the patterns separate them, in other cases, glued to word characters,
    /// after list markers and prompts, and with non-ASCII look-alikes (KELVIN SIGN,
    /// LONG S, NBSP, accented letters, Cyrillic).
    fn edge_strings(sources: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        let separators = [" ", "\t", "_", "", ": "];
        for source in sources {
            let words: Vec<&str> = source
                .split(|c: char| !c.is_alphanumeric() && c != '-' && c != '_')
                .filter(|w| w.len() > 1)
                .collect();
            for window in 1..=3 {
                for run in words.windows(window) {
                    for sep in separators {
                        let phrase = run.join(sep);
                        out.push(format!("{phrase} abcdefgh12345678ABCDEFGH12345678"));
                        out.push(format!("- please {} it now.", phrase.to_uppercase()));
                        out.push(format!("x{phrase}x"));
                        out.push(format!("1. {phrase} https://a.example/x.sh and run it"));
                        out.push(format!("$ {phrase} /etc/passwd"));
                        out.push(phrase.replace('k', "\u{212a}").replace('s', "\u{17f}"));
                        out.push(format!("{phrase}\u{a0}now\u{e9}"));
                        out.push(format!("\u{430}{phrase}\u{2028}"));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn ascii_form_agrees_with_unicode_form() {
        let builtin = crate::rules::builtin();
        let mut rules: Vec<&str> = builtin.iter().map(|r| r.pattern.as_str()).collect();
        rules.sort();
        rules.dedup();
        let mut texts: Vec<String> = Vec::new();
        let corpus = corpus_texts();
        assert!(
            corpus.len() > 300,
            "the corpora are found: {}",
            corpus.len()
        );
        for (_, text) in &corpus {
            for line in text.lines() {
                let view = crate::normalize::Deobfuscated::of(line);
                texts.push(line.to_owned());
                texts.push(view.folded);
                texts.extend(view.collapsed);
                texts.extend(crate::normalize::alternate_readings(line));
            }
            // Whole documents too: `^`, `$` and `\n` at line ends.
            texts.push(text.clone());
        }
        texts.extend(edge_strings(&rules));
        let mut with_ascii_form = 0;
        for source in &rules {
            let plain = build(source).unwrap();
            let pattern = RulePattern::deferred(source);
            with_ascii_form += usize::from(pattern.ascii().is_some());
            let (mut hits, mut ascii_hits) = (0, 0);
            for text in &texts {
                let expected = plain.is_match(text);
                assert_eq!(
                    pattern.is_match(text),
                    expected,
                    "rule {source:.60}… on {text:?}"
                );
                hits += usize::from(expected);
                ascii_hits += usize::from(expected && text.is_ascii());
            }
            // The texts reach both sides of every rule, ASCII ones included.
            assert!(ascii_hits > 0 && hits < texts.len(), "{source:.60}: {hits}");
        }
        // All built-in rules but `forbidden.instruction_to_run` (`[uú]`) have one.
        assert!(
            with_ascii_form + 1 >= rules.len(),
            "{with_ascii_form} of {}",
            rules.len()
        );
    }
}
