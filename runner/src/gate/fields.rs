//! Shared pieces of the markdown validators (tool results, research packets): the
//! reason collector, front matter field readers, the section layout rule, labelled
//! lines (`- Label: value`) and the forbidden-content scan.

use crate::normalize::strip_bom;
use crate::policy::ForbiddenRule;
use crate::request::Reason;
use crate::request::forbidden;
use crate::request::frontmatter::{self, Line, Split, SplitError};
use crate::request::sections::{self, Body, Section};
use crate::request::yaml::{self, Node};
use std::collections::BTreeMap;

/// Collects reasons.
#[derive(Debug, Default)]
pub struct Reasons(pub Vec<Reason>);

impl Reasons {
    pub fn add(&mut self, code: &str, message: impl Into<String>, line: impl Into<Option<usize>>) {
        self.0.push(Reason::new(code, message, line.into()));
    }
}

/// The document as text, or the reason it is not UTF-8 (with the line of the first bad
/// byte).
pub fn utf8<'a>(bytes: &'a [u8], r: &mut Reasons) -> Option<&'a str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Some(text),
        Err(e) => {
            let line = bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            r.add(
                "document.not_utf8",
                format!("the document is not valid UTF-8 (byte {})", e.valid_up_to()),
                line,
            );
            None
        }
    }
}

/// Splits the front matter and loads it with the strict YAML loader.
pub fn front_matter<'a>(
    text: &'a str,
    budget: yaml::Budget,
    r: &mut Reasons,
) -> Option<(Split<'a>, Node)> {
    let split = match frontmatter::split(text) {
        Ok(split) => split,
        Err(SplitError::Missing) => {
            r.add(
                "front_matter.missing",
                "the document must begin with YAML front matter: a line `---`",
                1,
            );
            return None;
        }
        Err(SplitError::Unterminated) => {
            r.add(
                "front_matter.unterminated",
                "the front matter has no closing `---` line",
                1,
            );
            return None;
        }
    };
    match yaml::load(&split.front_matter, split.front_matter_first_line, budget) {
        Ok(root) => Some((split, root)),
        Err(errors) => {
            for e in errors {
                r.add(e.code, e.message, e.line);
            }
            None
        }
    }
}

/// The top-level front matter keys with their values and lines.
pub struct Fields<'a> {
    entries: BTreeMap<&'a str, (&'a Node, usize)>,
    /// Line of the mapping (the first key), for "missing key" reasons.
    pub map_line: usize,
}

impl<'a> Fields<'a> {
    /// Reads the root mapping, reporting keys not in `known`.
    pub fn new(root: &'a Node, known: &[&str], r: &mut Reasons) -> Self {
        let mut entries = BTreeMap::new();
        let (list, map_line) = match root {
            Node::Map { entries, line } => (entries.as_slice(), *line),
            other => {
                r.add(
                    "yaml.not_mapping",
                    "front matter must be a mapping",
                    other.line(),
                );
                (&[][..], other.line())
            }
        };
        for e in list {
            if !known.contains(&e.key.as_str()) {
                r.add(
                    "front_matter.unknown_key",
                    format!("unknown front matter key `{}`", e.key),
                    e.key_line,
                );
            }
            entries
                .entry(e.key.as_str())
                .or_insert((&e.value, e.key_line));
        }
        Self { entries, map_line }
    }

    pub fn get(&self, key: &str) -> Option<(&'a Node, usize)> {
        self.entries.get(key).copied()
    }

    /// The node under `key`, or a `front_matter.missing_key` reason.
    pub fn require(&self, key: &str, r: &mut Reasons) -> Option<(&'a Node, usize)> {
        let found = self.get(key);
        if found.is_none() {
            r.add(
                "front_matter.missing_key",
                format!("required front matter key `{key}` is missing"),
                self.map_line,
            );
        }
        found
    }

    /// A key whose value must be exactly `want` (`result_type: tool_result`).
    pub fn constant(&self, key: &str, want: &str, r: &mut Reasons) {
        if let Some((node, line)) = self.require(key, r)
            && scalar_str(node).as_deref() != Some(want)
        {
            r.add(
                &format!("front_matter.{key}"),
                format!("`{key}` must be `{want}`, found {}", show(node)),
                line,
            );
        }
    }

    /// `schema_version`: `1` or `"1"`.
    pub fn schema_version(&self, r: &mut Reasons) {
        if let Some((node, line)) = self.require("schema_version", r)
            && scalar_str(node).as_deref() != Some("1")
        {
            r.add(
                "front_matter.schema_version",
                format!("`schema_version` must be 1, found {}", show(node)),
                line,
            );
        }
    }

    /// A required string that must not be blank.
    pub fn text(&self, key: &str, r: &mut Reasons) -> Option<(String, usize)> {
        let (node, line) = self.require(key, r)?;
        match node {
            Node::Seq { .. } | Node::Map { .. } => {
                r.add(
                    "front_matter.type",
                    format!("`{key}` must be a string, found {}", node.kind()),
                    line,
                );
                None
            }
            _ => match scalar_str(node) {
                Some(s) if !s.trim().is_empty() => Some((s, line)),
                _ => {
                    r.add(
                        "front_matter.empty_value",
                        format!("`{key}` must not be empty"),
                        line,
                    );
                    None
                }
            },
        }
    }

    /// A required identifier: 1–128 of `A–Z a–z 0–9 . _ -`, starting alphanumeric.
    pub fn id(&self, key: &str, r: &mut Reasons) -> Option<(String, usize)> {
        let (id, line) = self.text(key, r)?;
        if !is_id(&id) {
            r.add(
                "front_matter.id",
                format!("`{key}` must be 1–128 characters of A–Z, a–z, 0–9, `.`, `_`, `-`, starting with a letter or digit"),
                line,
            );
            return None;
        }
        Some((id, line))
    }

    /// A required RFC 3339 timestamp in UTC.
    pub fn timestamp(&self, key: &str, r: &mut Reasons) -> Option<(time::OffsetDateTime, usize)> {
        let (text, line) = self.text(key, r)?;
        utc_timestamp(&text)
            .map(|t| (t, line))
            .or_else(|| {
                r.add(
                    "front_matter.timestamp",
                    format!("`{key}` must be an ISO-8601 UTC timestamp such as 2026-02-09T16:10:30Z, found `{}`", clip(&text)),
                    line,
                );
                None
            })
    }

    /// A required value from a closed set.
    pub fn one_of(&self, key: &str, allowed: &[&str], r: &mut Reasons) -> Option<(String, usize)> {
        let (node, line) = self.require(key, r)?;
        match scalar_str(node) {
            Some(v) if allowed.contains(&v.as_str()) => Some((v, line)),
            _ => {
                r.add(
                    &format!("front_matter.{key}"),
                    format!(
                        "`{key}` must be one of {}, found {}",
                        allowed.join("|"),
                        show(node)
                    ),
                    line,
                );
                None
            }
        }
    }

    /// A required 64-lowercase-hex sha256.
    pub fn sha256(&self, key: &str, r: &mut Reasons) -> Option<(String, usize)> {
        let (node, line) = self.require(key, r)?;
        sha256_node(node, key, r).map(|s| (s, line))
    }
}

/// A node that must be a 64-lowercase-hex sha256 string.
pub fn sha256_node(node: &Node, what: &str, r: &mut Reasons) -> Option<String> {
    match scalar_str(node) {
        Some(s) if crate::digest::is_sha256_hex(&s) => Some(s),
        _ => {
            r.add(
                "front_matter.hash_format",
                format!(
                    "`{what}` must be 64 lowercase hex characters, found {}",
                    show(node)
                ),
                node.line(),
            );
            None
        }
    }
}

/// RFC 3339, offset zero.
pub fn utc_timestamp(text: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(text.trim(), &time::format_description::well_known::Rfc3339)
        .ok()
        .filter(|t| t.offset().is_utc())
}

/// 1–128 of `A–Z a–z 0–9 . _ -`, starting with a letter or digit.
pub fn is_id(id: &str) -> bool {
    id.len() <= 128
        && id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A scalar's text (quoted or plain), `None` for lists, mappings and null.
pub fn scalar_str(node: &Node) -> Option<String> {
    match node {
        Node::Scalar {
            value,
            quoted: false,
            ..
        } if yaml::is_null(value) => None,
        Node::Scalar { value, .. } => Some(value.clone()),
        _ => None,
    }
}

/// A plain (unquoted) scalar's text: YAML numbers are plain.
pub fn plain_scalar(node: &Node) -> Option<&str> {
    match node {
        Node::Scalar {
            value,
            quoted: false,
            ..
        } => Some(value),
        _ => None,
    }
}

/// How a node looks in a message.
pub fn show(node: &Node) -> String {
    match node {
        Node::Scalar { value, .. } if !value.is_empty() => format!("`{}`", clip(value)),
        other => other.kind().to_owned(),
    }
}

/// The first 40 characters, control characters escaped.
pub fn clip(s: &str) -> String {
    s.chars()
        .take(40)
        .map(|c| {
            if c.is_control() || crate::normalize::is_invisible(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Checks the body's layout: only a `# ` title before the first section; exactly the
/// `expected` H2 sections, each once, in order, spelled exactly; no heading that a
/// markdown viewer would show but the section parser would not (an indented `## `, a
/// setext underline). Returns the sections by title.
pub fn section_layout<'b, 'a>(
    body: &'b Body<'a>,
    body_lines: &[Line<'a>],
    expected: &[&'static str],
    end_line: usize,
    r: &mut Reasons,
) -> BTreeMap<&'static str, &'b Section<'a>> {
    if let Some(l) = body
        .preamble
        .iter()
        .find(|l| !l.text.trim().is_empty() && !l.text.starts_with("# "))
    {
        r.add(
            "body.text_outside_section",
            "text before the first `## ` section (only a `# ` title may stand there)",
            l.number,
        );
    }
    let mut found: BTreeMap<&'static str, &Section<'a>> = BTreeMap::new();
    let mut order: Vec<usize> = Vec::new();
    for s in &body.sections {
        match expected.iter().position(|t| *t == s.title) {
            Some(i) => {
                if let Some(first) = found.get(expected[i]) {
                    r.add(
                        "body.duplicate_section",
                        format!(
                            "section `## {}` appears twice (first on line {})",
                            s.title, first.heading_line
                        ),
                        s.heading_line,
                    );
                    continue;
                }
                if order.last().is_some_and(|&prev| prev > i) {
                    r.add(
                        "body.section_order",
                        format!(
                            "section `## {}` is out of order; the sections are, in this order: {}",
                            s.title,
                            expected.join(", ")
                        ),
                        s.heading_line,
                    );
                }
                order.push(i);
                found.insert(expected[i], s);
            }
            None => match expected.iter().find(|t| t.eq_ignore_ascii_case(&s.title)) {
                Some(t) => r.add(
                    "body.section_title",
                    format!(
                        "section `## {}` must be written exactly `## {t}`",
                        clip(&s.title)
                    ),
                    s.heading_line,
                ),
                None => r.add(
                    "body.unknown_section",
                    format!(
                        "unknown section `## {}` (the sections are: {})",
                        clip(&s.title),
                        expected.join(", ")
                    ),
                    s.heading_line,
                ),
            },
        }
    }
    for t in expected {
        match found.get(t) {
            None => r.add(
                "body.missing_section",
                format!("required section `## {t}` is missing"),
                end_line,
            ),
            Some(s) if s.content_lines().next().is_none() => r.add(
                "body.empty_section",
                format!("section `## {t}` is empty"),
                s.heading_line,
            ),
            Some(_) => {}
        }
    }
    ambiguous_headings(body_lines, r);
    found
}

/// Lines a markdown viewer shows as headings that the section parser does not treat as
/// sections: `## ` indented by one to three spaces, `##Title` without the space, and
/// setext underlines (`---` or `===` under a line of text). A document must not hold a
/// section that the validator cannot see.
fn ambiguous_headings(lines: &[Line<'_>], r: &mut Reasons) {
    let mut fence: Option<(char, usize)> = None;
    let mut previous_is_text = false;
    for line in lines {
        let marker = sections::fence_marker(line.text);
        match (fence, marker) {
            (None, Some(open)) => {
                fence = Some(open);
                previous_is_text = false;
                continue;
            }
            (Some((c, n)), Some((c2, n2)))
                if c == c2 && n2 >= n && line.text.trim_start()[n2..].trim().is_empty() =>
            {
                fence = None;
                previous_is_text = false;
                continue;
            }
            _ => {}
        }
        if fence.is_some() {
            continue;
        }
        let t = line.text;
        let indent = t.len() - t.trim_start_matches(' ').len();
        let rest = &t[indent..];
        let hashes = rest.chars().take_while(|&c| c == '#').count();
        let atx = (1..=6).contains(&hashes)
            && indent <= 3
            && rest[hashes..]
                .chars()
                .next()
                .is_none_or(|c| c == ' ' || c == '\t');
        let is_h2_section = indent == 0 && rest.starts_with("## ");
        if atx && hashes == 2 && !is_h2_section {
            r.add(
                "body.ambiguous_heading",
                "a heading that is not written `## Title` at the start of the line",
                line.number,
            );
        }
        let trimmed = t.trim_end();
        let setext = indent <= 3
            && trimmed.len() > indent
            && (trimmed[indent..].chars().all(|c| c == '-')
                || trimmed[indent..].chars().all(|c| c == '='));
        if setext && previous_is_text {
            r.add(
                "body.ambiguous_heading",
                "a setext underline (`---` or `===` under text) turns the line above into a heading",
                line.number,
            );
        }
        previous_is_text = !t.trim().is_empty() && !atx && !setext;
    }
}

/// One `Label: value` line of a section (list markers, emphasis and code marks around
/// the label removed). A label with an empty value takes the indented list under it as
/// its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labelled {
    /// Lowercase, single-spaced.
    pub label: String,
    pub value: String,
    pub line: usize,
}

/// The labelled lines of a section, in order.
pub fn labelled(section: &Section<'_>) -> Vec<Labelled> {
    let mut out: Vec<Labelled> = Vec::new();
    // True while the last label had no value of its own and takes a nested list.
    let mut collecting = false;
    for line in section.content_lines() {
        let indented = line.text.starts_with(' ') || line.text.starts_with('\t');
        let t = line.text.trim();
        let item = t
            .strip_prefix("- ")
            .or_else(|| t.strip_prefix("* "))
            .or_else(|| t.strip_prefix("+ "))
            .unwrap_or(t)
            .trim();
        if indented
            && collecting
            && let Some(last) = out.last_mut()
        {
            last.value.push_str(t);
            last.value.push('\n');
            continue;
        }
        collecting = false;
        if let Some((label, value)) = item.split_once(':') {
            let label = label.replace(['*', '_', '`'], "");
            let label = label.split_whitespace().collect::<Vec<_>>().join(" ");
            if !label.is_empty() && label.len() <= 60 && !label.contains('/') {
                let value = value.trim().trim_matches('*').trim().to_owned();
                collecting = value.is_empty();
                out.push(Labelled {
                    label: label.to_ascii_lowercase(),
                    value,
                    line: line.number,
                });
            }
        }
    }
    for l in &mut out {
        l.value = l.value.trim().to_owned();
    }
    out
}

/// Scans every line of `text` with `rules`, each finding a reason.
pub fn scan_forbidden(text: &str, rules: &[ForbiddenRule], r: &mut Reasons) {
    for f in forbidden::scan(frontmatter::lines(text), rules) {
        r.add(&f.code, f.message, f.line);
    }
}

/// Raw HTML and headings that render differently from how they parse
/// ([`crate::request::rendered`]): what a person reviewing the rendered document would
/// not see, or would see as structure the gate does not.
pub fn rendered_text(body: &[Line<'_>], r: &mut Reasons) {
    for m in crate::request::rendered::scan(body) {
        r.add(m.code, m.message, m.line);
    }
}

/// The last line number of the file.
pub fn last_line(text: &str) -> usize {
    strip_bom(text).split('\n').count().max(1)
}

/// The lines of a section inside code fences, and the lines outside them.
pub fn fenced_and_prose<'a>(section: &Section<'a>) -> (Vec<Line<'a>>, Vec<Line<'a>>) {
    let mut fenced = Vec::new();
    let mut prose = Vec::new();
    let mut fences = sections::Fences::default();
    for line in &section.lines {
        let was_open = fences.is_open();
        fences.step(line.text);
        match (was_open, fences.is_open()) {
            (true, true) => fenced.push(*line),
            (false, false) => prose.push(*line),
            _ => {} // a fence's opening or closing line
        }
    }
    (fenced, prose)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::request::frontmatter::lines;

    fn layout_codes(text: &str) -> Vec<String> {
        let all: Vec<Line<'_>> = lines(text).collect();
        let body = sections::parse(&all);
        let mut r = Reasons::default();
        section_layout(&body, &all, &["A", "B", "C"], 99, &mut r);
        r.0.into_iter().map(|x| x.code).collect()
    }

    #[test]
    fn layout_table() {
        let cases: &[(&str, &[&str])] = &[
            ("## A\nx\n## B\nx\n## C\nx\n", &[]),
            ("# T\n\n## A\nx\n## B\nx\n## C\nx\n", &[]),
            ("## A\nx\n## C\nx\n## B\nx\n", &["body.section_order"]),
            ("## A\nx\n## B\nx\n", &["body.missing_section"]),
            ("## A\nx\n## B\n\n## C\nx\n", &["body.empty_section"]),
            (
                "## A\nx\n## B\nx\n## B\nx\n## C\nx\n",
                &["body.duplicate_section"],
            ),
            (
                "## A\nx\n## b\nx\n## B\nx\n## C\nx\n",
                &["body.section_title"],
            ),
            (
                "## A\nx\n## D\nx\n## B\nx\n## C\nx\n",
                &["body.unknown_section"],
            ),
            (
                "hi\n## A\nx\n## B\nx\n## C\nx\n",
                &["body.text_outside_section"],
            ),
            (
                "## A\nx\n ## C\n## B\nx\n## C\nx\n",
                &["body.ambiguous_heading"],
            ),
            ("## A\nx\n##C\n## B\nx\n## C\nx\n", &[]),
            (
                "## A\nx\n##\tC\n## B\nx\n## C\nx\n",
                &["body.ambiguous_heading"],
            ),
            (
                "## A\nC\n---\n## B\nx\n## C\nx\n",
                &["body.ambiguous_heading"],
            ),
            ("## A\nx\n\n---\n## B\nx\n## C\nx\n", &[]),
            ("## A\n```\n ## C\nC\n---\n```\n## B\nx\n## C\nx\n", &[]),
            ("## A\nx\n### sub\n## B\nx\n## C\nx\n", &[]),
        ];
        for (text, want) in cases {
            assert_eq!(layout_codes(text), *want, "{text:?}");
        }
    }

    #[test]
    fn labelled_lines() {
        let text = "## S\n- **Untrusted Output Statement:** it is untrusted.\n- Unexpected behavior:\n  - one\n  - two\nNetwork confirmation: none used\nno label here\n";
        let all: Vec<Line<'_>> = lines(text).collect();
        let body = sections::parse(&all);
        let l = labelled(&body.sections[0]);
        assert_eq!(l[0].label, "untrusted output statement");
        assert_eq!(l[0].value, "it is untrusted.");
        assert_eq!(l[1].label, "unexpected behavior");
        assert_eq!(l[1].value, "- one\n- two");
        assert_eq!(l[2].value, "none used");
        assert_eq!(l[2].line, 6);
        assert_eq!(l.len(), 3);
    }
}
