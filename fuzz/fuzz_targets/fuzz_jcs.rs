//! The canonical-JSON writer (RFC 8785 via serde_jcs): for any JSON value the canonical
//! text parses back, to a value equal to the original as I-JSON (every number a double),
//! and canonicalizing again gives the same text (idempotent). The invariant is
//! `runner_fuzz::jcs_value` (src/lib.rs); the regression test runs its JSON half.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
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

fuzz_target!(|data: &[u8]| {
    runner_fuzz::jcs(data);
    if let Ok(value) = arbitrary_value(&mut Unstructured::new(data), 0) {
        runner_fuzz::jcs_value(&value);
    }
});
