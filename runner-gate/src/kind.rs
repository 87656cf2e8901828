//! Which schema a document claims: detected from its own text, never from its file name.
//!
//! 1. A document whose first character (after a BOM and whitespace) is `{` is JSON: with
//!    a top-level `schema` key it is a governed packet (the validator then checks the
//!    value); without one its kind is unknown.
//! 2. Otherwise it is markdown, and its front matter names its kind by key:
//!    `request_type` → tool request, `result_type` → tool result, `packet_type` →
//!    research packet. The key decides, not its value (`request_type: research_packet`
//!    is a tool request with a wrong `request_type`, and the request validator says so).
//!    The keys are found line by line at the start of a line, so a document whose YAML
//!    does not load, or whose front matter is unterminated or missing its opening `---`,
//!    still gets its kind and every reason its validator finds. Two different keys: the
//!    kind is ambiguous.
//! 3. A markdown document with no kind key is placed by its `## ` section titles, when
//!    they belong to exactly one schema (a request with an empty front matter is still a
//!    request).
//! 4. Anything else is of unknown kind, and rejected.

use super::DocKind;
use runner_core::request::sections;

/// The outcome of detection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detected {
    Kind(DocKind),
    /// Several kind keys: the message names them.
    Ambiguous(String),
    /// No kind: the message says why.
    Unknown(String),
}

/// How many bytes detection looks at (front matter lives at the top).
pub const PREFIX_BYTES: usize = 64 * 1024;

/// Detects the kind of a document from (a prefix of) its bytes.
pub fn detect(bytes: &[u8]) -> Detected {
    let prefix = &bytes[..bytes.len().min(PREFIX_BYTES)];
    let text = String::from_utf8_lossy(prefix);
    let text = runner_core::normalize::strip_bom(&text);
    if text.trim_start().starts_with('{') {
        return detect_json(bytes);
    }
    let mut keys: Vec<(&'static str, DocKind)> = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        // The front matter ends at its closing delimiter; without front matter, the kind
        // keys may only stand before the first heading.
        if i > 0 && (line.trim_end() == "---" || line.trim_end() == "...") {
            break;
        }
        if line.starts_with('#') {
            break;
        }
        for (key, kind) in [
            ("request_type", DocKind::ToolRequest),
            ("result_type", DocKind::ToolResult),
            ("packet_type", DocKind::ResearchPacket),
        ] {
            let unquoted = line.strip_prefix(key);
            let quoted = line
                .strip_prefix('"')
                .and_then(|l| l.strip_prefix(key))
                .and_then(|l| l.strip_prefix('"'))
                .or_else(|| {
                    line.strip_prefix('\'')
                        .and_then(|l| l.strip_prefix(key))
                        .and_then(|l| l.strip_prefix('\''))
                });
            if unquoted
                .or(quoted)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
                && !keys.iter().any(|(k, _)| *k == key)
            {
                keys.push((key, kind));
            }
        }
    }
    match keys.as_slice() {
        [(_, kind)] => return Detected::Kind(*kind),
        [] => {}
        many => {
            return Detected::Ambiguous(format!(
                "the front matter names more than one kind: {}",
                many.iter()
                    .map(|(k, _)| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    by_sections(text)
}

fn detect_json(bytes: &[u8]) -> Detected {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Detected::Unknown("a JSON-looking document that is not valid UTF-8".into());
    };
    let text = runner_core::normalize::strip_bom(text);
    match super::json::parse(text) {
        Ok(value) => {
            if value.get("schema").is_some() {
                Detected::Kind(DocKind::GovernedPacket)
            } else {
                Detected::Unknown(
                    "a JSON document without a `schema` key (a governed packet has `schema: \"b7-governed-packet/v1\"`)".into(),
                )
            }
        }
        // Broken JSON that still names a governed schema is judged as a governed packet,
        // so its reasons say what is broken.
        Err(e) if text.contains("\"schema\"") => {
            let _ = e;
            Detected::Kind(DocKind::GovernedPacket)
        }
        Err(e) => Detected::Unknown(format!(
            "a JSON-looking document that does not parse ({e}) and names no `schema`"
        )),
    }
}

fn by_sections(text: &str) -> Detected {
    const REQUEST: &[&str] = &[
        "command",
        "input files",
        "code",
        "inputs (json)",
        "output expectations",
        "risk assessment",
    ];
    const RESULT: &[&str] = &["provenance", "stdout", "stderr", "outputs"];
    const PACKET: &[&str] = &[
        "executive summary",
        "source metadata",
        "extracted content",
        "claims and evidence",
        "citations",
    ];
    let lines: Vec<_> = runner_core::request::frontmatter::lines(text).collect();
    let body = sections::parse(&lines);
    let mut kinds: Vec<DocKind> = Vec::new();
    for s in &body.sections {
        let title = s.title.to_ascii_lowercase();
        for (titles, kind) in [
            (REQUEST, DocKind::ToolRequest),
            (RESULT, DocKind::ToolResult),
            (PACKET, DocKind::ResearchPacket),
        ] {
            if titles.contains(&title.as_str()) && !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
    }
    match kinds.as_slice() {
        [kind] => Detected::Kind(*kind),
        [] => Detected::Unknown(
            "no kind: the front matter has no `request_type`, `result_type` or `packet_type`, and the document is not JSON with a `schema`".into(),
        ),
        _ => Detected::Ambiguous(
            "no kind key in the front matter, and the sections belong to more than one schema"
                .into(),
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn detection_table() {
        // Each text and the kind it is detected as.
        let cases: &[(&str, DocKind)] = &[
            (
                "---\nrequest_type: tool_request\n---\n",
                DocKind::ToolRequest,
            ),
            (
                "\u{feff}---\r\nresult_type: x\r\n---\r\n",
                DocKind::ToolResult,
            ),
            (
                "---\n\"packet_type\" : research_packet\n---\n",
                DocKind::ResearchPacket,
            ),
            (
                "request_type: tool_request\nschema_version: 1\n",
                DocKind::ToolRequest,
            ),
            ("---\nrequest_type: [\n---\n", DocKind::ToolRequest),
            (
                "---\nrequest_type: research_packet\n---\n",
                DocKind::ToolRequest,
            ),
            ("---\n---\n## Command\nx\n", DocKind::ToolRequest),
            ("---\n---\n## Stdout\nx\n", DocKind::ToolResult),
            ("  {\"schema\": 1}", DocKind::GovernedPacket),
            ("{\"schema\": \"b7\", ", DocKind::GovernedPacket),
        ];
        for (text, want) in cases {
            assert_eq!(detect(text.as_bytes()), Detected::Kind(*want), "{text:?}");
        }
        for text in [
            "---\nrequest_type: a\nresult_type: b\n---\n",
            "## Command\nx\n## Citations\nx\n",
        ] {
            assert!(
                matches!(detect(text.as_bytes()), Detected::Ambiguous(_)),
                "{text:?}"
            );
        }
        for text in [
            "",
            "hello\n",
            "{\"a\": 1}",
            "{nope",
            "---\ntitle: x\n---\n# x\n",
            // A kind key after the front matter is body text, not a kind.
            "---\ntitle: x\n---\nresult_type: tool_result\n",
            "# Title\nrequest_type: tool_request\n",
        ] {
            assert!(
                matches!(detect(text.as_bytes()), Detected::Unknown(_)),
                "{text:?}"
            );
        }
    }
}
