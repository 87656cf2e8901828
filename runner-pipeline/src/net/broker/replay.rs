//! Replay: a request answered from the recorded exchange, its body checked against its hash.

use super::{Answer, REPLAYED_REFUSALS, Refusal};
use cap_std::fs::Dir;
use runner_core::digest::sha256_hex;
use runner_core::net::Exchange;
use runner_core::net::body_file_name;

/// The next recorded exchange, when it is this request: its answer, the body read back
/// and checked against its recorded hash. Anything else is `network.replay_unrecorded`.
pub(super) fn replay(
    recorded: &[Exchange],
    dir: &std::io::Result<Dir>,
    next: &mut usize,
    ex: &mut Exchange,
) -> Result<Answer, Refusal> {
    let unrecorded = |why: String| Refusal("network.replay_unrecorded", why);
    // Refusals decided before any contact were decided by the checks above, which ran
    // again; one decided after the origin answered (a redirect off the list, a body too
    // large, a timeout, a failed transfer) is served as recorded.
    let Some(want) = recorded[(*next).min(recorded.len())..]
        .iter()
        .find(|r| r.allowed() || r.contacted)
    else {
        return Err(unrecorded(format!(
            "the recording holds no further exchange for {} {}",
            ex.method, ex.url
        )));
    };
    if want.method != ex.method || want.url != ex.url || want.request_sha256 != ex.request_sha256 {
        return Err(unrecorded(format!(
            "the recording's next exchange is {} {}, not {} {}",
            want.method, want.url, ex.method, ex.url
        )));
    }
    // What left is pinned by the head's hash too (the headers the guest sent); a
    // recording made before heads were hashed cannot show this request is its own.
    match &want.request_head_sha256 {
        None => {
            return Err(unrecorded(format!(
                "the recording's exchange {} holds no request-head hash (recorded by an \
                 older runner), so its headers cannot be matched",
                want.seq
            )));
        }
        Some(head) if Some(head) != ex.request_head_sha256.as_ref() => {
            return Err(unrecorded(format!(
                "the recording's exchange {} sent other headers ({head}) than this request",
                want.seq
            )));
        }
        Some(_) => {}
    }
    *next = recorded
        .iter()
        .position(|r| r.seq == want.seq)
        .map_or(recorded.len(), |i| i + 1);
    if !want.allowed() {
        ex.status = want.status;
        let code = want.refusal.as_deref().unwrap_or("");
        let code = REPLAYED_REFUSALS
            .iter()
            .find(|c| **c == code)
            .copied()
            .ok_or_else(|| {
                unrecorded(format!(
                    "the recording's exchange {} was refused with {code:?}, not a code a replay serves",
                    want.seq
                ))
            })?;
        return Err(Refusal(code, want.detail.clone().unwrap_or_default()));
    }
    let body = dir
        .as_ref()
        .map_err(|e| std::io::Error::new(e.kind(), e.to_string()))
        .and_then(|dir| dir.read(body_file_name(want.seq)))
        .map_err(|e| unrecorded(format!("the recorded body of exchange {}: {e}", want.seq)))?;
    let sha = format!("sha256:{}", sha256_hex(&body));
    if Some(&sha) != want.response_sha256.as_ref() {
        return Err(unrecorded(format!(
            "the recorded body of exchange {} does not match its hash",
            want.seq
        )));
    }
    Ok(Answer {
        status: want.status.unwrap_or(200),
        headers: want.response_headers.clone(),
        body,
    })
}
