//! The exchange files' wire format: the request read (capped) and its head checked,
//! the response written.

use super::{BROKER_HEADERS, MAX_REQUEST_HEADER_BYTES, MAX_REQUEST_HEADERS, Refusal};

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use runner_core::net::Url;
use serde::{Deserialize, Serialize};
use std::io::{self, Read};

#[derive(Deserialize, Clone)]
pub(super) struct WireRequest {
    pub(super) method: String,
    pub(super) url: String,
    #[serde(default)]
    pub(super) headers: Vec<(String, String)>,
}

#[derive(Serialize)]
pub(super) struct WireResponse<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) headers: Option<&'a [(String, String)]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) detail: Option<&'a str>,
}

/// Why a request file in `/net` could not be taken (the guest is answered
/// `network.bad_request` with this reason).
#[derive(Debug, thiserror::Error)]
pub(super) enum RequestFileError {
    #[error("cannot read the request: {0}")]
    Read(#[source] io::Error),
    #[error("the request is larger than {0} bytes")]
    TooLarge(u64),
}

/// The request head the broker hands its HTTP client: the method, the URL it sends
/// (origin and path, the fragment dropped) and the guest's headers it forwards, in
/// order, one `name: value` line each. What the client adds (`Host`, `Content-Length`,
/// `User-Agent: runner-net-broker`, `Accept: */*`) follows from these and the body, so
/// the head's hash and the body's pin everything that left.
pub(super) struct RequestHead {
    pub(super) url: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) text: Vec<u8>,
}

impl RequestHead {
    /// The head of `method` to `url` with the guest's `headers`; more than
    /// [`MAX_REQUEST_HEADERS`] or [`MAX_REQUEST_HEADER_BYTES`] is refused, never cut.
    pub(super) fn new(
        method: &str,
        url: &Url,
        headers: &[(String, String)],
    ) -> Result<Self, Refusal> {
        let bad = |detail: String| Refusal("network.bad_request", detail);
        if headers.len() > MAX_REQUEST_HEADERS {
            return Err(bad(format!(
                "the request has {} headers, more than the broker's {MAX_REQUEST_HEADERS}",
                headers.len()
            )));
        }
        let forwarded: Vec<(String, String)> = headers
            .iter()
            .filter(|(k, _)| !BROKER_HEADERS.contains(&k.to_ascii_lowercase().as_str()))
            .cloned()
            .collect();
        let size: usize = forwarded.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
        if size > MAX_REQUEST_HEADER_BYTES {
            return Err(bad(format!(
                "the request's headers are {size} bytes, more than the broker's \
                 {MAX_REQUEST_HEADER_BYTES}"
            )));
        }
        let sent = format!("{}{}", url.origin, url.path);
        let mut text = format!("{method} {sent}\r\n").into_bytes();
        for (k, v) in &forwarded {
            text.extend_from_slice(k.as_bytes());
            text.extend_from_slice(b": ");
            text.extend_from_slice(v.as_bytes());
            text.extend_from_slice(b"\r\n");
        }
        Ok(Self {
            url: sent,
            headers: forwarded,
            text,
        })
    }
}

/// Reads at most `cap` bytes of the file `name` of `dir` (never through a symlink, never
/// blocking on a FIFO); longer is an error.
pub(super) fn read_capped(dir: &Dir, name: &str, cap: u64) -> Result<Vec<u8>, RequestFileError> {
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let file = dir
        .open_with(
            name,
            OpenOptions::new().read(true).custom_flags(flags.bits()),
        )
        .map_err(RequestFileError::Read)?;
    let mut buf = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(RequestFileError::Read)?;
    if buf.len() as u64 > cap {
        return Err(RequestFileError::TooLarge(cap));
    }
    Ok(buf)
}

pub(super) fn wire(head: &WireResponse<'_>, body: &[u8]) -> Vec<u8> {
    let mut out =
        serde_json::to_vec(head).unwrap_or_else(|_| b"{\"error\":\"network.internal\"}".to_vec());
    out.push(b'\n');
    out.extend_from_slice(body);
    out
}

pub(super) fn reason_phrase(status: u16) -> &'static str {
    http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("")
}
