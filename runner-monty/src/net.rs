//! Monty's network door: `fetch(url, method='GET', body=None, headers=None)`.
//!
//! A run granted `network: allowlist` has the exchange directory `/out/.net`, served by
//! the runner's broker outside the sandbox (the protocol is `runner::net::broker`'s:
//! `N.req` holds one JSON line `{"method","url","headers"}`, a newline and the body;
//! the broker answers `N.resp`, one JSON line `{"status","reason","headers"}` or
//! `{"error","detail"}`, a newline and the body). The worker itself has no socket: it
//! writes the request file, waits for the answer and hands the code a dict
//! `{'status', 'reason', 'headers', 'body', 'url'}`. A refusal raises `OSError` whose
//! message starts with the refusal's code (`network.origin_not_allowed: …`), as the
//! ERA guests' `urllib.error.URLError` does. Redirects of a `GET` or `HEAD` are
//! followed (at most [`MAX_REDIRECTS`]), each hop its own recorded exchange.

use monty_types::unstable::MontyNode;
use monty_types::{CallArgs, ExcType, MontyException, MontyObject, ObjectRef};
use runner_sandbox::cap_std::fs::Dir;
use std::path::Path;
use std::time::{Duration, Instant};

/// The name Monty code calls.
pub const FETCH: &str = "fetch";
/// Redirect hops followed for one `fetch` of a `GET` or `HEAD`.
pub const MAX_REDIRECTS: usize = 10;
/// Longest wait between two looks for an answer.
const MAX_POLL: Duration = Duration::from_millis(20);

/// Why a `fetch` did not return a response.
#[derive(Debug)]
pub enum Failure {
    /// An exception for the code (a bad argument, a refusal).
    Raise(MontyException),
    /// The run's wall-clock deadline passed while waiting for the broker.
    Deadline,
}

impl Failure {
    fn raise(kind: ExcType, message: impl Into<String>) -> Self {
        Self::Raise(MontyException::new(kind, Some(message.into())))
    }
}

/// One request of the code, as its arguments gave it.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    url: String,
    method: String,
    body: Vec<u8>,
    headers: Vec<(String, String)>,
}

/// The exchange directory, and how many requests were written to it.
#[derive(Debug)]
pub struct Door {
    dir: Dir,
    sent: u64,
}

impl Door {
    /// The door on `dir` (the host path of `/out/.net`), opened before confinement as
    /// the mounts are; every request and answer is a name in it. Landlock grants the
    /// worker `/out` and all below it.
    ///
    /// # Ambient Authority
    ///
    /// Opens `dir`.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        Ok(Self {
            dir: runner_sandbox::host::open_dir(dir)?,
            sent: 0,
        })
    }

    /// Answers one `fetch(...)` call.
    pub fn fetch(&mut self, args: &CallArgs, deadline: Instant) -> Result<MontyObject, Failure> {
        let mut request = parse_args(args)?;
        let follow = matches!(request.method.as_str(), "GET" | "HEAD");
        let mut hops = 0;
        loop {
            let answer = self.exchange(&request, deadline)?;
            let location = answer
                .headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("location"))
                .and_then(|(_, v)| resolve(&request.url, v));
            match location {
                Some(next)
                    if follow
                        && hops < MAX_REDIRECTS
                        && matches!(answer.status, 301 | 302 | 303 | 307 | 308) =>
                {
                    hops += 1;
                    request.url = next;
                    request.body.clear();
                }
                _ => return Ok(answer.into_object(&request.url)),
            }
        }
    }

    /// One exchange with the broker.
    fn exchange(&mut self, request: &Request, deadline: Instant) -> Result<Answer, Failure> {
        self.sent += 1;
        let n = self.sent;
        let head = serde_json::json!({
            "method": request.method,
            "url": request.url,
            "headers": request.headers,
        });
        let mut bytes = head.to_string().into_bytes();
        bytes.push(b'\n');
        bytes.extend_from_slice(&request.body);
        let tmp = format!("{n}.req.tmp");
        self.dir
            .write(&tmp, &bytes)
            .and_then(|()| self.dir.rename(&tmp, &self.dir, format!("{n}.req")))
            .map_err(|e| {
                Failure::raise(
                    ExcType::OSError,
                    format!("network.bad_request: cannot hand the request to the broker: {e}"),
                )
            })?;
        let answer = format!("{n}.resp");
        let mut delay = Duration::from_micros(500);
        let raw = loop {
            match self.dir.read(&answer) {
                Ok(raw) => break raw,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(Failure::raise(
                        ExcType::OSError,
                        format!("network.fetch_failed: cannot read the broker's answer: {e}"),
                    ));
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Failure::Deadline);
            }
            std::thread::sleep(delay.min(left));
            delay = (delay * 2).min(MAX_POLL);
        };
        let _ = self.dir.remove_file(&answer);
        parse_answer(&raw)
    }
}

/// The broker's answer to one exchange.
#[derive(Debug)]
struct Answer {
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    /// `{'status', 'reason', 'headers', 'body', 'url'}`; header names lower-cased,
    /// repeated ones joined with `, `.
    fn into_object(self, url: &str) -> MontyObject {
        let mut headers: Vec<(String, String)> = Vec::new();
        for (k, v) in self.headers {
            let k = k.to_ascii_lowercase();
            match headers.iter_mut().find(|(name, _)| *name == k) {
                Some((_, value)) => {
                    value.push_str(", ");
                    value.push_str(&v);
                }
                None => headers.push((k, v)),
            }
        }
        fn s(text: impl Into<String>) -> MontyObject {
            MontyObject::string(text)
        }
        MontyObject::dict([
            (s("status"), MontyObject::int(i64::from(self.status))),
            (s("reason"), s(self.reason)),
            (
                s("headers"),
                MontyObject::dict(headers.into_iter().map(|(k, v)| (s(k), s(v)))),
            ),
            (s("body"), MontyObject::bytes(self.body)),
            (s("url"), s(url)),
        ])
    }
}

fn parse_answer(raw: &[u8]) -> Result<Answer, Failure> {
    let split = raw.iter().position(|&b| b == b'\n').unwrap_or(raw.len());
    let (line, body) = raw.split_at(split);
    let bad = |why: String| {
        Failure::raise(
            ExcType::OSError,
            format!("network.fetch_failed: the broker's answer is malformed: {why}"),
        )
    };
    let wire: serde_json::Value = serde_json::from_slice(line).map_err(|e| bad(e.to_string()))?;
    let text = |key: &str| wire.get(key).and_then(|v| v.as_str()).unwrap_or("");
    if let Some(code) = wire.get("error").and_then(|v| v.as_str()) {
        return Err(Failure::raise(
            ExcType::OSError,
            format!("{code}: {}", text("detail")),
        ));
    }
    let status = wire
        .get("status")
        .and_then(serde_json::Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .ok_or_else(|| bad("no status".into()))?;
    let headers = wire
        .get("headers")
        .and_then(|h| h.as_array())
        .map(|pairs| {
            pairs
                .iter()
                .filter_map(|p| {
                    Some((
                        p.get(0)?.as_str()?.to_owned(),
                        p.get(1)?.as_str()?.to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Answer {
        status,
        reason: text("reason").to_owned(),
        headers,
        body: body.get(1..).unwrap_or(&[]).to_vec(),
    })
}

/// `fetch(url, method='GET', body=None, headers=None)`: positional or by keyword.
fn parse_args(args: &CallArgs) -> Result<Request, Failure> {
    const NAMES: [&str; 4] = ["url", "method", "body", "headers"];
    let type_error = |m: String| Failure::raise(ExcType::TypeError, m);
    let mut given: [Option<ObjectRef<'_>>; 4] = [None; 4];
    let positional = args.args();
    if positional.len() > NAMES.len() {
        return Err(type_error(format!(
            "fetch() takes at most 4 positional arguments ({} given)",
            positional.len()
        )));
    }
    for (slot, value) in given.iter_mut().zip(positional) {
        *slot = Some(value);
    }
    for (key, value) in args.kwargs() {
        let name = key.as_str().unwrap_or("");
        let Some(i) = NAMES.iter().position(|n| *n == name) else {
            return Err(type_error(format!(
                "fetch() got an unexpected keyword argument {name:?}"
            )));
        };
        if given[i].is_some() {
            return Err(type_error(format!(
                "fetch() got multiple values for argument {name:?}"
            )));
        }
        given[i] = Some(value);
    }
    fn present<'a>(v: &Option<ObjectRef<'a>>) -> Option<ObjectRef<'a>> {
        v.filter(|v| v.type_name() != "NoneType")
    }
    let url = present(&given[0])
        .and_then(|v| v.as_str())
        .ok_or_else(|| type_error("fetch() needs url, a str".into()))?
        .to_owned();
    let method = match present(&given[1]) {
        None => "GET".to_owned(),
        Some(v) => v
            .as_str()
            .ok_or_else(|| {
                type_error(format!(
                    "fetch() method must be a str, not {}",
                    v.type_name()
                ))
            })?
            .to_ascii_uppercase(),
    };
    let body = match present(&given[2]) {
        None => Vec::new(),
        Some(v) => match (v.as_str(), monty_types::unstable::node(v)) {
            (Some(text), _) => text.as_bytes().to_vec(),
            (None, MontyNode::Bytes(b)) => b.clone(),
            _ => {
                return Err(type_error(format!(
                    "fetch() body must be bytes or str, not {}",
                    v.type_name()
                )));
            }
        },
    };
    let headers = match present(&given[3]) {
        None => Vec::new(),
        Some(v) => {
            let pairs = v.pairs().ok_or_else(|| {
                type_error(format!(
                    "fetch() headers must be a dict, not {}",
                    v.type_name()
                ))
            })?;
            pairs
                .into_iter()
                .map(|(k, v)| match (k.as_str(), v.as_str()) {
                    (Some(k), Some(v)) => Ok((k.to_owned(), v.to_owned())),
                    _ => Err(type_error("fetch() headers must map str to str".into())),
                })
                .collect::<Result<_, _>>()?
        }
    };
    Ok(Request {
        url,
        method,
        body,
        headers,
    })
}

/// The absolute URL a `Location` names: an absolute `http(s)` URL as is, an
/// absolute path on the same origin; anything else is not followed.
fn resolve(base: &str, location: &str) -> Option<String> {
    let lower = location.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Some(location.to_owned());
    }
    if location.starts_with('/') && !location.starts_with("//") {
        let (scheme, rest) = base.split_once("://")?;
        let authority = rest.split(['/', '?', '#']).next()?;
        return Some(format!("{scheme}://{authority}{location}"));
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn arguments_positional_and_by_keyword() {
        let mut a = CallArgs::new();
        a.push_arg(MontyObject::string("http://x.org/a"));
        a.push_kwarg("method", MontyObject::string("post"));
        a.push_kwarg("body", MontyObject::bytes(b"hi".to_vec()));
        a.push_kwarg(
            "headers",
            MontyObject::dict([(MontyObject::string("X-A"), MontyObject::string("1"))]),
        );
        let r = parse_args(&a).unwrap();
        assert_eq!(
            r,
            Request {
                url: "http://x.org/a".into(),
                method: "POST".into(),
                body: b"hi".to_vec(),
                headers: vec![("X-A".into(), "1".into())],
            }
        );
        let mut a = CallArgs::new();
        a.push_arg(MontyObject::string("http://x.org/a"));
        a.push_arg(MontyObject::none());
        a.push_arg(MontyObject::string("text"));
        let r = parse_args(&a).unwrap();
        assert_eq!(
            (r.method.as_str(), r.body.as_slice()),
            ("GET", &b"text"[..])
        );
    }

    #[test]
    fn bad_arguments_are_type_errors() {
        let cases: Vec<CallArgs> = vec![
            CallArgs::new(),
            {
                let mut a = CallArgs::new();
                a.push_arg(MontyObject::int(1));
                a
            },
            {
                let mut a = CallArgs::new();
                a.push_arg(MontyObject::string("http://x.org"));
                a.push_kwarg("timeout", MontyObject::int(1));
                a
            },
            {
                let mut a = CallArgs::new();
                a.push_arg(MontyObject::string("http://x.org"));
                a.push_kwarg("url", MontyObject::string("http://y.org"));
                a
            },
            {
                let mut a = CallArgs::new();
                a.push_arg(MontyObject::string("http://x.org"));
                a.push_kwarg("body", MontyObject::int(3));
                a
            },
            {
                let mut a = CallArgs::new();
                a.push_arg(MontyObject::string("http://x.org"));
                a.push_kwarg(
                    "headers",
                    MontyObject::dict([(MontyObject::string("a"), MontyObject::int(1))]),
                );
                a
            },
        ];
        for (i, a) in cases.iter().enumerate() {
            match parse_args(a) {
                Err(Failure::Raise(e)) => assert_eq!(e.exc_type(), ExcType::TypeError, "case {i}"),
                other => panic!("case {i}: {other:?}"),
            }
        }
    }

    #[test]
    fn answers_and_refusals() {
        let a = parse_answer(
            b"{\"status\":200,\"reason\":\"OK\",\"headers\":[[\"A\",\"1\"],[\"a\",\"2\"]]}\nbody",
        )
        .unwrap();
        assert_eq!((a.status, a.body.as_slice()), (200, &b"body"[..]));
        let o = a.into_object("http://x.org/");
        let text = o.py_repr();
        assert!(text.contains("'headers': {'a': '1, 2'}"), "{text}");
        assert!(text.contains("'body': b'body'"), "{text}");
        match parse_answer(b"{\"error\":\"network.origin_not_allowed\",\"detail\":\"no\"}\n") {
            Err(Failure::Raise(e)) => {
                assert_eq!(e.exc_type(), ExcType::OSError);
                assert_eq!(e.message(), Some("network.origin_not_allowed: no"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse_answer(b"not json"), Err(Failure::Raise(_))));
    }

    #[test]
    fn locations_resolve_against_the_origin() {
        let base = "http://127.0.0.1:9/a/b?q";
        assert_eq!(resolve(base, "/c").unwrap(), "http://127.0.0.1:9/c");
        assert_eq!(resolve(base, "https://y.org/").unwrap(), "https://y.org/");
        assert_eq!(resolve(base, "//y.org/"), None);
        assert_eq!(resolve(base, "c"), None);
    }
}
