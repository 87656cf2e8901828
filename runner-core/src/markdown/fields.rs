//! What the gate's markdown validators (tool results, research packets) share beyond
//! what they share with the request validator ([`crate::markdown::document`]): the
//! strict section layout rule, labelled lines (`- Label: value`), the forbidden-content
//! and rendered-text scans, fenced and prose lines.

use crate::markdown::document;
use crate::markdown::frontmatter::{self, Line};
use crate::markdown::sections::{self, Section};
use crate::normalize::strip_bom;
use crate::rules::ForbiddenRule;
use std::collections::BTreeMap;

/// `gate::artifacts` reports through `fields::Reasons` and `fields::clip`; the one copy
/// of each is in [`crate::markdown::document`].
pub use crate::markdown::document::{Reasons, clip};

/// Checks the body's layout: only a `# ` title before the first section; exactly the
/// `expected` H2 sections, each once, in order, spelled exactly; no heading that a
/// markdown viewer would show but the section parser would not (an indented `## `, a
/// setext underline). Parses `body_lines` into sections and returns the ones filed, by
/// title (a duplicate's first copy).
pub fn section_layout<'a>(
    body_lines: &[Line<'a>],
    expected: &[&'static str],
    end_line: usize,
    r: &mut Reasons,
) -> BTreeMap<&'static str, Section<'a>> {
    let body = sections::parse(body_lines);
    document::text_outside_section(&body, r);
    let mut found: BTreeMap<&'static str, &Section<'a>> = BTreeMap::new();
    let mut order: Vec<usize> = Vec::new();
    for s in &body.sections {
        match expected.iter().position(|t| *t == s.title) {
            Some(i) => {
                if !document::file_section(&mut found, expected[i], s, r) {
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
    document::required_sections(&found, expected, end_line, r);
    ambiguous_headings(body_lines, r);
    found.into_iter().map(|(t, s)| (t, s.clone())).collect()
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

/// Scans every line of `text`, and each pair of adjacent lines joined, with `rules`,
/// then the text as it renders ([`crate::markdown::visible`]); each finding a reason.
pub fn scan_forbidden(text: &str, rules: &[ForbiddenRule], r: &mut Reasons) {
    let lines: Vec<_> = frontmatter::lines(text).collect();
    let (found, rendered) = crate::markdown::visible::scan_with_source(text, &lines, |_| rules);
    for f in found.into_iter().chain(rendered) {
        r.add(&f.code, f.message, f.line);
    }
}

/// Raw HTML and headings that render differently from how they parse
/// ([`crate::markdown::rendered`]): what a person reviewing the rendered document would
/// not see, or would see as structure the gate does not.
pub fn rendered_text(body: &[Line<'_>], r: &mut Reasons) {
    for m in crate::markdown::rendered::scan(body) {
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
    use crate::markdown::frontmatter::lines;

    fn layout_codes(text: &str) -> Vec<String> {
        let all: Vec<Line<'_>> = lines(text).collect();
        let mut r = Reasons::default();
        section_layout(&all, &["A", "B", "C"], 99, &mut r);
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
