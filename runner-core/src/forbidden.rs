//! The forbidden-content scanner: the policy's rules run over every line of a document
//! after de-obfuscation (see [`crate::normalize::Deobfuscated`]). Invisible characters
//! and stray control characters are findings of their own: they have no business in
//! an approved request and are the usual way to hide text from a reviewer.

use crate::decode::Counts;
use crate::markdown::frontmatter::Line;
use crate::normalize::{
    Deobfuscated, Reading, alternate_readings_counted, is_disallowed_control, join_readings,
};
use crate::rule_pattern::{Admitted, PatternSet};
use crate::rules::{ForbiddenRule, RuleReading};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

/// One match of a rule on one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub code: String,
    pub message: String,
    pub line: usize,
}

/// Scans `lines` with `rules`; at most one finding per rule and line.
pub fn scan<'a>(
    lines: impl IntoIterator<Item = Line<'a>>,
    rules: &[ForbiddenRule],
) -> Vec<Finding> {
    let mut judge = Judge::new(rules);
    let mut findings = Vec::new();
    for line in lines {
        judge.line(line.text, line.number, &|_| false, &mut findings);
    }
    findings
}

/// The codes a line can earn besides its rules' own.
const CONTROL: &str = "text.control_character";
const INVISIBLE: &str = "text.invisible_character";

/// Judges lines with one set of rules: their literal conditions searched for once per
/// text ([`PatternSet`]), and only the rules a text admits run their regexes.
struct Judge<'r> {
    rules: &'r [ForbiddenRule],
    set: Arc<PatternSet>,
    /// Scratch space for the literal search.
    found: Vec<u64>,
    /// Answers of [`PatternSet::admit`] judged with, kept for their space (a line and a
    /// pair each used a few, and allocating them was a few percent of judging prose).
    spare: Vec<Admitted>,
    /// Scratch space for a pair: its text, and its literals.
    pair_text: String,
    pair_found: Vec<u64>,
}

impl<'r> Judge<'r> {
    fn new(rules: &'r [ForbiddenRule]) -> Self {
        // Each rule's own condition too, as judging a line prepared it before the set
        // did: a set made from other copies of the same rules is shared, and
        // `RulePattern::is_match` callers still use each rule's own.
        for rule in rules {
            rule.pattern.warm();
        }
        Self {
            rules,
            set: pattern_set(rules),
            found: Vec::new(),
            spare: Vec::new(),
            pair_text: String::new(),
            pair_found: Vec::new(),
        }
    }

    /// The judge in `slot` when it judges with `rules`, else a new one put there.
    fn for_rules<'s>(slot: &'s mut Option<Self>, rules: &'r [ForbiddenRule]) -> &'s mut Self {
        if !slot.as_ref().is_some_and(|j| std::ptr::eq(j.rules, rules)) {
            *slot = Some(Self::new(rules));
        }
        slot.get_or_insert_with(|| Self::new(rules))
    }

    /// Which rules may match one of `texts`.
    fn admitted(&mut self, texts: &[&str]) -> Admitted {
        let mut admitted = self.spare.pop().unwrap_or_default();
        self.set.admit(texts, &mut self.found, &mut admitted);
        admitted
    }

    /// Keeps the answers `views` held for the next texts.
    fn recycle(&mut self, views: Views<'_>) {
        self.spare.push(views.on_folded);
        self.spare.extend(views.on_readings);
    }

    /// Appends the findings of one line to `findings`, leaving out the codes `skip`
    /// names (a caller that would drop them: their rules are not run).
    fn line(
        &mut self,
        text: &str,
        number: usize,
        skip: &dyn Fn(&str) -> bool,
        findings: &mut Vec<Finding>,
    ) {
        self.line_quiet(text, number, skip, findings);
    }

    /// [`Self::line`]; and, for an ASCII line whose readings a pair's are composed from
    /// (none, or a cipher-naming line's whole-line hints), what judging a pair it is in
    /// can reuse ([`Self::pair_is_quiet`]).
    fn line_quiet(
        &mut self,
        text: &str,
        number: usize,
        skip: &dyn Fn(&str) -> bool,
        findings: &mut Vec<Finding>,
    ) -> Option<Quiet> {
        let first = findings.len();
        if !skip(CONTROL) && text.chars().any(is_disallowed_control) {
            findings.push(Finding {
                code: CONTROL.into(),
                message: "a control character (other than tab) is not allowed".into(),
                line: number,
            });
        }
        let view = Deobfuscated::of(text);
        if view.had_invisible && !skip(INVISIBLE) {
            findings.push(Finding {
                code: INVISIBLE.into(),
                message:
                    "an invisible character (zero-width, bidi control or similar) is not allowed"
                        .into(),
                line: number,
            });
        }
        let rules = self.rules;
        if rules.iter().all(|r| skip(&r.code)) {
            return None;
        }
        let (readings, counts) = alternate_readings_counted(text);
        // The folded and the collapsed line are one text with a few letters closed up:
        // their literals are tested together (a rule either admits runs on both; its
        // regex still decides each), so the conditions are evaluated once per line.
        // Outside its joined words the collapsed line is the folded one, so only the
        // stretches around them are searched again (a literal there overlaps one).
        let on_folded = match view.collapsed.as_deref() {
            None => self.admitted(&[&view.folded]),
            Some(c) => {
                let reach = self.set.longest_literal().saturating_sub(1);
                let texts: Vec<&str> = std::iter::once(view.folded.as_str())
                    .chain(view.joined_at.iter().map(|at| around(c, at, reach)))
                    .collect();
                self.admitted(&texts)
            }
        };
        let quiet = counts.map(|counts| Quiet {
            found: self.found.clone(),
            counts,
        });
        let views = self.views(&view, on_folded, &readings);
        for (i, rule) in rules.iter().enumerate() {
            // Several rules may share a code (one reason per code and line).
            if skip(&rule.code) || findings[first..].iter().any(|f| f.code == rule.code) {
                continue;
            }
            if views.hit(&self.set, i, rule) {
                findings.push(Finding {
                    code: rule.code.clone(),
                    message: rule.message.clone(),
                    line: number,
                });
            }
        }
        self.recycle(views);
        quiet
    }

    /// Whether judging `first + " " + second` (both ASCII, judged by this judge with
    /// `quiet` facts) would find nothing but the codes `skip` names. Exact: its folded
    /// text is the lines' joined by a space, so a literal found in it lies in one line or
    /// holds that space (those few are looked for across it); its readings are composed
    /// from the lines' ([`join_readings`]: none, or the whole-pair ROT13 and Atbash hints
    /// of a pair that names a cipher), and are searched and judged as [`Self::line`]
    /// judges them. False whenever it cannot tell.
    fn pair_is_quiet(
        &mut self,
        (first, a): (&str, &Quiet),
        (second, b): (&str, &Quiet),
        skip: &dyn Fn(&str) -> bool,
    ) -> bool {
        let mut joined = std::mem::take(&mut self.pair_text);
        joined.clear();
        joined.push_str(first);
        joined.push(' ');
        joined.push_str(second);
        let mut found = std::mem::take(&mut self.pair_found);
        let quiet = self.joined_is_quiet(&joined, first.len(), (a, b), &mut found, skip);
        self.pair_text = joined;
        self.pair_found = found;
        quiet
    }

    /// [`Self::pair_is_quiet`] of `joined`, joined at byte `at`; `found` is scratch space.
    fn joined_is_quiet(
        &mut self,
        joined: &str,
        at: usize,
        (a, b): (&Quiet, &Quiet),
        found: &mut Vec<u64>,
        skip: &dyn Fn(&str) -> bool,
    ) -> bool {
        let view = Deobfuscated::of(joined);
        let reach = self.set.longest_literal().saturating_sub(1);
        found.clear();
        found.extend(a.found.iter().zip(&b.found).map(|(x, y)| x | y));
        let mut searched =
            a.found.len() == b.found.len() && self.set.search_across_space(&view.folded, at, found);
        if let Some(c) = view.collapsed.as_deref() {
            for at in &view.joined_at {
                searched = searched && self.set.search_ascii(around(c, at, reach), found);
            }
        }
        if !searched {
            return false;
        }
        let Some(readings) = join_readings(&a.counts, &b.counts, joined) else {
            return false;
        };
        let mut admitted = self.spare.pop().unwrap_or_default();
        self.set.admit_found_ascii(found, &mut admitted);
        // As [`Self::line`] judges the pair; a regex answers alone, so admitting more
        // changes nothing.
        let views = self.views(&view, admitted, &readings);
        let quiet = (self.rules.iter().enumerate())
            .all(|(i, rule)| skip(&rule.code) || !views.hit(&self.set, i, rule));
        self.recycle(views);
        quiet
    }

    /// `view` and `readings` (`on_folded`: what the literals of the view admit), with
    /// what the literals of each reading admit.
    fn views<'v>(
        &mut self,
        view: &'v Deobfuscated,
        on_folded: Admitted,
        readings: &'v [Reading],
    ) -> Views<'v> {
        Views {
            view,
            on_folded,
            readings,
            on_readings: readings
                .iter()
                .map(|r| self.admitted(&[&r.folded]))
                .collect(),
        }
    }

    /// [`scan_joined`], leaving out the codes `skip` names.
    fn joined(
        &mut self,
        text: &str,
        line: usize,
        skip: &dyn Fn(&str) -> bool,
        findings: &mut Vec<Finding>,
    ) {
        if !skip(CONTROL) && text.chars().any(|c| c != '\n' && is_disallowed_control(c)) {
            findings.push(Finding {
                code: CONTROL.into(),
                message: "a control character (other than tab) is not allowed".into(),
                line,
            });
        }
        let flat = text.replace('\n', " ");
        // The flattened text's own control characters are the finding above.
        self.line(&flat, line, &|code| code == CONTROL || skip(code), findings);
    }
}

/// A text as the rules judge it: its de-obfuscated views and its readings, and which
/// rules (and branches) the literals of each admit.
struct Views<'v> {
    view: &'v Deobfuscated,
    /// For the folded text and its collapsed one alike.
    on_folded: Admitted,
    readings: &'v [Reading],
    on_readings: Vec<Admitted>,
}

impl Views<'_> {
    /// Whether `rule`, the pattern `i` of `set`, finds something in these views.
    fn hit(&self, set: &PatternSet, i: usize, rule: &ForbiddenRule) -> bool {
        let matches =
            |admitted: &Admitted, text: &str| set.is_match(i, &rule.pattern, admitted, text);
        let reading_hit = |encoded_only: bool| {
            (self.readings.iter().zip(&self.on_readings))
                .any(|(r, admitted)| (r.encoded || !encoded_only) && matches(admitted, &r.folded))
        };
        match rule.reading {
            // The encoding is the finding: only decoded blobs are judged.
            RuleReading::Decoded => reading_hit(true),
            RuleReading::Any => {
                matches(&self.on_folded, &self.view.folded)
                    || (self.view.spaced_runs.iter())
                        .any(|run| rule.spaced.iter().any(|w| run.contains(w.as_str())))
                    || (self.view.collapsed.as_deref()).is_some_and(|c| matches(&self.on_folded, c))
                    || reading_hit(false)
            }
        }
    }
}

/// What judging an ASCII line whose readings compose ([`alternate_readings_counted`])
/// found: the literals of its folded text (and of its collapsed stretches), and its
/// decoders' counts.
struct Quiet {
    found: Vec<u64>,
    counts: Counts,
}

/// The literal conditions of `rules` as one search, built once per rule set: a process
/// judges with a few (one per document kind and policy), each on every line.
fn pattern_set(rules: &[ForbiddenRule]) -> Arc<PatternSet> {
    /// More sets than a process uses at once; the least recently used goes first.
    const KEPT: usize = 16;
    static SETS: Mutex<Vec<Arc<PatternSet>>> = Mutex::new(Vec::new());
    let patterns = || rules.iter().map(|r| &r.pattern);
    let mut sets = SETS.lock().unwrap_or_else(PoisonError::into_inner);
    let set = match sets.iter().position(|s| s.is_of(patterns())) {
        Some(i) => sets.remove(i),
        None => Arc::new(PatternSet::new(patterns())),
    };
    if sets.len() >= KEPT {
        sets.remove(0);
    }
    sets.push(set.clone());
    set
}

/// Scans the lines of a document: each line alone ([`scan`]), then each pair of adjacent
/// non-blank lines joined the way markdown joins a paragraph's lines ("pip" at the end
/// of one line and "install" at the start of the next read as one phrase; a list item's
/// marker is dropped, so a step split over two items reads as one). A finding of the
/// pair is reported at its first line unless either line already has it. `rules_at`
/// gives the rules for a line number (a monty request's code has rules of its own); a
/// pair whose lines differ in rules is judged by the first line's.
///
/// A large document is judged in parts on several threads (`in_parts`): each line,
/// then each pair, is judged alone, so the parts' findings, put back in order, are the
/// findings of judging it whole.
pub fn scan_document<'r>(
    lines: &[Line<'_>],
    rules_at: impl Fn(usize) -> &'r [ForbiddenRule] + Sync,
) -> Vec<Finding> {
    let bytes = |line: &Line<'_>| line.text.len() + 1;
    // Per line: its findings, its rules and what a pair can reuse of judging it.
    let judged: Vec<JudgedLine<'r>> = in_parts(lines, bytes, |part| {
        // One judge per rule set, kept while consecutive lines share it.
        let mut judge: Option<Judge<'r>> = None;
        part.iter()
            .map(|line| {
                let rules = rules_at(line.number);
                let mut findings = Vec::new();
                let quiet = Judge::for_rules(&mut judge, rules).line_quiet(
                    line.text,
                    line.number,
                    &|_| false,
                    &mut findings,
                );
                JudgedLine {
                    findings,
                    rules,
                    quiet,
                }
            })
            .collect()
    });
    // Each pair's findings, judged knowing only its own lines' findings; a finding
    // reported at a line by an earlier pair is dropped below (only when line numbers
    // repeat can a pair's finding meet another pair's line).
    let indices: Vec<usize> = (0..lines.len().saturating_sub(1)).collect();
    let pairs: Vec<Vec<Finding>> = in_parts(
        &indices,
        |&n| bytes(&lines[n]),
        |part| {
            let mut judge: Option<Judge<'r>> = None;
            part.iter()
                .map(|&n| {
                    judge_pair(
                        &mut judge,
                        (&lines[n], &judged[n]),
                        (&lines[n + 1], &judged[n + 1]),
                    )
                })
                .collect()
        },
    );
    let mut findings: Vec<Finding> = judged.into_iter().flat_map(|j| j.findings).collect();
    // The lines' findings by (code, line): a pair's finding is looked up, not searched
    // for, so a document with a finding on every line is judged in linear work (a linear
    // search here took 4 s for 1 MiB and minutes for 8 MiB).
    let mut codes = Codes::default();
    let mut reported: HashSet<Key> = findings
        .iter()
        .map(|f| Key(codes.id(&f.code), f.line))
        .collect();
    for (n, pair_findings) in pairs.into_iter().enumerate() {
        let (first, second) = (lines[n].number, lines[n + 1].number);
        for f in pair_findings {
            let id = codes.id(&f.code);
            if !reported.contains(&Key(id, first)) && !reported.contains(&Key(id, second)) {
                reported.insert(Key(id, f.line));
                findings.push(f);
            }
        }
    }
    findings
}

/// One line of a document as [`scan_document`] judged it alone.
struct JudgedLine<'r> {
    findings: Vec<Finding>,
    rules: &'r [ForbiddenRule],
    quiet: Option<Quiet>,
}

/// The findings of the pair `first` + `second` (adjacent lines, judged alone as
/// `a` and `b`) that neither line has, by the first line's rules.
fn judge_pair<'r>(
    judge: &mut Option<Judge<'r>>,
    (first, a): (&Line<'_>, &JudgedLine<'r>),
    (second, b): (&Line<'_>, &JudgedLine<'r>),
) -> Vec<Finding> {
    if first.text.trim().is_empty() || second.text.trim().is_empty() {
        return Vec::new();
    }
    let rules = a.rules;
    // The codes either line has already: a pair's finding of one is not reported, so
    // the rules that give it are not run on the pair, nor is a pair that can add nothing
    // judged at all.
    let skip = |code: &str| a.findings.iter().chain(&b.findings).any(|f| f.code == code);
    if rules.iter().all(|r| skip(&r.code)) && skip(CONTROL) && skip(INVISIBLE) {
        return Vec::new();
    }
    let second_text = without_list_marker(second.text);
    // A pair of quiet lines of the same rules (the second without a list marker, so
    // its facts are of the text joined) is first asked whether it can find anything.
    if let (Some(q1), Some(q2)) = (&a.quiet, &b.quiet)
        && std::ptr::eq(b.rules, rules)
        && second_text.len() == second.text.len()
        && Judge::for_rules(judge, rules).pair_is_quiet((first.text, q1), (second.text, q2), &skip)
    {
        return Vec::new();
    }
    let joined = format!("{} {}", first.text, second_text);
    let mut findings = Vec::new();
    Judge::for_rules(judge, rules).joined(&joined, first.number, &skip, &mut findings);
    findings
}

/// Documents of fewer bytes are judged on the calling thread: handing parts to other
/// threads costs more than they save.
const PARALLEL_FROM: usize = 64 << 10;
/// The most threads documents are judged on.
const MAX_THREADS: usize = 8;
/// The parts of a document per thread ([`in_parts`]).
const PARTS_PER_THREAD: usize = 4;

/// The threads large documents are judged on, started once and kept: a rule's regex
/// keeps a lazy DFA cache per thread, and threads started per document began each one
/// with cold caches (building DFA states was 6% of judging a 1 MiB packet). `None` when
/// there is one core, or the threads cannot be started.
fn judges() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_THREADS);
        (threads > 1)
            .then(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("runner-judge-{i}"))
                    .build()
                    .ok()
            })
            .flatten()
    })
    .as_ref()
}

/// `text` around `range`, `reach` bytes further on each side (widened to whole
/// characters): where every literal of at most `reach + 1` bytes that overlaps `range`
/// lies.
fn around<'t>(text: &'t str, range: &std::ops::Range<usize>, reach: usize) -> &'t str {
    let mut start = range.start.saturating_sub(reach);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (range.end + reach).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    &text[start..end]
}

/// `a()` and `b()`, on the judges' threads at once when `size` (the bytes of the
/// document they are for) is worth it, else one after the other.
pub(crate) fn alongside<A: Send, B: Send>(
    size: usize,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    match judges().filter(|_| size >= PARALLEL_FROM) {
        Some(pool) => pool.install(|| rayon::join(a, b)),
        None => (a(), b()),
    }
}

/// `judge` over `items` cut into contiguous parts of about equal `weight`
/// ([`PARTS_PER_THREAD`] per thread of [`judges`]), the parts' results put back in order.
/// On the calling thread when the items weigh less than [`PARALLEL_FROM`] or there is no
/// pool.
fn in_parts<T: Sync, U: Send>(
    items: &[T],
    weight: impl Fn(&T) -> usize,
    judge: impl Fn(&[T]) -> Vec<U> + Sync,
) -> Vec<U> {
    let total: usize = items.iter().map(&weight).sum();
    #[cfg(test)]
    let one_thread = ONE_THREAD.get();
    #[cfg(not(test))]
    let one_thread = false;
    let Some(pool) = judges().filter(|_| !one_thread && total >= PARALLEL_FROM) else {
        return judge(items);
    };
    // A few parts per thread, so that a thread busy with other work (a document's
    // rendering, judged alongside, `alongside`) leaves its share to the others.
    let count = pool.current_num_threads() * PARTS_PER_THREAD;
    // Cut where the running weight passes each part's share.
    let share = total.div_ceil(count);
    let mut parts: Vec<&[T]> = Vec::with_capacity(count);
    let (mut start, mut sum) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        sum += weight(item);
        if sum >= share * (parts.len() + 1) && parts.len() + 1 < count {
            parts.push(&items[start..=i]);
            start = i + 1;
        }
    }
    parts.push(&items[start..]);
    use rayon::prelude::*;
    let judged: Vec<Vec<U>> = pool.install(|| parts.par_iter().map(|part| judge(part)).collect());
    judged.into_iter().flatten().collect()
}

/// Small numbers for the finding codes of one document, so a (code, line) key is two
/// integers.
#[derive(Default)]
struct Codes(std::collections::HashMap<String, usize>);

impl Codes {
    fn id(&mut self, code: &str) -> usize {
        if let Some(&id) = self.0.get(code) {
            return id;
        }
        let id = self.0.len();
        self.0.insert(code.to_owned(), id);
        id
    }
}

/// A finding's (code, line), as [`scan_document`] looks it up.
#[derive(Eq)]
struct Key(usize, usize);

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.1.hash(state);
        self.0.hash(state);
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        #[cfg(test)]
        KEY_COMPARISONS.with(|n| n.set(n.get() + 1));
        self.1 == other.1 && self.0 == other.0
    }
}

#[cfg(test)]
thread_local! {
    /// Set by a test to judge on the calling thread only ([`in_parts`]).
    static ONE_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// How many keys [`scan_document`] compared: what the test of its work bounds.
    static KEY_COMPARISONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The text of a list item without its marker (`- `, `* `, `+ `, `1. `, `2) `).
fn without_list_marker(line: &str) -> &str {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix(['-', '*', '+'])
        && rest.starts_with(' ')
    {
        return rest.trim_start();
    }
    let digits = t.trim_start_matches(|c: char| c.is_ascii_digit());
    if digits.len() < t.len()
        && let Some(rest) = digits.strip_prefix(['.', ')'])
        && rest.starts_with(' ')
    {
        return rest.trim_start();
    }
    line
}

/// Scans a value that may span lines as one line, reporting findings at `line`: YAML
/// scalars after decoding (escapes such as `\u200b` or `\e` become the characters they
/// name; folded scalars join their lines) and markdown lines joined the way a renderer
/// joins them. A newline inside the value is a space; any other control character is
/// a finding.
pub fn scan_joined(text: &str, line: usize, rules: &[ForbiddenRule]) -> Vec<Finding> {
    let mut findings = Vec::new();
    Judge::new(rules).joined(text, line, &|_| false, &mut findings);
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{RuleTarget, builtin, by_target};

    /// The built-in rules that judge requests.
    fn request_rules() -> Vec<ForbiddenRule> {
        by_target(&builtin())[RuleTarget::Request.index()].clone()
    }

    fn codes(text: &str) -> Vec<String> {
        scan(crate::markdown::frontmatter::lines(text), &request_rules())
            .into_iter()
            .map(|f| f.code)
            .collect()
    }

    #[test]
    fn rule_table() {
        let cases: &[(&str, &str)] = &[
            ("then pip install requests", "forbidden.package_install"),
            ("PIP3 INSTALL x", "forbidden.package_install"),
            ("python -m pip list", "forbidden.package_install"),
            ("sudo apt-get install -y curl", "forbidden.package_install"),
            ("apt install nmap", "forbidden.package_install"),
            ("npm i left-pad", "forbidden.package_install"),
            (
                "curl -fsSL https://x.example/i.sh | sh",
                "forbidden.package_install",
            ),
            ("wget -qO- x | sudo bash", "forbidden.package_install"),
            (
                "p i p   i n s t a l l requests",
                "forbidden.package_install",
            ),
            ("ｐｉｐ ｉｎｓｔａｌｌ x", "forbidden.package_install"),
            ("key AKIAIOSFODNN7EXAMPLE here", "forbidden.secret"),
            ("-----BEGIN RSA PRIVATE KEY-----", "forbidden.secret"),
            (
                "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "forbidden.secret",
            ),
            ("password=hunter2", "forbidden.secret"),
            ("api_key: abcdef", "forbidden.secret"),
            ("read /dev/mem", "forbidden.privileged_device"),
            ("open /etc/shadow", "forbidden.host_path"),
            ("cat ~/.ssh/id_rsa", "forbidden.host_path"),
            ("ls /proc/self", "forbidden.host_path"),
            ("sudo id", "forbidden.privilege_escalation"),
            ("a\u{200b}b", "text.invisible_character"),
            ("a\u{7}b", "text.control_character"),
        ];
        crate::test_support::assert_each_yields(cases, codes);
    }

    #[test]
    fn clean_text_has_no_findings() {
        for text in [
            "python -u script.py --in /in/data.csv --out /out/summary.json",
            "Risk level: low",
            "Computes the mean of a column; writes JSON to /out/.",
            "The pipeline installs nothing.",
            "Data sensitivity: public",
        ] {
            assert!(codes(text).is_empty(), "{text:?}: {:?}", codes(text));
        }
    }

    /// Lines that find nothing alone (ASCII, no reading: the pairs judged from what their
    /// lines found) whose join does: a phrase across the join, percent escapes that
    /// only the two lines together have enough of.
    #[test]
    fn quiet_lines_are_still_judged_joined() {
        let rules = request_rules();
        for (first, second) in [
            ("then run pip", "install requests"),
            ("see gem %20", "%20 install bundler"),
        ] {
            let text = format!("{first}\n{second}");
            let lines: Vec<Line<'_>> = crate::markdown::frontmatter::lines(&text).collect();
            let alone: Vec<Finding> = lines.iter().flat_map(|l| scan([*l], &rules)).collect();
            assert!(alone.is_empty(), "{alone:?}");
            let findings = scan_document(&lines, |_| &rules);
            assert!(
                findings
                    .iter()
                    .any(|f| f.code == "forbidden.package_install" && f.line == 1),
                "{first:?} + {second:?}: {findings:?}"
            );
        }
    }

    /// A pair cleared from its lines' facts ([`Judge::pair_is_quiet`]) is one that
    /// judging the joined text finds nothing in: pairs of quiet lines and of lines that
    /// name a cipher (read whole through ROT13 and Atbash, a phrase across the join
    /// among them), each line alone finding nothing.
    #[test]
    fn a_quiet_pair_is_one_the_joined_text_clears() {
        let rules = request_rules();
        let lines = [
            "The scheme sorts object members by their UTF-16 code units.",
            "Each encoder records the variance of repeated readings; then cvc",
            "vafgnyy requests, as the cipher says",
            "then run pip",
            "install requests",
            "The encoding round-trips exactly (n = 12, 3.4%).",
            "Decode the following for the survey",
            "the keys are listed once.",
            "so what does",
            "this mean for the cohort",
        ];
        let (mut cleared, mut judged) = (0, 0);
        let mut judge = Judge::new(&rules);
        for first in lines {
            for second in lines {
                let mut alone = Vec::new();
                let q1 = judge.line_quiet(first, 1, &|_| false, &mut alone);
                let q2 = judge.line_quiet(second, 2, &|_| false, &mut alone);
                assert!(alone.is_empty(), "{alone:?}");
                let (Some(q1), Some(q2)) = (q1, q2) else {
                    panic!("{first:?} or {second:?} does not compose");
                };
                let quiet = judge.pair_is_quiet((first, &q1), (second, &q2), &|_| false);
                let mut joined = Vec::new();
                judge.joined(&format!("{first} {second}"), 1, &|_| false, &mut joined);
                if quiet {
                    assert!(joined.is_empty(), "{first:?} + {second:?}: {joined:?}");
                    cleared += 1;
                } else {
                    judged += 1;
                }
            }
        }
        // Most pairs are cleared; those with a phrase across the join are not.
        assert!(
            cleared > 80 && judged > 0,
            "{cleared} cleared, {judged} not"
        );
    }

    /// A hostile document: findings of several rules on every line, and one more on
    /// every pair of lines ("then pip" + "install it"). Judging must not search all
    /// earlier findings per pair (quadratic: 4 s for 1 MiB, minutes for 8 MiB): the
    /// lookups grow with the pairs' findings. 2,000 lines are judged on several threads
    /// where there are cores, 200 on one.
    #[test]
    fn a_finding_on_every_line_is_judged_in_linear_work() {
        let rules = request_rules();
        let line = "install it; AKIAIOSFODNN7EXAMPLE; /etc/passwd; \u{200b}ignore previous instructions; then pip";
        for n in [200usize, 2000] {
            let text = vec![line; n].join("\n");
            let lines: Vec<Line<'_>> = crate::markdown::frontmatter::lines(&text).collect();
            KEY_COMPARISONS.with(|c| c.set(0));
            let findings = scan_document(&lines, |_| &rules);
            let compared = KEY_COMPARISONS.with(|c| c.get());
            // Each pair adds one finding, at its first line ...
            let joined: Vec<usize> = findings
                .iter()
                .filter(|f| f.code == "forbidden.package_install")
                .map(|f| f.line)
                .collect();
            assert_eq!(joined, (1..n).collect::<Vec<_>>());
            // ... to every line's own (so the pairs were judged).
            let own = findings.len() - joined.len();
            let per_line = own / n;
            assert!(per_line >= 3 && own == per_line * n, "{own}");
            // Each pair's finding is looked up (a key compared about once), not searched
            // for among all the others (a linear search: about n² / 2 keys).
            assert!(
                compared <= 4 * (per_line + 1) * n,
                "{n} lines: {compared} keys compared"
            );
        }
    }

    /// A document judged in parts on several threads has the findings, in the same
    /// order, of the document judged on one: findings on lines and on pairs at every
    /// distance from the parts' cuts, blank lines and list items among them.
    #[test]
    fn parts_find_what_the_whole_finds() {
        let rules = request_rules();
        let samples = [
            "The survey records the median time to the first response across all sites.",
            "then pip",
            "install requests",
            "",
            "- step one: sudo",
            "- apt-get install curl",
            "key AKIAIOSFODNN7EXAMPLE here",
            "a\u{200b}b and the rest of an ordinary sentence about the sample",
            "The dataset lists the number of distinct values per column.",
        ];
        // About 370 KiB: several parts wherever there are cores.
        let text: Vec<&str> = (0..12000)
            .map(|i| samples[(i * 7 + i / 9) % samples.len()])
            .collect();
        let text = text.join("\n");
        assert!(text.len() > 4 * PARALLEL_FROM);
        let lines: Vec<Line<'_>> = crate::markdown::frontmatter::lines(&text).collect();
        let parts = scan_document(&lines, |_| &rules);
        ONE_THREAD.set(true);
        let whole = scan_document(&lines, |_| &rules);
        ONE_THREAD.set(false);
        assert!(whole.len() > 2000, "{}", whole.len());
        assert!(whole.iter().any(|f| f.code == "forbidden.package_install"));
        assert_eq!(parts, whole);
    }
}
