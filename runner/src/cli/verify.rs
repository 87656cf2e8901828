//! `runner verify TS-….md [--request FILE] [--public-key FILE] [--json]`: re-derive
//! every hash of a result, its lock, its artifacts and (when given or found) its
//! request, and require equality. Fails closed; never repairs.

use runner_contract::exit_codes;
use runner_contract::verdict::Verdict;
use runner_pipeline::lock::verify::{self, Difference, Verification};
use runner_pipeline::sign;
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
            if let Err(code) = crate::cli::out_json(&v) {
                return code;
            }
        } else {
            crate::cli::outln!(
                "{}: {}",
                self.result.display(),
                super::output::verdict(v.verdict.as_str())
            );
            for d in &v.differences {
                crate::cli::outln!(
                    "  differs: {}\n    expected: {}\n    actual:   {}",
                    d.what,
                    d.expected,
                    d.actual
                );
            }
            for n in &v.not_checked {
                crate::cli::outln!("  not checked: {n}");
            }
        }
        if v.verdict == Verdict::Accept {
            exit_codes::OK
        } else {
            exit_codes::REJECT
        }
    }

    /// The statement beside the result must be the one the lock implies; with a key,
    /// its envelope must verify and carry exactly that statement.
    fn check_statement(&self, v: &mut Verification) {
        let key = match &self.public_key {
            None => None,
            Some(path) => match sign::load_verifying_key(path) {
                Ok(k) => Some(k),
                Err(e) => {
                    v.differences.push(Difference {
                        what: "public key".into(),
                        expected: "an Ed25519 public key".into(),
                        actual: e.to_string(),
                    });
                    v.verdict = Verdict::Reject;
                    return;
                }
            },
        };
        verify::check_statement(v, &self.result, key.as_ref());
    }
}
