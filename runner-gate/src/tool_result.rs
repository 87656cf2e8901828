//! Every rule of the tool-result schema (`tool-result.schema.md`), each with a stable
//! reason code (listed in the README).
//!
//! Front matter: exactly the schema's keys with their types. Body: the six sections in
//! order; Provenance names the command, the backend and the limits; Outputs lists
//! every artifact with its hash; each excerpt has at most `output.excerpt_lines` lines
//! and says when it was cut; Safety Notes makes its three statements. Forbidden content
//! uses the policy's result rules (the ones the result writer withholds excerpt lines
//! with), except that the Provenance's record of the exact command executed is not
//! judged as "a shell command meant to be run": it records what ran.
//!
//! With the result's directory beside it, every artifact and both streams are re-hashed
//! ([`super::artifacts`]) and each excerpt is compared with the stored stream. Without
//! it, that is a note: the document alone was judged.

use super::ArtifactsAt;
use super::artifacts::{self, Checked, Declared, DeclaredStream, StoredStreams};
use super::fields::{self, labelled};
use runner_core::policy::{ForbiddenRule, Policy, ResultText, RuleTarget};
use runner_core::request::Reason;
use runner_core::request::document::{self, Fields, Reasons, plain_scalar, scalar_str, show};
use runner_core::request::forbidden;
use runner_core::request::frontmatter::{self, Line};
use runner_core::request::sections::{self, Section};
use runner_core::request::yaml::Node;
use std::collections::HashSet;

/// The front matter keys of a result.
pub const KEYS: &[&str] = &[
    "result_type",
    "schema_version",
    "result_id",
    "created_utc",
    "request_id",
    "executor",
    "backend",
    "exit_code",
    "runtime_sec",
    "network_used",
    "network_destinations",
    "artifacts",
    "stdout_sha256",
    "stderr_sha256",
];

/// The sections, in order.
pub const SECTIONS: &[&str] = &[
    "Summary",
    "Provenance",
    "Outputs",
    "Stdout",
    "Stderr",
    "Safety Notes",
];

/// The rule the Provenance's command record is exempt from.
pub const COMMAND_RULE: &str = "forbidden.runnable_command";

/// Judges a result. Returns the reasons and the notes (what was not checked).
pub fn validate(
    bytes: &[u8],
    artifacts_at: &ArtifactsAt<'_>,
    policy: &Policy,
) -> (Vec<Reason>, Vec<Reason>) {
    let mut r = Reasons::default();
    let mut notes = Reasons::default();
    let Some(text) = document::utf8(bytes, "document", &mut r) else {
        return (r.0, notes.0);
    };
    let mut findings = Reasons::default();
    scan_result(text, policy.rules_for(RuleTarget::Result), &mut findings);
    let Some((split, root)) = document::front_matter(text, "document", &policy.request, &mut r)
    else {
        // The record of what ran is spared even when the front matter does not load.
        let command_line = runner_core::request::frontmatter::split(text)
            .ok()
            .and_then(|split| provenance_command_line(&sections::parse(&split.body)));
        spare_command_record(&mut findings, command_line);
        r.0.append(&mut findings.0);
        return (r.0, notes.0);
    };
    let fm = front_matter(&root, &mut r);

    fields::rendered_text(&split.body, &mut r);
    rendered_constructs(&split.body, &mut r);
    let found = fields::section_layout(&split.body, SECTIONS, fields::last_line(text), &mut r);

    // Provenance: the three facts; its command line is the record of what ran.
    let command_line = found
        .get("Provenance")
        .and_then(|s| provenance_facts(s, &mut r));

    if let Some(s) = found.get("Outputs") {
        outputs(s, &fm.artifacts, &mut r);
    }

    let stored = stored_streams(artifacts_at, &fm, policy, &mut r, &mut notes);

    for (title, stream, declared, bytes) in [
        (
            "Stdout",
            "stdout",
            fm.stdout.as_ref(),
            stored.stdout.as_deref(),
        ),
        (
            "Stderr",
            "stderr",
            fm.stderr.as_ref(),
            stored.stderr.as_deref(),
        ),
    ] {
        if let Some(s) = found.get(title) {
            excerpt(s, stream, declared, bytes, policy, &mut r);
        }
    }

    if let Some(s) = found.get("Safety Notes") {
        safety_notes(s, &fm, &mut r);
    }

    spare_command_record(&mut findings, command_line);
    r.0.append(&mut findings.0);
    (r.0, notes.0)
}

/// The three facts `## Provenance` must state; the line of its command, the record of
/// what ran, when it states one.
fn provenance_facts(s: &Section, r: &mut Reasons) -> Option<usize> {
    let facts = labelled(s);
    let mut command_line = None;
    for (what, needle) in [
        ("the exact command executed", "command"),
        ("the backend identity", "backend"),
        ("the resource limits applied", "limit"),
    ] {
        match facts.iter().find(|f| f.label.contains(needle)) {
            None => r.add(
                "provenance.missing_field",
                format!("`## Provenance` must state {what} (a line such as `- Exact command executed: …`)"),
                s.heading_line,
            ),
            Some(f) if f.value.is_empty() => r.add(
                "provenance.empty_field",
                format!("`## Provenance` names {what} without a value"),
                f.line,
            ),
            Some(f) => {
                if needle == "command" {
                    command_line = Some(f.line);
                }
            }
        }
    }
    command_line
}

/// The streams stored in the result's artifact directory, after checking it against
/// the front matter; a note when there is no directory to check.
fn stored_streams(
    artifacts_at: &ArtifactsAt<'_>,
    fm: &FrontMatter,
    policy: &Policy,
    r: &mut Reasons,
    notes: &mut Reasons,
) -> StoredStreams {
    // The directory that holds the artifact directory, opened here when it was named by
    // a path (the operator's), and the artifact directory's name in it.
    let opened;
    let at = match artifacts_at {
        ArtifactsAt::Nowhere => None,
        ArtifactsAt::In(dir, name) => Some((Ok(*dir), name.as_os_str())),
        ArtifactsAt::Dir(path) => match runner_sandbox::host::open_parent(path) {
            Ok(parent) => {
                opened = parent;
                Some((Ok(&opened.0), opened.1.as_os_str()))
            }
            Err(e) => Some((Err(e), path.file_name().unwrap_or_default())),
        },
    };
    match (at, fm.complete) {
        (Some(at), true) => {
            let name = at.1.to_string_lossy().into_owned();
            match artifacts::check(
                at,
                &fm.artifacts,
                fm.stdout.as_ref(),
                fm.stderr.as_ref(),
                policy.output.out_max_files.saturating_add(16),
                policy
                    .output
                    .stdout_max_bytes
                    .max(policy.output.stderr_max_bytes),
                r,
            ) {
                Checked::Absent => {
                    notes.add(
                        "artifacts.not_checked",
                        format!(
                            "no artifact directory `{name}/` beside the result: artifact and stream hashes were not re-derived"
                        ),
                        None,
                    );
                    StoredStreams::default()
                }
                Checked::Present(streams) => streams,
            }
        }
        (Some(_), false) => StoredStreams::default(),
        (None, _) => {
            notes.add(
                "artifacts.not_checked",
                "the result was judged alone: artifact and stream hashes were not re-derived",
                None,
            );
            StoredStreams::default()
        }
    }
}

/// The forbidden-content scan of a result. Every line is judged, as written and as it
/// renders, by the result rules that judge all of a result. Then the text the runner
/// did not write is judged by every result rule as the guest wrote it, the writer's
/// `\u{…}` escapes read back: the lines inside the Stdout and Stderr excerpt fences
/// (each pair of adjacent lines joined too), and the code spans of Summary, Outputs and
/// Safety Notes (`/out` names, quoted findings, the request's purpose). Of that pass only
/// `forbidden.*` findings count: a control or invisible character shown as an escape
/// is the writer's business, as it is when the writer withholds excerpt lines. The
/// runner's own lines (front matter, Provenance, the stream records with their sha256
/// digests) are never judged by a `result_text = "guest"` rule.
fn scan_result(text: &str, rules: &[ForbiddenRule], r: &mut Reasons) {
    let whole: Vec<ForbiddenRule> = rules
        .iter()
        .filter(|rule| rule.result_text == ResultText::All)
        .cloned()
        .collect();
    fields::scan_forbidden(text, &whole, r);
    let Ok(split) = frontmatter::split(text) else {
        return;
    };
    let mut seen: HashSet<(String, Option<usize>)> =
        r.0.iter().map(|x| (x.code.clone(), x.line)).collect();
    let mut add = |f: forbidden::Finding| {
        if f.code.starts_with("forbidden.") && seen.insert((f.code.clone(), Some(f.line))) {
            r.add(&f.code, f.message, f.line);
        }
    };
    for s in &sections::parse(&split.body).sections {
        match s.title.as_str() {
            "Stdout" | "Stderr" => {
                let (fenced, _) = fields::fenced_and_prose(s);
                // The writer indents every excerpt line by two spaces (its own text).
                let texts: Vec<_> = fenced
                    .iter()
                    .map(|l| document::unescaped(l.text.strip_prefix("  ").unwrap_or(l.text)))
                    .collect();
                let lines: Vec<Line<'_>> = fenced
                    .iter()
                    .zip(&texts)
                    .map(|(l, t)| Line {
                        number: l.number,
                        text: t,
                    })
                    .collect();
                forbidden::scan_document(&lines, |_| rules)
                    .into_iter()
                    .for_each(&mut add);
            }
            "Summary" | "Outputs" | "Safety Notes" => {
                for line in &s.lines {
                    for span in document::code_span_texts(line.text) {
                        forbidden::scan_joined(&document::unescaped(span), line.number, rules)
                            .into_iter()
                            .for_each(&mut add);
                    }
                }
            }
            _ => {}
        }
    }
}

/// What a CommonMark renderer makes of the body that the runner never writes outside
/// code: an image (a viewer fetches it, and its URL can carry data out), a link or an
/// autolink, raw HTML. Each is rejected with its line (raw HTML once per line, with
/// [`fields::rendered_text`]'s reason when that already named it). The writer quotes
/// every text it did not write as a code span, where none of these can form.
fn rendered_constructs(body: &[runner_core::request::frontmatter::Line<'_>], r: &mut Reasons) {
    use pulldown_cmark::{Event, LinkType, Parser, Tag};
    let mut text = String::new();
    let mut starts = Vec::with_capacity(body.len());
    for line in body {
        starts.push((text.len(), line.number));
        text.push_str(line.text);
        text.push('\n');
    }
    let line_at = |offset: usize| {
        let i = starts.partition_point(|&(start, _)| start <= offset);
        starts.get(i.wrapping_sub(1)).map(|&(_, number)| number)
    };
    let html_lines: Vec<Option<usize>> =
        r.0.iter()
            .filter(|x| x.code == "body.raw_html")
            .map(|x| x.line)
            .collect();
    let mut seen: Vec<(&str, Option<usize>)> = Vec::new();
    for (event, range) in Parser::new(&text).into_offset_iter() {
        let found = match event {
            Event::Start(Tag::Image { .. }) => Some((
                "body.renders_image",
                "an image, which a viewer fetches from its URL",
            )),
            Event::Start(Tag::Link {
                link_type: LinkType::Autolink | LinkType::Email,
                ..
            }) => Some(("body.renders_autolink", "an autolink")),
            Event::Start(Tag::Link { .. }) => Some(("body.renders_link", "a link")),
            Event::Html(_) | Event::InlineHtml(_) => Some(("body.renders_html", "raw HTML")),
            _ => None,
        };
        let Some((code, what)) = found else { continue };
        let line = line_at(range.start);
        if (code == "body.renders_html" && html_lines.contains(&line))
            || seen.contains(&(code, line))
        {
            continue;
        }
        seen.push((code, line));
        r.add(
            code,
            format!("this line renders as {what} outside code; a result quotes every text the runner did not write as a code span, so it never holds one"),
            line,
        );
    }
}

/// The line of `- Exact command executed: …` (the first labelled line of Provenance
/// whose label names the command).
fn provenance_command_line(body: &sections::Body<'_>) -> Option<usize> {
    let s = body.sections.iter().find(|s| s.title == "Provenance")?;
    labelled(s)
        .into_iter()
        .find(|f| f.label.contains("command") && !f.value.is_empty())
        .map(|f| f.line)
}

/// Drops the [`COMMAND_RULE`] finding on the Provenance's record of what ran (and only
/// that rule, on only that line).
fn spare_command_record(findings: &mut Reasons, command_line: Option<usize>) {
    findings
        .0
        .retain(|f| !(f.code == COMMAND_RULE && command_line.is_some() && f.line == command_line));
}

/// The front matter as read.
struct FrontMatter {
    artifacts: Vec<Declared>,
    stdout: Option<DeclaredStream>,
    stderr: Option<DeclaredStream>,
    network_used: Option<String>,
    destinations: Vec<String>,
    /// Every hash-bearing field was read (so re-deriving is meaningful).
    complete: bool,
}

fn front_matter(root: &Node, r: &mut Reasons) -> FrontMatter {
    let f = Fields::new(root, KEYS, r);
    f.constant("result_type", "tool_result", r);
    f.schema_version(r);
    f.id("result_id", r);
    f.timestamp("created_utc", r);
    f.id("request_id", r);
    f.text("executor", r);
    f.one_of("backend", &["ERA", "monty"], r);
    if let Some((node, line)) = f.require("exit_code", r)
        && plain_scalar(node)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .is_none()
    {
        r.add(
            "front_matter.type",
            format!("`exit_code` must be an integer, found {}", show(node)),
            line,
        );
    }
    if let Some((node, line)) = f.require("runtime_sec", r) {
        match plain_scalar(node).and_then(|v| v.trim().parse::<f64>().ok()) {
            Some(v) if v.is_finite() && v >= 0.0 => {}
            _ => r.add(
                "front_matter.type",
                format!(
                    "`runtime_sec` must be a non-negative number, found {}",
                    show(node)
                ),
                line,
            ),
        }
    }
    let network_used = f
        .one_of("network_used", &["none", "allowlist"], r)
        .map(|(v, _)| v);
    let destinations = destinations(&f, network_used.as_deref(), r);
    let (artifacts, artifacts_ok) = match f.require("artifacts", r) {
        None => (Vec::new(), false),
        Some((node, _)) => declared_artifacts(node, r),
    };
    let stream = |key: &str, r: &mut Reasons| {
        f.sha256(key, r)
            .map(|(sha256, line)| DeclaredStream { sha256, line })
    };
    let stdout = stream("stdout_sha256", r);
    let stderr = stream("stderr_sha256", r);
    let complete = artifacts_ok && stdout.is_some() && stderr.is_some();
    FrontMatter {
        artifacts,
        stdout,
        stderr,
        network_used,
        destinations,
        complete,
    }
}

fn destinations(f: &Fields<'_>, network_used: Option<&str>, r: &mut Reasons) -> Vec<String> {
    let entry = f.get("network_destinations");
    let (items, line) = match entry {
        None => (Vec::new(), f.map_line),
        Some((Node::Seq { items, .. }, line)) => (items.iter().collect::<Vec<_>>(), line),
        Some((node, line)) => {
            r.add(
                "front_matter.network_destinations",
                format!(
                    "`network_destinations` must be a list of `host:port`, found {}",
                    node.kind()
                ),
                line,
            );
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for item in items {
        match scalar_str(item) {
            Some(d) if is_host_port(&d) => out.push(d),
            _ => r.add(
                "front_matter.network_destinations",
                format!(
                    "a network destination must be `host:port`, found {}",
                    show(item)
                ),
                item.line(),
            ),
        }
    }
    match network_used {
        Some("none") if !out.is_empty() => r.add(
            "front_matter.network_destinations",
            "`network_used: none` but `network_destinations` lists destinations",
            line,
        ),
        Some("allowlist") if out.is_empty() => r.add(
            "front_matter.network_destinations",
            "`network_used: allowlist` must list its `network_destinations`",
            line,
        ),
        _ => {}
    }
    out
}

fn is_host_port(s: &str) -> bool {
    let Some((host, port)) = s.rsplit_once(':') else {
        return false;
    };
    let host_ok = if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        !inner.is_empty()
            && inner
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
    } else {
        !host.is_empty()
            && host.len() <= 253
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    };
    host_ok && port.parse::<u16>().is_ok_and(|p| p > 0)
}

/// The `artifacts` list: `{path, sha256}` each, paths relative to /out, safe, unique.
fn declared_artifacts(node: &Node, r: &mut Reasons) -> (Vec<Declared>, bool) {
    let items = match node {
        Node::Seq { items, .. } => items,
        other => {
            r.add(
                "front_matter.artifacts",
                format!(
                    "`artifacts` must be a list of {{path, sha256}}, found {}",
                    other.kind()
                ),
                other.line(),
            );
            return (Vec::new(), false);
        }
    };
    let mut ok = true;
    let mut out: Vec<Declared> = Vec::new();
    for item in items {
        let Node::Map { entries, line } = item else {
            r.add(
                "front_matter.artifacts",
                format!(
                    "each artifact must be a mapping with `path` and `sha256`, found {}",
                    item.kind()
                ),
                item.line(),
            );
            ok = false;
            continue;
        };
        if !document::known_keys(
            entries,
            &["path", "sha256"],
            "front_matter.artifacts",
            "an artifact",
            r,
        ) {
            ok = false;
        }
        let path = item.get("path").and_then(scalar_str);
        let path_line = item.get("path").map_or(*line, Node::line);
        let Some(path) = path else {
            r.add("front_matter.artifacts", "an artifact has no `path`", *line);
            ok = false;
            continue;
        };
        let safe = !path.starts_with('/')
            && path.len() <= 1024
            && path.split('/').all(runner_core::result::is_safe_component);
        if !safe {
            r.add(
                "front_matter.artifact_path",
                format!("artifact path `{}` must be relative to /out, made of safe names (no `..`, no empty parts)", document::clip(&path)),
                path_line,
            );
            ok = false;
            continue;
        }
        let sha = match item.get("sha256") {
            None => {
                r.add(
                    "front_matter.hash_format",
                    format!("artifact `{path}` has no sha256"),
                    *line,
                );
                ok = false;
                continue;
            }
            Some(n) => match document::sha256_node(n, &format!("sha256 of artifact {path}"), r) {
                Some(s) => s,
                None => {
                    ok = false;
                    continue;
                }
            },
        };
        if out.iter().any(|a| a.path == path) {
            r.add(
                "front_matter.artifacts",
                format!("artifact `{path}` is declared twice"),
                path_line,
            );
            ok = false;
            continue;
        }
        out.push(Declared {
            path,
            sha256: sha,
            line: path_line,
        });
    }
    (out, ok)
}

/// `## Outputs`: every declared artifact listed as `/out/<path> sha256: <hex>`, and
/// nothing else.
fn outputs(s: &Section<'_>, declared: &[Declared], r: &mut Reasons) {
    let mut listed: Vec<document::Listed> = Vec::new();
    for line in s.content_lines() {
        let tokens: Vec<&str> = line
            .text
            .split_whitespace()
            .map(|t| t.trim_matches(|c| matches!(c, '`' | '*' | ',' | ';')))
            .collect();
        let path = tokens.iter().find_map(|t| t.strip_prefix("/out/"));
        let sha = document::listed_sha256(&tokens);
        if let (Some(path), Some(sha)) = (path, sha) {
            listed.push((path.to_owned(), Some(sha.to_owned()), line.number));
        }
    }
    let words = document::ListingWords {
        not_listed: ("outputs.not_listed", &|path| {
            format!("artifact `{path}` is not listed in `## Outputs` as `/out/{path} sha256: …`")
        }),
        hash_missing: None,
        hash_mismatch: ("outputs.hash_mismatch", &|path, listed, declared| {
            format!(
                "`## Outputs` gives sha256 {listed} for `/out/{path}`, the front matter {declared}"
            )
        }),
        undeclared: ("outputs.undeclared", &|path| {
            format!(
                "`## Outputs` lists `/out/{path}`, which the front matter `artifacts` does not declare"
            )
        }),
    };
    document::cross_check_listing(
        s,
        &listed,
        declared
            .iter()
            .map(|a| (a.path.as_str(), a.sha256.as_str())),
        &|path| declared.iter().any(|a| a.path == path),
        &words,
        r,
    );
}

/// An excerpt section: at most `excerpt_lines` lines in its fence, a truncation note
/// exactly when the stream is longer, and — when the stream is stored — the very lines
/// the writer would show (or withhold).
fn excerpt(
    s: &Section<'_>,
    stream: &str,
    declared: Option<&DeclaredStream>,
    stored: Option<&[u8]>,
    policy: &Policy,
    r: &mut Reasons,
) {
    let max = policy.output.excerpt_lines;
    let (fenced, prose) = fields::fenced_and_prose(s);
    let note = prose
        .iter()
        .find(|l| l.text.to_ascii_lowercase().contains("truncated"))
        .map(|l| l.number);
    if fenced.len() > max {
        r.add(
            "excerpt.too_long",
            format!("the {stream} excerpt has {} lines; at most {max} may be quoted (store the full text and say it was truncated)", fenced.len()),
            fenced.get(max).map_or(s.heading_line, |l| l.number),
        );
    }
    if let Some(declared) = declared {
        for line in &prose {
            // A hash the prose names: `sha256 <hex>`, `sha256: <hex>`, `sha256=<hex>`.
            let named = line.text.match_indices("sha256").filter_map(|(i, _)| {
                let rest = line.text[i + 6..].trim_start_matches([':', '=', ' ']);
                let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
                (hex.len() == 64).then_some(hex)
            });
            for token in named {
                if token != declared.sha256 {
                    r.add(
                        "excerpt.hash_mismatch",
                        format!("`## {}` names sha256 {token}; the front matter's {stream}_sha256 is {}", s.title, declared.sha256),
                        line.number,
                    );
                }
            }
        }
    }
    let Some(bytes) = stored else {
        return;
    };
    let (expected, total) = shown_lines(bytes, max);
    if total > max && note.is_none() {
        r.add(
            "excerpt.truncation_note_missing",
            format!("the stored {stream} has {total} lines, more than the {max} quoted, but `## {}` does not say it was truncated", s.title),
            s.heading_line,
        );
    }
    if total <= max
        && let Some(line) = note
    {
        r.add(
            "excerpt.truncation_note_false",
            format!("`## {}` says the excerpt was truncated, but the stored {stream} has only {total} lines", s.title),
            line,
        );
    }
    if fenced.len() != expected.len() {
        r.add(
            "excerpt.mismatch",
            format!(
                "the {stream} excerpt has {} lines; the stored {stream} gives {}",
                fenced.len(),
                expected.len()
            ),
            fenced.first().map_or(s.heading_line, |l| l.number),
        );
        return;
    }
    let mut mismatches = 0;
    for (i, (line, want)) in fenced.iter().zip(&expected).enumerate() {
        let got = line.text.strip_prefix("  ").unwrap_or(line.text);
        let withheld =
            got.starts_with(&format!("[line {} withheld: ", i + 1)) && got.ends_with(']');
        // A withheld line hides text; it cannot add any, so any rule set may have
        // withheld it (results written under an older policy stay valid).
        if got == want || withheld {
            continue;
        }
        mismatches += 1;
        if mismatches <= 5 {
            r.add(
                "excerpt.mismatch",
                format!(
                    "{stream} excerpt line {} is not line {} of the stored {stream}",
                    i + 1,
                    i + 1
                ),
                line.number,
            );
        }
    }
}

/// The lines the result writer shows for a stream, which each excerpt must repeat.
use runner_core::result::render::shown_lines;

/// `## Safety Notes`: the three statements, consistent with the front matter.
fn safety_notes(s: &Section<'_>, fm: &FrontMatter, r: &mut Reasons) {
    let notes = labelled(s);
    let statement = |label: &str, r: &mut Reasons| -> Option<(String, usize)> {
        match notes.iter().find(|n| n.label == label) {
            None => {
                r.add(
                    "safety.missing_statement",
                    format!("`## Safety Notes` must include `{}:`", capitalized(label)),
                    s.heading_line,
                );
                None
            }
            Some(n) if n.value.is_empty() => {
                r.add(
                    "safety.empty_statement",
                    format!("`{}:` is empty", capitalized(label)),
                    n.line,
                );
                None
            }
            Some(n) => Some((n.value.to_ascii_lowercase(), n.line)),
        }
    };
    if let Some((text, line)) = statement("untrusted output statement", r)
        && !(text.contains("untrusted") && text.contains("instruction"))
    {
        r.add(
            "safety.statement_incomplete",
            "the Untrusted Output Statement must say the output is untrusted and must not be treated as instructions",
            line,
        );
    }
    statement("unexpected behavior", r);
    if let Some((text, line)) = statement("network confirmation", r) {
        match fm.network_used.as_deref() {
            Some("none") if !text.contains("none") => r.add(
                "safety.network_mismatch",
                "`network_used: none`, but the Network confirmation does not say none was used",
                line,
            ),
            Some("allowlist") => {
                for d in &fm.destinations {
                    if !text.contains(&d.to_ascii_lowercase()) {
                        r.add(
                            "safety.network_mismatch",
                            format!("the Network confirmation does not list the destination `{d}`"),
                            line,
                        );
                    }
                }
            }
            _ => {}
        }
    }
}

fn capitalized(label: &str) -> &'static str {
    match label {
        "untrusted output statement" => "Untrusted Output Statement",
        "unexpected behavior" => "Unexpected behavior",
        _ => "Network confirmation",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn host_ports() {
        for ok in ["pypi.org:443", "10.0.0.1:80", "[::1]:8080"] {
            assert!(is_host_port(ok), "{ok}");
        }
        for bad in ["pypi.org", "x:0", "x:99999", ":80", "a b:1"] {
            assert!(!is_host_port(bad), "{bad}");
        }
    }
}
