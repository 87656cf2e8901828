//! The front matter's fields: the known keys, each field's rules, and the approval.

use super::inputs::declared_inputs;
use super::limits::limits;
use crate::policy::Policy;
use crate::request::BackendKind;
use crate::request::document::{self, Fields, Reasons, is_id, scalar_str, show};
use crate::request::yaml::Node;
use crate::request::{DeclaredInput, RequestLimits};

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

/// The front matter fields, each `None` when missing or invalid (a reason was added).
pub(super) struct FrontMatter {
    pub(super) request_id: Option<String>,
    pub(super) created_utc: Option<String>,
    pub(super) requested_by: Option<String>,
    pub(super) approved_by: Option<String>,
    pub(super) approved_utc: Option<String>,
    pub(super) purpose: Option<String>,
    pub(super) backend: BackendKind,
    pub(super) backend_known: bool,
    pub(super) language: Option<String>,
    pub(super) limits: Option<RequestLimits>,
    pub(super) inputs: Vec<DeclaredInput>,
    /// Line of the `inputs` key, or of the closing delimiter when absent.
    pub(super) inputs_line: Option<usize>,
    /// Every path the front matter names, valid or not (for the section cross-check).
    pub(super) declared_paths: Vec<String>,
    /// `network: allowlist`, granted by the policy's `[network] allow`.
    pub(super) network_allowlist: bool,
}

pub(super) fn front_matter(root: &Node, policy: &Policy, r: &mut Reasons) -> FrontMatter {
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

    let (backend, backend_known) = backend_field(&f, r);
    let language = language_field(&f, backend, policy, r);
    let network_allowlist = network_field(&f, policy, r);
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

/// `backend`: `ERA` (also when absent) or `monty`; false when it names neither.
fn backend_field(f: &Fields<'_>, r: &mut Reasons) -> (BackendKind, bool) {
    match f.get("backend") {
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
    }
}

/// `language`: a registered guest's, never a shell, and no package environment on monty.
fn language_field(
    f: &Fields<'_>,
    backend: BackendKind,
    policy: &Policy,
    r: &mut Reasons,
) -> Option<String> {
    f.text("language", r).and_then(|(lang, line)| {
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
    })
}

/// `network`: `none`, or `allowlist` when the policy allows an origin (true then).
fn network_field(f: &Fields<'_>, policy: &Policy, r: &mut Reasons) -> bool {
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
    network_allowlist
}
