//! Operator approval that cannot be forged.
//!
//! A request's approval is its `approved_by`/`approved_utc` front matter plus, beside it,
//! `TR-….md.sig`: a DSSE envelope (payload type [`PAYLOAD_TYPE`]) whose payload is the
//! request's normalized bytes ([`runner_core::normalize::for_hashing`]: BOM stripped, CRLF → LF,
//! NFC) and whose Ed25519 signature is by an operator key. This module owns the check
//! ([`check_signature`], [`judge`]), sealing a draft's input hashes ([`seal`]) and the
//! approval edit with its signature ([`approve`]).
//!
//! What a signature proves depends on the policy's `[approval]` table:
//! * the key must be one of `approval.trusted`, registered under the request's
//!   `approved_by` (else `approval.signer_untrusted` / `approval.signer_mismatch`);
//! * the signed payload must equal the file's normalized bytes, every byte of every
//!   field and section (else `approval.bytes_changed`);
//! * with `require_signed_approval`, a request without a `.sig` is rejected
//!   (`approval.signature_missing`); without it, a `.sig` is still checked when present,
//!   and one that proves tampering (bytes changed, a signature that does not verify, a
//!   trusted key under another name) is a REJECT. A `.sig` by a key the policy does not
//!   know proves nothing (its signature cannot even be checked without the key), so it
//!   counts as unsigned.

pub mod approve;
pub mod edit;
pub mod seal;

use crate::sign;
use base64::Engine as _;
use cap_std::fs::OpenOptionsExt;
use runner_core::policy::Policy;
use runner_core::request::frontmatter;
use runner_core::request::yaml::{self, Node};
use runner_core::request::{self, ApprovedRequest, Reason};
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};

/// DSSE payload type of a signed tool request.
pub const PAYLOAD_TYPE: &str = "application/vnd.runner.tool-request+markdown";

/// The key that approved a request: its id and the name the policy trusts it under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalKey {
    /// `sha256:<hex>` of the raw Ed25519 public key ([`runner_core::policy::key_id`]).
    pub key_id: String,
    /// The `[[approval.trusted]]` name, equal to the request's `approved_by`.
    pub name: String,
}

impl std::fmt::Display for ApprovalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (trusted as {})", self.key_id, self.name)
    }
}

/// A request that passed validation and the approval check.
#[derive(Debug, Clone)]
pub struct Judged {
    pub request: ApprovedRequest,
    /// `None`: unsigned (allowed only when the policy does not require signatures).
    pub approval_key: Option<ApprovalKey>,
}

/// `TR-….md.sig`: the detached signature's path beside the request.
pub fn signature_path(request_path: &Path) -> PathBuf {
    let mut name = request_path
        .file_name()
        .map(std::ffi::OsStr::to_os_string)
        .unwrap_or_default();
    name.push(".sig");
    request_path.with_file_name(name)
}

/// The bytes a signature covers: the request text after the hashing normalization.
/// Bytes that are not UTF-8 cannot be normalized and are compared as they are (no
/// approval ever signs such a request, so they never match).
pub fn signed_payload(request_bytes: &[u8]) -> Vec<u8> {
    match std::str::from_utf8(request_bytes) {
        Ok(text) => runner_core::normalize::for_hashing(text).into_bytes(),
        Err(_) => request_bytes.to_vec(),
    }
}

/// Validates a request file and checks its approval: the validator's rules, separation
/// of duties, and the signature beside it. Every reason found is returned.
///
/// # Ambient authority
/// Reads the signature file beside `path`.
pub fn judge(path: &Path, bytes: &[u8], policy: &Policy) -> Result<Judged, Vec<Reason>> {
    let sig_path = signature_path(path);
    let sig = read_signature(&sig_path, signature_cap(policy));
    judge_with_signature(bytes, sig, &sig_path.display().to_string(), policy)
}

/// [`judge`] without the approval key: what `runner validate` needs. In
/// `cli/validate.rs` (or `gate::judge_bytes` for tool requests), call this instead of
/// `request::validate` when the file's path is known.
///
/// # Ambient authority
/// Reads the signature file beside `path`.
pub fn validate_request_file(
    path: &Path,
    bytes: &[u8],
    policy: &Policy,
) -> Result<ApprovedRequest, Vec<Reason>> {
    judge(path, bytes, policy).map(|j| j.request)
}

/// Checks the signature beside `request_path` against `request_bytes`. `Ok(None)` when
/// the request is unsigned (or signed by a key the policy does not know) and the policy
/// does not require a signature; `Ok(Some(key))` when a trusted key registered as
/// `approved_by` signed exactly these bytes.
///
/// # Ambient authority
/// Reads the signature file beside `request_path`.
pub fn check_signature(
    request_path: &Path,
    request_bytes: &[u8],
    approved_by: &str,
    policy: &Policy,
) -> Result<Option<ApprovalKey>, Vec<Reason>> {
    let sig_path = signature_path(request_path);
    let sig = read_signature(&sig_path, signature_cap(policy));
    verify_signature(
        sig,
        &sig_path.display().to_string(),
        request_bytes,
        Some(approved_by),
        policy,
    )
}

/// What reading the signature file gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureFile {
    Absent,
    Bytes(Vec<u8>),
    /// It exists but cannot be used (not a regular file, too large, unreadable).
    Unreadable(String),
}

/// An envelope carries the whole request base64-encoded: 4/3 of the request cap, plus
/// room for the signatures.
fn signature_cap(policy: &Policy) -> u64 {
    policy
        .request
        .max_bytes
        .saturating_mul(2)
        .saturating_add(64 << 10)
}

/// Reads a signature file: a regular file only (a FIFO would block), at most `cap` bytes.
///
/// # Ambient authority
/// Opens the directory of `path` on the host filesystem ([`runner_sandbox::host`]), and
/// the file through it.
pub fn read_signature(path: &Path, cap: u64) -> SignatureFile {
    let mut nonblocking = cap_std::fs::OpenOptions::new();
    nonblocking
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits());
    let opened = runner_sandbox::host::open_parent(path)
        .and_then(|(dir, name)| dir.open_with(name, &nonblocking));
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return SignatureFile::Absent,
        Err(e) => return SignatureFile::Unreadable(format!("cannot read {}: {e}", path.display())),
    };
    match file.metadata() {
        Ok(m) if m.is_file() => {}
        Ok(_) => {
            return SignatureFile::Unreadable(format!("{} is not a regular file", path.display()));
        }
        Err(e) => return SignatureFile::Unreadable(format!("cannot read {}: {e}", path.display())),
    }
    let mut bytes = Vec::new();
    if let Err(e) = file.take(cap.saturating_add(1)).read_to_end(&mut bytes) {
        return SignatureFile::Unreadable(format!("cannot read {}: {e}", path.display()));
    }
    if bytes.len() as u64 > cap {
        return SignatureFile::Unreadable(format!("{} is larger than {cap} bytes", path.display()));
    }
    SignatureFile::Bytes(bytes)
}

/// Validation, separation of duties and the signature, on bytes and a signature already
/// read (`runner approve` checks the request and envelope it is about to write).
pub fn judge_with_signature(
    bytes: &[u8],
    sig: SignatureFile,
    sig_name: &str,
    policy: &Policy,
) -> Result<Judged, Vec<Reason>> {
    let validated = request::validate(bytes, policy);
    // When validation failed, the approval is still checked with what the front matter
    // says, so the REJECT lists every reason.
    let field = |key: &str| front_matter_field(bytes, key, policy);
    let (requested_by, approved_by) = match &validated {
        Ok(a) => (
            Some(a.requested_by().to_owned()),
            Some(a.approved_by().to_owned()),
        ),
        Err(_) => (
            field("requested_by").map(|(v, _)| v),
            field("approved_by").map(|(v, _)| v),
        ),
    };
    let mut reasons = validated.as_ref().err().cloned().unwrap_or_default();
    if let (Some(requested), Some(approved)) = (&requested_by, &approved_by) {
        let line = field("approved_by").map(|(_, l)| l);
        if let Some(r) = separation_of_duties(requested, approved, line, policy) {
            reasons.push(r);
        }
    }
    let key = match verify_signature(sig, sig_name, bytes, approved_by.as_deref(), policy) {
        Ok(key) => key,
        Err(rs) => {
            reasons.extend(rs);
            None
        }
    };
    match validated {
        Ok(request) if reasons.is_empty() => Ok(Judged {
            request,
            approval_key: key,
        }),
        _ => Err(reasons),
    }
}

/// `approval.self_approved` when the policy demands separation of duties and the
/// approver is the requester, compared as a reader sees them
/// ([`runner_core::normalize::identity_key`]: case, width, look-alike letters, dashes and
/// invisible characters do not make two names differ).
pub fn separation_of_duties(
    requested_by: &str,
    approved_by: &str,
    line: Option<usize>,
    policy: &Policy,
) -> Option<Reason> {
    let same = runner_core::normalize::identity_key(requested_by)
        == runner_core::normalize::identity_key(approved_by);
    (policy.approval.separation_of_duties && same).then(|| {
        Reason::new(
            "approval.self_approved",
            format!(
                "`{}` both requested and approved this request; the policy demands separation of duties",
                approved_by.trim()
            ),
            line,
        )
    })
}

/// The signature check proper. `approved_by` is `None` when the front matter has none
/// (the name is then not compared; validation already rejected the request).
pub fn verify_signature(
    sig: SignatureFile,
    sig_name: &str,
    request_bytes: &[u8],
    approved_by: Option<&str>,
    policy: &Policy,
) -> Result<Option<ApprovalKey>, Vec<Reason>> {
    let required = policy.approval.require_signed_approval;
    let invalid = |message: String| vec![Reason::new("approval.signature_invalid", message, None)];
    let sig = match sig {
        SignatureFile::Absent if required => {
            return Err(vec![Reason::new(
                "approval.signature_missing",
                format!(
                    "the policy requires a signed approval and there is no signature {sig_name} (write one with `runner approve --key`)"
                ),
                None,
            )]);
        }
        SignatureFile::Absent => return Ok(None),
        SignatureFile::Unreadable(message) => return Err(invalid(message)),
        SignatureFile::Bytes(b) => b,
    };
    let envelope = sign::parse_envelope(&sig)
        .map_err(|e| invalid(format!("{sig_name} is not a DSSE envelope: {e}")))?;
    if envelope.payload_type != PAYLOAD_TYPE {
        return Err(invalid(format!(
            "{sig_name} signs a `{}`, not a tool request (`{PAYLOAD_TYPE}`)",
            envelope.payload_type
        )));
    }
    let payload = base64::engine::general_purpose::STANDARD
        .decode(&envelope.payload)
        .map_err(|e| invalid(format!("{sig_name}: the payload is not base64: {e}")))?;
    if envelope.signatures.is_empty() {
        return Err(invalid(format!("{sig_name} holds no signature")));
    }
    let mut reasons = Vec::new();
    let actual = signed_payload(request_bytes);
    if payload != actual {
        let line = first_difference_line(&payload, &actual);
        reasons.push(Reason::new(
            "approval.bytes_changed",
            format!(
                "the request differs from the text signed in {sig_name} (first at line {line}): it was changed after approval, or the signature belongs to another request"
            ),
            Some(line),
        ));
    }
    let candidates: Vec<&runner_core::policy::TrustedKey> = envelope
        .signatures
        .iter()
        .filter_map(|s| policy.approval.trusted_by_key_id(&s.keyid))
        .collect();
    let verified: Vec<&runner_core::policy::TrustedKey> = candidates
        .iter()
        .copied()
        .filter(|k| sign::verify(&envelope, PAYLOAD_TYPE, &k.key).is_ok())
        .collect();
    let mut key = None;
    let refusal = if candidates.is_empty() {
        required.then(|| {
            (
                "approval.signer_untrusted",
                format!(
                    "{sig_name} is signed by key {}, which is not among the policy's trusted keys ([[approval.trusted]])",
                    joined(&envelope.signatures, |s| s.keyid.clone())
                ),
            )
        })
    } else if verified.is_empty() {
        Some((
            "approval.signature_invalid",
            format!(
                "the signature in {sig_name} by key {} does not verify",
                joined(&candidates, |k| format!("{} ({})", k.key_id, k.name))
            ),
        ))
    } else {
        let approved_by = approved_by.map(str::trim);
        match approved_by.map(|name| verified.iter().find(|k| k.name == name)) {
            None => None,
            Some(Some(k)) => {
                key = Some(ApprovalKey {
                    key_id: k.key_id.clone(),
                    name: k.name.clone(),
                });
                None
            }
            Some(None) => Some((
                "approval.signer_mismatch",
                format!(
                    "{sig_name} is signed by {}, but `approved_by` is `{}`",
                    joined(&verified, |k| format!("`{}` (key {})", k.name, k.key_id)),
                    approved_by.unwrap_or_default()
                ),
            )),
        }
    };
    reasons.extend(refusal.map(|(code, message)| Reason::new(code, message, None)));
    if reasons.is_empty() {
        Ok(key)
    } else {
        Err(reasons)
    }
}

/// `items`, each as `show` writes it, joined with `, `.
fn joined<T>(items: &[T], show: impl Fn(&T) -> String) -> String {
    items.iter().map(show).collect::<Vec<_>>().join(", ")
}

/// 1-based line of the first byte where `a` and `b` differ (normalization keeps the
/// file's line count, so this is a line of the file).
fn first_difference_line(a: &[u8], b: &[u8]) -> usize {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    a[..common].iter().filter(|&&c| c == b'\n').count() + 1
}

/// A top-level scalar of the front matter and its line, when it can be read.
fn front_matter_field(bytes: &[u8], key: &str, policy: &Policy) -> Option<(String, usize)> {
    // The same normalized text `request::validate` judges.
    let text = runner_core::normalize::for_hashing(std::str::from_utf8(bytes).ok()?);
    let split = frontmatter::split(&text).ok()?;
    let budget = yaml::Budget {
        max_depth: policy.request.max_yaml_depth,
        max_nodes: policy.request.max_yaml_nodes,
    };
    let root = yaml::load(&split.front_matter, split.front_matter_first_line, budget).ok()?;
    let Node::Map { entries, .. } = &root else {
        return None;
    };
    let entry = entries.iter().find(|e| e.key == key)?;
    match &entry.value {
        Node::Scalar { value, .. } => Some((value.clone(), entry.key_line)),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ed25519_dalek::pkcs8::EncodePublicKey;

    const REQUEST: &str = include_str!("../../examples/csv-stats/TR-20261121-100000Z-csv-stats.md");

    fn policy(required: bool, trusted: &[(&str, &ed25519_dalek::SigningKey)]) -> Policy {
        let mut text = runner_core::policy::DEFAULT_POLICY_TOML.replace(
            "require_signed_approval = false",
            &format!("require_signed_approval = {required}"),
        );
        for (name, key) in trusted {
            let pem = key
                .verifying_key()
                .to_public_key_pem(Default::default())
                .unwrap();
            text.push_str(&format!(
                "\n[[approval.trusted]]\nname = \"{name}\"\npublic_key = \"\"\"\n{pem}\"\"\"\n"
            ));
        }
        Policy::parse(&text, "test").unwrap()
    }

    fn envelope(text: &str, key: &ed25519_dalek::SigningKey) -> SignatureFile {
        let env = sign::sign(PAYLOAD_TYPE, &signed_payload(text.as_bytes()), key);
        SignatureFile::Bytes(serde_json::to_vec(&env).unwrap())
    }

    fn codes(r: Result<Judged, Vec<Reason>>) -> Vec<String> {
        match r {
            Ok(_) => vec![],
            Err(rs) => rs.into_iter().map(|r| r.code).collect(),
        }
    }

    #[test]
    fn signature_path_appends_sig() {
        assert_eq!(
            signature_path(Path::new("/r/TR-1.md")),
            PathBuf::from("/r/TR-1.md.sig")
        );
    }

    #[test]
    fn verdicts_table() {
        let ada = sign::generate().unwrap();
        let bob = sign::generate().unwrap();
        let mallory = sign::generate().unwrap();
        let required = policy(true, &[("operator-ada", &ada), ("operator-bob", &bob)]);
        let optional = policy(false, &[("operator-ada", &ada), ("operator-bob", &bob)]);
        let bytes = REQUEST.as_bytes();
        let judge =
            |sig: SignatureFile, p: &Policy| codes(judge_with_signature(bytes, sig, "sig", p));

        let ok = judge_with_signature(bytes, envelope(REQUEST, &ada), "sig", &required).unwrap();
        assert_eq!(ok.approval_key.unwrap().name, "operator-ada");
        assert_eq!(
            judge(SignatureFile::Absent, &required),
            ["approval.signature_missing"]
        );
        assert!(judge(SignatureFile::Absent, &optional).is_empty());
        assert_eq!(
            judge(envelope(REQUEST, &mallory), &required),
            ["approval.signer_untrusted"]
        );
        // Not required: a key the policy does not know proves nothing; unsigned.
        let unsigned =
            judge_with_signature(bytes, envelope(REQUEST, &mallory), "sig", &optional).unwrap();
        assert_eq!(unsigned.approval_key, None);
        assert_eq!(
            judge(envelope(REQUEST, &bob), &required),
            ["approval.signer_mismatch"]
        );
        assert_eq!(
            judge(envelope(REQUEST, &bob), &optional),
            ["approval.signer_mismatch"]
        );
        let other = REQUEST.replace("three days", "four days");
        assert_eq!(
            judge(envelope(&other, &ada), &required),
            ["approval.bytes_changed"]
        );
        assert_eq!(
            judge(envelope(&other, &ada), &optional),
            ["approval.bytes_changed"]
        );
        assert_eq!(
            judge(SignatureFile::Bytes(b"{\"payload\":".to_vec()), &required),
            ["approval.signature_invalid"]
        );
        // A signature that does not verify: the envelope of another key relabelled.
        let mut env = sign::sign(PAYLOAD_TYPE, &signed_payload(bytes), &mallory);
        env.signatures[0].keyid = runner_core::policy::key_id(&ada.verifying_key());
        let forged = SignatureFile::Bytes(serde_json::to_vec(&env).unwrap());
        assert_eq!(judge(forged, &optional), ["approval.signature_invalid"]);
        // Another payload type.
        let env = sign::sign("application/x-other", &signed_payload(bytes), &ada);
        let other_type = SignatureFile::Bytes(serde_json::to_vec(&env).unwrap());
        assert_eq!(judge(other_type, &required), ["approval.signature_invalid"]);
    }

    #[test]
    fn crlf_and_bom_variants_verify() {
        let ada = sign::generate().unwrap();
        let p = policy(true, &[("operator-ada", &ada)]);
        let sig = envelope(REQUEST, &ada);
        let variant = format!("\u{feff}{}", REQUEST.replace('\n', "\r\n"));
        assert!(judge_with_signature(variant.as_bytes(), sig, "sig", &p).is_ok());
    }

    #[test]
    fn self_approval_and_every_reason_listed() {
        let p = policy(true, &[]);
        let text = REQUEST
            .replace(
                "approved_by: \"operator-ada\"",
                "approved_by: \"Core-Agent\"",
            )
            .replace("cpu_limit: \"10\"", "cpu_limit: \"ten\"");
        let c = codes(judge_with_signature(
            text.as_bytes(),
            SignatureFile::Absent,
            "sig",
            &p,
        ));
        assert_eq!(
            c,
            [
                "limits.cpu_limit_format",
                "approval.self_approved",
                "approval.signature_missing"
            ]
        );
        let off = Policy::parse(
            &runner_core::policy::DEFAULT_POLICY_TOML.replace(
                "separation_of_duties = true",
                "separation_of_duties = false",
            ),
            "t",
        )
        .unwrap();
        let text = REQUEST.replace(
            "approved_by: \"operator-ada\"",
            "approved_by: \"core-agent\"",
        );
        assert!(judge_with_signature(text.as_bytes(), SignatureFile::Absent, "sig", &off).is_ok());
    }

    #[test]
    fn first_difference_is_a_line_number() {
        assert_eq!(first_difference_line(b"a\nb\nc", b"a\nb\nd"), 3);
        assert_eq!(first_difference_line(b"x", b"y"), 1);
        assert_eq!(first_difference_line(b"a\n", b"a\n"), 2);
    }
}
