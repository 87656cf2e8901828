//! One item of a governed packet: its fields, its source metadata and the rules between
//! them, and its content hash re-derived when a catalog is given.

use super::{
    AUTHORITY_STATUSES, METADATA_FIELDS, PRECEDENCES, SURFACE_KINDS, content_hash, is_local_path,
    is_relation_name, is_tagged_sha256, show,
};
use crate::Catalog;
use crate::json::Json;
use runner_core::request::document::{Reasons, clip, utc_timestamp};
use std::collections::BTreeMap;

/// What the packet-level checks need from one item.
#[derive(Default)]
pub(super) struct CheckedItem {
    pub(super) named_query_id: Option<String>,
    pub(super) content_hash: Option<String>,
    pub(super) precedence: Option<String>,
    pub(super) content_unchecked: bool,
}

/// Checks `items[i]`, adding its reasons to `r` in the reference's order.
pub(super) fn check_item(
    i: usize,
    item: &Json,
    as_of: Option<time::OffsetDateTime>,
    catalog: Option<&Catalog>,
    r: &mut Reasons,
) -> CheckedItem {
    let mut out = CheckedItem::default();
    let Json::Object(entries) = item else {
        r.add(
            "FIELD_INVALID",
            format!("items[{i}] must be an object, found {}", item.type_name()),
            None,
        );
        return out;
    };
    for (k, _) in entries {
        if !matches!(k.as_str(), "named_query_id" | "payload" | "source_metadata") {
            r.add("FIELD_UNKNOWN", format!("items[{i}].{} is not a field of an item (named_query_id, payload, source_metadata)", clip(k)), None);
        }
    }
    let id = named_query_id(i, item, r);
    let payload = item.get("payload");
    if payload.is_none() {
        r.add(
            "FIELD_MISSING",
            format!("items[{i}] has no `payload` (the literal rows)"),
            None,
        );
    }
    let at = format!(
        "items[{i}]{}",
        id.as_deref()
            .map(|s| format!(" ({})", clip(s)))
            .unwrap_or_default()
    );
    let meta = Metadata::read(at, item, r);
    meta.check_surface_and_source(id.as_deref(), r);
    meta.check_observation(as_of, r);
    meta.check_authority(r);
    let declared = meta.declared_content_hash(r);
    if let (Some(id), Some(declared), Some(payload)) = (&id, &declared, payload) {
        out.content_unchecked = meta.check_content_hash(id, declared, payload, catalog, r);
    }
    out.named_query_id = id;
    out.content_hash = declared;
    out.precedence = meta.fields.get("precedence").cloned();
    out
}

/// The item's `named_query_id`: a non-empty string, or a reason.
fn named_query_id(i: usize, item: &Json, r: &mut Reasons) -> Option<String> {
    match item.get("named_query_id") {
        None => {
            r.add(
                "FIELD_MISSING",
                format!("items[{i}] has no `named_query_id`"),
                None,
            );
            None
        }
        Some(Json::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        Some(other) => {
            r.add(
                "FIELD_INVALID",
                format!(
                    "items[{i}].named_query_id must be a non-empty string, found {}",
                    show(other)
                ),
                None,
            );
            None
        }
    }
}

/// An item's source metadata: its name in messages and the fields present as non-empty
/// strings.
struct Metadata {
    /// `items[i]`, with the named query in parentheses when there is one.
    at: String,
    fields: BTreeMap<&'static str, String>,
}

impl Metadata {
    /// Reads `source_metadata`: unknown and non-string fields are reasons, and an item
    /// missing any field is not evidence.
    fn read(at: String, item: &Json, r: &mut Reasons) -> Self {
        let empty = Vec::new();
        let meta = match item.get("source_metadata") {
            Some(Json::Object(m)) => m,
            Some(other) => {
                r.add(
                    "FIELD_INVALID",
                    format!(
                        "{at}.source_metadata must be an object, found {}",
                        other.type_name()
                    ),
                    None,
                );
                &empty
            }
            None => &empty,
        };
        for (k, _) in meta {
            if !METADATA_FIELDS.contains(&k.as_str()) {
                r.add(
                    "FIELD_UNKNOWN",
                    format!(
                        "{at}.source_metadata.{} is not a source metadata field",
                        clip(k)
                    ),
                    None,
                );
            }
        }
        // Every field present as a non-empty string, or the item is not evidence.
        let mut fields: BTreeMap<&str, String> = BTreeMap::new();
        let mut absent = Vec::new();
        for f in METADATA_FIELDS {
            match meta.iter().find(|(k, _)| k == f).map(|(_, v)| v) {
                None => absent.push(*f),
                Some(Json::String(s)) if !s.trim().is_empty() => {
                    fields.insert(f, s.clone());
                }
                Some(Json::String(_)) | Some(Json::Null) => absent.push(*f),
                Some(other) => r.add(
                    "FIELD_INVALID",
                    format!(
                        "{at}.source_metadata.{f} must be a string, found {}",
                        other.type_name()
                    ),
                    None,
                ),
            }
        }
        if !absent.is_empty() {
            r.add(
                "NOT_EVIDENCED_IN_ALLOWED_SURFACES",
                format!(
                    "{at} lacks source metadata ({}): it is not evidence from an allowed surface",
                    absent.join(", ")
                ),
                None,
            );
        }
        Self { at, fields }
    }

    /// Flags `field` when its value is a local path (local-first authority); true then.
    fn local_first(&self, r: &mut Reasons, field: &str, value: &str, why: &str) -> bool {
        let local = is_local_path(value);
        if local {
            r.add(
                "FLAG_LOCAL_FIRST_AUTHORITY",
                format!(
                    "{}.source_metadata.{field} `{}` {why}",
                    self.at,
                    clip(value)
                ),
                None,
            );
        }
        local
    }

    /// A field whose value must be one of `allowed` (`expected`, in words).
    fn one_of(
        &self,
        r: &mut Reasons,
        code: &'static str,
        field: &str,
        allowed: &[&str],
        expected: &str,
    ) {
        if let Some(value) = self.fields.get(field)
            && !allowed.contains(&value.as_str())
        {
            r.add(
                code,
                format!(
                    "{}.source_metadata.{field} must be {expected}, found `{}`",
                    self.at,
                    clip(value)
                ),
                None,
            );
        }
    }

    /// Where the evidence comes from: a table or view, of a known kind, read by the
    /// item's own named query.
    fn check_surface_and_source(&self, id: Option<&str>, r: &mut Reasons) {
        let at = &self.at;
        if let Some(surface) = self.fields.get("governed_surface")
            && !self.local_first(
                r,
                "governed_surface",
                surface,
                "is a local file, not a database table or view",
            )
            && !is_relation_name(surface)
        {
            r.add(
                "FIELD_INVALID",
                format!("{at}.source_metadata.governed_surface `{}` is not a table or view name (database.schema.relation)", clip(surface)),
                None,
            );
        }
        let either = "\"BASE TABLE\" or \"VIEW\"";
        self.one_of(
            r,
            "FLAG_SURFACE_KIND",
            "surface_kind",
            SURFACE_KINDS,
            either,
        );
        if let Some(path) = self.fields.get("named_query_id_or_kb_path")
            && !self.local_first(
                r,
                "named_query_id_or_kb_path",
                path,
                "is a local file path: evidence comes from named queries",
            )
            && id.is_some_and(|id| id != path)
        {
            r.add(
                "FLAG_SOURCE_MISMATCH",
                format!("{at}.source_metadata.named_query_id_or_kb_path is `{}`, not the item's named_query_id", clip(path)),
                None,
            );
        }
    }

    /// `observation_ts`: a UTC timestamp no later than the packet's `packet_as_of`.
    fn check_observation(&self, as_of: Option<time::OffsetDateTime>, r: &mut Reasons) {
        let at = &self.at;
        if let Some(ts) = self.fields.get("observation_ts") {
            match utc_timestamp(ts) {
                None => r.add(
                    "FIELD_INVALID",
                    format!("{at}.source_metadata.observation_ts must be an ISO-8601 UTC timestamp, found `{}`", clip(ts)),
                    None,
                ),
                Some(t) if as_of.is_some_and(|a| t > a) => r.add(
                    "FIELD_INVALID",
                    format!("{at}.source_metadata.observation_ts is later than packet_as_of: an export cannot hold a later observation"),
                    None,
                ),
                Some(_) => {}
            }
        }
    }

    /// `authority_status` and `precedence`: each known, and the pair consistent.
    fn check_authority(&self, r: &mut Reasons) {
        let at = &self.at;
        let statuses = format!("one of {}", AUTHORITY_STATUSES.join("|"));
        self.one_of(
            r,
            "FIELD_INVALID",
            "authority_status",
            AUTHORITY_STATUSES,
            &statuses,
        );
        let either = "canonical or diagnostic";
        self.one_of(r, "FIELD_INVALID", "precedence", PRECEDENCES, either);
        let authority = self.fields.get("authority_status").map(String::as_str);
        let precedence = self.fields.get("precedence").map(String::as_str);
        match (authority, precedence) {
            (Some(a @ ("review-ready" | "draft" | "superseded")), Some("canonical")) => r.add(
                "FLAG_AUTHORITY_VIOLATION",
                format!("{at} is {a} but carries canonical precedence: a {a} source is never treated as binding"),
                None,
            ),
            (Some("diagnostic"), Some(p)) if p != "diagnostic" => r.add(
                "FLAG_PRECEDENCE_VIOLATION",
                format!("{at} is a diagnostic source with precedence `{}`: a diagnostic source must have precedence diagnostic", clip(p)),
                None,
            ),
            (Some("binding"), Some("diagnostic")) => r.add(
                "FLAG_PRECEDENCE_VIOLATION",
                format!("{at} is binding but has diagnostic precedence: a binding source is canonical"),
                None,
            ),
            _ => {}
        }
    }

    /// The declared `content_hash`, when it is `sha256:` and 64 lowercase hex.
    fn declared_content_hash(&self, r: &mut Reasons) -> Option<String> {
        self.fields.get("content_hash").and_then(|h| {
            if is_tagged_sha256(h) {
                Some(h.clone())
            } else {
                r.add(
                    "FLAG_HASH_FORMAT",
                    format!("{}.source_metadata.content_hash must be `sha256:` and 64 lowercase hex, found `{}`", self.at, clip(h)),
                    None,
                );
                None
            }
        })
    }

    /// Re-derives the content hash from the catalog's SQL; true when there is no
    /// catalog (nor any check), which the verdict notes.
    fn check_content_hash(
        &self,
        id: &str,
        declared: &str,
        payload: &Json,
        catalog: Option<&Catalog>,
        r: &mut Reasons,
    ) -> bool {
        let at = &self.at;
        let Some(surface) = self.fields.get("governed_surface") else {
            return false;
        };
        match catalog {
            None => return true,
            Some(catalog) => match catalog.queries.get(id) {
                None => r.add(
                    "BLOCKED_BY_UNVERIFIED_SOURCE",
                    format!("{at}: the catalog has no SQL for `{}`, so its content hash cannot be re-derived", clip(id)),
                    None,
                ),
                Some(sql) => match content_hash(id, surface, sql, payload) {
                    Ok(actual) if actual != *declared => r.add(
                        "FLAG_CONTENT_HASH_MISMATCH",
                        format!("{at}.source_metadata.content_hash is {declared}, but {{named_query_id, governed_surface, sql, payload}} hashes to {actual}"),
                        None,
                    ),
                    Ok(_) => {}
                    Err(e) => r.add("FIELD_INVALID", format!("{at}.payload: {e}"), None),
                },
            },
        }
        false
    }
}
