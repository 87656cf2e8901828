//! The Tool Execution Request model (`../shared/specs/tool-request.schema.md`).
//!
//! Raw bytes go in; [`validate::validate`] returns either an [`ApprovedRequest`] (which
//! only the validator can build) or every [`Reason`] the request was rejected for. It
//! judges against the [`crate::policy::Policy`].

pub mod command;
pub mod validate;

// The markdown toolkit and the forbidden-content scan, under the paths the request
// validator has always used (`runner::request::frontmatter`, ...).
pub use crate::forbidden;
pub use crate::markdown::{Reason, document, frontmatter, rendered, sections, yaml};

use serde::{Deserialize, Serialize};

pub use validate::validate;

/// Which engine runs the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BackendKind {
    /// The ERA contract, served by wasmtime with a CPython-for-WASI guest.
    #[serde(rename = "ERA")]
    Era,
    /// The Monty interpreter.
    #[serde(rename = "monty")]
    Monty,
}

/// An input declared in the front matter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeclaredInput {
    /// Absolute sandbox path, always under `/in/`.
    pub path: String,
    /// 64 lowercase hex.
    pub sha256: String,
}

impl DeclaredInput {
    /// The path relative to `/in` (`data/x.csv` for `/in/data/x.csv`).
    pub fn relative(&self) -> &str {
        self.path.strip_prefix("/in/").unwrap_or(&self.path)
    }
}

/// The limits the request asks for (already within the policy maxima).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestLimits {
    pub memory_limit_mb: u64,
    pub time_limit_sec: u64,
    /// `cpu_limit` as written in the request.
    pub cpu_limit: String,
    /// `cpu_limit` read as CPU seconds.
    pub cpu_limit_sec: f64,
}

/// What the request runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Work {
    /// One command line, split into words, and the guest its program selects.
    Era {
        command_line: String,
        argv: Vec<String>,
        guest: String,
        /// The package environment the request's `language` selects (policy
        /// `[[environments]]`), mounted read-only on the guest's import path.
        environment: Option<String>,
    },
    /// Python code for Monty, with its optional JSON inputs object.
    Monty {
        code: String,
        inputs_json: Option<String>,
    },
}

/// The `## Risk Assessment` fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RiskAssessment {
    pub level: String,
    pub justification: String,
    pub data_sensitivity: String,
    pub network_rationale: String,
}

/// A request that passed every rule. Only [`validate()`] builds one; its fields are
/// read-only.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovedRequest {
    request_id: String,
    created_utc: String,
    requested_by: String,
    approved_by: String,
    approved_utc: String,
    purpose: String,
    backend: BackendKind,
    language: String,
    limits: RequestLimits,
    inputs: Vec<DeclaredInput>,
    work: Work,
    outputs: Vec<String>,
    risk: RiskAssessment,
    /// `network: allowlist` (granted by the policy); false for `network: none`.
    network_allowlist: bool,
    /// sha256 of the file's bytes as read.
    bytes_sha256: String,
    /// sha256 of the normalized text (BOM stripped, CRLF → LF, NFC).
    normalized_sha256: String,
}

impl ApprovedRequest {
    pub fn request_id(&self) -> &str {
        &self.request_id
    }
    pub fn created_utc(&self) -> &str {
        &self.created_utc
    }
    pub fn requested_by(&self) -> &str {
        &self.requested_by
    }
    pub fn approved_by(&self) -> &str {
        &self.approved_by
    }
    pub fn approved_utc(&self) -> &str {
        &self.approved_utc
    }
    pub fn purpose(&self) -> &str {
        &self.purpose
    }
    pub fn backend(&self) -> BackendKind {
        self.backend
    }
    pub fn language(&self) -> &str {
        &self.language
    }
    pub fn limits(&self) -> &RequestLimits {
        &self.limits
    }
    pub fn inputs(&self) -> &[DeclaredInput] {
        &self.inputs
    }
    pub fn work(&self) -> &Work {
        &self.work
    }
    /// True when the request asked for `network: allowlist` and the policy grants it.
    pub fn network_allowlist(&self) -> bool {
        self.network_allowlist
    }
    /// Output paths named in `## Output Expectations` (all under `/out/`).
    pub fn outputs(&self) -> &[String] {
        &self.outputs
    }
    pub fn risk(&self) -> &RiskAssessment {
        &self.risk
    }
    pub fn bytes_sha256(&self) -> &str {
        &self.bytes_sha256
    }
    pub fn normalized_sha256(&self) -> &str {
        &self.normalized_sha256
    }
}
