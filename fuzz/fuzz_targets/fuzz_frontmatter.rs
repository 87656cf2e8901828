//! The front-matter splitter: never panics, and every line it hands out is the line of
//! the original file with that number (so every reason points at the right line).
#![no_main]

use libfuzzer_sys::fuzz_target;
use runner::request::frontmatter::{SplitError, lines, split};

fn is_delimiter(line: &str, closing: bool) -> bool {
    let t = line.trim_end_matches([' ', '\t']);
    t == "---" || (closing && t == "...")
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();

    // The file's own lines, counted independently of `lines`: split at LF after one
    // leading BOM, a CR before the LF dropped.
    let original: Vec<&str> = text
        .strip_prefix('\u{feff}')
        .unwrap_or(text)
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let numbered: Vec<_> = lines(text).collect();
    assert_eq!(numbered.len(), original.len());
    for (i, line) in numbered.iter().enumerate() {
        assert_eq!(line.number, i + 1);
        assert_eq!(line.text, original[i], "line {}", i + 1);
    }

    match split(text) {
        Ok(s) => {
            assert!(is_delimiter(original[0], false));
            assert_eq!(s.front_matter_first_line, 2);
            assert!(s.closing_line >= 2 && s.closing_line <= original.len());
            assert!(is_delimiter(original[s.closing_line - 1], true));
            // The closing delimiter is the first one after the opening line.
            assert!(
                original[1..s.closing_line - 1]
                    .iter()
                    .all(|l| !is_delimiter(l, true))
            );
            assert_eq!(s.front_matter, original[1..s.closing_line - 1].join("\n"));
            // The body is every line after the closing one, each with its own number.
            assert_eq!(s.body.len(), original.len() - s.closing_line);
            for (i, line) in s.body.iter().enumerate() {
                assert_eq!(line.number, s.closing_line + 1 + i);
                assert_eq!(line.text, original[line.number - 1]);
            }
        }
        Err(SplitError::Missing) => assert!(!is_delimiter(original[0], false)),
        Err(SplitError::Unterminated) => {
            assert!(is_delimiter(original[0], false));
            assert!(original[1..].iter().all(|l| !is_delimiter(l, true)));
        }
    }
});
