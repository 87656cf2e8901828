//! Splits a markdown document into its YAML front matter and its body, keeping the
//! line numbers of the original file. A UTF-8 BOM and CRLF line endings are tolerated.

/// One line of the original file, without its line ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// 1-based line number in the original file.
    pub number: usize,
    pub text: &'a str,
}

/// A document split at its front matter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split<'a> {
    /// The YAML text between the delimiters, lines joined with LF.
    pub front_matter: String,
    /// File line of the front matter's first line.
    pub front_matter_first_line: usize,
    /// Line of the closing delimiter.
    pub closing_line: usize,
    /// The body lines after the closing delimiter.
    pub body: Vec<Line<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitError {
    /// The first line is not `---`.
    Missing,
    /// No closing `---` (or `...`) line.
    Unterminated,
}

/// The text of each line of `text` (none when there is no text), for quoting the line a
/// reason names.
pub fn line_texts(text: Option<&str>) -> Vec<&str> {
    text.map(|t| lines(t).map(|l| l.text).collect())
        .unwrap_or_default()
}

/// Lines of `text` (after a BOM), CR stripped from CRLF endings.
pub fn lines(text: &str) -> impl Iterator<Item = Line<'_>> {
    crate::normalize::strip_bom(text)
        .split('\n')
        .enumerate()
        .map(|(i, raw)| Line {
            number: i + 1,
            text: raw.strip_suffix('\r').unwrap_or(raw),
        })
}

fn is_delimiter(line: &str, closing: bool) -> bool {
    let trimmed = line.trim_end_matches([' ', '\t']);
    trimmed == "---" || (closing && trimmed == "...")
}

/// Splits `text`. The first line must be `---`; the front matter ends at the next
/// line that is `---` or `...`.
pub fn split(text: &str) -> Result<Split<'_>, SplitError> {
    let mut all = lines(text);
    match all.next() {
        Some(first) if is_delimiter(first.text, false) => {}
        _ => return Err(SplitError::Missing),
    }
    let mut yaml = Vec::new();
    for line in all.by_ref() {
        if is_delimiter(line.text, true) {
            return Ok(Split {
                front_matter: yaml
                    .iter()
                    .map(|l: &Line<'_>| l.text)
                    .collect::<Vec<_>>()
                    .join("\n"),
                front_matter_first_line: 2,
                closing_line: line.number,
                body: all.collect(),
            });
        }
        yaml.push(line);
    }
    Err(SplitError::Unterminated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn splits_with_bom_and_crlf() {
        let s = split("\u{feff}---\r\na: 1\r\n---\r\n# T\r\n## Command\r\n").unwrap();
        assert_eq!(s.front_matter, "a: 1");
        assert_eq!(s.closing_line, 3);
        assert_eq!(
            s.body[0],
            Line {
                number: 4,
                text: "# T"
            }
        );
        assert_eq!(
            s.body[1],
            Line {
                number: 5,
                text: "## Command"
            }
        );
    }

    #[test]
    fn errors() {
        assert_eq!(split("a: 1\n---\n"), Err(SplitError::Missing));
        assert_eq!(split("---\na: 1\n"), Err(SplitError::Unterminated));
        assert_eq!(split(""), Err(SplitError::Missing));
        assert_eq!(split("---\na: 1\n...\nbody").unwrap().body[0].text, "body");
    }

    proptest! {
        /// The splitter never panics, and every body line it returns carries the
        /// number of the line it came from in the original text.
        #[test]
        fn never_panics_and_keeps_line_numbers(text in "(---|\u{feff}|\r\n|\n|[a-z: ]{0,8}|\\.\\.\\.){0,40}") {
            let numbered: Vec<String> = lines(&text).map(|l| l.text.to_owned()).collect();
            if let Ok(s) = split(&text) {
                for line in &s.body {
                    prop_assert_eq!(&numbered[line.number - 1], line.text);
                }
                prop_assert!(s.closing_line >= 2);
                let fm_lines = if s.front_matter.is_empty() && s.closing_line == 2 { 0 } else { s.front_matter.split('\n').count() };
                prop_assert_eq!(fm_lines, s.closing_line - 2);
            }
        }

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
            let _ = split(&text);
        }
    }
}
