//! Every rule of the research-packet schema (`research-packet.schema.md`), each with a
//! stable reason code (listed in the README).
//!
//! `content_hashes` are re-derived over bytes fixed for this project:
//!
//! * the whole file is normalized: a UTF-8 BOM stripped, CRLF → LF, Unicode NFC;
//! * the *body* is everything after the newline that ends the front matter's closing
//!   `---` line; `body_sha256` is the lowercase hex sha256 of its UTF-8 bytes;
//! * `sources_sha256` is that of the Citations section's content: the lines after the
//!   `## Citations` heading to the end of the body, joined with LF, with leading and
//!   trailing blank (whitespace-only) lines removed and no final newline.

use super::fields::{self, labelled};
use runner_core::digest::sha256_hex;
use runner_core::policy::{Policy, RuleTarget};
use runner_core::request::Reason;
use runner_core::request::document::{self, Fields, Reasons, clip, scalar_str, show};
use runner_core::request::frontmatter::{self, Line};
use runner_core::request::sections::{self, Section};
use runner_core::request::yaml::Node;
use std::collections::BTreeSet;

/// The front matter keys of a packet.
pub const KEYS: &[&str] = &[
    "packet_type",
    "schema_version",
    "packet_id",
    "created_utc",
    "source_kind",
    "source_ref",
    "title",
    "authors",
    "published_date",
    "retrieved_utc",
    "license",
    "content_hashes",
];

/// The sections, in order.
pub const SECTIONS: &[&str] = &[
    "Executive Summary",
    "Source Metadata",
    "Extracted Content",
    "Claims and Evidence",
    "Safety Notes",
    "Citations",
];

pub const SOURCE_KINDS: &[&str] = &[
    "arxiv",
    "pubmed",
    "crossref",
    "europepmc",
    "doi",
    "url",
    "manual",
];
pub const LICENSES: &[&str] = &["open", "unknown", "restricted"];

/// Fence info strings that mark data, not code. Any other fenced block is code.
pub const DATA_FENCES: &[&str] = &[
    "",
    "text",
    "plain",
    "plaintext",
    "txt",
    "json",
    "yaml",
    "yml",
    "csv",
    "tsv",
    "markdown",
    "md",
    "bibtex",
    "bib",
    "latex",
    "tex",
    "math",
    "output",
    "log",
    "xml",
];

/// Longest quote, in words.
pub const MAX_QUOTE_WORDS: usize = 60;

/// The hashes a packet's `content_hashes` must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentHashes {
    pub body_sha256: String,
    /// `None` when the body has no `## Citations` heading.
    pub sources_sha256: Option<String>,
}

/// Re-derives the content hashes of a packet's text (see the module docs). `None` when
/// the text has no complete front matter.
pub fn content_hashes(text: &str) -> Option<ContentHashes> {
    let normalized = runner_core::normalize::for_hashing(text);
    let split = frontmatter::split(&normalized).ok()?;
    // Everything after the closing line's newline (nothing when it has none).
    let body = normalized
        .match_indices('\n')
        .nth(split.closing_line - 1)
        .map_or("", |(at, _)| &normalized[at + 1..]);
    let citations = sections::parse(&split.body)
        .sections
        .into_iter()
        .find(|s| s.title == "Citations")
        .map(|s| s.heading_line);
    // The body's lines are the file's lines after the closing line, numbered alike.
    let sources_sha256 = citations.map(|heading| {
        let after: Vec<&str> = split
            .body
            .iter()
            .filter(|l| l.number > heading)
            .map(|l| l.text)
            .collect();
        sha256_hex(sections::trim_blank_lines(&after).join("\n").as_bytes())
    });
    Some(ContentHashes {
        body_sha256: sha256_hex(body.as_bytes()),
        sources_sha256,
    })
}

/// Judges a research packet; every reason found.
pub fn validate(bytes: &[u8], policy: &Policy) -> Vec<Reason> {
    let mut r = Reasons::default();
    let Some(text) = document::utf8(bytes, "document", &mut r) else {
        return r.0;
    };
    fields::scan_forbidden(text, policy.rules_for(RuleTarget::Packet), &mut r);
    let Some((split, root)) = document::front_matter(text, "document", &policy.request, &mut r)
    else {
        return r.0;
    };
    let source_ref = front_matter(&root, text, &mut r);

    let found = fields::section_layout(&split.body, SECTIONS, fields::last_line(text), &mut r);
    code_blocks(&split.body, &mut r);
    fields::rendered_text(&split.body, &mut r);

    let labels = found
        .get("Citations")
        .map(|s| citations(s, &mut r))
        .unwrap_or_default();
    // Every `[Cn]` anywhere in the body must name a citation.
    for line in &split.body {
        for label in citation_labels(line.text) {
            if found.contains_key("Citations") && !labels.contains(&label) {
                r.add(
                    "citations.unknown_label",
                    format!("`[{label}]` names no entry of `## Citations`"),
                    line.number,
                );
            }
        }
    }
    if let Some(s) = found.get("Source Metadata") {
        source_metadata(s, source_ref.as_deref(), &mut r);
    }
    if let Some(s) = found.get("Extracted Content") {
        quotes(s, &mut r);
    }
    if let Some(s) = found.get("Claims and Evidence") {
        claims(s, &mut r);
    }
    if let Some(s) = found.get("Safety Notes") {
        safety_notes(s, &mut r);
    }
    r.0
}

/// Front matter rules; returns `source_ref`.
fn front_matter(root: &Node, text: &str, r: &mut Reasons) -> Option<String> {
    let f = Fields::new(root, KEYS, r);
    f.constant("packet_type", "research_packet", r);
    f.schema_version(r);
    f.id("packet_id", r);
    let created = f.timestamp("created_utc", r);
    f.one_of("source_kind", SOURCE_KINDS, r);
    let source_ref = f.text("source_ref", r).map(|(s, _)| s);
    f.text("title", r);
    if let Some((node, line)) = f.require("authors", r) {
        match node {
            Node::Seq { items, .. } => {
                for item in items {
                    if scalar_str(item).is_none_or(|s| s.trim().is_empty()) {
                        r.add(
                            "front_matter.authors",
                            format!(
                                "each author must be a non-empty string, found {}",
                                show(item)
                            ),
                            item.line(),
                        );
                    }
                }
            }
            other => r.add(
                "front_matter.authors",
                format!("`authors` must be a list of names, found {}", other.kind()),
                line,
            ),
        }
    }
    if let Some((node, line)) = f.get("published_date")
        && let Some(d) = scalar_str(node).filter(|d| !d.trim().is_empty())
    {
        let format = time::macros::format_description!("[year]-[month]-[day]");
        if time::Date::parse(d.trim(), format).is_err() {
            r.add(
                "front_matter.published_date",
                format!("`published_date` must be a date YYYY-MM-DD (or be left out when unknown), found {}", show(node)),
                line,
            );
        }
    }
    let retrieved = f.timestamp("retrieved_utc", r);
    if let (Some((c, _)), Some((rt, line))) = (created, retrieved)
        && rt > c
    {
        r.add(
            "front_matter.timestamp_order",
            "`retrieved_utc` is later than `created_utc`: a packet cannot be made from a source before it was retrieved",
            line,
        );
    }
    f.one_of("license", LICENSES, r);
    if let Some((node, line)) = f.require("content_hashes", r) {
        content_hashes_field(node, line, text, r);
    }
    source_ref
}

fn content_hashes_field(node: &Node, line: usize, text: &str, r: &mut Reasons) {
    let Node::Map { entries, .. } = node else {
        r.add(
            "front_matter.content_hashes",
            format!("`content_hashes` must be a mapping with `body_sha256` and `sources_sha256`, found {}", node.kind()),
            line,
        );
        return;
    };
    document::known_keys(
        entries,
        &["body_sha256", "sources_sha256"],
        "front_matter.unknown_key",
        "`content_hashes`",
        r,
    );
    let derived = content_hashes(text);
    for key in ["body_sha256", "sources_sha256"] {
        let Some(value) = node.get(key) else {
            r.add(
                "front_matter.missing_key",
                format!("required key `content_hashes.{key}` is missing"),
                line,
            );
            continue;
        };
        let Some(declared) = document::sha256_node(value, &format!("content_hashes.{key}"), r)
        else {
            continue;
        };
        let actual = derived.as_ref().and_then(|d| {
            if key == "body_sha256" {
                Some(d.body_sha256.clone())
            } else {
                d.sources_sha256.clone()
            }
        });
        match actual {
            Some(actual) if actual != declared => r.add(
                if key == "body_sha256" {
                    "hash.body_mismatch"
                } else {
                    "hash.sources_mismatch"
                },
                format!(
                    "`content_hashes.{key}` is {declared}, but the packet's {} hashes to {actual}",
                    if key == "body_sha256" {
                        "body"
                    } else {
                        "Citations section"
                    }
                ),
                value.line(),
            ),
            Some(_) => {}
            // No Citations section: the layout rule already says so.
            None => {}
        }
    }
}

/// Fenced blocks: only data fences (`text`, `json`, …) may stand in a packet.
fn code_blocks(lines: &[Line<'_>], r: &mut Reasons) {
    let mut fences = sections::Fences::default();
    for line in lines {
        let was_open = fences.is_open();
        fences.step(line.text);
        if was_open || !fences.is_open() {
            continue; // not an opening fence line
        }
        let Some((_, ticks)) = sections::fence_marker(line.text) else {
            continue;
        };
        let info = line.text.trim_start()[ticks..].trim();
        let lang = info
            .trim_start_matches('{')
            .trim_start_matches('.')
            .split(|c: char| c.is_whitespace() || c == ',' || c == '}')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if !DATA_FENCES.contains(&lang.as_str()) {
            r.add(
                "packet.code_block",
                format!("a code block in `{}` is code meant to run; a packet describes, it does not carry code (data fences: text, json, csv, …)", clip(&lang)),
                line.number,
            );
        }
    }
}

/// The `Cn` labels in `[Cn]` references on a line.
fn citation_labels(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("[C") {
        let after = &rest[i + 2..];
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() && after[digits.len()..].starts_with(']') {
            out.push(format!("C{digits}"));
        }
        rest = &rest[i + 2..];
    }
    out
}

/// `## Citations`: a numbered list of `[Cn] …` entries, C1, C2, … in order. Returns the
/// labels.
fn citations(s: &Section<'_>, r: &mut Reasons) -> BTreeSet<String> {
    let mut labels = BTreeSet::new();
    let mut expected = 1usize;
    for line in s.content_lines() {
        let t = line.text.trim();
        let t = t
            .strip_prefix("- ")
            .or_else(|| {
                let digits = t.chars().take_while(char::is_ascii_digit).count();
                (digits > 0)
                    .then(|| {
                        t[digits..]
                            .strip_prefix(". ")
                            .or_else(|| t[digits..].strip_prefix(") "))
                    })
                    .flatten()
            })
            .unwrap_or(t)
            .trim_start();
        let label = t.strip_prefix("[C").and_then(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            rest[digits.len()..]
                .strip_prefix(']')
                .filter(|_| !digits.is_empty())
                .map(|entry| (digits, entry.trim().to_owned()))
        });
        let Some((digits, entry)) = label else {
            r.add(
                "citations.format",
                "each line of `## Citations` must be an entry `[Cn] Author, Title, Venue, Year. URL/DOI.`",
                line.number,
            );
            continue;
        };
        let label = format!("C{digits}");
        if entry.is_empty() {
            r.add(
                "citations.empty",
                format!("citation `[{label}]` has no text"),
                line.number,
            );
        }
        if !labels.insert(label.clone()) {
            r.add(
                "citations.duplicate_label",
                format!("citation `[{label}]` appears twice"),
                line.number,
            );
            continue;
        }
        if digits != expected.to_string() {
            r.add(
                "citations.label_sequence",
                format!("citation labels are numbered C1, C2, … in order; expected `[C{expected}]`, found `[{label}]`"),
                line.number,
            );
        }
        expected += 1;
    }
    labels
}

/// `## Source Metadata`: the canonical identifier (matching `source_ref`), the retrieval
/// method (API or HTML) and the access constraints observed.
fn source_metadata(s: &Section<'_>, source_ref: Option<&str>, r: &mut Reasons) {
    let facts = labelled(s);
    let identifier = facts.iter().find(|f| {
        ["url", "doi", "pmid", "arxiv", "identifier"]
            .iter()
            .any(|k| f.label.contains(k))
    });
    // Each field: missing is `metadata.missing_field`; then what its value must be.
    let by_label = |label: &str| facts.iter().find(|f| f.label.contains(label));
    let fields = [
        (
            identifier,
            "`## Source Metadata` must give the canonical URL, DOI or PMID (a line such as `- Canonical URL: …`)",
            Want::NonEmpty("the canonical identifier is empty"),
        ),
        (
            by_label("retrieval"),
            "`## Source Metadata` must state the retrieval method (`- Retrieval method: API` or `HTML`)",
            Want::ApiOrHtml,
        ),
        (
            by_label("access constraint"),
            "`## Source Metadata` must state the access constraints observed (`- Access constraints: none observed`)",
            Want::NonEmpty("`Access constraints:` is empty"),
        ),
    ];
    for (found, missing, want) in fields {
        let Some(f) = found else {
            r.add("metadata.missing_field", missing, s.heading_line);
            continue;
        };
        match want {
            Want::NonEmpty(empty) if f.value.is_empty() => {
                r.add("metadata.empty_field", empty, f.line)
            }
            Want::NonEmpty(_) => {}
            Want::ApiOrHtml => {
                let v = f.value.to_ascii_lowercase();
                if !(v.contains("api") || v.contains("html")) {
                    r.add(
                        "metadata.retrieval_method",
                        format!(
                            "the retrieval method must say API or HTML, found `{}`",
                            clip(&f.value)
                        ),
                        f.line,
                    );
                }
            }
        }
    }
    if let Some(source_ref) = source_ref
        && !s.lines.iter().any(|l| l.text.contains(source_ref.trim()))
    {
        r.add(
            "metadata.source_ref_mismatch",
            format!(
                "`## Source Metadata` does not name the front matter's `source_ref` ({})",
                clip(source_ref)
            ),
            s.heading_line,
        );
    }
}

/// What a `## Source Metadata` field's value must be.
enum Want {
    /// Not empty (else `metadata.empty_field` with this message).
    NonEmpty(&'static str),
    /// Says API or HTML (else `metadata.retrieval_method`).
    ApiOrHtml,
}

/// Quotes in `## Extracted Content`: short and attributed.
fn quotes(s: &Section<'_>, r: &mut Reasons) {
    let lines: Vec<&Line<'_>> = s.lines.iter().collect();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].text.trim_start();
        if t.starts_with('>') {
            // A blockquote: its lines, then the line after it.
            let first = lines[i].number;
            let mut words = 0;
            let mut attributed = false;
            while i < lines.len() && lines[i].text.trim_start().starts_with('>') {
                words += lines[i]
                    .text
                    .split_whitespace()
                    .filter(|w| *w != ">")
                    .count();
                attributed |= !citation_labels(lines[i].text).is_empty();
                i += 1;
            }
            if let Some(next) = lines.get(i) {
                attributed |= !citation_labels(next.text).is_empty();
            }
            if words > MAX_QUOTE_WORDS {
                r.add(
                    "extracted.quote_too_long",
                    format!("a quote of {words} words; quotes must be short (at most {MAX_QUOTE_WORDS} words): paraphrase with citations"),
                    first,
                );
            }
            if !attributed {
                r.add(
                    "extracted.quote_unattributed",
                    "a quote without a citation label (`[C1]`) in it or on the line after it",
                    first,
                );
            }
            continue;
        }
        for quote in inline_quotes(lines[i].text) {
            let words = quote.split_whitespace().count();
            if words > MAX_QUOTE_WORDS {
                r.add(
                    "extracted.quote_too_long",
                    format!("a quote of {words} words; quotes must be short (at most {MAX_QUOTE_WORDS} words)"),
                    lines[i].number,
                );
            }
            if words >= 5 && citation_labels(lines[i].text).is_empty() {
                r.add(
                    "extracted.quote_unattributed",
                    "a quote without a citation label (`[C1]`) on its line",
                    lines[i].number,
                );
            }
        }
        i += 1;
    }
}

/// Text between “curly” or "straight" double quotes.
fn inline_quotes(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (open, close) in [('“', '”'), ('"', '"')] {
        let mut rest = line;
        while let Some(a) = rest.find(open) {
            let after = &rest[a + open.len_utf8()..];
            let Some(b) = after.find(close) else { break };
            out.push(&after[..b]);
            rest = &after[b + close.len_utf8()..];
        }
    }
    out
}

/// `## Claims and Evidence`: claim blocks of Claim, Evidence, Confidence, Citation.
fn claims(s: &Section<'_>, r: &mut Reasons) {
    struct Block {
        line: usize,
        fields: Vec<(&'static str, String, usize)>,
    }
    let mut blocks: Vec<Block> = Vec::new();
    for line in s.content_lines() {
        let t = line.text.trim();
        let item = t
            .strip_prefix("- ")
            .or_else(|| t.strip_prefix("* "))
            .unwrap_or(t)
            .trim_start();
        let Some((label, value)) = item.split_once(':') else {
            r.add(
                "claims.stray_text",
                "text in `## Claims and Evidence` outside a claim block (`- Claim:`, `Evidence:`, `Confidence:`, `Citation:`)",
                line.number,
            );
            continue;
        };
        let label = label.replace(['*', '_'], "");
        let field = match label.trim().to_ascii_lowercase().as_str() {
            "claim" => "Claim",
            "evidence" => "Evidence",
            "confidence" => "Confidence",
            "citation" => "Citation",
            _ => {
                r.add(
                    "claims.stray_text",
                    "text in `## Claims and Evidence` outside a claim block (`- Claim:`, `Evidence:`, `Confidence:`, `Citation:`)",
                    line.number,
                );
                continue;
            }
        };
        let value = value.trim().trim_matches('*').trim().to_owned();
        if field == "Claim" {
            blocks.push(Block {
                line: line.number,
                fields: vec![(field, value, line.number)],
            });
            continue;
        }
        match blocks.last_mut() {
            None => r.add(
                "claims.stray_text",
                format!("`{field}:` before the first `- Claim:`"),
                line.number,
            ),
            Some(b) => {
                if let Some((_, _, first)) = b.fields.iter().find(|(f, _, _)| *f == field) {
                    r.add(
                        "claims.duplicate_field",
                        format!("`{field}:` appears twice in the claim of line {} (first on line {first})", b.line),
                        line.number,
                    );
                } else {
                    b.fields.push((field, value, line.number));
                }
            }
        }
    }
    if blocks.is_empty() {
        r.add(
            "claims.none",
            "`## Claims and Evidence` holds no claim block (`- Claim: …` with Evidence, Confidence, Citation)",
            s.heading_line,
        );
    }
    for b in &blocks {
        for field in ["Claim", "Evidence", "Confidence", "Citation"] {
            match b.fields.iter().find(|(f, _, _)| *f == field) {
                None => r.add(
                    "claims.missing_field",
                    format!("the claim of line {} has no `{field}:`", b.line),
                    b.line,
                ),
                Some((_, v, line)) if v.is_empty() => {
                    r.add("claims.empty_field", format!("`{field}:` is empty"), *line)
                }
                Some((_, v, line)) => match field {
                    "Confidence"
                        if !["low", "medium", "high"]
                            .contains(&v.to_ascii_lowercase().as_str()) =>
                    {
                        r.add(
                            "claims.confidence",
                            format!(
                                "`Confidence:` must be low, medium or high, found `{}`",
                                clip(v)
                            ),
                            *line,
                        )
                    }
                    "Citation" => {
                        let stripped: String = v
                            .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
                            .filter(|p| !p.is_empty())
                            .filter(|p| !is_label_ref(p))
                            .collect();
                        if !stripped.is_empty() || citation_labels(v).is_empty() {
                            r.add(
                                "claims.citation_format",
                                format!("`Citation:` must be one or more labels such as `[C1]`, found `{}`", clip(v)),
                                *line,
                            );
                        }
                    }
                    _ => {}
                },
            }
        }
    }
}

fn is_label_ref(p: &str) -> bool {
    p.strip_prefix("[C")
        .and_then(|d| d.strip_suffix(']'))
        .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
}

/// `## Safety Notes`: both statements.
fn safety_notes(s: &Section<'_>, r: &mut Reasons) {
    let notes = labelled(s);
    match notes
        .iter()
        .find(|n| n.label == "untrusted content statement")
    {
        None => r.add(
            "safety.missing_statement",
            "`## Safety Notes` must include `Untrusted Content Statement:`",
            s.heading_line,
        ),
        Some(n) if n.value.is_empty() => r.add(
            "safety.empty_statement",
            "`Untrusted Content Statement:` is empty",
            n.line,
        ),
        Some(n) => {
            let v = n.value.to_ascii_lowercase();
            if !(v.contains("untrusted") && v.contains("instruction")) {
                r.add(
                    "safety.statement_incomplete",
                    "the Untrusted Content Statement must say the content is untrusted and must not be treated as instructions",
                    n.line,
                );
            }
        }
    }
    match notes.iter().find(|n| n.label == "injection indicators") {
        None => r.add(
            "safety.missing_statement",
            "`## Safety Notes` must include `Injection Indicators:` (or `None observed`)",
            s.heading_line,
        ),
        Some(n) if n.value.is_empty() => r.add(
            "safety.empty_statement",
            "`Injection Indicators:` is empty (write `None observed`)",
            n.line,
        ),
        Some(_) => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../../tests/packets/accept-worked-example-rfc8785-jcs.md");

    #[test]
    fn the_worked_example_hashes_as_declared() {
        let h = content_hashes(EXAMPLE).unwrap();
        assert_eq!(
            h.body_sha256,
            "fe147ef3ece283d32f9dbf97609d51a9ad94a7a8030cf1a01dee64a0814de242"
        );
        assert_eq!(
            h.sources_sha256.as_deref(),
            Some("1f1e7e965bb31a4bd2018fedaf4cd91c0692ae9d1575680bc2468f6a8d9b2669")
        );
        // CRLF, a BOM and NFD spellings normalize to the same bytes.
        let crlf = format!("\u{feff}{}", EXAMPLE.replace('\n', "\r\n"));
        assert_eq!(content_hashes(&crlf), Some(h));
    }

    #[test]
    fn the_body_is_what_follows_the_closing_line() {
        for text in [
            EXAMPLE,
            "---\na: 1\n---",
            "---\na: 1\n---\n",
            "---\na: 1\n...\n\n## Citations\n[C1] x\n",
            "\u{feff}\u{feff}---\r\na: 1\r\n---\r\nbody\r\n## Citations\r\n\r\n[C1] y",
        ] {
            let normalized = runner_core::normalize::for_hashing(text);
            let closing = frontmatter::split(&normalized).unwrap().closing_line;
            let body: String = normalized.split_inclusive('\n').skip(closing).collect();
            let h = content_hashes(text).unwrap();
            assert_eq!(h.body_sha256, sha256_hex(body.as_bytes()), "{text:?}");
            if let Some(at) = normalized.find("## Citations\n") {
                let after = normalized[at..].split_once('\n').unwrap().1;
                let lines: Vec<&str> = after.split('\n').collect();
                let want = sections::trim_blank_lines(&lines).join("\n");
                assert_eq!(h.sources_sha256, Some(sha256_hex(want.as_bytes())));
            }
        }
    }

    #[test]
    fn the_worked_example_is_accepted() {
        let reasons = validate(EXAMPLE.as_bytes(), &Policy::builtin());
        assert!(reasons.is_empty(), "{reasons:#?}");
    }

    /// Found by fuzzing (fuzz_packet, fuzz/regressions/fuzz_packet/): the normalization
    /// the README fixes (BOM, CRLF → LF, NFC, one pass) is not idempotent on `\r\r\n`,
    /// so hashing the text and hashing its normalized text differ. That is the rule as
    /// specified, not a bug to change (another implementation does the same single
    /// pass); what matters is that such a packet is refused, so its hashes never gate.
    #[test]
    fn a_cr_before_crlf_is_refused_whatever_it_hashes_to() {
        let text = "---\npacket_type: research_packet\n---\n## Citations\nx\r\r\n";
        let once = runner_core::normalize::for_hashing(text);
        assert_ne!(runner_core::normalize::for_hashing(&once), once);
        assert_ne!(content_hashes(text), content_hashes(&once));
        let reasons = validate(text.as_bytes(), &Policy::builtin());
        assert!(
            reasons
                .iter()
                .any(|r| r.code == "text.control_character" && r.line == Some(5)),
            "{reasons:#?}"
        );
    }

    #[test]
    fn labels_and_quotes() {
        assert_eq!(
            citation_labels("see [C1] and [C12], not [C] or [Cx]"),
            vec!["C1", "C12"]
        );
        assert_eq!(inline_quotes("a “b c” d \"e\""), vec!["b c", "e"]);
        assert!(is_label_ref("[C3]"));
        assert!(!is_label_ref("C3"));
    }
}
