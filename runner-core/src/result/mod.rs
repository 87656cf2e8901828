//! The Tool Execution Result as data: the [`Artifact`] record of a collected file, the
//! rule for names that may be written into the document ([`is_safe_component`]), and
//! the document's rendering ([`render`]). Collecting `/out` and publishing the set are
//! `runner::result`'s.

pub mod render;

/// One collected artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Path relative to `/out` as stored beside the result (always a safe name).
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

/// A path component that can be written into the result document and onto any
/// filesystem unchanged: ASCII letters, digits and `._+@=,-`, at most 200 bytes, not
/// `.` or `..`.
pub fn is_safe_component(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+@=,-".contains(&b))
}

/// A name shown in a finding: control and non-ASCII characters escaped.
pub fn escaped(name: &std::ffi::OsStr) -> String {
    let lossy = name.to_string_lossy();
    let mut out = String::new();
    for c in lossy.chars().take(200) {
        if c.is_ascii_graphic() || c == ' ' {
            out.push(c);
        } else {
            out.push_str(&c.escape_unicode().to_string());
        }
    }
    out
}

/// `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_timestamp(now: time::OffsetDateTime) -> String {
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}
