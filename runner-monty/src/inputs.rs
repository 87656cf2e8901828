//! Binding `## Inputs (JSON)` to Monty input variables.
//!
//! The request's JSON object is parsed again here (with `jiter`, which keeps integers
//! of any size exact) and each top-level key becomes a variable of the same name:
//!
//! | JSON                         | Monty value                                  |
//! |------------------------------|----------------------------------------------|
//! | `null`                       | `None`                                       |
//! | `true` / `false`             | `bool`                                       |
//! | integer (no `.`, no exponent)| `int`, exact at any size                     |
//! | other number                 | `float` (IEEE double)                        |
//! | string                       | `str`                                        |
//! | array                        | `list`, elements bound recursively           |
//! | object                       | `dict` with `str` keys, in document order    |
//!
//! A key that appears twice keeps its last value, as `json.loads` does. The validator
//! has already checked that the document is an object whose keys are identifiers.

use jiter::JsonValue;
use monty_types::MontyObject;

/// Input variables: `names[i]` is bound to `values[i]`.
#[derive(Debug, Default)]
pub struct BoundInputs {
    pub names: Vec<String>,
    pub values: Vec<MontyObject>,
}

/// Why the inputs could not be bound (the run is `trapped`, saying it).
#[derive(Debug, thiserror::Error)]
pub enum InputsError {
    #[error("`## Inputs (JSON)` does not parse: {0}")]
    Parse(#[source] jiter::JsonError),
    #[error("`## Inputs (JSON)` is not a JSON object")]
    NotAnObject,
}

/// Bind the inputs object (absent: no inputs).
pub fn bind(inputs_json: Option<&str>) -> Result<BoundInputs, InputsError> {
    let Some(text) = inputs_json else {
        return Ok(BoundInputs::default());
    };
    let value = JsonValue::parse(text.as_bytes(), false).map_err(InputsError::Parse)?;
    let JsonValue::Object(object) = value else {
        return Err(InputsError::NotAnObject);
    };
    let mut bound = BoundInputs::default();
    for (key, value) in object.iter() {
        let value = to_monty(value);
        if let Some(i) = bound.names.iter().position(|n| n == key.as_ref()) {
            bound.values[i] = value;
        } else {
            bound.names.push(key.to_string());
            bound.values.push(value);
        }
    }
    Ok(bound)
}

/// One JSON value as a Monty value (see the module table).
pub fn to_monty(value: &JsonValue<'_>) -> MontyObject {
    match value {
        JsonValue::Null => MontyObject::none(),
        JsonValue::Bool(b) => MontyObject::bool(*b),
        JsonValue::Int(i) => MontyObject::int(*i),
        JsonValue::BigInt(i) => MontyObject::bigint(i.clone()),
        JsonValue::Float(f) => MontyObject::float(*f),
        JsonValue::Str(s) => MontyObject::string(s.as_ref()),
        JsonValue::Array(items) => MontyObject::list(items.iter().map(to_monty)),
        JsonValue::Object(pairs) => MontyObject::dict(
            pairs
                .iter()
                .map(|(k, v)| (MontyObject::string(k.as_ref()), to_monty(v))),
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    fn reprs(json: &str) -> Vec<(String, String)> {
        let bound = bind(Some(json)).unwrap();
        bound
            .names
            .into_iter()
            .zip(bound.values.iter().map(MontyObject::py_repr))
            .collect()
    }

    #[test]
    fn binding_table() {
        let cases: &[(&str, &str)] = &[
            ("null", "None"),
            ("true", "True"),
            ("false", "False"),
            ("42", "42"),
            ("-7", "-7"),
            (
                "123456789012345678901234567890",
                "123456789012345678901234567890",
            ),
            ("1.5", "1.5"),
            ("1e3", "1000.0"),
            ("2.0", "2.0"),
            (r#""caf\u00e9""#, "'café'"),
            ("[1, [2, null], \"x\"]", "[1, [2, None], 'x']"),
            (r#"{"b": 1, "a": [true]}"#, "{'b': 1, 'a': [True]}"),
        ];
        for (json, repr) in cases {
            let got = reprs(&format!(r#"{{"v": {json}}}"#));
            assert_eq!(got, vec![("v".to_owned(), (*repr).to_owned())], "{json}");
        }
    }

    #[test]
    fn keys_keep_document_order_and_the_last_duplicate_wins() {
        assert_eq!(
            reprs(r#"{"z": 1, "a": 2, "z": 3}"#),
            vec![("z".into(), "3".into()), ("a".into(), "2".into())]
        );
    }

    #[test]
    fn absent_inputs_bind_nothing_and_non_objects_are_refused() {
        assert!(bind(None).unwrap().names.is_empty());
        assert_eq!(
            bind(Some("[1]")).unwrap_err().to_string(),
            "`## Inputs (JSON)` is not a JSON object"
        );
        let why = bind(Some("{")).unwrap_err().to_string();
        assert!(
            why.starts_with("`## Inputs (JSON)` does not parse: "),
            "{why}"
        );
    }
}
