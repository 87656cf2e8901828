//! The invariant each fuzz target asserts, one function per target, shared by the
//! libFuzzer targets (`fuzz_targets/`) and by the runner crate's test
//! `runner/tests/it/fuzz_regressions.rs`, which feeds every saved finding
//! (`regressions/TARGET/`) and every seed (`corpus/TARGET/`) to the same function in
//! the normal test suite. A function panics when its invariant fails.
//!
//! This file is compiled twice: here, and by that test through `#[path]`; it may use
//! only `runner` and the crates `runner` itself depends on.

use runner_core::policy::Policy;
use std::sync::LazyLock;

static POLICY: LazyLock<Policy> = LazyLock::new(Policy::builtin);

/// A target's invariant: panics when `data` breaks it.
pub type Invariant = fn(&[u8]);

/// Every target by its name, for the regression harness.
pub const TARGETS: &[(&str, Invariant)] = &[
    ("fuzz_frontmatter", frontmatter),
    ("fuzz_yaml", yaml),
    ("fuzz_request", request),
    ("fuzz_jcs", jcs),
    ("fuzz_lock", lock),
    ("fuzz_result", result),
    ("fuzz_packet", packet),
    ("fuzz_governed", governed),
    ("fuzz_gate_json", gate_json),
    ("fuzz_envelope", envelope),
    ("fuzz_policy", policy),
    ("fuzz_manifest", manifest),
];

/// Every reason points at a line the file has.
fn lines_within(reasons: &[runner_core::request::Reason], data: &[u8]) {
    let file_lines = data.iter().filter(|&&b| b == b'\n').count() + 1;
    for r in reasons {
        if let Some(line) = r.line {
            assert!(
                (1..=file_lines).contains(&line),
                "{r:?}: the file has {file_lines} lines"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// fuzz_frontmatter: the splitter never panics, and every line it hands out is the line of
// the original file with that number (so every reason points at the right line).

fn is_delimiter(line: &str, closing: bool) -> bool {
    let t = line.trim_end_matches([' ', '\t']);
    t == "---" || (closing && t == "...")
}

pub fn frontmatter(data: &[u8]) {
    use runner_core::request::frontmatter::{SplitError, lines, split};
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();

    // The file's own lines, counted independently of `lines`: split at LF after one
    // leading BOM, a CR before the LF dropped.
    let original: Vec<&str> = text
        .strip_prefix('\u{feff}')
        .unwrap_or(text)
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let numbered: Vec<_> = lines(text).collect();
    assert_eq!(numbered.len(), original.len());
    for (i, line) in numbered.iter().enumerate() {
        assert_eq!(line.number, i + 1);
        assert_eq!(line.text, original[i], "line {}", i + 1);
    }

    match split(text) {
        Ok(s) => {
            assert!(is_delimiter(original[0], false));
            assert_eq!(s.front_matter_first_line, 2);
            assert!(s.closing_line >= 2 && s.closing_line <= original.len());
            assert!(is_delimiter(original[s.closing_line - 1], true));
            // The closing delimiter is the first one after the opening line.
            assert!(
                original[1..s.closing_line - 1]
                    .iter()
                    .all(|l| !is_delimiter(l, true))
            );
            assert_eq!(s.front_matter, original[1..s.closing_line - 1].join("\n"));
            // The body is every line after the closing one, each with its own number.
            assert_eq!(s.body.len(), original.len() - s.closing_line);
            for (i, line) in s.body.iter().enumerate() {
                assert_eq!(line.number, s.closing_line + 1 + i);
                assert_eq!(line.text, original[line.number - 1]);
            }
        }
        Err(SplitError::Missing) => assert!(!is_delimiter(original[0], false)),
        Err(SplitError::Unterminated) => {
            assert!(is_delimiter(original[0], false));
            assert!(original[1..].iter().all(|l| !is_delimiter(l, true)));
        }
    }
}

// ---------------------------------------------------------------------------------------
// fuzz_yaml: the strict loader never panics, never builds more nodes or deeper nesting
// than the budget allows, and every line it reports lies inside the text it was given.

mod yaml_checks {
    use runner_core::request::yaml::{Budget, Node, load};

    /// Nodes as the loader counts them (every scalar, key scalars included, and every
    /// collection) and the deepest nesting of collections.
    fn measure(node: &Node, depth: usize, nodes: &mut usize, deepest: &mut usize) {
        *nodes += 1;
        match node {
            Node::Scalar { .. } => {}
            Node::Seq { items, .. } => {
                *deepest = (*deepest).max(depth + 1);
                for item in items {
                    measure(item, depth + 1, nodes, deepest);
                }
            }
            Node::Map { entries, .. } => {
                *deepest = (*deepest).max(depth + 1);
                for (i, e) in entries.iter().enumerate() {
                    *nodes += 1; // the key
                    assert!(
                        entries[..i].iter().all(|other| other.key != e.key),
                        "duplicate key {:?} accepted",
                        e.key
                    );
                    measure(&e.value, depth + 1, nodes, deepest);
                }
            }
        }
    }

    fn lines_within(node: &Node, first: usize, last: usize) {
        assert!(
            (first..=last).contains(&node.line()),
            "line {} outside {first}..={last}",
            node.line()
        );
        match node {
            Node::Scalar { .. } => {}
            Node::Seq { items, .. } => items.iter().for_each(|n| lines_within(n, first, last)),
            Node::Map { entries, .. } => entries.iter().for_each(|e| {
                assert!((first..=last).contains(&e.key_line));
                lines_within(&e.value, first, last)
            }),
        }
    }

    pub fn check(text: &str, first_line: usize, budget: Budget) {
        // The text's lines end at LF only (YAML also breaks at a lone CR; the file does
        // not).
        let last = first_line + text.matches('\n').count();
        match load(text, first_line, budget) {
            Ok(root) => {
                assert!(matches!(root, Node::Map { .. }));
                let (mut nodes, mut deepest) = (0, 0);
                measure(&root, 0, &mut nodes, &mut deepest);
                assert!(
                    nodes <= budget.max_nodes,
                    "{nodes} nodes > {}",
                    budget.max_nodes
                );
                assert!(
                    deepest <= budget.max_depth,
                    "depth {deepest} > {}",
                    budget.max_depth
                );
                lines_within(&root, first_line, last);
            }
            Err(errors) => {
                assert!(!errors.is_empty());
                for e in &errors {
                    assert!(e.code.starts_with("yaml."), "{}", e.code);
                    assert!(
                        (first_line..=last).contains(&e.line),
                        "{e:?} outside {first_line}..={last}"
                    );
                }
            }
        }
    }
}

pub fn yaml(data: &[u8]) {
    use runner_core::request::yaml::Budget;
    let text = String::from_utf8_lossy(data);
    let policy = &*POLICY;
    yaml_checks::check(
        &text,
        2,
        Budget {
            max_depth: policy.request.max_yaml_depth,
            max_nodes: policy.request.max_yaml_nodes,
        },
    );
    // Small budgets (taken from the first two bytes), so the fuzzer meets the limits
    // without writing 2000 nodes.
    if let [depth, nodes, ..] = data {
        yaml_checks::check(
            &text,
            1,
            Budget {
                max_depth: usize::from(depth % 10),
                max_nodes: usize::from(*nodes),
            },
        );
    }
}

// ---------------------------------------------------------------------------------------
// fuzz_request: the validator never panics, judges the same bytes the same way twice,
// points only at lines the file has, and an ACCEPT survives the line-ending
// normalization a signature covers: without its BOM and with LF endings it is the same
// request.

pub fn request(data: &[u8]) {
    use runner_core::normalize;
    use runner_core::request::validate;
    let policy = &*POLICY;
    let first = validate(data, policy);
    let again = validate(data, policy);
    match (&first, &again) {
        (Ok(a), Ok(b)) => {
            let a = serde_json::to_value(a).expect("an approved request serializes");
            let b = serde_json::to_value(b).expect("an approved request serializes");
            assert_eq!(a, b, "an ACCEPT re-validated differently");
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "a REJECT re-validated with other reasons");
            assert!(!a.is_empty(), "a REJECT without a reason");
            lines_within(a, data);
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
                    runner_core::digest::sha256_hex(normalize::for_hashing(&normalized).as_bytes())
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
}

// ---------------------------------------------------------------------------------------
// fuzz_jcs: for any JSON value the canonical text (RFC 8785 via serde_jcs) parses back,
// to a value equal to the original as I-JSON (every number a double), and
// canonicalizing again gives the same text (idempotent). The target also builds values
// from raw bytes with `arbitrary`; that half lives in the target.

/// Equal as I-JSON: numbers compare as the doubles they denote.
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
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

pub fn jcs_value(value: &serde_json::Value) {
    use runner_core::jcs;
    let canonical = jcs::to_string(value).expect("a JSON value has a canonical form");
    let parsed: serde_json::Value = serde_json::from_str(&canonical)
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
            runner_core::digest::sha256_hex(canonical.as_bytes())
        )
    );
}

pub fn jcs(data: &[u8]) {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        jcs_value(&value);
    }
}

// ---------------------------------------------------------------------------------------
// fuzz_lock: the strict reader never panics, and a lock it accepts is exactly the
// canonical text of what it read (serializing it again gives the same bytes). The writer
// and the reader agree: any lock-shaped JSON, sealed, reads back equal.

pub fn lock(data: &[u8]) {
    use runner_core::jcs;
    use runner_core::lock::LOCK_TYPE;
    use runner_core::lock::Lock;
    if let Ok(lock) = Lock::parse(data) {
        let text = jcs::to_string(&lock).expect("an accepted lock serializes");
        assert_eq!(
            text.as_bytes(),
            data,
            "an accepted lock re-serializes to other bytes"
        );
        assert_eq!(lock.rollup().expect("rollup"), lock.lock_sha256);
        // Sealing an accepted lock changes nothing.
        let (sealed, sealed_text) = lock.clone().seal().expect("seal");
        assert_eq!(sealed, lock);
        assert_eq!(sealed_text, text);
    }
    // Random bytes almost never carry a lock_sha256 that re-derives; reseal whatever
    // has the lock's shape, so the reader sees every writable lock.
    if let Ok(mut lock) = serde_json::from_slice::<Lock>(data) {
        // The writer only ever writes the one lock type.
        lock.lock_type = LOCK_TYPE.to_owned();
        if let Ok((sealed, text)) = lock.seal() {
            match Lock::parse(text.as_bytes()) {
                Ok(read) => assert_eq!(read, sealed, "a sealed lock reads back different"),
                Err(e) => panic!("the reader refuses a lock the writer sealed: {e}\n{text}"),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// fuzz_result: the tool-result validator (judged alone, without its artifact directory)
// never panics, judges the same bytes the same way twice, and points only at lines the
// document has. Also the excerpt shaper the writer and validator share.

pub fn result(data: &[u8]) {
    use runner_core::result::render::shown_lines;
    use runner_gate::ArtifactsAt;
    use runner_gate::tool_result::validate;
    let policy = &*POLICY;
    let (reasons, notes) = validate(data, &ArtifactsAt::Nowhere, policy);
    let again = validate(data, &ArtifactsAt::Nowhere, policy);
    assert_eq!(
        (&reasons, &notes),
        (&again.0, &again.1),
        "judged differently twice"
    );
    lines_within(&reasons, data);
    lines_within(&notes, data);

    let max = usize::from(data.first().copied().unwrap_or(0) % 16);
    let (shown, count) = shown_lines(data, max);
    assert!(shown.len() <= max && shown.len() <= count);
    for line in &shown {
        assert!(
            !line.chars().any(char::is_control),
            "{line:?} shows a control character"
        );
    }
}

// ---------------------------------------------------------------------------------------
// fuzz_packet: the research-packet validator never panics, judges the same bytes the
// same way twice, points only at lines the packet has; its content hashes depend on the
// normalized text only.

pub fn packet(data: &[u8]) {
    use runner_core::normalize;
    use runner_gate::research_packet::{content_hashes, validate};
    let policy = &*POLICY;
    let reasons = validate(data, policy);
    assert_eq!(reasons, validate(data, policy), "judged differently twice");
    lines_within(&reasons, data);
    // Normalizing is not idempotent on `\r\r\n` or a doubled BOM (the validator refuses
    // both, as a control or an invisible character): compare only where it is.
    if let Ok(text) = std::str::from_utf8(data) {
        let normalized = normalize::for_hashing(text);
        if normalize::for_hashing(&normalized) == normalized {
            assert_eq!(content_hashes(text), content_hashes(&normalized));
        }
    }
}

// ---------------------------------------------------------------------------------------
// fuzz_governed: the governed-packet validator, with and without a catalog, never
// panics and judges the same bytes the same way twice. Also the catalog reader.

/// The catalog the governed fixtures are judged with.
static CATALOG: LazyLock<runner_gate::Catalog> = LazyLock::new(|| {
    runner_gate::Catalog::parse(include_str!("../../tests/governed/catalog.json"))
        .expect("the catalog parses")
});

pub fn governed(data: &[u8]) {
    use runner_gate::governed::validate;
    let policy = &*POLICY;
    let alone = validate(data, policy, None);
    assert_eq!(
        alone,
        validate(data, policy, None),
        "judged differently twice"
    );
    let with = validate(data, policy, Some(&CATALOG));
    assert_eq!(
        with,
        validate(data, policy, Some(&CATALOG)),
        "judged differently twice"
    );
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = runner_gate::Catalog::parse(text);
    }
}

// ---------------------------------------------------------------------------------------
// fuzz_gate_json: the gate's strict JSON reader and canonical writer (governed packets,
// catalogs): the canonical text of anything read parses back and canonicalizes to
// itself, and its numbers agree with RFC 8785 (serde_jcs) wherever a number is a double.

/// Every non-integer literal must get the RFC 8785 text of the double it denotes.
fn numbers_agree(value: &runner_gate::json::Json) {
    use runner_gate::json::{Json, canonical_number};
    match value {
        Json::Number(lit) if lit.contains(['.', 'e', 'E']) => {
            let double: f64 = lit.parse().expect("a JSON number parses as f64");
            match canonical_number(lit) {
                Ok(text) => {
                    let theirs = runner_core::jcs::to_string(&double).expect("finite");
                    assert_eq!(text, theirs, "{lit}");
                }
                Err(_) => assert!(!double.is_finite(), "{lit} refused but finite"),
            }
        }
        Json::Array(items) => items.iter().for_each(numbers_agree),
        Json::Object(entries) => entries.iter().for_each(|(_, v)| numbers_agree(v)),
        _ => {}
    }
}

pub fn gate_json(data: &[u8]) {
    use runner_gate::json::{canonical, ecmascript_number, parse};
    // Any finite double: the gate's ECMAScript form is the lock's (serde_jcs), and it
    // reads back as the same double.
    if let Some(bits) = data.get(..8) {
        let v = f64::from_bits(u64::from_le_bytes(bits.try_into().expect("8 bytes")));
        if v.is_finite() {
            let ours = ecmascript_number(v);
            let theirs = runner_core::jcs::to_string(&v).expect("finite");
            assert_eq!(ours, theirs, "{v:e}");
            assert_eq!(ours.parse::<f64>().ok(), Some(v), "{v:e}");
        }
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(value) = parse(text) else {
        return;
    };
    numbers_agree(&value);
    let Ok(text) = canonical(&value) else {
        return;
    };
    let again =
        parse(&text).unwrap_or_else(|e| panic!("canonical text {text:?} does not parse: {e}"));
    assert_eq!(
        canonical(&again).as_deref(),
        Ok(text.as_str()),
        "not idempotent"
    );
}

// ---------------------------------------------------------------------------------------
// fuzz_envelope: the DSSE reader never panics, what it reads writes back to an equal
// envelope, and verifying any envelope with a real key never panics and accepts only a
// signature by that key over the pre-authentication encoding.

/// The public half of a throwaway key (`runner keygen`) that signed the seed envelopes
/// in `corpus/fuzz_envelope/`; its private half was never kept.
const SEED_KEY_PEM: &str = "-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEA/IkFBSNSUKYxsTN3yRby1Z4JibbKtJR8OqtxJ+NQwRY=
-----END PUBLIC KEY-----
";
static KEY: LazyLock<ed25519_dalek::VerifyingKey> = LazyLock::new(|| {
    runner_pipeline::sign::parse_verifying_key(SEED_KEY_PEM, "seed key")
        .expect("the seed key parses")
});

pub fn envelope(data: &[u8]) {
    use runner_pipeline::sign::{self, parse_envelope};
    let Ok(envelope) = parse_envelope(data) else {
        return;
    };
    let written = serde_json::to_vec(&envelope).expect("an envelope serializes");
    assert_eq!(parse_envelope(&written).ok().as_ref(), Some(&envelope));
    let key = &*KEY;
    for payload_type in [
        envelope.payload_type.as_str(),
        runner_pipeline::approval::PAYLOAD_TYPE,
        runner_core::lock::statement::PAYLOAD_TYPE,
    ] {
        if let Ok(payload) = sign::verify(&envelope, payload_type, key) {
            assert_eq!(payload_type, envelope.payload_type);
            let id = runner_core::policy::key_id(key);
            assert!(envelope.signatures.iter().any(|s| s.keyid == id));
            // The payload is the base64 text decoded: never longer than it.
            assert!(payload.len() <= envelope.payload.len());
        }
    }
    // A key as text: parsing any PEM-ish text never panics.
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = sign::parse_verifying_key(text, "fuzz");
    }
}

// ---------------------------------------------------------------------------------------
// fuzz_policy: the loader never panics; a policy it accepts pins the hash of its own
// text, keeps the request rules equal to the request kind's rules, and loads again the
// same.

pub fn policy(data: &[u8]) {
    use runner_core::policy::ForbiddenRule;
    use runner_core::policy::RuleTarget;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(policy) = Policy::parse(text, "fuzz") else {
        return;
    };
    assert_eq!(policy.sha256, runner_core::digest::sha256_hex(data));
    assert_eq!(policy.text, text);
    assert!(policy.request.max_bytes > 0 && policy.output.excerpt_lines > 0);
    let codes =
        |rules: &[ForbiddenRule]| -> Vec<String> { rules.iter().map(|r| r.code.clone()).collect() };
    assert_eq!(
        codes(&policy.forbidden),
        codes(policy.rules_for(RuleTarget::Request))
    );
    for target in RuleTarget::ALL {
        for rule in policy.rules_for(target) {
            assert!(rule.code.starts_with("forbidden.") && rule.applies_to.contains(&target));
        }
    }
    let again = Policy::parse(&policy.text, "fuzz").expect("an accepted policy loads again");
    assert_eq!(again.sha256, policy.sha256);
    assert_eq!(codes(&again.forbidden), codes(&policy.forbidden));
    assert_eq!(again.approval.trusted.len(), policy.approval.trusted.len());
}

// ---------------------------------------------------------------------------------------
// fuzz_manifest: the guest manifest loader never panics, an error names a line the text
// has, and every entry it accepts satisfies the rules the fetcher relies on without
// checking again (a name, package and version that cannot smuggle options, plain
// relative zip paths, lowercase sha256s, a bounded size, unique names).

pub fn manifest(data: &[u8]) {
    use runner_core::digest::is_sha256_hex;
    use runner_pipeline::guest::GuestError;
    use runner_pipeline::guest::manifest::{GuestManifest, MAX_GUEST_SIZE};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match GuestManifest::parse(text, "fuzz") {
        Ok(manifest) => {
            assert!(!manifest.guests.is_empty());
            for (i, g) in manifest.guests.iter().enumerate() {
                assert!(manifest.guests[..i].iter().all(|o| o.name != g.name));
                assert!(!g.name.is_empty() && g.name.len() <= 64);
                assert!(
                    g.name.bytes().all(|b| b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || b"._-".contains(&b))
                );
                assert!(g.name.as_bytes()[0].is_ascii_alphanumeric());
                for v in [&g.package, &g.version] {
                    assert!(!v.is_empty() && !v.starts_with('-'), "{v:?}");
                    assert!(
                        v.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"._-+!".contains(&b)),
                        "{v:?}"
                    );
                }
                assert!(is_sha256_hex(&g.wheel_sha256) && is_sha256_hex(&g.file_sha256));
                assert!((1..=MAX_GUEST_SIZE).contains(&g.size));
                assert!(!g.file.starts_with('/') && !g.file.contains('\\'));
                assert!(!g.file.chars().any(char::is_control));
                assert!(
                    g.file.split('/').all(|c| !matches!(c, "" | "." | "..")),
                    "{:?}",
                    g.file
                );
                assert!(!g.description.trim().is_empty());
            }
            assert_eq!(
                GuestManifest::parse(text, "fuzz").ok().as_ref(),
                Some(&manifest)
            );
        }
        Err(GuestError::ManifestField { line, .. }) => {
            let lines = text.matches('\n').count() + 1;
            assert!((1..=lines).contains(&line), "line {line} of {lines}");
        }
        Err(_) => {}
    }
}
