//! Ed25519 keys and DSSE envelopes (Dead Simple Signing Envelope, as used by in-toto
//! and Sigstore). One mechanism signs both operator approvals and run statements.
//!
//! Keys are PKCS#8 / SPKI PEM files (`runner keygen` writes them; `openssl genpkey
//! -algorithm ed25519` makes compatible ones). A signature covers the DSSE
//! pre-authentication encoding `DSSEv1 <len(type)> <type> <len(body)> <body>`, so the
//! payload type is signed too and one kind of document cannot pass for another.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("{path}: {message}")]
    Key { path: String, message: String },
    #[error("signature envelope: {0}")]
    Envelope(String),
    #[error("no signature in the envelope verifies with key {0}")]
    BadSignature(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// A new key from the kernel's random source.
///
/// # Ambient authority
/// Reads `/dev/urandom`.
pub fn generate() -> Result<SigningKey, SignError> {
    let mut seed = [0u8; 32];
    runner_sandbox::read::urandom(&mut seed)?;
    Ok(SigningKey::from_bytes(&seed))
}

/// A key's id (`sha256:<hex>` of the raw public key) and the public key parser are the
/// policy's (`runner_core::policy`), which checks its trusted keys with them.
use runner_core::policy::key_id;

/// Writes `<prefix>.key` (PKCS#8 PEM, mode 0600) and `<prefix>.pub` (SPKI PEM), never
/// overwriting an existing file.
///
/// # Ambient authority
/// Creates two files on the host filesystem.
pub fn write_keypair(
    key: &SigningKey,
    prefix: &Path,
) -> Result<(std::path::PathBuf, std::path::PathBuf), SignError> {
    let err = |p: &Path, m: String| SignError::Key {
        path: p.display().to_string(),
        message: m,
    };
    let secret_path = prefix.with_extension("key");
    let public_path = prefix.with_extension("pub");
    let secret = key
        .to_pkcs8_pem(Default::default())
        .map_err(|e| err(&secret_path, e.to_string()))?;
    let public = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .map_err(|e| err(&public_path, e.to_string()))?;
    for (path, text, mode) in [
        (&secret_path, secret.as_bytes(), 0o600),
        (&public_path, public.as_bytes(), 0o644),
    ] {
        runner_sandbox::read::write_new(path, mode, text).map_err(|e| err(path, e.to_string()))?;
    }
    Ok((secret_path, public_path))
}

/// Loads a private key (PKCS#8 PEM).
pub fn load_signing_key(path: &Path) -> Result<SigningKey, SignError> {
    let text = runner_sandbox::read::read_to_string(path).map_err(|e| SignError::Key {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    SigningKey::from_pkcs8_pem(&text).map_err(|e| SignError::Key {
        path: path.display().to_string(),
        message: format!("not an Ed25519 PKCS#8 PEM private key: {e}"),
    })
}

/// Parses a public key (SPKI PEM) from text; `origin` names it in errors.
pub fn parse_verifying_key(text: &str, origin: &str) -> Result<VerifyingKey, SignError> {
    runner_core::policy::parse_public_key_pem(text).map_err(|e| SignError::Key {
        path: origin.into(),
        message: e.to_string(),
    })
}

/// Loads a public key (SPKI PEM).
pub fn load_verifying_key(path: &Path) -> Result<VerifyingKey, SignError> {
    let text = runner_sandbox::read::read_to_string(path).map_err(|e| SignError::Key {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    parse_verifying_key(&text, &path.display().to_string())
}

/// A DSSE envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    pub payload: String,
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    pub signatures: Vec<EnvelopeSignature>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeSignature {
    pub keyid: String,
    pub sig: String,
}

/// The DSSE pre-authentication encoding.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// Signs `payload` of `payload_type`.
pub fn sign(payload_type: &str, payload: &[u8], key: &SigningKey) -> Envelope {
    let sig: Signature = key.sign(&pae(payload_type, payload));
    Envelope {
        payload: B64.encode(payload),
        payload_type: payload_type.to_owned(),
        signatures: vec![EnvelopeSignature {
            keyid: key_id(&key.verifying_key()),
            sig: B64.encode(sig.to_bytes()),
        }],
    }
}

/// Parses an envelope from JSON text.
pub fn parse_envelope(bytes: &[u8]) -> Result<Envelope, SignError> {
    serde_json::from_slice(bytes).map_err(|e| SignError::Envelope(e.to_string()))
}

/// The payload of `envelope`, whose payload type must be `expected_type`, with no
/// signature checked: for comparing what an envelope carries when no key is at hand.
pub fn payload(envelope: &Envelope, expected_type: &str) -> Result<Vec<u8>, SignError> {
    if envelope.payload_type != expected_type {
        return Err(SignError::Envelope(format!(
            "payload type is `{}`, expected `{expected_type}`",
            envelope.payload_type
        )));
    }
    B64.decode(&envelope.payload)
        .map_err(|e| SignError::Envelope(format!("payload is not base64: {e}")))
}

/// Verifies `envelope` with `key` and returns its payload. The payload type must be
/// `expected_type`; one signature by `key` (matched by key id) must verify strictly.
pub fn verify(
    envelope: &Envelope,
    expected_type: &str,
    key: &VerifyingKey,
) -> Result<Vec<u8>, SignError> {
    let payload = payload(envelope, expected_type)?;
    let id = key_id(key);
    let message = pae(&envelope.payload_type, &payload);
    for s in envelope.signatures.iter().filter(|s| s.keyid == id) {
        let Ok(raw) = B64.decode(&s.sig) else {
            continue;
        };
        let Ok(bytes) = <[u8; 64]>::try_from(raw.as_slice()) else {
            continue;
        };
        if key
            .verify_strict(&message, &Signature::from_bytes(&bytes))
            .is_ok()
        {
            return Ok(payload);
        }
    }
    Err(SignError::BadSignature(id))
}

#[cfg(test)]
// reason: the tests check the key file's mode on disk
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn pae_matches_the_dsse_spec_example() {
        // From the DSSE protocol document.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
    }

    #[test]
    fn sign_verify_and_every_tamper_fails() {
        let key = generate().unwrap();
        let other = generate().unwrap();
        let env = sign("application/x-test", b"payload", &key);
        assert_eq!(
            verify(&env, "application/x-test", &key.verifying_key()).unwrap(),
            b"payload"
        );
        assert!(verify(&env, "application/x-other", &key.verifying_key()).is_err());
        assert!(verify(&env, "application/x-test", &other.verifying_key()).is_err());
        let mut t = env.clone();
        t.payload = B64.encode(b"payloaD");
        assert!(verify(&t, "application/x-test", &key.verifying_key()).is_err());
        let mut t = env.clone();
        t.signatures[0].sig = B64.encode([0u8; 64]);
        assert!(verify(&t, "application/x-test", &key.verifying_key()).is_err());
        let mut t = env.clone();
        t.signatures[0].sig.truncate(20);
        assert!(verify(&t, "application/x-test", &key.verifying_key()).is_err());
        let mut t = env;
        t.payload_type = "application/x-tesT".into();
        assert!(verify(&t, "application/x-tesT", &key.verifying_key()).is_err());
    }

    #[test]
    fn keys_round_trip_through_pem_files() {
        let dir = tempfile::tempdir().unwrap();
        let key = generate().unwrap();
        let (secret, public) = write_keypair(&key, &dir.path().join("ada")).unwrap();
        assert_eq!(
            load_signing_key(&secret).unwrap().to_bytes(),
            key.to_bytes()
        );
        assert_eq!(load_verifying_key(&public).unwrap(), key.verifying_key());
        assert!(
            write_keypair(&key, &dir.path().join("ada")).is_err(),
            "never overwrites"
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(load_verifying_key(&secret).is_err());
    }
}
