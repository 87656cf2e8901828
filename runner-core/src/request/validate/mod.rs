//! Every rule of the tool-request schema, each with a stable reason code (listed in
//! the README). The validator collects every reason it finds instead of stopping at
//! the first, and it is the only code that can build an [`ApprovedRequest`].

use super::BackendKind;
use super::command;
use super::document::{self, Fields, Reasons, is_id, plain_scalar, scalar_str, show};
use super::forbidden;
use super::frontmatter::{self, Line};
use super::rendered;
use super::sections::{self, Section};
use super::yaml::{self, Node};
use super::{ApprovedRequest, DeclaredInput, Reason, RequestLimits, RiskAssessment, Work};
use crate::digest::{is_sha256_hex, sha256_hex};
use crate::normalize;
use crate::policy::Policy;
use crate::rules::RuleTarget;
use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

/// Front matter keys the schema defines.
pub const KNOWN_KEYS: &[&str] = &[
    "request_type",
    "schema_version",
    "request_id",
    "created_utc",
    "requested_by",
    "approved_by",
    "approved_utc",
    "purpose",
    "backend",
    "language",
    "network",
    "cpu_limit",
    "memory_limit_mb",
    "time_limit_sec",
    "inputs",
];

/// Languages that are shells: a request in one of them is refused outright.
const SHELL_LANGUAGES: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "csh",
    "tcsh",
    "fish",
    "ash",
    "shell",
    "powershell",
    "pwsh",
    "cmd",
    "bat",
    "batch",
];

const ERA_SECTIONS: &[&str] = &[
    "Command",
    "Input Files",
    "Output Expectations",
    "Risk Assessment",
];
const MONTY_SECTIONS: &[&str] = &["Code", "Output Expectations", "Risk Assessment"];
const MONTY_OPTIONAL: &[&str] = &["Inputs (JSON)"];

/// Judges a request. `bytes` is the file as read; nothing else is touched.
pub fn validate(bytes: &[u8], policy: &Policy) -> Result<ApprovedRequest, Vec<Reason>> {
    let mut r = Reasons::default();
    if bytes.len() as u64 > policy.request.max_bytes {
        r.add(
            "request.too_large",
            format!(
                "the request is {} bytes; the policy allows at most {}",
                bytes.len(),
                policy.request.max_bytes
            ),
            None,
        );
        return Err(r.0);
    }
    let Some(text) = document::utf8(bytes, "request", &mut r) else {
        return Err(r.0);
    };
    // What is judged, signed, hashed into the lock and run is one text: the file after
    // the hashing normalization (BOM stripped, CRLF → LF, Unicode NFC). A signature
    // covers the normalized text, so parsing the raw bytes would let an NFD rewrite of a
    // signed request (invisible to the approver) run different code under the same
    // signature and the same lock hash. Normalizing changes no line count.
    let normalized = normalize::for_hashing(text);
    let text = normalized.as_str();
    let mut seen = Seen::default();
    let all_lines: Vec<Line<'_>> = frontmatter::lines(text).collect();
    let request_rules = policy.rules_for(RuleTarget::Request);
    let Some((split, root)) = document::front_matter(text, "request", &policy.request, &mut r)
    else {
        for f in forbidden::scan_document(&all_lines, |_| request_rules) {
            seen.report(&mut r, f);
        }
        return Err(r.0);
    };
    let fm = front_matter(&root, policy, &mut r);
    let body = sections::parse(&split.body);
    // A monty request's code is judged by the code rules: a program that names a host
    // path or a `password=` keyword reaches nothing (every path outside /in and /out
    // fails at run time); the rest of the request by the request rules.
    let code_lines: HashSet<usize> = if fm.backend == BackendKind::Monty && fm.backend_known {
        body.sections
            .iter()
            .filter(|s| s.title == "Code")
            .flat_map(|s| s.lines.iter().map(|l| l.number))
            .collect()
    } else {
        HashSet::new()
    };
    let code_rules = policy.rules_for(RuleTarget::Code);
    let rules_at = |line: usize| {
        if code_lines.contains(&line) {
            code_rules
        } else {
            request_rules
        }
    };
    // The lines as written, then as the approver sees them rendered (entities decoded,
    // emphasis and link syntax gone).
    let found = forbidden::scan_document(&all_lines, rules_at);
    let rendered = crate::markdown::visible::scan(text, &found, rules_at);
    for f in found.into_iter().chain(rendered) {
        seen.report(&mut r, f);
    }
    // The YAML values as decoded: escapes and folded lines can hide what the raw
    // lines show innocently.
    let mut scalars = Vec::new();
    collect_scalars(&root, &mut scalars);
    for (value, line) in scalars {
        for f in forbidden::scan_joined(&value, line, request_rules) {
            seen.report(&mut r, f);
        }
    }
    for m in rendered::scan(&split.body) {
        r.add(m.code, m.message, m.line);
    }
    let checked = body_rules(&body, &fm, policy, &mut r);
    document::text_outside_section(&body, &mut r);
    if !r.0.is_empty() {
        return Err(r.0);
    }
    // Every field was checked above; a missing one would have produced a reason.
    let (
        Some(request_id),
        Some(created_utc),
        Some(requested_by),
        Some(approved_by),
        Some(approved_utc),
        Some(purpose),
        Some(language),
        Some(limits),
        Some((work, outputs, risk)),
    ) = (
        fm.request_id,
        fm.created_utc,
        fm.requested_by,
        fm.approved_by,
        fm.approved_utc,
        fm.purpose,
        fm.language,
        fm.limits,
        checked,
    )
    else {
        r.add(
            "internal.incomplete",
            "the validator accepted a request with a field missing (a bug)",
            None,
        );
        return Err(r.0);
    };
    Ok(ApprovedRequest {
        request_id,
        created_utc,
        requested_by,
        approved_by,
        approved_utc,
        purpose,
        backend: fm.backend,
        language,
        limits,
        inputs: fm.inputs,
        work,
        outputs,
        risk,
        network_allowlist: fm.network_allowlist,
        bytes_sha256: sha256_hex(bytes),
        normalized_sha256: sha256_hex(text.as_bytes()),
    })
}

/// Forbidden-content findings already reported, so one problem on one line is
/// reported once whichever view found it.
#[derive(Default)]
struct Seen(std::collections::HashSet<(String, usize)>);

impl Seen {
    fn report(&mut self, r: &mut Reasons, f: forbidden::Finding) {
        if self.0.insert((f.code.clone(), f.line)) {
            r.add(&f.code, f.message, f.line);
        }
    }
}

/// Every key and scalar value with its line.
fn collect_scalars(node: &Node, out: &mut Vec<(String, usize)>) {
    match node {
        Node::Scalar { value, line, .. } => out.push((value.clone(), *line)),
        Node::Seq { items, .. } => items.iter().for_each(|i| collect_scalars(i, out)),
        Node::Map { entries, .. } => {
            for e in entries {
                out.push((e.key.clone(), e.key_line));
                collect_scalars(&e.value, out);
            }
        }
    }
}

/// The front matter fields, each `None` when missing or invalid (a reason was added).
struct FrontMatter {
    request_id: Option<String>,
    created_utc: Option<String>,
    requested_by: Option<String>,
    approved_by: Option<String>,
    approved_utc: Option<String>,
    purpose: Option<String>,
    backend: BackendKind,
    backend_known: bool,
    language: Option<String>,
    limits: Option<RequestLimits>,
    inputs: Vec<DeclaredInput>,
    /// Line of the `inputs` key, or of the closing delimiter when absent.
    inputs_line: Option<usize>,
    /// Every path the front matter names, valid or not (for the section cross-check).
    declared_paths: Vec<String>,
    /// `network: allowlist`, granted by the policy's `[network] allow`.
    network_allowlist: bool,
}

fn front_matter(root: &Node, policy: &Policy, r: &mut Reasons) -> FrontMatter {
    let f = Fields::new(root, KNOWN_KEYS, r);
    f.constant("request_type", "tool_request", r);
    f.schema_version(r);
    let request_id = f.text("request_id", r).filter(|(id, line)| {
        let ok = is_id(id);
        if !ok {
            r.add(
                "front_matter.request_id",
                "`request_id` must be 1–128 characters of A–Z, a–z, 0–9, `.`, `_`, `-`, starting with a letter or digit (it names the result file)",
                *line,
            );
        }
        ok
    });
    let created = f.text("created_utc", r);
    let created_at = created
        .as_ref()
        .and_then(|(s, line)| document::timestamp("created_utc", s, *line, r));
    let requested_by = f.text_coded("requested_by", Some("approval.requested_by"), r);
    let approved_by = f.text_coded("approved_by", Some("approval.approved_by"), r);
    let approved = f.text_coded("approved_utc", Some("approval.approved_utc"), r);
    let approved_at = approved
        .as_ref()
        .and_then(|(s, line)| document::timestamp("approved_utc", s, *line, r));
    if let (Some(c), Some(a), Some((_, line))) = (created_at, approved_at, approved.as_ref())
        && a < c
    {
        r.add("approval.before_creation", "`approved_utc` is earlier than `created_utc`: a request cannot be approved before it exists", *line);
    }
    let purpose = f.text("purpose", r);

    let (backend, backend_known) = match f.get("backend") {
        None => (BackendKind::Era, true),
        Some((node, line)) => match scalar_str(node).as_deref() {
            Some("ERA") => (BackendKind::Era, true),
            Some("monty") => (BackendKind::Monty, true),
            _ => {
                r.add(
                    "front_matter.backend",
                    format!("`backend` must be `ERA` or `monty`, found {}", show(node)),
                    line,
                );
                (BackendKind::Era, false)
            }
        },
    };

    let language = f.text("language", r).and_then(|(lang, line)| {
        let lower = lang.trim().to_ascii_lowercase();
        if SHELL_LANGUAGES.contains(&lower.as_str()) {
            r.add(
                "language.shell",
                format!("`language: {lang}` is a shell; shell requests are refused"),
                line,
            );
            None
        } else if policy.guest_for_language(&lower).is_none() {
            let known = policy.languages();
            r.add(
                "language.unknown",
                format!(
                    "`language: {lang}` selects no registered guest (known: {})",
                    known.join(", ")
                ),
                line,
            );
            None
        } else {
            if let Some(env) = policy.environment_for_language(&lower)
                && backend == BackendKind::Monty
            {
                r.add(
                    "language.environment_on_monty",
                    format!(
                        "`language: {lang}` selects the package environment `{}` (guest `{}`), but backend monty has no packages; use `backend: ERA`",
                        env.name, env.guest
                    ),
                    line,
                );
            }
            Some(lang)
        }
    });

    let mut network_allowlist = false;
    if let Some((node, line)) = f.require("network", r) {
        match scalar_str(node).as_deref() {
            Some("none") => {}
            Some("allowlist") if policy.network.enabled() => network_allowlist = true,
            Some("allowlist") => r.add(
                "network.allowlist_unsupported",
                "`network: allowlist` cannot be served: the policy's `[network] allow` lists no origin, so this runner grants no network at all",
                line,
            ),
            _ => r.add("front_matter.network", format!("`network` must be `none` or `allowlist`, found {}", show(node)), line),
        }
    }

    let limits = limits(r, &f, policy);
    let mut declared_paths = Vec::new();
    let (inputs, inputs_line) = match f.get("inputs") {
        None => (Vec::new(), None),
        Some((node, line)) => (declared_inputs(r, node, &mut declared_paths), Some(line)),
    };
    FrontMatter {
        request_id: request_id.map(|(s, _)| s),
        created_utc: created_at.and(created.map(|(s, _)| s)),
        requested_by: requested_by.map(|(s, _)| s),
        approved_by: approved_by.map(|(s, _)| s),
        approved_utc: approved_at.and(approved.map(|(s, _)| s)),
        purpose: purpose.map(|(s, _)| s),
        backend,
        backend_known,
        language,
        limits,
        inputs,
        inputs_line,
        declared_paths,
        network_allowlist,
    }
}

fn limits(r: &mut Reasons, f: &Fields<'_>, policy: &Policy) -> Option<RequestLimits> {
    let mut int_limit = |key: &str, max: u64, unit: &str| -> Option<u64> {
        let (node, line) = f.require(key, r)?;
        let value = plain_scalar(node).and_then(|v| v.trim().parse::<i128>().ok());
        match value {
            None => {
                r.add(
                    "front_matter.type",
                    format!("`{key}` must be an integer, found {}", show(node)),
                    line,
                );
                None
            }
            Some(v) if v <= 0 => {
                r.add(
                    "limits.not_positive",
                    format!("`{key}` must be positive, found {v}"),
                    line,
                );
                None
            }
            Some(v) if v > i128::from(max) => {
                r.add(
                    "limits.over_maximum",
                    format!("`{key}` is {v} {unit}; the policy allows at most {max}"),
                    line,
                );
                None
            }
            Some(v) => u64::try_from(v).ok(),
        }
    };
    let memory = int_limit("memory_limit_mb", policy.limits.max_memory_limit_mb, "MB");
    let time = int_limit("time_limit_sec", policy.limits.max_time_limit_sec, "s");
    let cpu = match f.require("cpu_limit", r) {
        None => None,
        Some((node, line)) => match scalar_str(node).as_deref().and_then(parse_cpu_seconds) {
            None => {
                r.add(
                    "limits.cpu_limit_format",
                    format!(
                        "`cpu_limit` must be CPU seconds, such as \"30\" or \"2.5s\", found {}",
                        show(node)
                    ),
                    line,
                );
                None
            }
            Some(v) if v <= 0.0 => {
                r.add(
                    "limits.not_positive",
                    format!("`cpu_limit` must be positive, found {v}"),
                    line,
                );
                None
            }
            Some(v) if v > policy.limits.max_cpu_limit_sec as f64 => {
                r.add(
                    "limits.over_maximum",
                    format!(
                        "`cpu_limit` is {v} CPU seconds; the policy allows at most {}",
                        policy.limits.max_cpu_limit_sec
                    ),
                    line,
                );
                None
            }
            Some(v) => scalar_str(node).map(|text| (text, v)),
        },
    };
    match (memory, time, cpu) {
        (Some(memory_limit_mb), Some(time_limit_sec), Some((cpu_limit, cpu_limit_sec))) => {
            Some(RequestLimits {
                memory_limit_mb,
                time_limit_sec,
                cpu_limit,
                cpu_limit_sec,
            })
        }
        _ => None,
    }
}

/// `30`, `30s`, `2.5`, `2.5 sec`, `10 seconds` → CPU seconds.
pub fn parse_cpu_seconds(text: &str) -> Option<f64> {
    let t = text.trim().to_ascii_lowercase();
    let number = ["seconds", "second", "secs", "sec", "s"]
        .iter()
        .find_map(|unit| t.strip_suffix(unit))
        .unwrap_or(&t)
        .trim();
    if number.is_empty()
        || !number.chars().all(|c| c.is_ascii_digit() || c == '.')
        || number.matches('.').count() > 1
    {
        return None;
    }
    number.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn declared_inputs(
    r: &mut Reasons,
    node: &Node,
    declared_paths: &mut Vec<String>,
) -> Vec<DeclaredInput> {
    let items = match node {
        Node::Seq { items, .. } => items,
        Node::Scalar {
            value,
            quoted: false,
            ..
        } if yaml::is_null(value) => return Vec::new(),
        other => {
            r.add(
                "inputs.type",
                format!(
                    "`inputs` must be a list of {{path, sha256}}, found {}",
                    other.kind()
                ),
                other.line(),
            );
            return Vec::new();
        }
    };
    let mut inputs: Vec<DeclaredInput> = Vec::new();
    for item in items {
        let Node::Map { entries, line } = item else {
            r.add(
                "inputs.type",
                format!(
                    "each input must be a mapping with `path` and `sha256`, found {}",
                    item.kind()
                ),
                item.line(),
            );
            continue;
        };
        document::known_keys(
            entries,
            &["path", "sha256"],
            "inputs.unknown_key",
            "an input",
            r,
        );
        let path = item.get("path").and_then(scalar_str);
        let sha = item.get("sha256").and_then(scalar_str);
        let Some(path) = path else {
            r.add("inputs.path_missing", "an input has no `path`", *line);
            continue;
        };
        let path_line = item.get("path").map_or(*line, Node::line);
        declared_paths.push(path.clone());
        if let Some(problem) = input_path_problem(&path) {
            r.add(problem.0, problem.1, path_line);
            continue;
        }
        match sha {
            None => r.add(
                "inputs.hash_missing",
                format!("input `{path}` has no sha256: every declared input needs its hash"),
                *line,
            ),
            Some(sha) if !is_sha256_hex(&sha) => r.add(
                "inputs.hash_format",
                format!("the sha256 of input `{path}` must be 64 lowercase hex characters"),
                item.get("sha256").map_or(*line, Node::line),
            ),
            Some(sha) => {
                if inputs.iter().any(|i| i.path == path) {
                    r.add(
                        "inputs.duplicate_path",
                        format!(
                            "input `{path}` is declared twice (paths are compared after Unicode NFC normalization, so two spellings of one name are one path)"
                        ),
                        path_line,
                    );
                } else {
                    inputs.push(DeclaredInput { path, sha256: sha });
                }
            }
        }
    }
    inputs
}

/// Problems with an input path: must be `/in/<relative path>` without `..`, `.`, empty
/// components, backslashes or control characters.
pub fn input_path_problem(path: &str) -> Option<(&'static str, String)> {
    let Some(rel) = path.strip_prefix("/in/") else {
        return Some((
            "inputs.path_outside_in",
            format!("input path `{path}` must be under /in/"),
        ));
    };
    let components: Vec<&str> = rel.split('/').collect();
    if components.contains(&"..") {
        return Some((
            "inputs.path_traversal",
            format!("input path `{path}` climbs out with `..`"),
        ));
    }
    if rel.is_empty()
        || components.iter().any(|c| c.is_empty() || *c == ".")
        || path.contains('\\')
        || path.chars().any(char::is_control)
        || path.len() > 1024
    {
        return Some((
            "inputs.path_invalid",
            format!("input path `{path}` is not a plain relative file path under /in/"),
        ));
    }
    None
}

/// Section rules. Returns the work, outputs and risk assessment when all are valid.
fn body_rules(
    body: &sections::Body<'_>,
    fm: &FrontMatter,
    policy: &Policy,
    r: &mut Reasons,
) -> Option<(Work, Vec<String>, RiskAssessment)> {
    if !fm.backend_known {
        return None;
    }
    let (required, optional, other): (&[&str], &[&str], &[&str]) = match fm.backend {
        BackendKind::Era => (ERA_SECTIONS, &[], &["Code", "Inputs (JSON)"]),
        BackendKind::Monty => (MONTY_SECTIONS, MONTY_OPTIONAL, &["Command", "Input Files"]),
    };
    let backend_name = match fm.backend {
        BackendKind::Era => "ERA",
        BackendKind::Monty => "monty",
    };
    let mut found: BTreeMap<&'static str, &Section<'_>> = BTreeMap::new();
    for s in &body.sections {
        let canonical = required
            .iter()
            .chain(optional)
            .find(|t| t.eq_ignore_ascii_case(&s.title));
        match canonical {
            Some(t) => {
                document::file_section(&mut found, t, s, r);
            }
            None if other.iter().any(|t| t.eq_ignore_ascii_case(&s.title)) => r.add(
                "body.section_wrong_backend",
                format!("section `## {}` belongs to the other backend; a {backend_name} request has: {}", s.title, required.join(", ")),
                s.heading_line,
            ),
            None => r.add("body.unknown_section", format!("unknown section `## {}` (a {backend_name} request has: {})", s.title, required.iter().chain(optional).copied().collect::<Vec<_>>().join(", ")), s.heading_line),
        }
    }
    let end_line = body
        .sections
        .last()
        .and_then(|s| s.lines.last().map(|l| l.number))
        .unwrap_or(1);
    document::required_sections(&found, required, end_line, r);
    let outputs = found
        .get("Output Expectations")
        .map(|s| output_paths(s, r))
        .unwrap_or_default();
    let risk = found
        .get("Risk Assessment")
        .and_then(|s| risk_assessment(s, r));
    let work = match fm.backend {
        BackendKind::Era => {
            if let Some(s) = found.get("Input Files") {
                input_files_section(s, fm, r);
            }
            found
                .get("Command")
                .and_then(|s| era_command(s, fm, policy, r))
        }
        BackendKind::Monty => {
            let code = found.get("Code").and_then(|s| monty_code(s, r));
            let inputs_json = match found.get("Inputs (JSON)") {
                None => Some(None),
                Some(s) => monty_inputs(s, r).map(Some),
            };
            match (code, inputs_json) {
                (Some(code), Some(inputs_json)) => Some(Work::Monty { code, inputs_json }),
                _ => None,
            }
        }
    };
    match (work, risk) {
        (Some(work), Some(risk)) => Some((work, outputs, risk)),
        _ => None,
    }
}

fn era_command(
    s: &Section<'_>,
    fm: &FrontMatter,
    policy: &Policy,
    r: &mut Reasons,
) -> Option<Work> {
    let content: Vec<&Line<'_>> = s.content_lines().collect();
    if content
        .iter()
        .any(|l| sections::fence_marker(l.text).is_some())
    {
        r.add(
            "command.code_fence",
            "the command must be plain text, not a code fence",
            content[0].number,
        );
        return None;
    }
    if content.len() > 1 {
        r.add(
            "command.multiple_lines",
            format!(
                "the command must be exactly one line, found {}",
                content.len()
            ),
            content[1].number,
        );
        return None;
    }
    let line = content.first()?;
    let command_line = command::strip_inline_code(line.text);
    let mut ok = true;
    for p in command::shell_syntax(command_line) {
        r.add(p.code, p.message, line.number);
        ok = false;
    }
    let words = match command::words(command_line) {
        Ok(words) => words,
        Err(p) => {
            r.add(p.code, p.message, line.number);
            return None;
        }
    };
    let program = &words[0];
    let guest = if program.contains('/') {
        r.add(
            "command.host_path",
            format!("the program `{program}` must be a bare name such as `python`, not a path"),
            line.number,
        );
        None
    } else {
        // Several guests may share a program word (`python`): the request's `language`
        // picks among them; without one, the first guest registering the word.
        let by_language = fm
            .language
            .as_deref()
            .and_then(|lang| policy.guest_for_language(lang))
            .filter(|g| g.programs.iter().any(|p| p == program));
        match by_language.or_else(|| policy.guest_for_program(program)) {
            Some(g) => Some(g.guest.clone()),
            None => {
                let known: Vec<&str> = policy
                    .guests
                    .iter()
                    .flat_map(|g| g.programs.iter().map(String::as_str))
                    .collect();
                r.add("command.unknown_program", format!("`{program}` is not a registered guest program (registered: {}); nothing runs on the host", known.join(", ")), line.number);
                None
            }
        }
    };
    for p in command::path_problems(&words[1..]) {
        r.add(p.code, p.message, line.number);
        ok = false;
    }
    let guest = guest?;
    if let Some(lang) = &fm.language
        && policy.guest_for_language(lang).map(|g| g.guest.as_str()) != Some(guest.as_str())
    {
        r.add("command.guest_mismatch", format!("the program `{program}` selects guest `{guest}`, but `language: {lang}` selects another"), line.number);
        ok = false;
    }
    let environment = fm
        .language
        .as_deref()
        .and_then(|lang| policy.environment_for_language(lang))
        .map(|e| e.name.clone());
    ok.then(|| Work::Era {
        command_line: command_line.to_owned(),
        argv: words,
        guest,
        environment,
    })
}

fn path_tokens(text: &str) -> impl Iterator<Item = &str> {
    // Markdown wraps paths in backticks, quotes, brackets and emphasis, and follows them
    // with punctuation: "`/out/x.json`:" is the path /out/x.json. A trailing `..` is a
    // path component, never punctuation.
    text.split_whitespace()
        .map(trim_path_token)
        .filter(|t| !t.is_empty())
}

/// A path token without its markdown dressing (`approval::seal` reads lines the same way).
pub fn trim_path_token(token: &str) -> &str {
    let mut t = token.trim_start_matches(['`', '"', '\'', '(', '[', '*', '<', '{']);
    loop {
        let before = t;
        t = t.trim_end_matches(|c: char| {
            matches!(
                c,
                '`' | '"' | '\'' | ')' | ']' | '*' | '>' | '}' | ',' | ':' | ';'
            )
        });
        if t.ends_with('.') && !t.ends_with("..") {
            t = &t[..t.len() - 1];
        }
        if t == before {
            return t;
        }
    }
}

fn input_files_section(s: &Section<'_>, fm: &FrontMatter, r: &mut Reasons) {
    let mut named: Vec<document::Listed> = Vec::new();
    for line in s.content_lines() {
        let tokens: Vec<&str> = path_tokens(line.text).collect();
        let path = tokens
            .iter()
            .find(|t| t.starts_with("/in/") || **t == "/in");
        let sha = document::listed_sha256(&tokens);
        if let Some(path) = path {
            named.push(((*path).to_owned(), sha.map(str::to_owned), line.number));
        } else if let Some(p) = tokens.iter().find(|t| t.starts_with('/')) {
            r.add(
                "inputs.path_outside_in",
                format!("`## Input Files` names `{p}`, which is not under /in/"),
                line.number,
            );
        }
    }
    let line_hint = fm
        .inputs_line
        .map(|l| format!(" (front matter `inputs` on line {l})"))
        .unwrap_or_default();
    let words = document::ListingWords {
        not_listed: ("inputs.section_missing_file", &|path| {
            format!(
                "input `{path}` is declared in the front matter but not listed in `## Input Files`"
            )
        }),
        hash_missing: Some(("inputs.section_hash_missing", &|path| {
            format!("`## Input Files` lists `{path}` without its sha256")
        })),
        hash_mismatch: ("inputs.section_hash_mismatch", &|path, listed, declared| {
            format!(
                "`## Input Files` gives sha256 {listed} for `{path}`, the front matter {declared}"
            )
        }),
        undeclared: ("inputs.section_undeclared_file", &|path| {
            format!(
                "`## Input Files` lists `{path}`, which the front matter `inputs` does not declare{line_hint}"
            )
        }),
    };
    document::cross_check_listing(
        s,
        &named,
        fm.inputs
            .iter()
            .map(|i| (i.path.as_str(), i.sha256.as_str())),
        &|path| fm.declared_paths.iter().any(|p| p == path),
        &words,
        r,
    );
}

fn output_paths(s: &Section<'_>, r: &mut Reasons) -> Vec<String> {
    let mut outputs = Vec::new();
    for line in s.content_lines() {
        for token in path_tokens(line.text) {
            if !token.starts_with('/') {
                continue;
            }
            if token.split('/').any(|c| c == "..") {
                r.add(
                    "outputs.path_traversal",
                    format!("output path `{token}` climbs out with `..`"),
                    line.number,
                );
            } else if token == "/out" || token.starts_with("/out/") {
                outputs.push(token.to_owned());
            } else {
                r.add(
                    "outputs.path_outside_out",
                    format!("output path `{token}` must be under /out/"),
                    line.number,
                );
            }
        }
    }
    outputs
}

fn risk_assessment(s: &Section<'_>, r: &mut Reasons) -> Option<RiskAssessment> {
    let mut fields: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for line in s.content_lines() {
        let t = line.text.trim().trim_start_matches(['-', '*', '+']).trim();
        let Some((key, value)) = t.split_once(':') else {
            continue;
        };
        let key = key.replace(['*', '_', '`'], "").trim().to_ascii_lowercase();
        let value = value.replace(['*', '`'], "").trim().to_owned();
        fields.entry(key).or_insert((value, line.number));
    }
    let mut field = |name: &str, allowed: Option<&[&str]>, code: &str| -> Option<String> {
        match fields.get(name) {
            None => {
                r.add(
                    "risk.missing_field",
                    format!("`## Risk Assessment` must include `{}:`", capitalize(name)),
                    s.heading_line,
                );
                None
            }
            Some((value, line)) if value.is_empty() => {
                r.add(
                    "risk.empty_field",
                    format!("`{}:` is empty", capitalize(name)),
                    *line,
                );
                None
            }
            Some((value, line)) => match allowed {
                Some(allowed) if !allowed.contains(&value.to_ascii_lowercase().as_str()) => {
                    r.add(
                        code,
                        format!(
                            "`{}:` must be one of {}, found `{value}`",
                            capitalize(name),
                            allowed.join("|")
                        ),
                        *line,
                    );
                    None
                }
                Some(_) => Some(value.to_ascii_lowercase()),
                None => Some(value.clone()),
            },
        }
    };
    let level = field("risk level", Some(&["low", "medium", "high"]), "risk.level");
    let justification = field("justification", None, "risk.empty_field");
    let data_sensitivity = field(
        "data sensitivity",
        Some(&["public", "internal", "confidential"]),
        "risk.data_sensitivity",
    );
    let network_rationale = field("network rationale", None, "risk.empty_field");
    Some(RiskAssessment {
        level: level?,
        justification: justification?,
        data_sensitivity: data_sensitivity?,
        network_rationale: network_rationale?,
    })
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// `## Code`: one fenced code block, opened at the start of the section's first line
/// and closed on its last. What an approver sees rendered must be the text Monty runs,
/// and only fenced code renders as written: unfenced, `&#114;` shows as `r`, `*x*` as
/// emphasis, `\_` as `_`; under an indented fence the renderer strips the indent from
/// each line, which can move a Python line out of its block.
fn monty_code(s: &Section<'_>, r: &mut Reasons) -> Option<String> {
    if !monty_code_fenced(s, r) {
        return None;
    }
    let (code, _info) = sections::unfence(&s.text());
    if code.trim().is_empty() {
        r.add(
            "monty.code_empty",
            "`## Code` holds no code",
            s.heading_line,
        );
        return None;
    }
    Some(code)
}

/// Whether `## Code` is exactly one fenced block (with a `monty.code_unfenced` reason
/// naming the first line outside it when not). An empty section is left to the
/// empty-code rule.
fn monty_code_fenced(s: &Section<'_>, r: &mut Reasons) -> bool {
    let first = s.lines.iter().position(|l| !l.text.trim().is_empty());
    let last = s.lines.iter().rposition(|l| !l.text.trim().is_empty());
    let (Some(first), Some(last)) = (first, last) else {
        return true;
    };
    let lines = &s.lines[first..=last];
    let mut unfenced = |line: usize, why: &str| {
        r.add(
            "monty.code_unfenced",
            format!(
                "`## Code` must be one fenced code block (a line ```` ```python ```` at the start, ```` ``` ```` closing it): {why}; markdown outside a fence renders differently from the text Monty runs (`&#114;` shows as `r`)"
            ),
            line,
        );
        false
    };
    if lines[0].text.starts_with(' ') || sections::fence_marker(lines[0].text).is_none() {
        let why = if sections::fence_marker(lines[0].text).is_some() {
            "its opening fence is indented, and a renderer strips that indent from the code's lines"
        } else {
            "its first line is not a fence"
        };
        return unfenced(lines[0].number, why);
    }
    let mut fences = sections::Fences::default();
    for (i, line) in lines.iter().enumerate() {
        fences.step(line.text);
        if !fences.is_open() {
            return match lines.get(i + 1) {
                None => true,
                Some(after) => unfenced(after.number, "this line follows the closing fence"),
            };
        }
    }
    unfenced(
        lines[0].number,
        "the fence opened on this line is not closed in the section",
    )
}

fn python_identifier_re() -> &'static regex::Regex {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    #[allow(clippy::unwrap_used)] // a constant pattern
    RE.get_or_init(|| regex::Regex::new(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$").unwrap())
}

const PYTHON_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

fn monty_inputs(s: &Section<'_>, r: &mut Reasons) -> Option<String> {
    let (json, _info) = sections::unfence(&s.text());
    let value: serde_json::Value = match serde_json::from_str(&json) {
        Ok(v) => v,
        Err(e) => {
            r.add(
                "monty.inputs_invalid_json",
                format!("`## Inputs (JSON)` is not valid JSON: {e}"),
                s.heading_line,
            );
            return None;
        }
    };
    let Some(object) = value.as_object() else {
        r.add(
            "monty.inputs_not_object",
            "`## Inputs (JSON)` must be a JSON object whose keys name the inputs",
            s.heading_line,
        );
        return None;
    };
    let mut ok = true;
    for key in object.keys() {
        if !python_identifier_re().is_match(key) || PYTHON_KEYWORDS.contains(&key.as_str()) {
            r.add(
                "monty.input_name",
                format!("input name `{key}` is not a Python identifier"),
                s.heading_line,
            );
            ok = false;
        }
    }
    ok.then_some(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_seconds() {
        assert_eq!(parse_cpu_seconds("30"), Some(30.0));
        assert_eq!(parse_cpu_seconds("2.5s"), Some(2.5));
        assert_eq!(parse_cpu_seconds(" 10 seconds "), Some(10.0));
        assert_eq!(parse_cpu_seconds("1 core"), None);
        assert_eq!(parse_cpu_seconds("-1"), None);
        assert_eq!(parse_cpu_seconds("1e9"), None);
        assert_eq!(parse_cpu_seconds(""), None);
    }

    #[test]
    fn input_paths() {
        let cases: &[(&str, Option<&str>)] = &[
            ("/in/a.csv", None),
            ("/in/d/a.csv", None),
            ("/etc/passwd", Some("inputs.path_outside_in")),
            ("/in/../etc", Some("inputs.path_traversal")),
            ("/in/", Some("inputs.path_invalid")),
            ("/in//a", Some("inputs.path_invalid")),
            ("/in/./a", Some("inputs.path_invalid")),
            ("in/a", Some("inputs.path_outside_in")),
        ];
        for (path, code) in cases {
            assert_eq!(input_path_problem(path).map(|p| p.0), *code, "{path}");
        }
    }
}
