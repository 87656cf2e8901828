//! `runner keygen PREFIX`: make an Ed25519 key pair for signing approvals and run
//! statements: `PREFIX.key` (private, PKCS#8 PEM, mode 0600) and `PREFIX.pub`.

use crate::exit_codes;
use crate::sign;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct KeygenCommand {
    /// Path prefix of the two files (for example `keys/ada` → `keys/ada.key`, `keys/ada.pub`).
    #[arg(value_name = "PREFIX")]
    pub prefix: PathBuf,
}

impl KeygenCommand {
    pub fn execute(self) -> i32 {
        let made = sign::generate().and_then(|key| {
            let paths = sign::write_keypair(&key, &self.prefix)?;
            Ok((key, paths))
        });
        match made {
            Ok((key, (secret, public))) => {
                println!("private key: {} (keep it secret)", secret.display());
                println!("public key:  {}", public.display());
                println!("key id:      {}", sign::key_id(&key.verifying_key()));
                exit_codes::OK
            }
            Err(e) => {
                eprintln!("error: {e}");
                exit_codes::IO
            }
        }
    }
}
