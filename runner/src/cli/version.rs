//! `runner version [--json]` and the text of `runner --version`: the runner's version,
//! the engines it embeds, and every guest the embedded manifest registers (so a new
//! guest appears here without code changes).

use super::output;
use runner_contract::exit_codes;
use runner_pipeline::guest::GuestManifest;
use serde::Serialize;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner version
  runner version --json | jq -r '.guests[].file_sha256'
  runner --version          # the same text
  runner -V                 # only `runner X.Y.Z`")]
pub struct VersionCommand {
    /// Print one JSON object (schema: schemas/version.json) instead of text. Example:
    /// `runner version --json`.
    #[arg(long)]
    pub json: bool,
}

/// What `runner version --json` prints.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct VersionReport {
    /// The runner's own version (recorded in every result's Provenance and lock).
    pub runner: String,
    /// The wasmtime version embedded for the ERA backend.
    pub wasmtime: String,
    /// The Monty version of the monty worker.
    pub monty: String,
    /// Every registered guest, in manifest order.
    pub guests: Vec<GuestPinReport>,
}

/// One registered guest's pin.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GuestPinReport {
    /// Registry name, as requests and `runner guest` use it (`cpython-3.12`).
    pub name: String,
    /// The package it comes from, `package==version`.
    pub package: String,
    /// sha256 of the guest file (64 lowercase hex digits).
    pub file_sha256: String,
    /// Size of the guest file in bytes.
    pub size: u64,
}

/// The versions and pins, from the embedded manifest.
pub fn report() -> Result<VersionReport, String> {
    let manifest = GuestManifest::embedded().map_err(|e| e.to_string())?;
    Ok(VersionReport {
        runner: runner_pipeline::RUNNER_VERSION.to_owned(),
        wasmtime: runner_wasmtime::WASMTIME_VERSION.to_owned(),
        monty: runner_pipeline::MONTY_VERSION.to_owned(),
        guests: manifest
            .guests
            .iter()
            .map(|g| GuestPinReport {
                name: g.name.clone(),
                package: format!("{}=={}", g.package, g.version),
                file_sha256: g.file_sha256.clone(),
                size: g.size,
            })
            .collect(),
    })
}

/// The text after `runner ` in `runner --version` (clap prints the name first).
pub fn long_version() -> String {
    match report() {
        Ok(r) => {
            let mut text = format!("{}\nwasmtime {}\nmonty {}", r.runner, r.wasmtime, r.monty);
            for g in &r.guests {
                text.push_str(&format!(
                    "\nguest {}: {}, file sha256 {}",
                    g.name, g.package, g.file_sha256
                ));
            }
            text
        }
        Err(e) => format!(
            "{}\nwasmtime {}\nmonty {}\nguests: the embedded manifest is invalid: {e}",
            runner_pipeline::RUNNER_VERSION,
            runner_wasmtime::WASMTIME_VERSION,
            runner_pipeline::MONTY_VERSION
        ),
    }
}

impl VersionCommand {
    pub fn execute(self) -> i32 {
        let report = match report() {
            Ok(r) => r,
            Err(e) => {
                output::error(e);
                return exit_codes::INTERNAL;
            }
        };
        if self.json {
            return super::print_json(&report);
        }
        crate::cli::outln!("runner {}", long_version());
        exit_codes::OK
    }
}
