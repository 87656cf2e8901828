//! `runner verify TS-….md [--request FILE] [--public-key FILE] [--json]`: re-derive
//! every hash of a result, its lock, its artifacts and (when given or found) its
//! request, and require equality. Fails closed; never repairs.

use crate::exit_codes;
use crate::lock::statement::{self, PAYLOAD_TYPE};
use crate::lock::verify::{self, Difference, Verification};
use crate::sign;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner verify examples/ci-replay/baseline/TS-*.md
  runner verify results/TS-20261121-100000Z-csv-stats.md --request TR-20261121-100000Z-csv-stats.md
  runner verify results/TS-20261121-100000Z-csv-stats.md --public-key keys/ci.pub --json

Exit codes: 0 every hash re-derived and equal (ACCEPT), 1 any difference (REJECT).")]
pub struct VerifyCommand {
    /// The result document (`TS-….md`); its lock and artifacts are found beside it.
    /// Example: `results/TS-20261121-100000Z-csv-stats.md`.
    #[arg(value_name = "RESULT")]
    pub result: PathBuf,
    /// The request it ran (default: `<request_id>.md` beside the results directory).
    /// Example: `--request examples/csv-stats/TR-20261121-100000Z-csv-stats.md`.
    #[arg(long, value_name = "FILE")]
    pub request: Option<PathBuf>,
    /// Also require the run statement's DSSE signature (`TS-….intoto.dsse.json`) by this
    /// Ed25519 public key (PEM). Example: `--public-key keys/ci.pub`.
    #[arg(long, value_name = "FILE")]
    pub public_key: Option<PathBuf>,
    /// Print `{"verdict", "differences": [{"what", "expected", "actual"}], "checked",
    /// "not_checked"}` (schema: schemas/verify.json). Example: `--json`.
    #[arg(long)]
    pub json: bool,
}

impl VerifyCommand {
    pub fn execute(self) -> i32 {
        let mut v = verify::verify(&self.result, self.request.as_deref());
        self.check_statement(&mut v);
        if self.json {
            match serde_json::to_string(&v) {
                Ok(line) => println!("{line}"),
                Err(e) => {
                    super::output::error(e);
                    return exit_codes::INTERNAL;
                }
            }
        } else {
            println!(
                "{}: {}",
                self.result.display(),
                super::output::verdict(v.verdict)
            );
            for d in &v.differences {
                println!(
                    "  differs: {}\n    expected: {}\n    actual:   {}",
                    d.what, d.expected, d.actual
                );
            }
            for n in &v.not_checked {
                println!("  not checked: {n}");
            }
        }
        if v.verdict == "ACCEPT" {
            exit_codes::OK
        } else {
            exit_codes::REJECT
        }
    }

    /// The statement beside the result must be the one the lock implies; with a key,
    /// its envelope must verify and carry exactly that statement.
    fn check_statement(&self, v: &mut Verification) {
        let Some(lock) = v.lock.clone() else { return };
        let (id, dir) = verify::result_location(&self.result);
        let result_file = format!("{id}.md");
        let expected = match statement::statement_text(&lock, &result_file) {
            Ok(t) => t,
            Err(e) => {
                v.differences.push(Difference {
                    what: "statement".into(),
                    expected: "encodable".into(),
                    actual: e.to_string(),
                });
                v.verdict = "REJECT";
                return;
            }
        };
        let mut push = |what: &str, expected: &str, actual: String| {
            v.differences.push(Difference {
                what: what.into(),
                expected: expected.into(),
                actual,
            });
        };
        match std::fs::read(dir.join(statement::statement_file_name(&id))) {
            Ok(bytes) if bytes == expected.as_bytes() => v.checked.push("in-toto statement".into()),
            Ok(_) => push(
                "in-toto statement",
                "the statement the lock implies",
                "different bytes".into(),
            ),
            Err(e) => push("in-toto statement", "present", e.to_string()),
        }
        if let Some(key_path) = &self.public_key {
            let key = match sign::load_verifying_key(key_path) {
                Ok(k) => k,
                Err(e) => return push("public key", "an Ed25519 public key", e.to_string()),
            };
            match std::fs::read(dir.join(statement::envelope_file_name(&id))) {
                Err(e) => push(
                    "statement signature",
                    "a DSSE envelope beside the result",
                    e.to_string(),
                ),
                Ok(bytes) => match sign::parse_envelope(&bytes)
                    .and_then(|env| sign::verify(&env, PAYLOAD_TYPE, &key))
                {
                    Ok(payload) if payload == expected.as_bytes() => v
                        .checked
                        .push(format!("statement signature by {}", sign::key_id(&key))),
                    Ok(_) => push(
                        "statement signature",
                        "a signature over this run's statement",
                        "a valid signature over another statement".into(),
                    ),
                    Err(e) => push(
                        "statement signature",
                        "a valid signature by the given key",
                        e.to_string(),
                    ),
                },
            }
        } else if dir.join(statement::envelope_file_name(&id)).exists() {
            v.not_checked
                .push("statement signature (no --public-key given)".into());
        }
        if !v.differences.is_empty() {
            v.verdict = "REJECT";
        }
    }
}
