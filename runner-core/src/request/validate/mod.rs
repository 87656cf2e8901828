//! Every rule of the tool-request schema, each with a stable reason code (listed in
//! the README). The validator collects every reason it finds instead of stopping at
//! the first, and it is the only code that can build an [`ApprovedRequest`].

mod body;
mod era;
mod fields;
mod inputs;
mod limits;
mod monty;
#[cfg(test)]
mod tests;

pub use body::trim_path_token;
pub use fields::KNOWN_KEYS;
pub use inputs::input_path_problem;
pub use limits::parse_cpu_seconds;

use super::BackendKind;
use super::document::{self, Reasons};
use super::forbidden;
use super::frontmatter::{self, Line};
use super::rendered;
use super::sections;
use super::yaml::Node;
use super::{ApprovedRequest, Reason};
use crate::digest::sha256_hex;
use crate::normalize;
use crate::policy::{ForbiddenRule, Policy};
use crate::rules::RuleTarget;
use body::body_rules;
use fields::{FrontMatter, front_matter};
use std::collections::HashSet;

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
    let code_lines = code_lines(&body, &fm);
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
    let (found, rendered) = crate::markdown::visible::scan_with_source(text, &all_lines, rules_at);
    for f in found.into_iter().chain(rendered) {
        seen.report(&mut r, f);
    }
    // The YAML values as decoded: escapes and folded lines can hide what the raw
    // lines show innocently.
    scan_scalars(&root, request_rules, &mut seen, &mut r);
    for m in rendered::scan(&split.body) {
        r.add(m.code, m.message, m.line);
    }
    let checked = body_rules(&body, &fm, policy, &mut r);
    document::text_outside_section(&body, &mut r);
    if !r.0.is_empty() {
        return Err(r.0);
    }
    approve(fm, checked, bytes, text, r)
}

/// The approved request, built from fields every rule has passed.
fn approve(
    fm: FrontMatter,
    checked: Option<(super::Work, Vec<String>, super::RiskAssessment)>,
    bytes: &[u8],
    text: &str,
    mut r: Reasons,
) -> Result<ApprovedRequest, Vec<Reason>> {
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

/// The lines of a monty request's `## Code`, which the code rules judge (none for ERA).
fn code_lines(body: &sections::Body<'_>, fm: &FrontMatter) -> HashSet<usize> {
    if fm.backend == BackendKind::Monty && fm.backend_known {
        body.sections
            .iter()
            .filter(|s| s.title == "Code")
            .flat_map(|s| s.lines.iter().map(|l| l.number))
            .collect()
    } else {
        HashSet::new()
    }
}

/// The forbidden-content scan of the YAML values as decoded (keys and scalars).
fn scan_scalars(root: &Node, rules: &[ForbiddenRule], seen: &mut Seen, r: &mut Reasons) {
    let mut scalars = Vec::new();
    collect_scalars(root, &mut scalars);
    for (value, line) in scalars {
        for f in forbidden::scan_joined(&value, line, rules) {
            seen.report(r, f);
        }
    }
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
