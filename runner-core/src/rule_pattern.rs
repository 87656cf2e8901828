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
//!   text that is all ASCII and one line (it is built without multi-line mode, so a
//!   pattern anchored at `^` is tried at the start only; without a newline in the text,
//!   both modes read `^` and `$` alike);
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
//! Neither is built for a text that cannot match: before either, the text is searched
//! for the literals every match of the pattern contains (`needs`: one Aho-Corasick
//! pass, ASCII case folded, over the words the rule names). A hello-world request or
//! result holds none of most rules' literals, so judging it compiles no regex at all
//! (`tests::a_plain_request_compiles_no_rule`), where it used to compile every request
//! rule and, on a second thread while the worker ran, every result rule (about 57% of
//! the CPU of a monty hello's `runner exec`). `tests::needs_never_refuse_a_match` checks
//! that the literal condition admits every text the compiled rule matches, for every
//! built-in rule and a set of policy-style custom rules, on the same corpora.
//!
//! A pattern whose top level is an alternation is also judged **branch by branch**
//! (`branches`): its condition is one per branch, and when a text admits at most
//! `SEPARATE` branches, only their regexes run. Rules are long alternations of
//! unrelated shapes, and one short branch that needs only a common character admitted
//! the whole rule on nearly every line (`tests::branches_judge_as_the_whole_pattern`).
//!
//! A policy file is still compiled whole (Unicode form) at load time, so a bad rule
//! fails before any request is judged; the built-in policy is compiled whole by a unit
//! test instead.

mod needs;

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
    /// The literals a match needs (`None`: none known), see [`needs`].
    needs: OnceLock<Option<needs::Needs>>,
    /// The top-level branches as patterns of their own ([`branches`]; empty when the
    /// pattern is not split).
    branches: OnceLock<Vec<RulePattern>>,
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
        let ascii = one_ascii_line(text);
        // Once the form this text needs is compiled, it answers alone: the literal search
        // saves compiles, and the regex's own search is as quick (a document with a
        // finding on every line compiles every rule, and then searched twice: 1 MiB of
        // the bench's hostile line took 2.6 s instead of 1.7 s).
        let ready = if ascii {
            match self.compiled.ascii.get() {
                Some(Some(form)) => return form.is_match(text.as_bytes()),
                // No ASCII form: the Unicode one judges ASCII text too.
                Some(None) => self.compiled.unicode.get(),
                None => None,
            }
        } else {
            self.compiled.unicode.get()
        };
        if let Some(form) = ready {
            return form.is_match(text);
        }
        self.may_match(text) && self.is_match_admitted(text)
    }

    /// Whether the pattern matches `text`, for a text its literal condition admitted
    /// ([`PatternSet::admit`]): the regex alone judges it.
    pub fn is_match_admitted(&self, text: &str) -> bool {
        if one_ascii_line(text)
            && let Some(ascii) = self.ascii()
        {
            return ascii.is_match(text.as_bytes());
        }
        self.unicode().is_match(text)
    }

    /// Prepares now what judging a text needs first: the literal condition (`needs`),
    /// so a text that holds none of its literals is refused at once. The regexes are
    /// still compiled only for a text that may match.
    pub fn warm(&self) {
        self.needs();
    }

    /// False when `text` lacks a literal every match needs: no regex is compiled then.
    fn may_match(&self, text: &str) -> bool {
        self.needs().is_none_or(|needs| needs.admit(text))
    }

    fn needs(&self) -> Option<&needs::Needs> {
        self.compiled
            .needs
            .get_or_init(|| needs::Needs::of(&self.source))
            .as_ref()
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

    /// The pattern's top-level branches, each a pattern of its own (see [`branches`]).
    fn branch_patterns(&self) -> &[RulePattern] {
        self.compiled.branches.get_or_init(|| {
            branches(&self.source)
                .unwrap_or_default()
                .into_iter()
                .map(Self::deferred)
                .collect()
        })
    }
}

/// Whether the ASCII form may judge `text`: ASCII, and one line (the form is built
/// without multi-line mode, so that a pattern anchored at `^` is searched at the start
/// only; on a text without a newline, `^` and `$` mean the same in either mode).
fn one_ascii_line(text: &str) -> bool {
    text.is_ascii() && !text.as_bytes().contains(&b'\n')
}

/// The top-level branches of `source` (`a|b|c`: `a`, `b` and `c`), or `None` when it is
/// not an alternation of two branches or more, or one of them sets flags that would
/// reach the branches after it (`(?i)a|b`). A text matches the pattern exactly when it
/// matches one of its branches, each compiled alone with the same options.
fn branches(source: &str) -> Option<Vec<&str>> {
    use regex_syntax::ast::{Ast, parse::Parser};
    let ast = Parser::new().parse(source).ok()?;
    let Ast::Alternation(alternation) = &ast else {
        return None;
    };
    let sets_flags = |branch: &Ast| match branch {
        Ast::Flags(_) => true,
        Ast::Concat(concat) => concat.asts.iter().any(|a| matches!(a, Ast::Flags(_))),
        _ => false,
    };
    if alternation.asts.len() < 2 || alternation.asts.iter().any(sets_flags) {
        return None;
    }
    Some(
        alternation
            .asts
            .iter()
            .map(|branch| &source[branch.span().start.offset..branch.span().end.offset])
            .collect(),
    )
}

/// Which patterns of a [`PatternSet`] may match a text, and which of their branches.
#[derive(Debug, Default, Clone)]
pub struct Admitted {
    /// Per pattern.
    rules: Vec<bool>,
    /// Each admitted pattern split into branches, and where its branches start in
    /// `branches`.
    branch_at: Vec<(usize, usize)>,
    /// The branches of each admitted pattern split into branches, in order
    /// ([`PatternSet::is_match`]).
    branches: Vec<bool>,
}

impl Admitted {
    fn clear(&mut self) {
        self.rules.clear();
        self.branch_at.clear();
        self.branches.clear();
    }

    /// The answers of the branches of pattern `i`, an admitted one.
    fn add_branches(&mut self, i: usize, branches: impl Iterator<Item = bool>) {
        self.branch_at.push((i, self.branches.len()));
        self.branches.extend(branches);
    }

    /// Admits branch `b` of pattern `i` (whose branches were added).
    fn admit_branch(&mut self, i: usize, b: usize) {
        if let Some(&(_, start)) = self.branch_at.iter().find(|&&(rule, _)| rule == i) {
            self.branches[start + b] = true;
        }
    }

    /// The answers of pattern `i`'s branches, when it was admitted and is split.
    fn branches_of(&self, i: usize) -> Option<&[bool]> {
        let at = self.branch_at.iter().position(|&(rule, _)| rule == i)?;
        let start = self.branch_at[at].1;
        let end = self
            .branch_at
            .get(at + 1)
            .map_or(self.branches.len(), |b| b.1);
        Some(&self.branches[start..end])
    }

    /// Every pattern (of `count`) and branch (of `branches`, per pattern) admitted.
    fn all(&mut self, count: usize, branches: &[Vec<usize>]) {
        self.clear();
        self.rules.resize(count, true);
        for (i, b) in branches.iter().enumerate().filter(|(_, b)| !b.is_empty()) {
            self.add_branches(i, std::iter::repeat_n(true, b.len()));
        }
    }
}

/// The most branches of one pattern run one by one: with more admitted, the whole
/// pattern runs (one search for all its branches).
const SEPARATE: usize = 2;

/// The literal conditions of several patterns searched for in one pass (one
/// Aho-Corasick automaton over all their literals): which of them may match a text,
/// before any regex runs.
pub struct PatternSet {
    sources: Vec<Arc<str>>,
    union: needs::Union,
}

impl PatternSet {
    /// The set of `patterns`, in order.
    pub fn new<'a>(patterns: impl IntoIterator<Item = &'a RulePattern>) -> Self {
        let patterns: Vec<&RulePattern> = patterns.into_iter().collect();
        let needs: Vec<Option<&needs::Needs>> = patterns.iter().map(|p| p.needs()).collect();
        Self {
            sources: patterns.iter().map(|p| p.source.clone()).collect(),
            union: needs::Union::of(&needs),
        }
    }

    /// Whether this is the set of `patterns` (the same sources in the same order).
    pub fn is_of<'a>(&self, patterns: impl IntoIterator<Item = &'a RulePattern>) -> bool {
        let mut mine = self.sources.iter();
        patterns
            .into_iter()
            .all(|p| mine.next().is_some_and(|s| *s == p.source))
            && mine.next().is_none()
    }

    /// The length in bytes of the longest literal any pattern needs.
    pub fn longest_literal(&self) -> usize {
        self.union.longest
    }

    /// Sets `admitted[i]` to false when pattern `i` can match none of `texts` (true when
    /// it may match one of them); `found` is scratch space, kept between calls to spare
    /// allocations.
    pub fn admit(&self, texts: &[&str], found: &mut Vec<u64>, admitted: &mut Admitted) {
        self.union.admit(texts, found, admitted);
    }

    /// Adds the literals found in the ASCII `text` to `found` (as left by an
    /// [`Self::admit`] of ASCII texts); false, and nothing added, when `text` is not ASCII
    /// or the set has no search (an [`Self::admit`] admits every pattern then).
    pub fn search_ascii(&self, text: &str, found: &mut [u64]) -> bool {
        self.union.search_ascii(text, found)
    }

    /// Adds the literals that occur in the ASCII `text` across the space at byte `at` to
    /// `found`: those of `text` when `found` holds those of the texts either side of `at`.
    /// False, and nothing added, as [`Self::search_ascii`] is, or when `text[at]` is not a
    /// space.
    pub fn search_across_space(&self, text: &str, at: usize, found: &mut [u64]) -> bool {
        self.union.search_across_space(text, at, found)
    }

    /// [`Self::admit`] of ASCII texts in which the literals `found` were found.
    pub fn admit_found_ascii(&self, found: &[u64], admitted: &mut Admitted) {
        self.union.admit_found(found, true, admitted);
    }

    /// Whether pattern `i` (`pattern`, this set's pattern `i`) matches `text`, one of the
    /// texts `admitted` was found for: false when its condition refused them; else its
    /// regex judges, or, for a pattern split into branches, the regexes of the branches
    /// admitted (a branch refused cannot match: its own condition is sound), when there
    /// are at most two. A branch alone is quicker to search than the whole
    /// pattern: a prefilter finds its first words, and one anchored at `^` is tried at
    /// the start of the text only. (The persistence rule's crontab line needs only one of
    /// `/~.$`, so nearly every line of prose admits the rule, and its whole regex
    /// searched each line and pair to the end: 8% of judging a packet of prose.)
    #[inline]
    pub fn is_match(
        &self,
        i: usize,
        pattern: &RulePattern,
        admitted: &Admitted,
        text: &str,
    ) -> bool {
        admitted.rules[i] && Self::is_match_admitted(i, pattern, admitted, text)
    }

    /// [`Self::is_match`] of an admitted pattern.
    fn is_match_admitted(i: usize, pattern: &RulePattern, admitted: &Admitted, text: &str) -> bool {
        let Some(mine) = admitted.branches_of(i) else {
            return pattern.is_match_admitted(text);
        };
        let parts = pattern.branch_patterns();
        if parts.len() != mine.len() || mine.iter().filter(|&&a| a).count() > SEPARATE {
            return pattern.is_match_admitted(text);
        }
        parts
            .iter()
            .zip(mine)
            .any(|(part, &admitted)| admitted && part.is_match_admitted(text))
    }
}

impl fmt::Debug for RulePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RulePattern").field(&&*self.source).finish()
    }
}

/// The lazy DFA's cache per regex and thread (grown only as a search needs it). The
/// default 2 MiB is too small for the larger jailbreak rules (`[\w'’-]+\s+){0,3}` under
/// Unicode): their DFA cleared its cache over and over on prose and the regex fell back to
/// the PikeVM, about 0.2-0.5 ms a line, a third of judging a megabyte of prose.
const DFA_CACHE: usize = 1 << 24;

fn build(source: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(source)
        .case_insensitive(true)
        .multi_line(true)
        .size_limit(1 << 22)
        .dfa_size_limit(DFA_CACHE)
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
        .multi_line(false)
        .size_limit(1 << 22)
        .dfa_size_limit(DFA_CACHE)
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
        let q = RulePattern::deferred(r"\bsudo\b");
        q.warm();
        assert!(q.compiled.needs.get().is_some() && q.compiled.ascii.get().is_none());
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

    /// Every text file under the repository's `tests/` and `runner/tests/it/corpus/`.
    fn corpus_texts() -> Vec<(std::path::PathBuf, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut dirs = vec![
            root.join("../tests"),
            root.join("../runner/tests/it/corpus"),
        ];
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

    /// Every line of the corpora as the rules see it (raw, folded, collapsed, each
    /// alternate reading), and the whole documents (`^`, `$` and `\n` at line ends).
    fn corpus_views(corpus: &[(std::path::PathBuf, String)]) -> Vec<String> {
        let mut texts = Vec::new();
        for (_, text) in corpus {
            for line in text.lines() {
                let view = crate::normalize::Deobfuscated::of(line);
                texts.push(line.to_owned());
                texts.push(view.folded);
                texts.extend(view.collapsed);
                texts.extend(
                    crate::normalize::alternate_readings(line)
                        .into_iter()
                        .map(|r| r.folded),
                );
            }
            texts.push(text.clone());
        }
        texts
    }

    #[test]
    fn ascii_form_agrees_with_unicode_form() {
        let builtin = crate::rules::builtin();
        let mut rules: Vec<&str> = builtin.iter().map(|r| r.pattern.as_str()).collect();
        rules.sort();
        rules.dedup();
        let corpus = corpus_texts();
        assert!(
            corpus.len() > 300,
            "the corpora are found: {}",
            corpus.len()
        );
        let texts = Texts::new(&rules);
        let mut with_ascii_form = 0;
        for (i, source) in rules.iter().enumerate() {
            let plain = build(source).unwrap();
            let pattern = RulePattern::deferred(source);
            with_ascii_form += usize::from(pattern.ascii().is_some());
            let (mut judged, mut hits) = (0, 0);
            // Only ASCII texts: a pattern judges any other by the Unicode form, built as
            // `plain` is (and the first text, before it is built, by its literal
            // condition, which `needs_never_refuse_a_match` checks).
            for text in texts.for_rule(i).filter(|text| text.is_ascii()) {
                let expected = plain.is_match(text);
                assert_eq!(
                    pattern.is_match(text),
                    expected,
                    "rule {source:.60}… on {text:?}"
                );
                judged += 1;
                hits += usize::from(expected);
            }
            // The ASCII texts reach both sides of every rule.
            assert!(hits > 0 && hits < judged, "{source:.60}: {hits}");
        }
        // All built-in rules but `forbidden.instruction_to_run` (`[uú]`) have one.
        assert!(
            with_ascii_form + 1 >= rules.len(),
            "{with_ascii_form} of {}",
            rules.len()
        );
    }

    /// Patterns a policy may add, written to probe the literal conditions: inline flags,
    /// escapes naming characters, non-ASCII literals (some folding to ASCII), small and
    /// large classes, optional and counted parts, alternations with an empty branch.
    const CUSTOM_RULES: &[&str] = &[
        r"(?-i:Secret)Sauce",
        r"(?i)\bpass(word)?\s*=",
        r"\x41KIA[0-9A-Z]{4}|\u{17F}hadow",
        r"\x{212A}ube(ctl)?\s+exec",
        "\u{17f}udo|\u{212a}ill\\s+-9",
        "t\u{e9}l\u{e9}charge[rz]|\u{0441}\u{043a}\u{0430}\u{0447}\u{0430}\u{0439}",
        "[\u{e9}e]x\u{e9}cute[rz]?",
        r"(?:rm|mv)\s+-[rf]{1,2}\s+[/~]",
        r"(?:|pre)fetch\b|\bcurl\b",
        r"[$%][{(]?[A-Z_]+[})]?\s*[|;&]",
        r"(?:ab){2,}cd|x{3}",
        r"^\s*(?:#|//)\s*TODO\b",
        r"(?x) d r o p \s+ table  # comment",
        r"a\.b|a\.b\.c",
        r"[k][e][y]s?\b",
        r"\p{Greek}+\s*=\s*\d+",
        r"(?s)begin.{0,20}end",
        r"\bfoo(?-u:\x20)bar",
    ];

    /// Every built-in rule and [`CUSTOM_RULES`].
    fn all_rule_sources() -> Vec<String> {
        let mut rules: Vec<String> = crate::rules::builtin()
            .iter()
            .map(|r| r.pattern.as_str().to_owned())
            .collect();
        rules.extend(CUSTOM_RULES.iter().map(|r| (*r).to_owned()));
        rules.sort();
        rules.dedup();
        rules
    }

    /// Every how many of the other rules' edge strings a rule is judged on: a rule's own
    /// edge strings probe its boundaries; the others' are only more text, and all of them
    /// for every rule (1.4 million) took most of this crate's test time.
    const OTHERS_EDGE_STRIDE: usize = 8;

    /// The texts the rules are judged on, each once: the corpora's lines (raw, folded,
    /// collapsed, each alternate reading) and documents, and a few strings for the custom
    /// rules, all shared; each rule's own edge strings; a sample of all the edge strings.
    /// Edge and custom strings come also with their `k` and `s` turned into KELVIN SIGN
    /// and LONG S.
    struct Texts {
        shared: Vec<String>,
        own: Vec<Vec<String>>,
        sampled_edges: Vec<String>,
    }

    impl Texts {
        fn new(rules: &[&str]) -> Texts {
            let mut shared = corpus_views(&corpus_texts());
            shared.extend(with_kelvin_and_long_s(
                [
                    "secretsauce SecretSauce SECRETSAUCE",
                    "PASSWORD = x",
                    "AKIA1234 \u{17f}hadow",
                    "kubectl exec \u{212a}UBE exec",
                    "T\u{c9}L\u{c9}CHARGEZ",
                    "\u{421}\u{41a}\u{410}\u{427}\u{410}\u{419}",
                    "EX\u{c9}CUTE \u{c9}x\u{e9}cuter",
                    "rm -rf / mv -f ~",
                    "prefetch fetch curl",
                    "${HOME} ; $(PATH)|",
                    "ababcd xxx abcd",
                    "  // todo: x",
                    "droptable DROP TABLE",
                    "a.b a.b.c",
                    "KEYS key",
                    "\u{3b1}\u{3b2} = 3",
                    "BEGIN\nx\nEND",
                    "foo bar",
                ]
                .map(str::to_owned)
                .to_vec(),
            ));
            let shared = distinct(shared);
            let own: Vec<Vec<String>> = rules
                .iter()
                .map(|rule| distinct(with_kelvin_and_long_s(edge_strings(&[rule]))))
                .collect();
            let sampled_edges = distinct(own.concat())
                .into_iter()
                .step_by(OTHERS_EDGE_STRIDE)
                .collect();
            Texts {
                shared,
                own,
                sampled_edges,
            }
        }

        /// The texts rule `i` (of the rules given to [`Texts::new`]) is judged on.
        fn for_rule(&self, i: usize) -> impl Iterator<Item = &str> {
            self.shared
                .iter()
                .chain(&self.own[i])
                .chain(&self.sampled_edges)
                .map(String::as_str)
        }

        /// The texts every rule is judged on together: the shared ones and the sample.
        fn common(&self) -> Vec<&str> {
            self.shared
                .iter()
                .chain(&self.sampled_edges)
                .map(String::as_str)
                .collect()
        }
    }

    fn with_kelvin_and_long_s(mut texts: Vec<String>) -> Vec<String> {
        let folded: Vec<String> = texts
            .iter()
            .filter(|t| t.contains(['k', 's', 'K', 'S']))
            .map(|t| {
                t.replace(['k', 'K'], "\u{212a}")
                    .replace(['s', 'S'], "\u{17f}")
            })
            .collect();
        texts.extend(folded);
        texts
    }

    fn distinct(mut texts: Vec<String>) -> Vec<String> {
        texts.sort_unstable();
        texts.dedup();
        texts
    }

    /// The literal condition never refuses a text the rule matches (a refused text is
    /// judged without compiling the rule), for every built-in rule and a policy's own
    /// rules, over the corpora and the generated strings; and it refuses most texts.
    #[test]
    fn needs_never_refuse_a_match() {
        let rules = all_rule_sources();
        let sources: Vec<&str> = rules.iter().map(String::as_str).collect();
        let texts = Texts::new(&sources);
        let (mut judged, mut refused) = (0usize, 0usize);
        for (i, source) in sources.iter().enumerate() {
            let plain = build(source).unwrap();
            let Some(needs) = needs::Needs::of(source) else {
                continue;
            };
            // Only a refused text can break the condition, so only those are matched
            // (and admitted ones until one matches, to show the texts reach the rule).
            let mut matched = false;
            for text in texts.for_rule(i) {
                judged += 1;
                if needs.admit(text) {
                    matched = matched || plain.is_match(text);
                } else {
                    refused += 1;
                    assert!(!plain.is_match(text), "rule {source:.60}… matches {text:?}");
                }
            }
            assert!(matched, "no text matches {source:.60}");
        }
        // A prefilter that refuses nothing would pass the above. (Most texts here are
        // built around the rules' words, so fewer are refused than in a plain request.)
        assert!(
            refused * 2 > judged,
            "refused {refused} of {judged} (rule, text) pairs"
        );
    }

    /// One search for all the rules' literals ([`PatternSet`]) admits exactly the texts
    /// each rule's own search admits, for the built-in and policy-style rules together
    /// (patterns that need nothing included), over the same texts.
    #[test]
    fn pattern_set_admits_as_each_rule_does() {
        let rules = all_rule_sources();
        let sources: Vec<&str> = rules.iter().map(String::as_str).collect();
        let texts = Texts::new(&sources);
        let texts = texts.common();
        let patterns: Vec<RulePattern> = rules
            .iter()
            .map(|s| RulePattern::deferred(s))
            .chain([
                RulePattern::deferred(r"\w+"),
                RulePattern::deferred(r"\bsudo\b"),
            ])
            .collect();
        let set = PatternSet::new(&patterns);
        assert!(set.is_of(&patterns) && !set.is_of(&patterns[1..]));
        let (mut found, mut admitted) = (Vec::new(), Admitted::default());
        let mut refused = 0usize;
        for &text in &texts {
            set.admit(&[text], &mut found, &mut admitted);
            assert_eq!(admitted.rules.len(), patterns.len());
            for (pattern, admitted) in patterns.iter().zip(&admitted.rules) {
                assert_eq!(
                    *admitted,
                    pattern.may_match(text),
                    "rule {:.60}… on {text:?}",
                    pattern.as_str()
                );
                refused += usize::from(!admitted);
            }
        }
        assert!(refused > 0, "the set refuses some (rule, text) pairs");
        // Several texts at once (a line's views) admit every rule one of them admits.
        let mut joint_refused = 0usize;
        for pair in texts.windows(2) {
            set.admit(pair, &mut found, &mut admitted);
            for (pattern, admitted) in patterns.iter().zip(&admitted.rules) {
                assert!(
                    *admitted || !(pattern.may_match(pair[0]) || pattern.may_match(pair[1])),
                    "rule {:.60}… on {pair:?}",
                    pattern.as_str()
                );
                joint_refused += usize::from(!admitted);
            }
        }
        assert!(
            joint_refused > 0,
            "several texts together are still refused by some rules"
        );
    }

    /// The built-in rules' literal conditions are read off `needs/builtin.rs`, which must
    /// be what `Needs::of` computes from their sources (`UPDATE_NEEDS_TABLE=1` rewrites it).
    #[test]
    fn builtin_needs_table_is_current() {
        // A rule on decoded blobs only (rare readings) needs no prefilter.
        let mut sources: Vec<String> = crate::rules::builtin()
            .iter()
            .filter(|r| r.reading == crate::rules::RuleReading::Any)
            .map(|r| r.pattern.as_str().to_owned())
            .collect();
        sources.sort();
        sources.dedup();
        let expected = needs::Needs::table_file(&sources);
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/rule_pattern/needs/builtin.rs"
        );
        if std::env::var_os("UPDATE_NEEDS_TABLE").is_some() {
            std::fs::write(path, &expected).unwrap();
        }
        let actual = std::fs::read_to_string(path).unwrap();
        assert!(
            actual == expected,
            "{path} is stale: run this test with UPDATE_NEEDS_TABLE=1"
        );
        // Every built-in rule has a condition (`every_builtin_rule_needs_literals`).
        assert!(sources.len() > 5 && expected.matches(" =>\n").count() == sources.len());
    }

    /// Which rules get a literal condition: all built-in ones, and the custom ones but
    /// those whose every match may be made of classes only.
    #[test]
    fn every_builtin_rule_needs_literals() {
        for rule in crate::rules::builtin()
            .into_iter()
            .filter(|r| r.reading == crate::rules::RuleReading::Any)
        {
            assert!(
                needs::Needs::of(rule.pattern.as_str()).is_some(),
                "{}: {:.60}",
                rule.code,
                rule.pattern.as_str()
            );
        }
        for none in [r"\w+", r"[a-z]{3}\d", r"a?b*", r"(?:x|\s)", "\u{17f}udo"] {
            assert!(needs::Needs::of(none).is_none(), "{none}");
        }
        // A class of a few characters is one of them; a literal with a character that
        // folds to ASCII needs nothing, so a text with `SUDO` is not refused.
        let small = needs::Needs::of(r"[/~.$]etc").unwrap();
        assert!(small.admit("~ETC") && !small.admit("etc") && !small.admit("/et"));
        assert!(RulePattern::deferred("\u{17f}udo").is_match("SUDO"));
        // Non-ASCII literals: never in ASCII text; in other text, their ASCII runs.
        let accented = needs::Needs::of("t\u{e9}l\u{e9}chargez").unwrap();
        assert!(!accented.admit("telechargez") && accented.admit("T\u{c9}L\u{c9}CHARGEZ"));
        assert!(!accented.admit("t\u{e9}l\u{e9}charge"));
        // A text with a character that folds to ASCII is never refused.
        assert!(accented.admit("\u{17f}"));
    }

    /// The literal search folds ASCII case only; this is sound because no character
    /// outside ASCII matches an ASCII one case-insensitively except those
    /// [`folds_to_ascii`] names (checked over every code point with the regex engine).
    #[test]
    fn folds_to_ascii_covers_every_character_regex_folds_to_ascii() {
        let any_ascii = build(r"^[\x00-\x7f]$").unwrap();
        let mut folding = Vec::new();
        for c in (0x80u32..=0x10ffff).filter_map(char::from_u32) {
            if any_ascii.is_match(c.encode_utf8(&mut [0; 4])) {
                assert!(folds_to_ascii(c), "{c:?} U+{:04X}", u32::from(c));
                folding.push(c);
            }
        }
        assert_eq!(folding, ['\u{17f}', '\u{212a}'], "the two known ones");
    }

    /// The top-level branches, and only those: not inside a group or a class, nor after
    /// an escaped bar; none when a branch sets flags for the rest, or there is one.
    #[test]
    fn branches_are_the_top_level_alternatives() {
        assert_eq!(
            branches(r"a|(?:b|c)d|[|x]|\||e(?i:f|g)"),
            Some(vec!["a", "(?:b|c)d", "[|x]", r"\|", "e(?i:f|g)"])
        );
        assert_eq!(branches(r"^\s*x|y$"), Some(vec![r"^\s*x", "y$"]));
        assert_eq!(branches("abc"), None);
        assert_eq!(branches("(?:a|b)"), None);
        assert_eq!(branches("(?i)a|b"), None);
        assert_eq!(branches("a|x(?-i)b"), None);
        assert_eq!(branches("a|(b"), None);
    }

    /// A pattern split into branches is judged as the whole pattern: [`PatternSet::is_match`]
    /// (the admitted branches' regexes, or the whole one when more are admitted) agrees
    /// with the whole regex on every text, for the built-in and policy-style rules; a
    /// branch the set refuses never matches; and both ways of answering are taken.
    #[test]
    fn branches_judge_as_the_whole_pattern() {
        let rules = all_rule_sources();
        let sources: Vec<&str> = rules.iter().map(String::as_str).collect();
        let texts = Texts::new(&sources);
        let patterns: Vec<RulePattern> = sources.iter().map(|s| RulePattern::deferred(s)).collect();
        let set = PatternSet::new(&patterns);
        let (mut found, mut admitted) = (Vec::new(), Admitted::default());
        let (mut split, mut by_branches, mut whole) = (0, 0, 0);
        for (i, source) in sources.iter().enumerate() {
            let plain = build(source).unwrap();
            let parts: Vec<Regex> = branches(source)
                .unwrap_or_default()
                .into_iter()
                .map(|b| build(b).unwrap())
                .collect();
            split += usize::from(!parts.is_empty());
            for text in texts.for_rule(i) {
                set.admit(&[text], &mut found, &mut admitted);
                let expected = plain.is_match(text);
                assert_eq!(
                    set.is_match(i, &patterns[i], &admitted, text),
                    expected,
                    "rule {source:.60}… on {text:?}"
                );
                let Some(answers) = admitted.branches_of(i) else {
                    continue;
                };
                assert_eq!(answers.len(), parts.len(), "{source:.60}");
                for (part, &admitted) in parts.iter().zip(answers) {
                    assert!(
                        admitted || !part.is_match(text),
                        "a refused branch of {source:.60}… matches {text:?}"
                    );
                }
                if answers.iter().filter(|&&a| a).count() > SEPARATE {
                    whole += 1;
                } else {
                    by_branches += 1;
                }
            }
        }
        assert!(split >= 10, "{split} rules split");
        assert!(
            by_branches > 100 && whole > 100,
            "{by_branches} by branches, {whole} whole"
        );
    }

    /// The literals of two ASCII texts joined by a space are theirs and those found
    /// across the space ([`PatternSet::search_across_space`]), as a search of the whole
    /// finds them, literals of several spaces and at either end included.
    #[test]
    fn literals_across_a_space_complete_those_of_either_side() {
        let mut rules = all_rule_sources();
        rules.push(r"\bab c d\b|x y|(?:^| )z ".to_owned());
        let patterns: Vec<RulePattern> = rules.iter().map(|s| RulePattern::deferred(s)).collect();
        let set = PatternSet::new(&patterns);
        let sources: Vec<&str> = rules.iter().map(String::as_str).collect();
        let texts = Texts::new(&sources);
        let mut sides: Vec<String> = texts
            .common()
            .into_iter()
            .filter(|t| t.is_ascii() && t.len() < 200)
            .step_by(7)
            .take(600)
            .map(str::to_ascii_lowercase)
            .collect();
        sides.extend(
            [
                "private",
                "key material",
                "ab",
                "c d",
                "ab c",
                "d",
                "x",
                "y",
                "z",
                "",
                "-----begin",
            ]
            .map(String::from),
        );
        let (mut whole, mut parts, mut admitted) = (Vec::new(), Vec::new(), Admitted::default());
        let mut across = 0;
        for (i, a) in sides.iter().enumerate() {
            // Each side with about twenty others, and with every constructed one.
            for b in sides
                .iter()
                .skip(i % 29)
                .step_by(29)
                .chain(&sides[sides.len() - 11..])
            {
                let joined = format!("{a} {b}");
                set.admit(&[&joined], &mut whole, &mut admitted);
                set.admit(&[a.as_str(), b.as_str()], &mut parts, &mut admitted);
                let before = parts.clone();
                assert!(set.search_across_space(&joined, a.len(), &mut parts));
                assert_eq!(parts, whole, "{joined:?}");
                across += usize::from(parts != before);
            }
        }
        assert!(across > 10, "{across} joins add a literal");
        assert!(!set.search_across_space("ab c", 1, &mut parts));
    }

    /// A text of several lines is judged in multi-line mode (`^` after a newline), one
    /// line by the ASCII form, built without it: both answer as the Unicode form does.
    #[test]
    fn a_text_of_several_lines_is_judged_in_multi_line_mode() {
        let pattern = RulePattern::deferred(r"^\s*rm\s+-rf\b|curl\s+\S+$");
        assert!(pattern.is_match("echo hi\n  rm -rf /"));
        assert!(pattern.is_match("curl x\nnext line"));
        assert!(!pattern.is_match("echo rm -rf /"));
        assert!(!pattern.is_match("curl x next"));
        assert!(pattern.is_match("rm -rf /") && pattern.is_match("see curl x"));
        assert!(pattern.compiled.ascii.get().is_some_and(Option::is_some));
    }

    /// A hello-world request's lines, judged with the request rules, compile no regex:
    /// no rule's literals occur in them.
    #[test]
    fn a_plain_request_compiles_no_rule() {
        let text = "---\nrequest_type: tool_request\nschema_version: 1\nrequest_id: \"TR-bench-era-hello\"\n\
            created_utc: \"2026-11-21T12:00:00Z\"\nrequested_by: \"bench\"\napproved_by: \"bench-operator\"\n\
            purpose: \"Hello world, for the benchmark.\"\nbackend: ERA\nlanguage: python\nnetwork: none\n\
            cpu_limit: \"10\"\nmemory_limit_mb: 256\ntime_limit_sec: 30\n---\n## Command\n\
            `python -c \"print('hello')\"`\n\n## Input Files\nNone.\n\n## Output Expectations\n\
            - stdout only\n\n## Risk Assessment\n- Risk level: low\n- Justification: prints a constant.\n\
            - Data sensitivity: public\n- Network rationale: none needed\n";
        let rules = crate::rules::by_target(&crate::rules::builtin())
            [crate::rules::RuleTarget::Request.index()]
        .clone();
        let lines: Vec<_> = crate::markdown::frontmatter::lines(text).collect();
        assert!(crate::forbidden::scan_document(&lines, |_| &rules).is_empty());
        for rule in &rules {
            let compiled = &rule.pattern.compiled;
            assert!(
                compiled.ascii.get().is_none() && compiled.unicode.get().is_none(),
                "{} was compiled",
                rule.code
            );
            assert!(
                compiled.needs.get().is_some(),
                "{} was not judged",
                rule.code
            );
        }
    }
}
