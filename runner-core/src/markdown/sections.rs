//! Parses a markdown body into its `## ` sections. Headings inside fenced code blocks
//! are content, not headings, so a fence cannot hide or fake a section.

use super::frontmatter::Line;

/// One `## ` section: its title (trimmed) and the lines under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section<'a> {
    pub title: String,
    pub heading_line: usize,
    pub lines: Vec<Line<'a>>,
}

impl Section<'_> {
    /// The lines that are not blank.
    pub fn content_lines(&self) -> impl Iterator<Item = &Line<'_>> {
        self.lines.iter().filter(|l| !l.text.trim().is_empty())
    }

    /// The section's text, lines joined with LF, trimmed of blank lines at both ends.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self.lines.iter().map(|l| l.text).collect();
        trim_blank_lines(&texts).join("\n")
    }
}

/// `texts` without the blank (whitespace-only) lines at both ends.
pub fn trim_blank_lines<'s, 'a>(texts: &'s [&'a str]) -> &'s [&'a str] {
    let start = texts
        .iter()
        .position(|t| !t.trim().is_empty())
        .unwrap_or(texts.len());
    let end = texts
        .iter()
        .rposition(|t| !t.trim().is_empty())
        .map_or(start, |i| i + 1);
    &texts[start..end]
}

/// The body split into sections; lines before the first heading are the preamble.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body<'a> {
    pub preamble: Vec<Line<'a>>,
    pub sections: Vec<Section<'a>>,
}

/// The opening of a code fence: its character and length, when `line` opens or closes one.
pub fn fence_marker(line: &str) -> Option<(char, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let c = rest.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = rest.chars().take_while(|&x| x == c).count();
    // CommonMark: a backtick fence's info string may not contain a backtick ("```a`b"
    // is a paragraph with a code span, not a fence); what a renderer does not fence,
    // neither may we.
    if n < 3 || (c == '`' && rest[n..].contains('`')) {
        return None;
    }
    Some((c, n))
}

/// Follows the code fences of a run of lines the way a CommonMark renderer does for
/// top-level fences: [`Fences::step`] says whether a line is fenced content or a fence
/// line (`true`) or ordinary markdown (`false`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Fences {
    open: Option<(char, usize)>,
}

impl Fences {
    pub fn step(&mut self, text: &str) -> bool {
        match (self.open, fence_marker(text)) {
            (None, Some(open)) => {
                self.open = Some(open);
                true
            }
            (Some((c, n)), Some((c2, n2)))
                if c == c2 && n2 >= n && text.trim_start()[n2..].trim().is_empty() =>
            {
                self.open = None;
                true
            }
            (open, _) => open.is_some(),
        }
    }

    /// A fence is open: the next line is fenced content unless it closes the fence.
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }
}

/// Splits `lines` into sections at `## ` headings outside code fences.
pub fn parse<'a>(lines: &[Line<'a>]) -> Body<'a> {
    let mut body = Body {
        preamble: Vec::new(),
        sections: Vec::new(),
    };
    let mut fences = Fences::default();
    for line in lines {
        let fenced = fences.step(line.text);
        let is_heading = !fenced && line.text.starts_with("## ");
        if is_heading {
            body.sections.push(Section {
                title: line.text[3..].trim().to_owned(),
                heading_line: line.number,
                lines: Vec::new(),
            });
        } else if let Some(section) = body.sections.last_mut() {
            section.lines.push(*line);
        } else {
            body.preamble.push(*line);
        }
    }
    body
}

/// Strips one enclosing code fence from a section's text, returning the inner text and
/// the fence's info string (`python`, `json`). Text without a fence comes back as is.
pub fn unfence(text: &str) -> (String, Option<String>) {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() >= 2
        && let (Some((c, n)), Some((c2, n2))) =
            (fence_marker(lines[0]), fence_marker(lines[lines.len() - 1]))
    {
        let closing_is_bare = lines[lines.len() - 1].trim_start()[n2..].trim().is_empty();
        if c == c2 && n2 >= n && closing_is_bare {
            let info = lines[0].trim_start()[n..].trim().to_owned();
            return (
                lines[1..lines.len() - 1].join("\n"),
                (!info.is_empty()).then_some(info),
            );
        }
    }
    (text.to_owned(), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::markdown::frontmatter::lines;

    #[test]
    fn headings_inside_fences_are_content() {
        let text = "# Title\n## Code\n```python\n## not a heading\nprint(1)\n```\n## Risk Assessment\nRisk level: low\n";
        let all: Vec<_> = lines(text).collect();
        let body = parse(&all);
        assert_eq!(body.preamble.len(), 1);
        assert_eq!(body.sections.len(), 2);
        assert_eq!(body.sections[0].title, "Code");
        assert_eq!(body.sections[0].heading_line, 2);
        assert!(body.sections[0].text().contains("## not a heading"));
        assert_eq!(body.sections[1].title, "Risk Assessment");
    }

    #[test]
    fn unfence_table() {
        assert_eq!(
            unfence("```python\nprint(1)\n```"),
            ("print(1)".into(), Some("python".into()))
        );
        assert_eq!(unfence("~~~~\nx\n~~~~"), ("x".into(), None));
        assert_eq!(unfence("print(1)"), ("print(1)".into(), None));
        assert_eq!(unfence("```\nx\n```json"), ("```\nx\n```json".into(), None));
    }
}
