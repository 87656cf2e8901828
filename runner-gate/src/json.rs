//! A strict JSON reader and the project's canonical JSON writer, for governed packets
//! and their catalogs.
//!
//! Strict: RFC 8259 only (no comments, no trailing commas, no NaN), a duplicate key is an
//! error (two readers of one packet must never see two different values), a lone
//! surrogate escape is an error, nesting is bounded, and a number keeps its literal so
//! an integer of any size survives exactly.
//!
//! Canonical JSON, fixed for this project (the README repeats it):
//! * object keys sorted by Unicode code point (the order of their UTF-8 bytes), each
//!   key once; no whitespace; `,` and `:` separators;
//! * strings as UTF-8 with non-ASCII characters kept as they are; only `"`, `\` and the
//!   controls U+0000–U+001F are escaped: `\b \t \n \f \r`, the others as `\u00xx`
//!   (lowercase hex);
//! * an integer literal (no fraction, no exponent) is written as its decimal digits,
//!   exactly, whatever its size (`-0` is `0`);
//! * any other number is read as an IEEE-754 double and written as ECMAScript's
//!   `Number.prototype.toString` writes it (the RFC 8785 form): `1.0` → `1`,
//!   `1.5e3` → `1500`, `1e21` → `1e+21`, `0.000001` → `0.000001`, `1e-7` → `1e-7`.
//!   A number too large for a double (`1e400`) has no canonical form.
//!
//! Two numbers that are equal as doubles and not larger than 2^53 get the same text
//! either way, so `17`, `17.0` and `1.7e1` all hash alike.

use std::fmt::Write as _;

/// A JSON value. Objects keep their keys in document order (each key once).
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// A number, as its literal text (already checked against the grammar).
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The value under `key` when this is an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// A short name of the value's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

/// Why a text is not (strict) JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at line {line}, column {column}")]
pub struct JsonError {
    pub message: String,
    pub line: usize,
    pub column: usize,
}

/// Deepest nesting accepted.
pub const MAX_DEPTH: usize = 128;

/// Parses one JSON text (a BOM is not allowed: RFC 8259 forbids it).
pub fn parse(text: &str) -> Result<Json, JsonError> {
    let mut p = Parser {
        bytes: text.as_bytes(),
        text,
        pos: 0,
    };
    p.skip_ws();
    let value = p.value(0)?;
    p.skip_ws();
    if p.pos != p.bytes.len() {
        return Err(p.error("text after the JSON value"));
    }
    Ok(value)
}

struct Parser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, message: impl Into<String>) -> JsonError {
        let before = &self.bytes[..self.pos.min(self.bytes.len())];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let column = self.text[line_start..self.pos.min(self.text.len())]
            .chars()
            .count()
            + 1;
        JsonError {
            message: message.into(),
            line,
            column,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn expect_literal(&mut self, word: &str, value: Json) -> Result<Json, JsonError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("unexpected character"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, JsonError> {
        match self.peek() {
            None => Err(self.error("unexpected end of input")),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') => self.expect_literal("true", Json::Bool(true)),
            Some(b'f') => self.expect_literal("false", Json::Bool(false)),
            Some(b'n') => self.expect_literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("unexpected character")),
        }
    }

    fn check_depth(&self, depth: usize) -> Result<(), JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.error(format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn object(&mut self, depth: usize) -> Result<Json, JsonError> {
        self.check_depth(depth)?;
        self.pos += 1;
        let mut entries: Vec<(String, Json)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        if self.closes(b'}') {
            return Ok(Json::Object(entries));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a string key"));
            }
            let key_at = self.pos;
            let key = self.string()?;
            if !seen.insert(key.clone()) {
                self.pos = key_at;
                return Err(self.error(format!("duplicate key {key:?}")));
            }
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.error("expected `:`"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value(depth)?;
            entries.push((key, value));
            if !self.more(b'}')? {
                return Ok(Json::Object(entries));
            }
        }
    }

    /// Past white space, whether `close` (the end of an empty object or array) is next;
    /// consumed when it is.
    fn closes(&mut self, close: u8) -> bool {
        self.skip_ws();
        let found = self.peek() == Some(close);
        if found {
            self.pos += 1;
        }
        found
    }

    /// After a member of an object or array: true at a `,` (another follows), false at
    /// `close` (the end), each consumed; anything else is an error.
    fn more(&mut self, close: u8) -> Result<bool, JsonError> {
        if self.closes(close) {
            return Ok(false);
        }
        if self.peek() == Some(b',') {
            self.pos += 1;
            return Ok(true);
        }
        Err(self.error(format!("expected `,` or `{}`", char::from(close))))
    }

    fn array(&mut self, depth: usize) -> Result<Json, JsonError> {
        self.check_depth(depth)?;
        self.pos += 1;
        let mut items = Vec::new();
        if self.closes(b']') {
            return Ok(Json::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth)?);
            if !self.more(b']')? {
                return Ok(Json::Array(items));
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let digits = self
            .bytes
            .get(self.pos..self.pos + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.error("a `\\u` escape needs four hex digits"))?;
        let v = u32::from_str_radix(digits, 16).map_err(|_| self.error("bad `\\u` escape"))?;
        self.pos += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            let start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[start..self.pos]);
            match self.peek() {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let Some(e) = self.peek() else {
                        return Err(self.error("unterminated string"));
                    };
                    self.pos += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let c = if (0xd800..0xdc00).contains(&hi) {
                                if !self.bytes[self.pos..].starts_with(b"\\u") {
                                    return Err(self.error("a lone surrogate in a `\\u` escape"));
                                }
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&lo) {
                                    return Err(self.error("a lone surrogate in a `\\u` escape"));
                                }
                                0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                            } else if (0xdc00..0xe000).contains(&hi) {
                                return Err(self.error("a lone surrogate in a `\\u` escape"));
                            } else {
                                hi
                            };
                            out.push(
                                char::from_u32(c)
                                    .ok_or_else(|| self.error("an invalid `\\u` escape"))?,
                            );
                        }
                        _ => {
                            self.pos -= 1;
                            return Err(self.error("an invalid escape"));
                        }
                    }
                }
                Some(_) => return Err(self.error("a control character inside a string")),
            }
        }
    }

    fn number(&mut self) -> Result<Json, JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                while matches!(self.peek(), Some(b'0'..=b'9')) {
                    self.pos += 1;
                }
            }
            _ => return Err(self.error("a number needs digits")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error("a number needs digits after `.`"));
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error("a number needs digits in its exponent"));
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        Ok(Json::Number(self.text[start..self.pos].to_owned()))
    }
}

/// A value without a canonical form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the number {0} is too large for a double and has no canonical form")]
pub struct CanonicalError(pub String);

/// The canonical text of `value` (see the module docs).
pub fn canonical(value: &Json) -> Result<String, CanonicalError> {
    let mut out = String::new();
    write_canonical(value, &mut out)?;
    Ok(out)
}

fn write_canonical(value: &Json, out: &mut String) -> Result<(), CanonicalError> {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Number(lit) => out.push_str(&canonical_number(lit)?),
        Json::String(s) => write_string(s, out),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out)?;
            }
            out.push(']');
        }
        Json::Object(entries) => {
            let mut sorted: Vec<&(String, Json)> = entries.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            out.push('{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_canonical(v, out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// Writes `s` as a canonical JSON string.
pub fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The canonical text of a number literal (already valid JSON grammar).
pub fn canonical_number(lit: &str) -> Result<String, CanonicalError> {
    if !lit.contains(['.', 'e', 'E']) {
        let (negative, digits) = match lit.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, lit),
        };
        return Ok(if digits == "0" {
            "0".to_owned()
        } else if negative {
            format!("-{digits}")
        } else {
            digits.to_owned()
        });
    }
    let v: f64 = lit.parse().map_err(|_| CanonicalError(lit.to_owned()))?;
    if !v.is_finite() {
        return Err(CanonicalError(lit.to_owned()));
    }
    Ok(ecmascript_number(v))
}

/// ECMAScript `Number.prototype.toString` of a finite double (ECMA-262 §6.1.6.1.20), the
/// RFC 8785 number form, by `ryu-js`: the same formatter the lock's canonical writer
/// (serde_jcs) uses, so the two canonical forms cannot drift apart. Rust's own shortest
/// digits (`{:e}`) are not that form: where two shortest digit strings are equally near
/// the double, ECMA-262 takes the even one and Rust may not (`784467440737161.25` is
/// `784467440737161.2` in ECMAScript, `…161.3` from Rust).
pub fn ecmascript_number(v: f64) -> String {
    if v == 0.0 {
        // -0 is "0" as well.
        return "0".to_owned();
    }
    ryu_js::Buffer::new().format_finite(v).to_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn canon(text: &str) -> String {
        canonical(&parse(text).unwrap()).unwrap()
    }

    #[test]
    fn sorted_keys_no_whitespace_utf8_kept() {
        assert_eq!(
            canon(
                "{ \"b\" : [1, 2.50, true, null], \"a\": \"é\\u00e9\\n\\u0001\", \"\u{10000}\": 0, \"\u{e000}\": 0 }"
            ),
            "{\"a\":\"éé\\n\\u0001\",\"b\":[1,2.5,true,null],\"\u{e000}\":0,\"\u{10000}\":0}"
        );
        assert_eq!(
            canon("\"\\/\\\"\\\\\\b\\f\\t\\r\u{7f}\u{2028}\""),
            "\"/\\\"\\\\\\b\\f\\t\\r\u{7f}\u{2028}\""
        );
        assert_eq!(canon("\"\\ud83d\\ude00\""), "\"\u{1f600}\"");
    }

    /// Each literal of `table` canonicalizes to its expected text.
    fn assert_numbers(table: &[(&str, &str)]) {
        for (lit, want) in table {
            assert_eq!(canonical_number(lit).unwrap(), *want, "{lit}");
        }
    }

    /// The number table the README quotes.
    #[test]
    fn numbers() {
        let table: &[(&str, &str)] = &[
            ("0", "0"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("17", "17"),
            ("17.0", "17"),
            ("1.7e1", "17"),
            ("-3", "-3"),
            ("1.5", "1.5"),
            ("1.5e3", "1500"),
            ("0.1", "0.1"),
            ("100000000000000000000", "100000000000000000000"),
            ("1e20", "100000000000000000000"),
            ("1e21", "1e+21"),
            (
                "123456789012345678901234567890",
                "123456789012345678901234567890",
            ),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("-1.25e-10", "-1.25e-10"),
            ("333333333.33333329", "333333333.3333333"),
            ("4.50", "4.5"),
            ("2e-3", "0.002"),
            ("1E30", "1e+30"),
            ("0.000000000000000000000000001", "1e-27"),
            ("5e-324", "5e-324"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("9007199254740993", "9007199254740993"),
            ("9007199254740993.0", "9007199254740992"),
        ];
        assert_numbers(table);
        assert!(canonical_number("1e400").is_err());
    }

    /// Found by fuzzing (fuzz_gate_json, fuzz/regressions/fuzz_gate_json/): where two
    /// shortest digit strings are equally near the double, ECMA-262 takes the one whose
    /// last digit is even; Rust's `{:e}` took the other. (Python's repr and V8 agree on
    /// the even one.)
    #[test]
    fn number_ties_take_the_even_digit() {
        let table: &[(&str, &str)] = &[
            ("784467440737161.25", "784467440737161.2"),
            (
                "784467440737161.1976931567890123456788",
                "784467440737161.2",
            ),
            ("784467440737161.3125", "784467440737161.2"),
            ("784467440737161.375", "784467440737161.4"),
            ("900719925474.01797", "900719925474.018"),
            ("-784467440737161.25", "-784467440737161.2"),
            ("0.3", "0.3"),
            ("-0.0e5", "0"),
        ];
        assert_numbers(table);
        assert_eq!(
            canon(
                "[90071992547401.7976937693171992547409930, 784467440737161.197693156789012345678890]"
            ),
            "[90071992547401.8,784467440737161.2]"
        );
    }

    #[test]
    fn rejects_what_strict_json_rejects() {
        for bad in [
            "{\"a\":1,\"a\":2}",
            "{\"a\":1,}",
            "[1,]",
            "01",
            "1.",
            "-",
            "NaN",
            "\"\\ud800\"",
            "\"\\udc00x\"",
            "\"a\u{1}\"",
            "'a'",
            "{a:1}",
            "1 2",
            "// c\n1",
            "\"\\x\"",
            "",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(parse(&deep).unwrap_err().message.contains("nesting"));
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(&ok).is_ok());
        // A member not followed by `,` or the container's end names both.
        assert_eq!(
            parse("{\"a\":1 2}").unwrap_err().message,
            "expected `,` or `}`"
        );
        assert_eq!(parse("[1 2]").unwrap_err().message, "expected `,` or `]`");
        assert_eq!(parse(" { } ").unwrap(), Json::Object(Vec::new()));
        assert_eq!(parse("[ ]").unwrap(), Json::Array(Vec::new()));
        let e = parse("{\n  \"a\": 1,\n  \"a\": 2\n}").unwrap_err();
        assert_eq!((e.line, e.column), (3, 3), "{e}");
    }

    proptest! {
        /// Canonical text is a fixed point: parsing it again and canonicalizing gives
        /// the same bytes; and serde_json reads it as the same value.
        #[test]
        fn canonical_is_idempotent(v in json_value()) {
            let text = serde_json::to_string(&v).unwrap();
            let once = canon(&text);
            prop_assert_eq!(&canon(&once), &once);
            let a: serde_json::Value = serde_json::from_str(&once).unwrap();
            prop_assert_eq!(a, v);
        }

        /// Doubles: the ECMAScript text reads back as the same double.
        #[test]
        fn ecmascript_numbers_round_trip(bits in any::<u64>()) {
            let v = f64::from_bits(bits);
            prop_assume!(v.is_finite());
            let text = ecmascript_number(v);
            let back: f64 = text.parse().unwrap();
            prop_assert!(back == v || (v == 0.0 && back == 0.0), "{} -> {}", v, text);
        }

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,64}") {
            let _ = parse(&text);
        }
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(serde_json::Value::from),
            "\\PC{0,8}".prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
                prop::collection::btree_map("\\PC{0,6}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
