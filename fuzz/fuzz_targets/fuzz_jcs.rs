//! The canonical-JSON writer (RFC 8785 via serde_jcs): for any JSON value the canonical
//! text parses back, to a value equal to the original as I-JSON (every number a double),
//! and canonicalizing again gives the same text (idempotent).
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use runner::lock::jcs;
use serde_json::{Map, Number, Value};

/// A JSON value built from the fuzzer's bytes, so every shape is reached without the
/// fuzzer having to learn JSON syntax first.
fn arbitrary_value(u: &mut Unstructured<'_>, depth: usize) -> Result<Value> {
    let kinds = if depth >= 6 { 5 } else { 7 };
    Ok(match u.int_in_range(0..=kinds)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::from(u.arbitrary::<i64>()?),
        3 => Value::from(u.arbitrary::<u64>()?),
        4 => Number::from_f64(f64::from_bits(u.arbitrary()?)).map_or(Value::Null, Value::Number),
        5 => Value::String(u.arbitrary()?),
        6 => {
            let n = u.int_in_range(0..=5)?;
            Value::Array(
                (0..n)
                    .map(|_| arbitrary_value(u, depth + 1))
                    .collect::<Result<_>>()?,
            )
        }
        _ => {
            let n = u.int_in_range(0..=5)?;
            let mut map = Map::new();
            for _ in 0..n {
                map.insert(u.arbitrary()?, arbitrary_value(u, depth + 1)?);
            }
            Value::Object(map)
        }
    })
}

/// Equal as I-JSON: numbers compare as the doubles they denote.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn check(value: &Value) {
    let canonical = jcs::to_string(value).expect("a JSON value has a canonical form");
    let parsed: Value = serde_json::from_str(&canonical)
        .unwrap_or_else(|e| panic!("canonical text {canonical:?} does not parse: {e}"));
    assert!(
        same(value, &parsed),
        "{value:?} came back as {parsed:?} from {canonical:?}"
    );
    let again = jcs::to_string(&parsed).expect("canonical again");
    assert_eq!(
        canonical, again,
        "canonicalization is not idempotent for {value:?}"
    );
    assert_eq!(
        jcs::digest(value).expect("digest"),
        format!(
            "sha256:{}",
            runner::digest::sha256_hex(canonical.as_bytes())
        )
    );
}

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        check(&value);
    }
    if let Ok(value) = arbitrary_value(&mut Unstructured::new(data), 0) {
        check(&value);
    }
});
