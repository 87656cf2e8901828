//! Inbox names as shown in reports, and made safe for a destination.

use crate::report;
use std::ffi::OsStr;

/// An inbox name as shown in reports and summaries: non-printable bytes escaped.
pub fn shown(name: &OsStr) -> String {
    report::printable(&name.to_string_lossy())
}

/// The destination name of an inbox entry, split into stem and extension: unsafe
/// characters become `_`, at most 200 bytes, never a report name.
pub fn safe_name(name: &OsStr) -> (String, String) {
    let lossy = name.to_string_lossy();
    let mut safe: String = lossy
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._+@=,-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.is_empty() || safe.starts_with('.') {
        safe.insert_str(0, "document");
    }
    for suffix in [report::MD_SUFFIX, report::JSON_SUFFIX] {
        if let Some(stem) = safe.strip_suffix(suffix) {
            safe = format!("{stem}.reasons-doc{}", &suffix[".reasons".len()..]);
        }
    }
    let (stem, ext) = match safe.rfind('.') {
        Some(i) if i > 0 && safe.len() - i <= 10 => (safe[..i].to_owned(), safe[i..].to_owned()),
        _ => (safe.clone(), String::new()),
    };
    let stem: String = stem.chars().take(180).collect();
    (stem, ext)
}
