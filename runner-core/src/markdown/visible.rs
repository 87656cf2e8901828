//! The text a reader sees when the document is rendered, line by line of the source.
//! A CommonMark parser (pulldown-cmark) reads the whole document; what it shows as text
//! (entities decoded, emphasis, link and image syntax gone, code spans unwrapped, a
//! link's text without its target) is gathered per source line. Raw HTML is not text a
//! reader sees (it is rejected on its own, `body.raw_html`), and code blocks show their
//! source unchanged, so neither is gathered. The forbidden-content rules then judge
//! these lines as they judge the source: `Ign&#111;re`, `Ig*nore*` and `apt&#45;get`
//! read as what they render to.

use super::frontmatter::Line;
use crate::forbidden::{self, Finding};
use crate::rules::ForbiddenRule;
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// The visible text of each line of `text` (index 0 is line 1): what a renderer shows of
/// the inline content that starts on that line. `None` where it is the line itself
/// (nothing rendered differently), so the caller scans only what differs.
pub fn lines(text: &str) -> Vec<Option<String>> {
    let text = crate::normalize::strip_bom(text);
    let starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let line_of = |offset: usize| starts.partition_point(|&s| s <= offset).saturating_sub(1);
    let mut visible: Vec<Shown> = vec![Shown::Nothing; starts.len()];
    let mut touched = vec![false; starts.len()];
    let mut in_code_block = 0usize;
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    opts.insert(Options::ENABLE_TABLES);
    for (event, range) in Parser::new_ext(text, opts).into_offset_iter() {
        let line = line_of(range.start);
        match event {
            Event::Start(Tag::CodeBlock(_)) => in_code_block += 1,
            Event::End(TagEnd::CodeBlock) => in_code_block = in_code_block.saturating_sub(1),
            Event::Text(t) if in_code_block == 0 => {
                visible[line].push(text, &t, range.start);
                touched[line] = true;
            }
            Event::Code(t) => {
                visible[line].push(text, &t, range.start);
                touched[line] = true;
            }
            Event::SoftBreak | Event::HardBreak => {}
            // Markup that shows no text of its own still changes the line's reading.
            Event::Start(_) | Event::End(_) => touched[line] = true,
            _ => {}
        }
    }
    visible
        .into_iter()
        .zip(touched)
        .enumerate()
        .map(|(i, (shown, touched))| {
            let end = starts.get(i + 1).map_or(text.len(), |&s| s - 1);
            let source = text[starts[i]..end].trim_end_matches('\r');
            let shown = shown.as_str(text);
            (touched && shown.trim() != source.trim()).then(|| shown.to_owned())
        })
        .collect()
}

/// The text gathered for one line: a stretch of the source while the pieces are the
/// source's own text one after another (the usual line, so nothing is copied), else a
/// copy. Either way the pieces joined, in order.
#[derive(Clone)]
enum Shown {
    Nothing,
    Source(std::ops::Range<usize>),
    Copy(String),
}

impl Shown {
    /// Appends `piece`, which the parser reports at byte `at` of `text`.
    fn push(&mut self, text: &str, piece: &str, at: usize) {
        match self {
            Shown::Nothing if text.get(at..at + piece.len()) == Some(piece) => {
                *self = Shown::Source(at..at + piece.len());
            }
            Shown::Nothing => *self = Shown::Copy(piece.to_owned()),
            Shown::Source(range) if text[range.end..].starts_with(piece) => {
                range.end += piece.len();
            }
            Shown::Source(range) => {
                let mut copy = text[range.clone()].to_owned();
                copy.push_str(piece);
                *self = Shown::Copy(copy);
            }
            Shown::Copy(copy) => copy.push_str(piece),
        }
    }

    fn as_str<'t>(&'t self, text: &'t str) -> &'t str {
        match self {
            Shown::Nothing => "",
            Shown::Source(range) => &text[range.clone()],
            Shown::Copy(copy) => copy,
        }
    }
}

/// The findings of the source lines of `text` (`lines_of_text`, judged by
/// [`forbidden::scan_document`]), and the rules' findings on its rendered text (see
/// [`lines`]) that the source lines do not already have: each visible line that differs
/// from its source is scanned alone and joined with its neighbours, as
/// [`forbidden::scan_document`] scans the source, with the rules `rules_at` gives for its
/// source line. Findings carry the source line the visible text starts on. A large
/// document's visible lines are gathered while its source is judged: gathering them is
/// one pass of the parser over the whole text, which no other thread could share.
pub fn scan_with_source<'r>(
    text: &str,
    lines_of_text: &[Line<'_>],
    rules_at: impl Fn(usize) -> &'r [ForbiddenRule] + Sync,
) -> (Vec<Finding>, Vec<Finding>) {
    let (visible, source) = forbidden::alongside(
        text.len(),
        || lines(text),
        || forbidden::scan_document(lines_of_text, &rules_at),
    );
    let rendered = scan_lines(text, &visible, &source, rules_at);
    (source, rendered)
}

/// The rendered text's findings of [`scan_with_source`], `text`'s visible lines gathered
/// (`visible`).
fn scan_lines<'r>(
    text: &str,
    visible: &[Option<String>],
    source_findings: &[Finding],
    rules_at: impl Fn(usize) -> &'r [ForbiddenRule] + Sync,
) -> Vec<Finding> {
    // No line renders differently: nothing to scan (the loop below would pick none).
    if visible.iter().all(Option::is_none) {
        return Vec::new();
    }
    let source: Vec<Line<'_>> = super::frontmatter::lines(text).collect();
    // Each differing line with its neighbours (their visible text, or their source when
    // that is what is shown), groups separated by a blank line so that no pair joins
    // lines that are not adjacent.
    let shown = |i: usize| -> &str {
        match visible.get(i) {
            Some(Some(v)) => v.as_str(),
            _ => source.get(i).map_or("", |l| l.text),
        }
    };
    let mut picked: Vec<Line<'_>> = Vec::new();
    let mut last: Option<usize> = None;
    for (i, v) in visible.iter().enumerate() {
        if v.is_none() {
            continue;
        }
        for j in i.saturating_sub(1)..=(i + 1).min(visible.len().saturating_sub(1)) {
            if last.is_some_and(|l| j <= l) {
                continue;
            }
            if last.is_some_and(|l| j > l + 1) {
                picked.push(Line {
                    number: 0,
                    text: "",
                });
            }
            picked.push(Line {
                number: j + 1,
                text: shown(j),
            });
            last = Some(j);
        }
    }
    if picked.is_empty() {
        return Vec::new();
    }
    let known: std::collections::HashSet<(&str, usize)> = source_findings
        .iter()
        .map(|f| (f.code.as_str(), f.line))
        .collect();
    let mut reported = std::collections::HashSet::new();
    forbidden::scan_document(&picked, rules_at)
        .into_iter()
        .filter(|f| f.line != 0 && !known.contains(&(f.code.as_str(), f.line)))
        .filter(|f| reported.insert((f.code.clone(), f.line)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> Vec<Option<String>> {
        lines(text)
    }

    #[test]
    fn entities_and_emphasis_render_as_text() {
        let v = shown("# T\n\nIgn&#111;re all\nplain line\nIg*nore* all pre*vious*\n");
        assert_eq!(v[2].as_deref(), Some("Ignore all"));
        assert_eq!(v[3], None, "a plain line renders as itself");
        assert_eq!(v[4].as_deref(), Some("Ignore all previous"));
    }

    #[test]
    fn a_line_gathered_without_copying_reads_the_same() {
        let text = "ab&amp;cd *ef* `g` é\u{301}";
        // (piece, where the parser reports it): source text, text that is not the
        // source's at that place, a piece that continues the source, one off a boundary.
        let cases: &[&[(&str, usize)]] = &[
            &[("ab", 0), ("&", 2), ("cd", 7)],
            &[("ab", 0), ("&amp;cd", 2), (" ", 9)],
            &[("x", 0), ("b", 1)],
            &[("cd", 7), (" ", 9), ("ef", 11)],
            &[("\u{301}", 20), ("", 3)],
            &[("\u{301}", 21)],
        ];
        for pieces in cases {
            let mut shown = Shown::Nothing;
            for (piece, at) in *pieces {
                shown.push(text, piece, *at);
            }
            let joined: String = pieces.iter().map(|(p, _)| *p).collect();
            assert_eq!(shown.as_str(text), joined, "{pieces:?}");
        }
    }

    #[test]
    fn links_keep_their_text_and_code_blocks_are_not_gathered() {
        let v = shown("see [apt&#45;get install](https://x.example/) now\n\n```\na &amp; b\n```\n");
        assert_eq!(v[0].as_deref(), Some("see apt-get install now"));
        assert!(v[3].is_none(), "{v:?}");
    }
}
