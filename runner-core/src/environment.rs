//! The policy's package environments (issue 21, `[[environments]]`): named, hash-pinned
//! sets of pure-Python wheels a request selects by its `language`, checked when the
//! policy is parsed, and a package set's identity. Installing, storing and verifying
//! them is `runner::environment`'s.

use crate::digest::{is_sha256_hex, sha256_hex};
use crate::rules::GuestMapping;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where the guest sees an environment's tree (read-only), and its `PYTHONPATH`.
pub const GUEST_MOUNT: &str = "/site-packages";

/// The value of `set_type` in what [`set_id`] hashes.
const SET_TYPE: &str = "runner.env-set/v1";

/// One `[[environments]]` entry of the policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentSpec {
    /// `[a-z0-9][a-z0-9._-]*`, at most 64 characters.
    pub name: String,
    /// A guest of the policy's `[[guests]]` registry.
    pub guest: String,
    /// The request `language` values that select this environment.
    pub languages: Vec<String>,
    /// Every package, dependencies included: nothing is resolved.
    pub packages: Vec<PackagePin>,
}

/// One pinned wheel.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct PackagePin {
    pub name: String,
    pub version: String,
    /// sha256 (64 lowercase hex) of the wheel file.
    pub sha256: String,
}

/// A verified, installed environment: what a run mounts and what its lock pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub name: String,
    /// The tree's directory on the host.
    pub dir: PathBuf,
    /// sha256 hex of the tree (`runner::environment::tree::tree_sha256`).
    pub tree_sha256: String,
    pub packages: Vec<PackagePin>,
}

/// Checks the policy's `[[environments]]`: names, guests, languages and pins.
pub fn check_specs(specs: &[EnvironmentSpec], guests: &[GuestMapping]) -> Result<(), String> {
    for (i, spec) in specs.iter().enumerate() {
        let at = format!("environments entry {} (`{}`)", i + 1, spec.name);
        if !valid_name(&spec.name) {
            return Err(format!(
                "{at}: `name` must be 1-64 characters of a-z, 0-9, `.`, `_`, `-`, starting with a letter or digit"
            ));
        }
        if specs[..i].iter().any(|o| o.name == spec.name) {
            return Err(format!("{at}: the name is used twice"));
        }
        if !guests.iter().any(|g| g.guest == spec.guest) {
            return Err(format!(
                "{at}: `guest = \"{}\"` is not in the policy's [[guests]] registry",
                spec.guest
            ));
        }
        if spec.languages.is_empty() {
            return Err(format!(
                "{at}: `languages` is empty; a request selects an environment by its language"
            ));
        }
        for lang in &spec.languages {
            let taken_by_guest = guests
                .iter()
                .any(|g| g.languages.iter().any(|l| l.eq_ignore_ascii_case(lang)));
            let taken_by_env = specs[..i]
                .iter()
                .any(|o| o.languages.iter().any(|l| l.eq_ignore_ascii_case(lang)));
            if lang.trim().is_empty() || lang.trim() != lang {
                return Err(format!("{at}: language {lang:?} is empty or padded"));
            }
            if taken_by_guest || taken_by_env {
                return Err(format!(
                    "{at}: language `{lang}` already selects another guest or environment"
                ));
            }
        }
        if spec.packages.is_empty() {
            return Err(format!("{at}: `packages` is empty"));
        }
        for (j, p) in spec.packages.iter().enumerate() {
            let at = format!("{at}, package {} (`{}`)", j + 1, p.name);
            if !valid_package_name(&p.name) {
                return Err(format!("{at}: `name` is not a Python package name"));
            }
            if p.version.is_empty()
                || !p
                    .version
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".+!_-".contains(c))
            {
                return Err(format!(
                    "{at}: `version` must be an exact version such as 0.9.0"
                ));
            }
            if !is_sha256_hex(&p.sha256) || p.sha256.chars().any(|c| c.is_ascii_uppercase()) {
                return Err(format!(
                    "{at}: `sha256` must be the wheel's sha256, 64 lowercase hex digits"
                ));
            }
            if spec.packages[..j]
                .iter()
                .any(|o| normalize(&o.name) == normalize(&p.name))
            {
                return Err(format!("{at}: the package is listed twice"));
            }
        }
    }
    Ok(())
}

fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"._-".contains(c))
}

/// PEP 508 names: letters, digits, `.`, `_`, `-`, starting and ending alphanumeric.
fn valid_package_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 100
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(c))
}

/// The identity of a package set: sha256 of its canonical JSON, packages sorted by
/// normalized name. The environment's name is not part of it: two names for the same
/// wheels share one tree.
pub fn set_id(spec: &EnvironmentSpec) -> String {
    let mut packages: Vec<(String, &PackagePin)> = spec
        .packages
        .iter()
        .map(|p| (normalize(&p.name), p))
        .collect();
    packages.sort();
    let value = serde_json::json!({
        "set_type": SET_TYPE,
        "guest": spec.guest,
        "packages": packages.iter().map(|(n, p)| serde_json::json!({
            "name": n, "version": p.version, "sha256": p.sha256,
        })).collect::<Vec<_>>(),
    });
    // Strings and arrays only: canonicalization cannot fail.
    let text = crate::jcs::to_string(&value).unwrap_or_default();
    sha256_hex(text.as_bytes())
}

/// A distribution name as wheel file names and dist-info directories spell it: lowercase,
/// each run of `-`, `_`, `.` one `_`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if "-_.".contains(c) {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('_');
            }
            sep = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}
