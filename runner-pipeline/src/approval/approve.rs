//! Approving a request: set `approved_by` and `approved_utc` (replacing those lines, or
//! inserting them after `requested_by`), check that the approved request passes every
//! rule (signature included), and write it with its detached signature so that neither
//! is ever left without the other.

use super::edit::{self, Document, EditError, FrontMatter};
use super::{Judged, PAYLOAD_TYPE, SignatureFile, judge_with_signature, signature_path};
use crate::sign::{self, Envelope};
use ed25519_dalek::SigningKey;
use runner_core::policy::Policy;
use runner_core::request::{Reason, Work};
use runner_core::result::render::yaml_str;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// An approval ready to be written: the new request text, its envelope when a key signs
/// it, and the verdict on both.
#[derive(Debug, Clone)]
pub struct Approval {
    pub text: String,
    pub envelope: Option<Envelope>,
    pub judged: Judged,
    /// The signing key's id, trusted or not.
    pub key_id: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApproveError {
    /// The approver's name cannot stand in the front matter.
    #[error("--by: {0}")]
    Name(String),
    /// The request cannot be edited.
    #[error("{0}")]
    Edit(#[from] EditError),
    /// The approved request would not pass: every reason.
    #[error("the approved request would be rejected")]
    Rejected(Vec<Reason>),
}

/// `text` with `approved_by: "<by>"` and `approved_utc: "<at>"`. Existing lines are
/// replaced (their whole YAML value, however many lines); missing ones are inserted
/// after `requested_by`, or before the closing `---`.
pub fn set_approval(text: &str, by: &str, at: &str, policy: &Policy) -> Result<String, EditError> {
    let fm = FrontMatter::load(text, policy)?;
    let mut doc = Document::parse(text);
    let by_line = format!("approved_by: {}", yaml_str(by));
    let at_line = format!("approved_utc: {}", yaml_str(at));
    let by_block = fm.key_block(&doc, "approved_by");
    let at_block = fm.key_block(&doc, "approved_utc");
    let anchor = fm
        .key_block(&doc, "requested_by")
        .map_or(fm.closing_line, |(_, end)| end);
    match (by_block, at_block) {
        (Some((s, e)), Some((s2, e2))) => {
            doc.replace(s, e, vec![by_line]);
            doc.replace(s2, e2, vec![at_line]);
        }
        (Some((s, e)), None) => doc.replace(s, e, vec![by_line, at_line]),
        (None, Some((s, e))) => doc.replace(s, e, vec![by_line, at_line]),
        (None, None) => doc.insert_before(anchor, vec![by_line, at_line]),
    }
    Ok(doc.text())
}

/// A name that can stand as `approved_by`: one line of visible text.
fn check_name(by: &str) -> Result<(), ApproveError> {
    if by.trim().is_empty() {
        return Err(ApproveError::Name("the approver's name is empty".into()));
    }
    if by != by.trim() {
        return Err(ApproveError::Name(
            "the approver's name has leading or trailing spaces".into(),
        ));
    }
    if by
        .chars()
        .any(|c| c.is_control() || runner_core::normalize::is_invisible(c))
    {
        return Err(ApproveError::Name(
            "the approver's name holds control or invisible characters".into(),
        ));
    }
    Ok(())
}

/// Builds the approval of `text` by `by` at `at` (RFC 3339 UTC), signed with `key` when
/// given, and judges it as `runner exec` will: every rule, separation of duties, and the
/// new signature (a stale `.sig` beside the request does not count: it is replaced or
/// removed when the approval is written).
pub fn prepare(
    text: &str,
    by: &str,
    at: &str,
    key: Option<&SigningKey>,
    request_path: &Path,
    policy: &Policy,
) -> Result<Approval, ApproveError> {
    check_name(by)?;
    let approved = set_approval(text, by, at, policy)?;
    let envelope =
        key.map(|k| sign::sign(PAYLOAD_TYPE, &super::signed_payload(approved.as_bytes()), k));
    let sig = match &envelope {
        None => SignatureFile::Absent,
        Some(env) => SignatureFile::Bytes(serde_json::to_vec(env).unwrap_or_default()),
    };
    let sig_name = signature_path(request_path).display().to_string();
    let judged = judge_with_signature(approved.as_bytes(), sig, &sig_name, policy)
        .map_err(ApproveError::Rejected)?;
    Ok(Approval {
        text: approved,
        envelope,
        judged,
        key_id: key.map(|k| runner_core::policy::key_id(&k.verifying_key())),
    })
}

/// What the operator is approving, for the terminal: purpose, the work, inputs with
/// hashes, outputs, limits, network, risk, and what will be signed. Every value is shown
/// with control and invisible characters escaped.
pub fn summary(a: &Approval, request_path: &Path, by: &str, at: &str, policy: &Policy) -> String {
    let r = &a.judged.request;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Approving {} ({})",
        shown(r.request_id()),
        request_path.display()
    );
    let _ = writeln!(s, "  purpose:       {}", shown(r.purpose()));
    let _ = writeln!(s, "  requested by:  {}", shown(r.requested_by()));
    let _ = writeln!(s, "  approved by:   {} at {at}", shown(by));
    match r.work() {
        Work::Era {
            command_line,
            guest,
            environment,
            ..
        } => {
            let _ = writeln!(s, "  backend:       ERA (guest {})", shown(guest));
            if let Some(env) = environment.as_deref().and_then(|e| policy.environment(e)) {
                let packages: Vec<String> = env
                    .packages
                    .iter()
                    .map(|p| format!("{} {}", shown(&p.name), shown(&p.version)))
                    .collect();
                let _ = writeln!(
                    s,
                    "  environment:   {} ({})",
                    shown(&env.name),
                    packages.join(", ")
                );
            }
            let _ = writeln!(s, "  command:       {}", shown(command_line));
        }
        Work::Monty { code, inputs_json } => {
            let _ = writeln!(s, "  backend:       monty");
            let _ = writeln!(s, "  code:");
            for line in code.lines() {
                let _ = writeln!(s, "    | {}", shown(line));
            }
            if let Some(json) = inputs_json {
                let _ = writeln!(s, "  inputs (JSON):");
                for line in json.lines() {
                    let _ = writeln!(s, "    | {}", shown(line));
                }
            }
        }
    }
    if r.inputs().is_empty() {
        let _ = writeln!(s, "  inputs:        none");
    } else {
        let _ = writeln!(s, "  inputs:");
        for i in r.inputs() {
            let _ = writeln!(s, "    {}  sha256:{}", shown(&i.path), i.sha256);
        }
    }
    if !r.outputs().is_empty() {
        let outs: Vec<String> = r.outputs().iter().map(|o| shown(o)).collect();
        let _ = writeln!(s, "  outputs:       {}", outs.join(", "));
    }
    let l = r.limits();
    let _ = writeln!(
        s,
        "  limits:        memory {} MB, wall time {} s, CPU {} s",
        l.memory_limit_mb,
        l.time_limit_sec,
        shown(&l.cpu_limit)
    );
    let _ = writeln!(s, "  network:       none");
    let risk = r.risk();
    let _ = writeln!(
        s,
        "  risk:          {} (data sensitivity: {})",
        shown(&risk.level),
        shown(&risk.data_sensitivity)
    );
    let _ = writeln!(s, "  justification: {}", shown(&risk.justification));
    let _ = writeln!(s, "  network rationale: {}", shown(&risk.network_rationale));
    let _ = writeln!(
        s,
        "  request sha256 (normalized text, what a signature covers): {}",
        r.normalized_sha256()
    );
    match (&a.key_id, &a.judged.approval_key) {
        (None, _) => {
            let _ = writeln!(s, "  signature:     none (no --key)");
        }
        (Some(_), Some(k)) => {
            let _ = writeln!(s, "  signature:     key {k}");
        }
        (Some(id), None) => {
            let _ = writeln!(
                s,
                "  signature:     key {id}, which the policy in force ({}) does not trust as `{}`",
                policy.origin,
                shown(by)
            );
        }
    }
    s
}

/// A value made safe for a terminal: control and invisible characters escaped.
fn shown(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if c.is_control() || runner_core::normalize::is_invisible(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// What writing an approval did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub request: PathBuf,
    /// The signature written, when a key signed.
    pub signature: Option<PathBuf>,
    /// A signature over older bytes that was removed (approving without a key).
    pub removed_stale_signature: Option<PathBuf>,
}

/// Writes the approved request over `request_path` and, when signed, `TR-….md.sig`
/// beside it: the signature to a temporary name first, then the request (atomically),
/// then the signature renamed into place, so a crash leaves the old pair or a request
/// whose stale signature fails closed, never a signature without its request. When the
/// last rename fails, the original request is put back. Without a key, a signature
/// left from an earlier approval (it covers other bytes) is removed.
///
/// # Ambient authority
/// Writes in the request's directory.
pub fn write(
    request_path: &Path,
    original: &[u8],
    approval: &Approval,
) -> std::io::Result<Written> {
    let sig_path = signature_path(request_path);
    edit::existing_mode(request_path)?;
    match &approval.envelope {
        Some(envelope) => {
            let mut json = serde_json::to_vec(envelope).map_err(std::io::Error::other)?;
            json.push(b'\n');
            let sig_tmp = edit::stage_beside(&sig_path, &json, 0o644)?;
            edit::write_atomic(request_path, approval.text.as_bytes())?;
            if let Err(e) = sig_tmp.commit() {
                let restored = edit::write_atomic(request_path, original);
                return Err(std::io::Error::other(format!(
                    "writing {}: {e}; {}",
                    sig_path.display(),
                    match restored {
                        Ok(()) => "the request was restored to its previous text".to_owned(),
                        Err(r) => format!("restoring the request failed too: {r}"),
                    }
                )));
            }
            Ok(Written {
                request: request_path.to_owned(),
                signature: Some(sig_path),
                removed_stale_signature: None,
            })
        }
        None => {
            edit::write_atomic(request_path, approval.text.as_bytes())?;
            let removed = match runner_sandbox::host::open_parent(&sig_path)
                .and_then(|(dir, name)| dir.remove_file(name))
            {
                Ok(()) => Some(sig_path),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => {
                    return Err(std::io::Error::other(format!(
                        "the request was approved, but the stale signature {} could not be removed: {e}",
                        sig_path.display()
                    )));
                }
            };
            Ok(Written {
                request: request_path.to_owned(),
                signature: None,
                removed_stale_signature: removed,
            })
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn replaces_or_inserts_the_two_lines() {
        let p = Policy::builtin();
        let text = "---\r\nrequested_by: \"core\"\r\napproved_by: \"\"\r\napproved_utc: \"\"\r\nx: 1\r\n---\r\nbody\r\n";
        assert_eq!(
            set_approval(text, "ada", "2026-11-21T10:00:00Z", &p).unwrap(),
            "---\r\nrequested_by: \"core\"\r\napproved_by: \"ada\"\r\napproved_utc: \"2026-11-21T10:00:00Z\"\r\nx: 1\r\n---\r\nbody\r\n"
        );
        let text = "---\nrequested_by: core\nx: 1\n---\n";
        assert_eq!(
            set_approval(text, "ada", "T", &p).unwrap(),
            "---\nrequested_by: core\napproved_by: \"ada\"\napproved_utc: \"T\"\nx: 1\n---\n"
        );
        let text = "---\nx: 1\napproved_by: >\n  folded\n  name\n---\n";
        assert_eq!(
            set_approval(text, "a\"b", "T", &p).unwrap(),
            "---\nx: 1\napproved_by: \"a\\\"b\"\napproved_utc: \"T\"\n---\n"
        );
    }

    #[test]
    fn names_that_cannot_stand() {
        for bad in ["", " ", " ada", "ada\n", "a\u{200b}da", "a\u{1b}da"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name("operator-ada").is_ok());
    }
}
