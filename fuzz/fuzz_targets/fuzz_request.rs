//! The request validator: never panics, judges the same bytes the same way twice, points
//! only at lines the file has, and an ACCEPT survives the line-ending normalization a
//! signature covers: without its BOM and with LF endings it is the same request.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runner::normalize;
use runner::policy::Policy;
use runner::request::validate;
use std::sync::LazyLock;

static POLICY: LazyLock<Policy> = LazyLock::new(Policy::builtin);

fuzz_target!(|data: &[u8]| {
    let policy = &*POLICY;
    let first = validate(data, policy);
    let again = validate(data, policy);
    let file_lines = data.iter().filter(|&&b| b == b'\n').count() + 1;
    match (&first, &again) {
        (Ok(a), Ok(b)) => {
            let a = serde_json::to_value(a).expect("an approved request serializes");
            let b = serde_json::to_value(b).expect("an approved request serializes");
            assert_eq!(a, b, "an ACCEPT re-validated differently");
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "a REJECT re-validated with other reasons");
            assert!(!a.is_empty(), "a REJECT without a reason");
            for r in a {
                if let Some(line) = r.line {
                    assert!(
                        (1..=file_lines).contains(&line),
                        "{r:?}: the file has {file_lines} lines"
                    );
                }
            }
        }
        _ => panic!("the verdict changed between two runs: {first:?} then {again:?}"),
    }

    // A signature covers the normalized text, so the BOM and CRs it drops must not
    // matter. (NFC is left out: it can change a path or a string literal, which is the
    // point of hashing the normalized text, not a validator property.)
    if let (Ok(approved), Ok(text)) = (&first, std::str::from_utf8(data)) {
        let normalized = normalize::strip_bom(text).replace("\r\n", "\n");
        match validate(normalized.as_bytes(), policy) {
            Ok(n) => {
                assert_eq!(n.normalized_sha256(), approved.normalized_sha256());
                assert_eq!(
                    approved.normalized_sha256(),
                    runner::digest::sha256_hex(normalize::for_hashing(&normalized).as_bytes())
                );
                let mut a = serde_json::to_value(approved).expect("serializes");
                let mut b = serde_json::to_value(&n).expect("serializes");
                a["bytes_sha256"] = serde_json::Value::Null;
                b["bytes_sha256"] = serde_json::Value::Null;
                assert_eq!(a, b, "normalizing the text changed the approved request");
            }
            Err(reasons) => panic!("accepted, but its normalized text is rejected: {reasons:?}"),
        }
    }
});
