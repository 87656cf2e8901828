//! The policy's package environments (`[[environments]]`): named, hash-pinned
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

/// Why an `[[environments]]` entry is refused: where (`environments entry N (`name`)`,
/// and the package when it is one), and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {problem}")]
pub struct SpecError {
    pub at: String,
    pub problem: SpecProblem,
}

/// What is wrong with an `[[environments]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecProblem {
    #[error(
        "`name` must be 1-64 characters of a-z, 0-9, `.`, `_`, `-`, starting with a letter or digit"
    )]
    Name,
    #[error("the name is used twice")]
    NameTwice,
    #[error("`guest = \"{0}\"` is not in the policy's [[guests]] registry")]
    UnknownGuest(String),
    #[error("`languages` is empty; a request selects an environment by its language")]
    NoLanguages,
    #[error("language {0:?} is empty or padded")]
    LanguageBlank(String),
    #[error("language `{0}` already selects another guest or environment")]
    LanguageTaken(String),
    #[error("`packages` is empty")]
    NoPackages,
    #[error("`name` is not a Python package name")]
    PackageName,
    #[error("`version` must be an exact version such as 0.9.0")]
    PackageVersion,
    #[error("`sha256` must be the wheel's sha256, 64 lowercase hex digits")]
    PackageSha256,
    #[error("the package is listed twice")]
    PackageTwice,
}

/// Checks the policy's `[[environments]]`: names, guests, languages and pins.
pub fn check_specs(specs: &[EnvironmentSpec], guests: &[GuestMapping]) -> Result<(), SpecError> {
    for (i, spec) in specs.iter().enumerate() {
        let at = format!("environments entry {} (`{}`)", i + 1, spec.name);
        let fail = |problem| {
            Err(SpecError {
                at: at.clone(),
                problem,
            })
        };
        if !valid_name(&spec.name) {
            return fail(SpecProblem::Name);
        }
        if specs[..i].iter().any(|o| o.name == spec.name) {
            return fail(SpecProblem::NameTwice);
        }
        if !guests.iter().any(|g| g.guest == spec.guest) {
            return fail(SpecProblem::UnknownGuest(spec.guest.clone()));
        }
        if spec.languages.is_empty() {
            return fail(SpecProblem::NoLanguages);
        }
        for lang in &spec.languages {
            let taken_by_guest = guests
                .iter()
                .any(|g| g.languages.iter().any(|l| l.eq_ignore_ascii_case(lang)));
            let taken_by_env = specs[..i]
                .iter()
                .any(|o| o.languages.iter().any(|l| l.eq_ignore_ascii_case(lang)));
            if lang.trim().is_empty() || lang.trim() != lang {
                return fail(SpecProblem::LanguageBlank(lang.clone()));
            }
            if taken_by_guest || taken_by_env {
                return fail(SpecProblem::LanguageTaken(lang.clone()));
            }
        }
        if spec.packages.is_empty() {
            return fail(SpecProblem::NoPackages);
        }
        for (j, p) in spec.packages.iter().enumerate() {
            let fail = |problem| {
                Err(SpecError {
                    at: format!("{at}, package {} (`{}`)", j + 1, p.name),
                    problem,
                })
            };
            if !valid_package_name(&p.name) {
                return fail(SpecProblem::PackageName);
            }
            if p.version.is_empty()
                || !p
                    .version
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".+!_-".contains(c))
            {
                return fail(SpecProblem::PackageVersion);
            }
            if !is_sha256_hex(&p.sha256) || p.sha256.chars().any(|c| c.is_ascii_uppercase()) {
                return fail(SpecProblem::PackageSha256);
            }
            if spec.packages[..j]
                .iter()
                .any(|o| normalize(&o.name) == normalize(&p.name))
            {
                return fail(SpecProblem::PackageTwice);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping() -> Vec<GuestMapping> {
        vec![GuestMapping {
            guest: "cpython-3.12".into(),
            programs: vec!["python".into()],
            languages: vec!["python".into()],
        }]
    }

    fn spec() -> EnvironmentSpec {
        EnvironmentSpec {
            name: "analysis".into(),
            guest: "cpython-3.12".into(),
            languages: vec!["python-analysis".into()],
            packages: vec![PackagePin {
                name: "tabulate".into(),
                version: "0.9.0".into(),
                sha256: "a".repeat(64),
            }],
        }
    }

    #[test]
    fn specs_are_checked_naming_the_entry() {
        assert_eq!(check_specs(&[spec()], &mapping()), Ok(()));
        let bad = |f: &dyn Fn(&mut EnvironmentSpec), want: &str| {
            let mut s = spec();
            f(&mut s);
            let err = check_specs(&[s], &mapping()).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
            assert!(err.contains("environments entry 1"), "{err}");
        };
        bad(&|s| s.name = "Bad Name".into(), "`name`");
        bad(&|s| s.guest = "cpython-9".into(), "[[guests]]");
        bad(&|s| s.languages = vec!["python".into()], "already selects");
        bad(&|s| s.languages.clear(), "`languages` is empty");
        bad(&|s| s.packages.clear(), "`packages` is empty");
        bad(&|s| s.packages[0].sha256 = "A".repeat(64), "`sha256`");
        bad(&|s| s.packages[0].version = ">=0.9".into(), "`version`");
        bad(&|s| s.packages[0].name = "../x".into(), "package name");
        bad(
            &|s| {
                let mut twin = s.packages[0].clone();
                twin.name = "Tabulate".into();
                s.packages.push(twin);
            },
            "listed twice",
        );
        let twice = check_specs(&[spec(), spec()], &mapping())
            .unwrap_err()
            .to_string();
        assert!(twice.contains("used twice"), "{twice}");
    }

    #[test]
    fn set_id_ignores_order_and_name_but_not_pins() {
        let a = spec();
        let mut b = spec();
        b.name = "other".into();
        assert_eq!(set_id(&a), set_id(&b));
        let mut c = spec();
        c.packages[0].sha256 = "b".repeat(64);
        assert_ne!(set_id(&a), set_id(&c));
        let mut d = spec();
        d.packages.insert(
            0,
            PackagePin {
                name: "networkx".into(),
                version: "3.4.2".into(),
                sha256: "c".repeat(64),
            },
        );
        let mut e = d.clone();
        e.packages.reverse();
        assert_eq!(set_id(&d), set_id(&e));
    }
}
