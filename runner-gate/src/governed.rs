//! Governed packets (`b7-governed-packet/v1`, `../shared/references/governed-packet.md`):
//! JSON exported from a read-only database role. Every rule of the reference, with its
//! verdict codes; reasons carry no line (`line: null`) and name the JSON path instead.
//!
//! Hashes, with this project's fixed encodings (see [`super::json`] for canonical JSON):
//!
//! * `content_hash` = `sha256:` + hex sha256 of the canonical JSON of
//!   `{named_query_id, governed_surface, sql, payload}`, the SQL coming from a catalog
//!   (`named_query_id → sql`), never from the packet;
//! * `manifest_hash` = `sha256:` + hex sha256 of the lines `named_query_id:content_hash`,
//!   one per item, sorted (by bytes), joined with LF, no final newline.
//!
//! The manifest is always re-derived (from the items' declared content hashes). Content
//! hashes need the catalog: without one the verdict says so in a note
//! (`CONTENT_HASH_NOT_CHECKED`) instead of passing them.

mod item;

use super::Catalog;
use super::json::{self, Json};
use item::check_item;
use regex::Regex;
use runner_core::digest::sha256_hex;
use runner_core::policy::{ForbiddenRule, Policy, RuleTarget};
use runner_core::request::Reason;
use runner_core::request::document::{Reasons, clip, utc_timestamp};
use std::collections::BTreeMap;
use std::sync::OnceLock;

pub const SCHEMA: &str = "b7-governed-packet/v1";

/// The packet's fields (all required).
pub const FIELDS: &[&str] = &[
    "schema",
    "packet_id",
    "packet_as_of",
    "source_mode",
    "freshness",
    "export_operator",
    "manifest_hash",
    "decision_effect",
    "may_gate",
    "non_global_denial_disclaimer",
    "items",
];

/// An item's source metadata (all required).
pub const METADATA_FIELDS: &[&str] = &[
    "governed_surface",
    "surface_kind",
    "named_query_id_or_kb_path",
    "observation_ts",
    "source_revision",
    "content_hash",
    "authority_status",
    "precedence",
];

pub const SURFACE_KINDS: &[&str] = &["BASE TABLE", "VIEW"];
pub const AUTHORITY_STATUSES: &[&str] = &[
    "binding",
    "review-ready",
    "draft",
    "evidence-only",
    "superseded",
    "diagnostic",
];
pub const PRECEDENCES: &[&str] = &["canonical", "diagnostic"];

/// `sha256:` + hex of the canonical JSON of `{named_query_id, governed_surface, sql, payload}`.
pub fn content_hash(
    named_query_id: &str,
    governed_surface: &str,
    sql: &str,
    payload: &Json,
) -> Result<String, json::CanonicalError> {
    let object = Json::Object(vec![
        ("named_query_id".into(), Json::String(named_query_id.into())),
        (
            "governed_surface".into(),
            Json::String(governed_surface.into()),
        ),
        ("sql".into(), Json::String(sql.into())),
        ("payload".into(), payload.clone()),
    ]);
    Ok(format!(
        "sha256:{}",
        sha256_hex(json::canonical(&object)?.as_bytes())
    ))
}

/// `sha256:` + hex of the sorted `named_query_id:content_hash` lines joined with LF.
pub fn manifest_hash<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut lines: Vec<String> = pairs
        .into_iter()
        .map(|(id, h)| format!("{id}:{h}"))
        .collect();
    lines.sort();
    format!("sha256:{}", sha256_hex(lines.join("\n").as_bytes()))
}

/// True for `sha256:` + 64 lowercase hex.
pub fn is_tagged_sha256(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .is_some_and(runner_core::digest::is_sha256_hex)
}

/// Judges a governed packet. Returns the reasons and the notes.
pub fn validate(
    bytes: &[u8],
    policy: &Policy,
    catalog: Option<&Catalog>,
) -> (Vec<Reason>, Vec<Reason>) {
    let mut r = Reasons::default();
    let mut notes = Vec::new();
    let Some(value) = parse_packet(bytes, &mut r) else {
        return (r.0, notes);
    };
    scan_strings(&value, "", policy.rules_for(RuleTarget::Packet), &mut r);
    check_field_names(&value, &mut r);
    non_empty_string(&value, "packet_id", &mut r);
    let as_of = packet_as_of(&value, &mut r);
    check_authority_flags(&value, &mut r);
    export_operator(value.get("export_operator"), &mut r);
    let manifest = declared_manifest(&value, &mut r);

    let items = match value.get("items") {
        None => return (r.0, notes),
        Some(Json::Array(items)) => items.as_slice(),
        Some(other) => {
            r.add(
                "FIELD_INVALID",
                format!("`items` must be an array, found {}", show(other)),
                None,
            );
            return (r.0, notes);
        }
    };
    let mut tally = Tally::default();
    for (i, item) in items.iter().enumerate() {
        tally.add(i, check_item(i, item, as_of, catalog, &mut r));
    }
    tally.check_duplicates(&mut r);
    tally.check_manifest(manifest, &mut r);
    notes.extend(tally.unchecked_note());
    (r.0, notes)
}

/// The packet as a JSON object, or the `PACKET_NOT_JSON` reason saying why not.
fn parse_packet(bytes: &[u8], r: &mut Reasons) -> Option<Json> {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            r.add(
                "PACKET_NOT_JSON",
                format!("the packet is not valid UTF-8 (byte {})", e.valid_up_to()),
                None,
            );
            return None;
        }
    };
    let value = match json::parse(runner_core::normalize::strip_bom(text)) {
        Ok(v) => v,
        Err(e) => {
            r.add(
                "PACKET_NOT_JSON",
                format!("the packet is not strict JSON: {e}"),
                None,
            );
            return None;
        }
    };
    if !matches!(value, Json::Object(_)) {
        r.add(
            "PACKET_NOT_JSON",
            format!(
                "the packet must be a JSON object, found {}",
                value.type_name()
            ),
            None,
        );
        return None;
    }
    Some(value)
}

/// The top-level field names: none unknown, none missing, and `schema` this one.
fn check_field_names(value: &Json, r: &mut Reasons) {
    let Json::Object(top) = value else { return };
    for (k, _) in top {
        if !FIELDS.contains(&k.as_str()) {
            let why = match k.as_str() {
                "signature" => {
                    " (signatures are future work in b7-governed-packet/v1; this validator cannot verify one, and does not pretend to)"
                }
                "ttl" | "expires" | "expires_at" | "max_age" => {
                    " (the packet carries no TTL: the consumer decides the acceptable age from packet_as_of)"
                }
                _ => "",
            };
            r.add(
                "FIELD_UNKNOWN",
                format!("`{}` is not a field of {SCHEMA}{why}", clip(k)),
                None,
            );
        }
    }
    for f in FIELDS {
        if value.get(f).is_none() {
            r.add(
                "FIELD_MISSING",
                format!("required field `{f}` is missing"),
                None,
            );
        }
    }
    match value.get("schema") {
        Some(Json::String(s)) if s == SCHEMA => {}
        Some(other) => r.add(
            "SCHEMA_MISMATCH",
            format!("`schema` must be \"{SCHEMA}\", found {}", show(other)),
            None,
        ),
        None => {}
    }
}

/// `packet_as_of` as a UTC timestamp, the bound of every item's `observation_ts`.
fn packet_as_of(value: &Json, r: &mut Reasons) -> Option<time::OffsetDateTime> {
    value.get("packet_as_of").and_then(|v| {
        let t = v.as_str().and_then(utc_timestamp);
        if t.is_none() {
            r.add(
                "FIELD_INVALID",
                format!(
                    "`packet_as_of` must be an ISO-8601 UTC timestamp, found {}",
                    show(v)
                ),
                None,
            );
        }
        t
    })
}

/// The fields that keep a packet evidence: derived from the export, deciding and gating
/// nothing, and scoped in what its absence of evidence means.
fn check_authority_flags(value: &Json, r: &mut Reasons) {
    for (field, want) in [
        ("source_mode", "PACKET_DERIVED"),
        ("freshness", "AS_OF_EXPORT"),
    ] {
        if let Some(v) = value.get(field)
            && v.as_str() != Some(want)
        {
            r.add(
                "FIELD_INVALID",
                format!("`{field}` must be \"{want}\", found {}", show(v)),
                None,
            );
        }
    }
    match value.get("decision_effect") {
        None => {}
        Some(Json::String(s)) if s == "NONE" => {}
        Some(Json::String(s)) => r.add(
            "FLAG_AUTHORITY_VIOLATION",
            format!("`decision_effect` is \"{}\": a governed packet is evidence and decides nothing (it must be \"NONE\")", clip(s)),
            None,
        ),
        Some(other) => r.add("FIELD_INVALID", format!("`decision_effect` must be \"NONE\", found {}", show(other)), None),
    }
    match value.get("may_gate") {
        None | Some(Json::Bool(false)) => {}
        Some(Json::Bool(true)) => r.add(
            "FLAG_AUTHORITY_VIOLATION",
            "`may_gate` is true: a governed packet may never gate a decision (it must be false)",
            None,
        ),
        Some(other) => r.add(
            "FIELD_INVALID",
            format!(
                "`may_gate` must be the boolean false, found {}",
                show(other)
            ),
            None,
        ),
    }
    if let Some(v) = value.get("non_global_denial_disclaimer") {
        match v.as_str() {
            Some(s) if !s.trim().is_empty() => {
                let l = s.to_lowercase();
                if !(l.contains("global") && (l.contains("scope") || l.contains("surface"))) {
                    r.add(
                        "FIELD_INVALID",
                        "`non_global_denial_disclaimer` must say that absence of evidence is scoped to the listed surfaces, never global",
                        None,
                    );
                }
            }
            _ => r.add(
                "FIELD_INVALID",
                format!(
                    "`non_global_denial_disclaimer` must be a non-empty string, found {}",
                    show(v)
                ),
                None,
            ),
        }
    }
}

/// The declared `manifest_hash`, when it is `sha256:` and 64 lowercase hex.
fn declared_manifest(value: &Json, r: &mut Reasons) -> Option<String> {
    value.get("manifest_hash").and_then(|v| match v.as_str() {
        Some(s) if is_tagged_sha256(s) => Some(s.to_owned()),
        _ => {
            r.add(
                "FLAG_HASH_FORMAT",
                format!(
                    "`manifest_hash` must be `sha256:` and 64 lowercase hex, found {}",
                    show(v)
                ),
                None,
            );
            None
        }
    })
}

/// What the checked items add up to: the manifest's lines, the items per named query,
/// and how many content hashes went unchecked.
struct Tally {
    pairs: Vec<(String, String)>,
    /// Every item gave a named query and a well-formed content hash.
    manifest_complete: bool,
    by_query: BTreeMap<String, Vec<(usize, String)>>,
    unchecked: usize,
}

impl Default for Tally {
    fn default() -> Self {
        Self {
            pairs: Vec::new(),
            manifest_complete: true,
            by_query: BTreeMap::new(),
            unchecked: 0,
        }
    }
}

impl Tally {
    /// Counts `items[i]`.
    fn add(&mut self, i: usize, checked: item::CheckedItem) {
        match (checked.named_query_id, checked.content_hash) {
            (Some(id), Some(h)) => {
                self.by_query
                    .entry(id.clone())
                    .or_default()
                    .push((i, checked.precedence.unwrap_or_default()));
                self.pairs.push((id, h));
            }
            _ => self.manifest_complete = false,
        }
        if checked.content_unchecked {
            self.unchecked += 1;
        }
    }

    /// One item per named query, and never a diagnostic beside a canonical one.
    fn check_duplicates(&self, r: &mut Reasons) {
        for (id, entries) in &self.by_query {
            if entries.len() > 1 {
                let at: Vec<String> = entries.iter().map(|(i, _)| format!("items[{i}]")).collect();
                r.add(
                    "FLAG_DUPLICATE_ITEM",
                    format!(
                        "`{}` appears in {}: one named query, one item",
                        clip(id),
                        at.join(", ")
                    ),
                    None,
                );
                let has = |p: &str| entries.iter().any(|(_, q)| q == p);
                if has("diagnostic") && has("canonical") {
                    r.add(
                        "FLAG_PRECEDENCE_VIOLATION",
                        format!("a diagnostic item for `{}` stands beside a canonical one: a diagnostic source never overrides a canonical one", clip(id)),
                        None,
                    );
                }
            }
        }
    }

    /// The declared manifest hash against the one the items' lines give, when every
    /// item gave its line.
    fn check_manifest(&self, declared: Option<String>, r: &mut Reasons) {
        if let Some(declared) = declared
            && self.manifest_complete
        {
            let actual = manifest_hash(self.pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())));
            if actual != declared {
                r.add(
                    "FLAG_MANIFEST_HASH_MISMATCH",
                    format!("`manifest_hash` is {declared}, but the items' `named_query_id:content_hash` lines hash to {actual}"),
                    None,
                );
            }
        }
    }

    /// The note saying how many content hashes were not re-derived (no catalog).
    fn unchecked_note(&self) -> Option<Reason> {
        let unchecked = self.unchecked;
        (unchecked > 0).then(|| {
            Reason::new(
                "CONTENT_HASH_NOT_CHECKED",
                format!(
                    "the content_hash of {unchecked} item(s) was not re-derived: no catalog of named_query_id → sql was given (--catalog FILE); the verdict covers the manifest over the declared item hashes only"
                ),
                None,
            )
        })
    }
}

fn export_operator(value: Option<&Json>, r: &mut Reasons) {
    let Some(value) = value else { return };
    let Json::Object(entries) = value else {
        r.add(
            "FIELD_INVALID",
            format!(
                "`export_operator` must be an object {{role, database, gateway}}, found {}",
                value.type_name()
            ),
            None,
        );
        return;
    };
    for (k, _) in entries {
        if !matches!(k.as_str(), "role" | "database" | "gateway") {
            r.add(
                "FIELD_UNKNOWN",
                format!(
                    "export_operator.{} is not a field (role, database, gateway)",
                    clip(k)
                ),
                None,
            );
        }
    }
    for f in ["role", "database", "gateway"] {
        match value.get(f) {
            None => r.add(
                "FIELD_MISSING",
                format!("export_operator.{f} is missing"),
                None,
            ),
            Some(Json::String(s)) if !s.trim().is_empty() => {}
            Some(other) => r.add(
                "FIELD_INVALID",
                format!(
                    "export_operator.{f} must be a non-empty string, found {}",
                    show(other)
                ),
                None,
            ),
        }
    }
    if let Some(role) = value.get("role").and_then(Json::as_str)
        && !is_read_only_role(role)
    {
        r.add(
            "FLAG_EXPORT_ROLE_NOT_READONLY",
            format!("export_operator.role `{}` is not a read-only role (a governed packet is exported by a read-only role)", clip(role)),
            None,
        );
    }
}

/// A role whose name says read-only (`readonly_export`, `read_only`, `reporting_ro`,
/// `reader`) and nothing that can write.
pub fn is_read_only_role(role: &str) -> bool {
    let lower = role.to_ascii_lowercase();
    let tokens: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty())
        .collect();
    let joined: String = tokens.concat();
    let says_read_only =
        joined.contains("readonly") || tokens.iter().any(|t| *t == "ro" || *t == "reader");
    let can_write = tokens.iter().any(|t| {
        matches!(
            *t,
            "rw" | "write"
                | "writer"
                | "admin"
                | "owner"
                | "superuser"
                | "root"
                | "dba"
                | "postgres"
                | "sa"
        )
    }) || joined.contains("readwrite");
    says_read_only && !can_write
}

/// A local file rather than a database relation: a path, a `file:` URL, a drive letter,
/// or a name ending in a file extension.
pub fn is_local_path(s: &str) -> bool {
    const FILE_EXTENSIONS: &[&str] = &[
        "csv", "tsv", "json", "jsonl", "ndjson", "xlsx", "xls", "ods", "parquet", "feather",
        "arrow", "db", "sqlite", "sqlite3", "duckdb", "md", "txt", "yaml", "yml", "toml", "pdf",
        "docx", "xml", "html",
    ];
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    t.starts_with('/')
        || t.starts_with('.')
        || t.starts_with('~')
        || t.contains('/')
        || t.contains('\\')
        || lower.starts_with("file:")
        || (t.len() >= 2 && t.as_bytes()[0].is_ascii_alphabetic() && t.as_bytes()[1] == b':')
        || lower
            .rsplit_once('.')
            .is_some_and(|(_, ext)| FILE_EXTENSIONS.contains(&ext))
}

/// `relation`, `schema.relation` or `database.schema.relation`.
pub fn is_relation_name(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    (1..=3).contains(&parts.len())
        && parts.iter().all(|p| {
            p.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '-')
        })
}

fn raw_sql_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    #[allow(clippy::unwrap_used)] // a constant pattern, exercised by the tests
    RE.get_or_init(|| {
        Regex::new(
            r#"(?is)\bselect\s+.{1,200}?\bfrom\s+[\w."]+(?:\s*(?:where|join|group|order|limit|having|union|;|$)|\.[\w"]+)|\binsert\s+into\b|\bupdate\s+[\w."]+\s+set\b|\bdelete\s+from\b|\bcreate\s+(?:or\s+replace\s+)?(?:temp\s+|temporary\s+)?(?:table|view|index|function|procedure|trigger|schema|role|user)\b|\bdrop\s+(?:table|view|index|schema|database|function|role|user)\b|\balter\s+(?:table|view|role|user|database)\b|\btruncate\s+(?:table\s+)?[\w."]+|\bgrant\s+[\w, ]+\s+on\b|\brevoke\s+[\w, ]+\s+on\b|\bcopy\s+[\w."]+\s+(?:from|to)\b|\bunion\s+(?:all\s+)?select\b|;\s*--"#,
        )
        .unwrap()
    })
}

/// True when `s` holds an SQL statement.
pub fn has_raw_sql(s: &str) -> bool {
    raw_sql_re().is_match(s)
}

/// Every key and string value: raw SQL is a failure anywhere, and the packet rules
/// judge the text (a secret in a payload row crosses the gate like any other).
fn scan_strings(value: &Json, path: &str, rules: &[ForbiddenRule], r: &mut Reasons) {
    let check = |s: &str, at: &str, r: &mut Reasons| {
        if has_raw_sql(s) {
            r.add(
                "FLAG_RAW_SQL",
                format!(
                    "{} holds raw SQL: SQL lives in the catalog, never in the packet",
                    display_path(at)
                ),
                None,
            );
        }
        let mut codes: Vec<(String, String)> = runner_core::request::forbidden::scan(
            runner_core::request::frontmatter::lines(s),
            rules,
        )
        .into_iter()
        .map(|f| (f.code, f.message))
        .collect();
        codes.sort();
        codes.dedup();
        for (code, message) in codes {
            r.add(&code, format!("{}: {message}", display_path(at)), None);
        }
    };
    match value {
        Json::String(s) => check(s, path, r),
        Json::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                scan_strings(item, &format!("{path}[{i}]"), rules, r);
            }
        }
        Json::Object(entries) => {
            for (k, v) in entries {
                let at = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                check(k, &format!("{at} (key)"), r);
                scan_strings(v, &at, rules, r);
            }
        }
        _ => {}
    }
}

fn display_path(at: &str) -> String {
    if at.is_empty() {
        "the packet".into()
    } else {
        format!("`{}`", clip(at))
    }
}

fn non_empty_string(value: &Json, field: &str, r: &mut Reasons) {
    if let Some(v) = value.get(field)
        && v.as_str().is_none_or(|s| s.trim().is_empty())
    {
        r.add(
            "FIELD_INVALID",
            format!("`{field}` must be a non-empty string, found {}", show(v)),
            None,
        );
    }
}

fn show(v: &Json) -> String {
    match v {
        Json::String(s) => format!("\"{}\"", clip(s)),
        Json::Number(n) => clip(n),
        Json::Bool(b) => b.to_string(),
        other => other.type_name().to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../../tests/governed/accept-worked-example.json");
    const CATALOG: &str = include_str!("../../tests/governed/catalog.json");

    fn codes(reasons: &[Reason]) -> Vec<&str> {
        reasons.iter().map(|r| r.code.as_str()).collect()
    }

    #[test]
    fn the_worked_example_re_derives() {
        let catalog = Catalog::parse(CATALOG).unwrap();
        let (reasons, notes) = validate(EXAMPLE.as_bytes(), &Policy::builtin(), Some(&catalog));
        assert!(
            reasons.is_empty() && notes.is_empty(),
            "{reasons:#?} {notes:#?}"
        );
        let payload = json::parse("{\"count\": 17}").unwrap();
        assert_eq!(
            content_hash(
                "NQ-ORDERS-OPEN-V1",
                "directus.public.orders",
                "select count(*) from public.orders where status = 'open'",
                &payload
            )
            .unwrap(),
            "sha256:a27eb65d00298410b6d2fbe9f401f2258660f3bcc638a64c3de5ddaa55fa75ff"
        );
        assert_eq!(
            manifest_hash([(
                "NQ-ORDERS-OPEN-V1",
                "sha256:a27eb65d00298410b6d2fbe9f401f2258660f3bcc638a64c3de5ddaa55fa75ff"
            )]),
            "sha256:3998a18abbd5cb0eeb2f12536e766d598b0e8f529c3c08619423019ecf07242f"
        );
    }

    #[test]
    fn without_a_catalog_the_verdict_is_scoped() {
        let (reasons, notes) = validate(EXAMPLE.as_bytes(), &Policy::builtin(), None);
        assert!(reasons.is_empty(), "{reasons:#?}");
        assert_eq!(codes(&notes), ["CONTENT_HASH_NOT_CHECKED"]);
        assert_eq!(notes[0].line, None);
    }

    #[test]
    fn manifest_lines_are_sorted_and_joined_without_final_newline() {
        let h = manifest_hash([("b", "sha256:2"), ("a", "sha256:1")]);
        assert_eq!(
            h,
            format!("sha256:{}", sha256_hex(b"a:sha256:1\nb:sha256:2"))
        );
        assert_eq!(manifest_hash([]), format!("sha256:{}", sha256_hex(b"")));
    }

    #[test]
    fn helper_tables() {
        for sql in [
            "select count(*) from public.orders where status = 'open'",
            "SELECT a, b FROM t",
            "select * from x.y",
            "insert into t values (1)",
            "DROP TABLE users",
            "update orders set x = 1",
            "x'; drop table y; --",
        ] {
            assert!(has_raw_sql(sql), "{sql}");
        }
        for text in [
            "Please select an option from the list",
            "open orders",
            "selected from 3 regions",
            "updated daily",
        ] {
            assert!(!has_raw_sql(text), "{text}");
        }
        for local in [
            "/srv/data/orders.csv",
            "./orders.csv",
            "orders.csv",
            "file:///x",
            "C:\\data\\x",
            "kb/orders.md",
            "~/x",
        ] {
            assert!(is_local_path(local), "{local}");
        }
        for relation in ["directus.public.orders", "orders", "public.v_orders"] {
            assert!(
                !is_local_path(relation) && is_relation_name(relation),
                "{relation}"
            );
        }
        for role in ["readonly_export", "read_only", "reporting_ro", "reader"] {
            assert!(is_read_only_role(role), "{role}");
        }
        for role in [
            "admin",
            "postgres",
            "readwrite",
            "export",
            "ro_admin",
            "rw_export",
        ] {
            assert!(!is_read_only_role(role), "{role}");
        }
    }
}
