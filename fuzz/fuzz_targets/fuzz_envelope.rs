//! DSSE envelopes: the reader never panics, what it reads writes back to an equal
//! envelope, and verifying any envelope with a real key never panics and accepts only a
//! signature by that key over the pre-authentication encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runner::sign::{self, parse_envelope};
use std::sync::LazyLock;

/// The public half of a throwaway key (`runner keygen`) that signed the seed envelopes
/// in `corpus/fuzz_envelope/`; its private half was never kept.
const SEED_KEY_PEM: &str = "-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEA/IkFBSNSUKYxsTN3yRby1Z4JibbKtJR8OqtxJ+NQwRY=
-----END PUBLIC KEY-----
";
static KEY: LazyLock<ed25519_dalek::VerifyingKey> = LazyLock::new(|| {
    sign::parse_verifying_key(SEED_KEY_PEM, "seed key").expect("the seed key parses")
});

fuzz_target!(|data: &[u8]| {
    let Ok(envelope) = parse_envelope(data) else {
        return;
    };
    let written = serde_json::to_vec(&envelope).expect("an envelope serializes");
    assert_eq!(parse_envelope(&written).ok().as_ref(), Some(&envelope));
    let key = &*KEY;
    for payload_type in [
        envelope.payload_type.as_str(),
        runner::approval::PAYLOAD_TYPE,
        runner::lock::statement::PAYLOAD_TYPE,
    ] {
        if let Ok(payload) = sign::verify(&envelope, payload_type, key) {
            assert_eq!(payload_type, envelope.payload_type);
            let id = sign::key_id(key);
            assert!(envelope.signatures.iter().any(|s| s.keyid == id));
            // The payload is the base64 text decoded: never longer than it.
            assert!(payload.len() <= envelope.payload.len());
        }
    }
    // A key as text: parsing any PEM-ish text never panics.
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = sign::parse_verifying_key(text, "fuzz");
    }
});
