//! The JSON Schemas of every `--json` output, derived (`schemars`) from the very types
//! serde writes, so a schema cannot describe anything but what is printed. They are
//! committed under `schemas/`, one file per command (`just schemas` rewrites them with
//! the hidden `runner __schemas DIR`), and `runner/tests/it/cli_schemas.rs` fails when the
//! committed files and the types disagree.
//!
//! Why a hidden subcommand rather than an xtask or an example: it needs nothing but the
//! binary that is already built, and the test calls [`all`] directly.

use super::output;
use runner_contract::exit_codes;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use std::path::PathBuf;

/// `runner __schemas DIR [--check]` (hidden: dispatched by `main` before the CLI is
/// parsed, so it appears in no help, completion or man page): write every schema into
/// DIR, or with `--check` write nothing and exit 1 when a file differs.
pub struct SchemasCommand {
    pub dir: PathBuf,
    pub check: bool,
}

impl SchemasCommand {
    /// Parses the arguments after `__schemas`.
    pub fn from_args(args: &[String]) -> Result<Self, String> {
        match args {
            [dir] => Ok(Self {
                dir: dir.into(),
                check: false,
            }),
            [dir, flag] | [flag, dir] if flag == "--check" => Ok(Self {
                dir: dir.into(),
                check: true,
            }),
            _ => Err("usage: runner __schemas DIR [--check]".into()),
        }
    }
}

/// Every output schema: `(file name, JSON text)`, the text pretty-printed with a final
/// newline.
pub fn all() -> Vec<(String, String)> {
    fn one<T: JsonSchema>(name: &str, command: &str, note: &str) -> (String, String) {
        // The serialize contract: what serde writes (an `Option` is always present, as
        // null; a `skip_serializing_if` field may be absent).
        let mut schema: Schema = SchemaSettings::draft2020_12()
            .for_serialize()
            .into_generator()
            .into_root_schema_for::<T>();
        let mut comment = format!("The output of `{command}`.");
        if !note.is_empty() {
            comment.push(' ');
            comment.push_str(note);
        }
        comment.push_str(" Generated from the Rust types by `just schemas`; do not edit.");
        schema.insert("$comment".into(), comment.into());
        let text = serde_json::to_string_pretty(&schema)
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        (format!("{name}.json"), text + "\n")
    }
    use super::{approve, drafts, env, exec, guest, keygen, policy, request, validate, version};
    vec![
        one::<validate::FileVerdict>(
            "validate",
            "runner validate --json",
            "One object per file, one per line (JSON Lines).",
        ),
        one::<runner_pipeline::report::ExecReport>("exec", "runner exec --json", ""),
        one::<Vec<exec::batch::BatchEntry>>(
            "exec-batch",
            "runner exec --json REQUEST… (a batch: several requests or a directory)",
            "One entry per request, in the order given, each `exec.json` plus `request`.",
        ),
        one::<runner_gate::inbox::Summary>("gate", "runner gate --json", ""),
        one::<env::EnvFetchReport>(
            "env-fetch",
            "runner env fetch --json",
            "`runner env install --json` prints the same object.",
        ),
        one::<env::EnvListReport>("env-list", "runner env list --json", ""),
        one::<runner_serve::Handled>(
            "serve",
            "runner serve --json",
            "One object per request handled, one per line (JSON Lines).",
        ),
        one::<runner_pipeline::lock::verify::Verification>("verify", "runner verify --json", ""),
        one::<runner_pipeline::report::ReplayReport>("replay", "runner replay --json", ""),
        one::<Vec<runner_pipeline::guest::GuestListEntry>>(
            "guest-list",
            "runner guest list --json",
            "",
        ),
        one::<guest::GuestFetchReport>("guest-fetch", "runner guest fetch --json", ""),
        one::<guest::GuestLocation>("guest-install", "runner guest install --json", ""),
        one::<guest::GuestLocation>("guest-path", "runner guest path --json", ""),
        one::<keygen::KeygenReport>("keygen", "runner keygen --json", ""),
        one::<approve::ApproveReport>("approve", "runner approve --json", ""),
        one::<drafts::ListReport>("drafts-list", "runner drafts list --json", ""),
        one::<drafts::RejectReport>("drafts-reject", "runner drafts reject --json", ""),
        one::<request::SealReport>("request-seal", "runner request seal --json", ""),
        one::<policy::PolicyReport>("policy-show", "runner policy show --json", ""),
        one::<version::VersionReport>("version", "runner version --json", ""),
    ]
}

impl SchemasCommand {
    pub fn execute(self) -> i32 {
        let schemas = all();
        if self.check {
            let mut code = exit_codes::OK;
            let dir = runner_sandbox::host::open_dir(&self.dir).ok();
            for (name, text) in &schemas {
                let path = self.dir.join(name);
                let committed = dir.as_ref().and_then(|d| d.read_to_string(name).ok());
                if committed.as_deref() != Some(text.as_str()) {
                    output::error(format!(
                        "{} is not current: run `just schemas`",
                        path.display()
                    ));
                    code = exit_codes::REJECT;
                }
            }
            return code;
        }
        if let Err(e) = runner_sandbox::host::create_dir_all(&self.dir) {
            output::error(format!("cannot create {}: {e}", self.dir.display()));
            return exit_codes::IO;
        }
        for (name, text) in &schemas {
            let path = self.dir.join(name);
            if let Err(e) = runner_pipeline::approval::edit::write_atomic(&path, text.as_bytes()) {
                output::error(format!("cannot write {}: {e}", path.display()));
                return exit_codes::IO;
            }
            crate::cli::outln!("{}", path.display());
        }
        exit_codes::OK
    }
}
