//! What a rule's match needs: the literals every match of a pattern contains, so a text
//! without them is judged without compiling the pattern.
//!
//! The condition is read off the pattern's syntax tree, parsed case-sensitively: a
//! literal is needed; a concatenation needs what each of its parts needs; an alternation
//! needs what one of its branches needs; a repetition needs its body when it must occur
//! at least once (`+`, `{2,5}`), nothing when it may not (`?`, `*`, `{0,80}`); a class of
//! at most eight characters needs one of them (`[/~.$]`); larger classes, anchors and
//! word boundaries need nothing. Every match of the pattern then contains a case
//! variant of each literal the condition names on the way it took.
//!
//! The rules are compiled case-insensitively with Unicode case folding, and the text is
//! searched for the literals with ASCII case folding only (one Aho-Corasick automaton per
//! rule). The two agree except where a non-ASCII character folds to an ASCII one
//! (KELVIN SIGN `K` and `k`, LONG S `ſ` and `s`; [`super::folds_to_ascii`] is a
//! conservative superset, tested against the regex engine over every code point), so:
//!
//! - a literal holding such a character needs nothing;
//! - a text holding one is not prefiltered (every rule is possible);
//! - a literal holding another non-ASCII character (`téléchargez`, `игнорируй`) cannot
//!   occur in an ASCII text (none of its characters has an ASCII case variant), and in
//!   any other text needs its ASCII runs (`t`, `l`, `chargez`), which a case variant of
//!   the literal contains as they are, up to ASCII case.
//!
//! The literal prefix sets of `regex_syntax::hir::literal::Extractor` are not used: most
//! rules begin with `(?:^\s*|[.!?:;]\s+|…)`, whose prefix set is infinite, while the
//! words after it are what makes a rule unlikely to match.
//! `tests::needs_never_refuse_a_match` checks the condition against the compiled rule on
//! the same corpora as the ASCII form.

mod builtin;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind};
use regex_syntax::hir::{Class, Hir, HirKind};
use std::collections::HashMap;

/// The start of `needs/builtin.rs`.
#[cfg(test)]
const TABLE_HEAD: &str = "\
//! The literal conditions of the built-in rules, made by `Needs::table_file` from the
//! rules' sources: generated, do not edit. `tests::builtin_needs_table_is_current`
//! fails when a built-in rule changes; `UPDATE_NEEDS_TABLE=1` on that test rewrites it.

use super::Cond::{self, All, Any, Lit, NonAscii};

/// The literals and the condition of the built-in rule `source`; `None` for any other.
#[rustfmt::skip]
#[allow(clippy::too_many_lines)]
pub(super) fn table(source: &str) -> Option<(&'static [&'static str], Cond)> {
    match source {
";

/// The largest class read as one of its characters.
const SMALL_CLASS: u32 = 8;

/// The literals a pattern's every match contains, and how.
pub(super) struct Needs {
    /// The needed literals (their ASCII parts), found case-insensitively in one pass.
    automaton: AhoCorasick,
    literals: usize,
    condition: Cond,
}

/// A condition over the literals found in a text.
#[derive(Debug)]
enum Cond {
    /// Literal number `n` occurs.
    Lit(usize),
    /// A literal with a non-ASCII character: never in an ASCII text; in any other text,
    /// its ASCII runs (these literals) all occur.
    NonAscii(Vec<usize>),
    All(Vec<Cond>),
    Any(Vec<Cond>),
}

impl Needs {
    /// The needs of `source`, or `None` when a match needs no literal (or the pattern
    /// does not parse as the rule compiler's patterns do: it is then compiled as before
    /// and fails there).
    pub(super) fn of(source: &str) -> Option<Self> {
        // A built-in rule's condition is read off the table made from the same code
        // (`builtin::table`, checked by `tests::builtin_needs_table_is_current`): parsing
        // the built-in rules cost about 3 ms of every process.
        if let Some((list, condition)) = builtin::table(source) {
            return Self::with(list, condition);
        }
        let (literals, condition) = Self::condition(source)?;
        Self::with(&literals.list, condition)
    }

    /// The literals and the condition of `source`, computed from its syntax tree.
    fn condition(source: &str) -> Option<(Literals, Cond)> {
        let hir = regex_syntax::ParserBuilder::new()
            .case_insensitive(false)
            .multi_line(true)
            .build()
            .parse(source)
            .ok()?;
        let mut literals = Literals::default();
        let condition = literals.cond(&hir)?;
        Some((literals, condition))
    }

    fn with<S: AsRef<[u8]>>(list: &[S], condition: Cond) -> Option<Self> {
        let automaton = AhoCorasickBuilder::new()
            // As cheap to build as the noncontiguous NFA (the DFA costs about 1.5 ms more
            // for the built-in rules) and quicker to search.
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .prefilter(false)
            .ascii_case_insensitive(true)
            .build(list)
            .ok()?;
        Some(Self {
            automaton,
            literals: list.len(),
            condition,
        })
    }

    /// The text of `needs/builtin.rs` for the rules `sources` (sorted, distinct).
    #[cfg(test)]
    pub(super) fn table_file(sources: &[String]) -> String {
        let mut out = String::from(TABLE_HEAD);
        for source in sources {
            if let Some(entry) = Self::table_entry(source) {
                out.push_str(&format!("        {source:?} =>\n            {entry},\n"));
            }
        }
        out.push_str("        _ => None,\n    }\n}\n");
        out
    }

    /// The table entry of `source` in `builtin.rs`'s form: `None` when it needs nothing.
    #[cfg(test)]
    pub(super) fn table_entry(source: &str) -> Option<String> {
        let (literals, condition) = Self::condition(source)?;
        Some(format!(
            "Some((&{:?} as &[&str], {}))",
            literals.list,
            condition.rust()
        ))
    }

    /// Whether `text` may hold a match: false only when it cannot.
    pub(super) fn admit(&self, text: &str) -> bool {
        let ascii = text.is_ascii();
        if !ascii
            && text
                .chars()
                .any(|c| !c.is_ascii() && super::folds_to_ascii(c))
        {
            return true;
        }
        let mut found = vec![false; self.literals];
        for m in self.automaton.find_overlapping_iter(text) {
            found[m.pattern().as_usize()] = true;
        }
        self.condition.holds(&found, ascii)
    }
}

impl Cond {
    /// The Rust expression that builds this condition (for the built-in table).
    #[cfg(test)]
    fn rust(&self) -> String {
        let list = |parts: &[Cond]| parts.iter().map(Cond::rust).collect::<Vec<_>>().join(", ");
        match self {
            Cond::Lit(n) => format!("Lit({n})"),
            Cond::NonAscii(runs) => format!("NonAscii(vec!{runs:?})"),
            Cond::All(parts) => format!("All(vec![{}])", list(parts)),
            Cond::Any(parts) => format!("Any(vec![{}])", list(parts)),
        }
    }

    fn holds(&self, found: &[bool], ascii: bool) -> bool {
        match self {
            Cond::Lit(n) => found[*n],
            Cond::NonAscii(runs) => !ascii && runs.iter().all(|n| found[*n]),
            Cond::All(parts) => parts.iter().all(|c| c.holds(found, ascii)),
            Cond::Any(parts) => parts.iter().any(|c| c.holds(found, ascii)),
        }
    }
}

/// The distinct literals of a condition, ASCII-lowercased, by number.
#[derive(Default)]
struct Literals {
    list: Vec<String>,
    index: HashMap<String, usize>,
}

impl Literals {
    fn id(&mut self, literal: &str) -> usize {
        let key = literal.to_ascii_lowercase();
        if let Some(&n) = self.index.get(&key) {
            return n;
        }
        self.list.push(key.clone());
        self.index.insert(key, self.list.len() - 1);
        self.list.len() - 1
    }

    /// What every match of `hir` needs; `None`: nothing.
    fn cond(&mut self, hir: &Hir) -> Option<Cond> {
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => None,
            HirKind::Class(class) => self.class(class),
            HirKind::Literal(lit) => self.literal(std::str::from_utf8(&lit.0).ok()?),
            HirKind::Repetition(rep) if rep.min == 0 => None,
            HirKind::Repetition(rep) => self.cond(&rep.sub),
            HirKind::Capture(cap) => self.cond(&cap.sub),
            HirKind::Concat(parts) => {
                let mut all: Vec<Cond> = parts.iter().filter_map(|p| self.cond(p)).collect();
                match all.len() {
                    0 => None,
                    1 => all.pop(),
                    _ => Some(Cond::All(all)),
                }
            }
            HirKind::Alternation(branches) => {
                let mut any = Vec::with_capacity(branches.len());
                for branch in branches {
                    any.push(self.cond(branch)?);
                }
                Some(Cond::Any(any))
            }
        }
    }

    /// A class of a few characters needs one of them (`[/~.$]`); a larger one, nothing.
    fn class(&mut self, class: &Class) -> Option<Cond> {
        let Class::Unicode(class) = class else {
            return None;
        };
        let mut size = 0u32;
        for range in class.ranges() {
            size += u32::from(range.end()) - u32::from(range.start()) + 1;
            if size > SMALL_CLASS {
                return None;
            }
        }
        let mut any = Vec::with_capacity(size as usize);
        for range in class.ranges() {
            for c in range.start()..=range.end() {
                any.push(self.literal(c.encode_utf8(&mut [0; 4]))?);
            }
        }
        Some(Cond::Any(any))
    }

    fn literal(&mut self, text: &str) -> Option<Cond> {
        if text
            .chars()
            .any(|c| !c.is_ascii() && super::folds_to_ascii(c))
        {
            return None;
        }
        if text.is_ascii() {
            return Some(Cond::Lit(self.id(text)));
        }
        let runs = text
            .split(|c: char| !c.is_ascii())
            .filter(|run| !run.is_empty())
            .map(|run| self.id(run))
            .collect();
        Some(Cond::NonAscii(runs))
    }
}
