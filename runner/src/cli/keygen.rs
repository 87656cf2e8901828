//! `runner keygen PREFIX [--json]`: make an Ed25519 key pair for signing approvals and
//! run statements: `PREFIX.key` (private, PKCS#8 PEM, mode 0600) and `PREFIX.pub`.

use super::output;
use runner_contract::exit_codes;
use runner_pipeline::sign;
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner keygen keys/ada                  # keys/ada.key (0600) and keys/ada.pub
  runner keygen keys/ci --json | jq -r .key_id

Put the .pub file's text under the approver's name in the policy's [[approval.trusted]];
sign approvals with `runner approve --key keys/ada.key`, runs with `runner exec --sign-key`.
An existing file is never overwritten (exit code 3).")]
pub struct KeygenCommand {
    /// Path prefix of the two files. Example: `keys/ada` → `keys/ada.key`, `keys/ada.pub`.
    #[arg(value_name = "PREFIX")]
    pub prefix: PathBuf,
    /// Print one JSON object (schema: schemas/keygen.json). Example: `--json`.
    #[arg(long)]
    pub json: bool,
}

/// What `runner keygen --json` prints.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct KeygenReport {
    /// The private key file (PKCS#8 PEM, mode 0600).
    pub private_key: PathBuf,
    /// The public key file (SPKI PEM).
    pub public_key: PathBuf,
    /// `sha256:<hex>` of the raw public key, as results and locks name it.
    pub key_id: String,
}

impl KeygenCommand {
    pub fn execute(self) -> i32 {
        let made = sign::generate().and_then(|key| {
            let paths = sign::write_keypair(&key, &self.prefix)?;
            Ok((key, paths))
        });
        match made {
            Ok((key, (secret, public))) => {
                let report = KeygenReport {
                    private_key: secret,
                    public_key: public,
                    key_id: runner_core::policy::key_id(&key.verifying_key()),
                };
                if self.json {
                    return super::print_json(&report);
                }
                crate::cli::outln!(
                    "private key: {} (keep it secret)",
                    report.private_key.display()
                );
                crate::cli::outln!("public key:  {}", report.public_key.display());
                crate::cli::outln!("key id:      {}", report.key_id);
                exit_codes::OK
            }
            Err(e) => {
                output::error(e);
                exit_codes::IO
            }
        }
    }
}
