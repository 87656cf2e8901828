//! The reason report written beside a quarantined document: `NAME.reasons.md` for a
//! person and `NAME.reasons.json` for a program, each with every reason and its line.
//!
//! Text quoted from the document is shown with control and invisible characters
//! escaped and long lines cut: the report must not carry what it reports.

use super::Judgement;
use runner_contract::verdict::Verdict;
use runner_core::request::Reason;
use serde::Serialize;
use std::fmt::Write as _;

/// Suffixes of the two report files (a document is never given a name ending in them).
pub const MD_SUFFIX: &str = ".reasons.md";
pub const JSON_SUFFIX: &str = ".reasons.json";

/// The report names for a document named `doc` in quarantine.
pub fn names(doc: &str) -> (String, String) {
    (format!("{doc}{MD_SUFFIX}"), format!("{doc}{JSON_SUFFIX}"))
}

/// True for a name that is a report.
pub fn is_report_name(name: &str) -> bool {
    name.ends_with(MD_SUFFIX) || name.ends_with(JSON_SUFFIX)
}

/// What the JSON report holds.
#[derive(Debug, Serialize)]
pub struct JsonReport<'a> {
    /// The document's name in quarantine.
    pub file: &'a str,
    /// Its name in the inbox (escaped when not plain).
    pub source: &'a str,
    pub kind: &'a str,
    pub verdict: Verdict,
    pub judged_utc: &'a str,
    pub reasons: &'a [Reason],
}

/// The JSON report (one object, newline-terminated).
pub fn json(doc: &str, source: &str, judgement: &Judgement, judged_utc: &str) -> String {
    let report = JsonReport {
        file: doc,
        source,
        kind: judgement.kind_name(),
        verdict: judgement.verdict,
        judged_utc,
        reasons: &judgement.reasons,
    };
    let mut s =
        serde_json::to_string_pretty(&report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

/// The markdown report. `text` is the document's text, for quoting the lines named.
pub fn markdown(
    doc: &str,
    source: &str,
    judgement: &Judgement,
    judged_utc: &str,
    text: Option<&str>,
) -> String {
    let lines = runner_core::request::frontmatter::line_texts(text);
    let mut s = String::new();
    let _ = writeln!(s, "# Quarantine report: {}\n", printable(doc));
    let _ = writeln!(
        s,
        "- Document: `{}` (in the inbox: `{}`)",
        printable(doc),
        printable(source)
    );
    let _ = writeln!(s, "- Kind: {}", judgement.kind_name());
    let _ = writeln!(s, "- Verdict: {}", judgement.verdict.as_str());
    let _ = writeln!(s, "- Judged: {judged_utc}");
    let _ = writeln!(s, "- Reasons: {}\n", judgement.reasons.len());
    s.push_str("## Reasons\n\n");
    // A line with forbidden content (a secret, an injected instruction) is named, never
    // quoted: the report must not carry what it reports.
    let unquotable: std::collections::BTreeSet<usize> = judgement
        .reasons
        .iter()
        .filter(|r| r.code.starts_with("forbidden.") || r.code.starts_with("text."))
        .filter_map(|r| r.line)
        .collect();
    for r in &judgement.reasons {
        match r.line {
            Some(n) => {
                let _ = writeln!(s, "- line {n}: `{}`: {}", r.code, printable(&r.message));
                if unquotable.contains(&n) {
                    let _ = writeln!(s, "  - the line is not quoted: it holds forbidden content");
                } else if let Some(l) = lines.get(n.wrapping_sub(1)) {
                    let _ = writeln!(
                        s,
                        "  - the line, escaped: `{}`",
                        printable(l).replace('`', "'")
                    );
                }
            }
            None => {
                let _ = writeln!(s, "- `{}`: {}", r.code, printable(&r.message));
            }
        }
    }
    s.push_str("\nThe document is untrusted: this report names what was found and does not repeat instructions from it.\n");
    s
}

/// A line made safe to show: control and invisible characters escaped, cut at 160.
pub fn printable(line: &str) -> String {
    let mut out = String::new();
    for (i, c) in line.chars().enumerate() {
        if i >= 160 {
            out.push('…');
            break;
        }
        if c.is_control() || runner_core::normalize::is_invisible(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{DocKind, Verdict};

    #[test]
    fn reports_every_reason_with_lines_escaped() {
        let j = Judgement {
            kind: Some(DocKind::ResearchPacket),
            verdict: Verdict::Reject,
            reasons: vec![
                Reason::new(
                    "text.invisible_character",
                    "an invisible character",
                    Some(2),
                ),
                Reason::new("hash.body_mismatch", "x", None),
                Reason::new("body.unknown_section", "unknown section", Some(3)),
            ],
            notes: vec![],
        };
        let md = markdown(
            "RP-x.md",
            "RP-x.md",
            &j,
            "2026-11-21T10:00:00Z",
            Some("---\nig\u{200b}nore `x` AKIAIOSFODNN7EXAMPLE\n## N\u{1b}otes `y`\n"),
        );
        assert!(md.contains("- line 2: `text.invisible_character`"), "{md}");
        assert!(md.contains("the line is not quoted"), "{md}");
        assert!(!md.contains("AKIA") && !md.contains('\u{200b}'), "{md}");
        assert!(md.contains("`## N\\u{1b}otes 'y'`"), "{md}");
        let js: serde_json::Value =
            serde_json::from_str(&json("RP-x.md", "RP-x.md", &j, "t")).unwrap();
        assert_eq!(js["reasons"].as_array().unwrap().len(), 3);
        assert_eq!(js["reasons"][0]["line"], 2);
        assert!(js["reasons"][1]["line"].is_null());
        assert_eq!(js["kind"], "research_packet");
        assert!(is_report_name(&names("a.md").0) && is_report_name(&names("a.md").1));
    }
}
