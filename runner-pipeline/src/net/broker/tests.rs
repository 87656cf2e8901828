use super::replay::replay;
use super::wire::{RequestFileError, RequestHead};
use super::*;
use runner_core::net::Url;
use std::net::TcpListener;

/// A broker on a fresh exchange directory, allowing `origin`, with the policy's
/// timeout `timeout_sec`, until `deadline`; the directory's path is returned too.
fn broker(
    origin: &str,
    timeout_sec: u64,
    source: Source,
    deadline: Instant,
) -> (Broker, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("net")).unwrap();
    std::fs::create_dir(tmp.path().join("bodies")).unwrap();
    let open = |name: &str| {
        Dir::open_ambient_dir(tmp.path().join(name), cap_std::ambient_authority()).unwrap()
    };
    let policy = NetworkPolicy {
        allow: vec![runner_core::net::Origin::parse(origin).unwrap()],
        timeout_sec,
        ..Default::default()
    };
    let b = Broker::start(policy, open("net"), open("bodies"), source, deadline).unwrap();
    (b, tmp)
}

fn request(dir: &std::path::Path, n: u32, url: &str) {
    let tmp = dir.join(format!("{n}.req.tmp"));
    std::fs::write(
        &tmp,
        format!("{{\"method\": \"GET\", \"url\": \"{url}\"}}\n"),
    )
    .unwrap();
    std::fs::rename(tmp, dir.join(format!("{n}.req"))).unwrap();
}

/// Waits (at most 20 s) until `path` is `present` or not.
fn wait_for(path: &std::path::Path, present: bool) {
    let until = Instant::now() + Duration::from_secs(20);
    while path.exists() != present && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(path.exists(), present, "{}", path.display());
}

fn codes(log: &NetworkLog) -> Vec<Option<&str>> {
    log.exchanges.iter().map(|e| e.refusal.as_deref()).collect()
}

/// A listener that accepts connections and never answers, counting them.
fn silent_origin() -> (String, TcpListener) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    (origin, listener)
}

fn accepted(listener: &TcpListener) -> usize {
    listener.set_nonblocking(true).unwrap();
    std::iter::from_fn(|| listener.accept().ok())
        .take(100)
        .count()
}

/// The guest ends while request 1 waits on an origin that never answers and 2 is
/// listed: 1 is abandoned, 2 is recorded as not served, and the origin saw one
/// connection (the policy's 30 s timeout never runs out).
#[test]
fn the_guests_end_abandons_the_exchange_in_flight_and_sends_nothing_more() {
    let (origin, listener) = silent_origin();
    let deadline = Instant::now() + Duration::from_secs(120);
    let (b, tmp) = broker(&origin, 30, Source::Live, deadline);
    let net = tmp.path().join("net");
    request(&net, 1, &format!("{origin}/hang"));
    wait_for(&net.join("1.req"), false);
    request(&net, 2, &format!("{origin}/never"));
    let out = b.finish();
    assert_eq!(
        codes(&out.log),
        [Some("network.run_ended"), Some("network.not_served")]
    );
    let contacted: Vec<bool> = out.log.exchanges.iter().map(|e| e.contacted).collect();
    assert_eq!(contacted, [true, false]);
    assert_eq!(out.log.exchanges[1].url, format!("{origin}/never"));
    assert_eq!(accepted(&listener), 1);
}

/// The run's deadline cuts the policy's timeout: an origin that never answers is a
/// timeout by the deadline (here 300 ms away), not after the policy's 30 s, and the
/// guest gets that answer; after the deadline nothing is sent at all.
#[test]
fn the_runs_deadline_bounds_every_exchange() {
    let (origin, listener) = silent_origin();
    let deadline = Instant::now() + Duration::from_millis(300);
    let (b, tmp) = broker(&origin, 30, Source::Live, deadline);
    let net = tmp.path().join("net");
    request(&net, 1, &format!("{origin}/hang"));
    wait_for(&net.join("1.resp"), true);
    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
    request(&net, 2, &format!("{origin}/late"));
    wait_for(&net.join("2.resp"), true);
    let out = b.finish();
    assert_eq!(
        codes(&out.log),
        [Some("network.timeout"), Some("network.run_ended")]
    );
    assert!(
        out.log.exchanges[0]
            .detail
            .as_deref()
            .unwrap()
            .contains("the run's time limit"),
        "{:?}",
        out.log.exchanges[0]
    );
    assert!(!out.log.exchanges[1].contacted);
    assert_eq!(accepted(&listener), 1);
}

/// An entry the broker cannot remove (a directory named like a request) is answered
/// and recorded once, then left alone; the next request is served as usual.
#[test]
fn an_entry_that_cannot_be_removed_is_taken_once() {
    let recorded = Vec::new();
    let source = Source::Replay {
        recorded,
        bodies: Err(io::Error::other("no recording")),
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let (b, tmp) = broker("http://127.0.0.1:9", 30, source, deadline);
    let net = tmp.path().join("net");
    std::fs::create_dir(net.join("1.req")).unwrap();
    wait_for(&net.join("1.resp"), true);
    std::fs::remove_file(net.join("1.resp")).unwrap();
    // Time for a busy loop to show itself: it would answer again and again.
    std::thread::sleep(Duration::from_millis(200));
    assert!(!net.join("1.resp").exists());
    request(&net, 2, "http://127.0.0.1:9/x");
    wait_for(&net.join("2.resp"), true);
    let out = b.finish();
    assert_eq!(
        codes(&out.log),
        [
            Some("network.bad_request"),
            Some("network.replay_unrecorded")
        ]
    );
    assert_eq!(out.log.unrecorded_refusals, 0);
}

fn head(headers: &[(&str, &str)]) -> Result<RequestHead, Refusal> {
    let url = Url::parse("http://127.0.0.1:9/a?b").unwrap();
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    RequestHead::new("GET", &url, &headers)
}

/// The head the log hashes is what the client is handed: the broker's own headers
/// dropped, the rest in order; too many or too large is refused, never cut.
#[test]
fn the_request_head_is_what_is_sent_and_bounded() {
    let h = head(&[("Host", "evil"), ("X-A", "1"), ("Content-Length", "9")]).unwrap();
    assert_eq!(h.text, b"GET http://127.0.0.1:9/a?b\r\nX-A: 1\r\n");
    assert_eq!(h.headers, [("X-A".to_owned(), "1".to_owned())]);
    assert_ne!(head(&[("X-A", "2")]).unwrap().text, h.text);
    let many: Vec<(&str, &str)> = (0..=MAX_REQUEST_HEADERS).map(|_| ("X", "y")).collect();
    let Err(Refusal(code, detail)) = head(&many) else {
        panic!("65 headers were taken");
    };
    assert_eq!(code, "network.bad_request");
    assert!(detail.contains("65 headers"), "{detail}");
    let big = "v".repeat(MAX_REQUEST_HEADER_BYTES);
    let Err(Refusal(_, detail)) = head(&[("X", &big)]) else {
        panic!("a 16 KiB header was taken");
    };
    assert!(detail.contains("more than the broker's 16384"), "{detail}");
}

/// A replay serves a recorded exchange only to the request that made it: the same
/// method, full URL, body and head (headers); a recording without a head hash is
/// matched to nothing.
#[test]
fn replay_matches_the_request_head_too() {
    let recorded = |head: Option<&str>| Exchange {
        seq: 1,
        method: "GET".into(),
        url: "http://127.0.0.1:9/a".into(),
        origin: "http://127.0.0.1:9".into(),
        path: "/a".into(),
        request_bytes: 0,
        request_sha256: "sha256:e".into(),
        request_head_sha256: head.map(str::to_owned),
        request_head_bytes: None,
        verdict: "refused".into(),
        contacted: true,
        refusal: Some("network.timeout".into()),
        detail: None,
        status: None,
        response_headers: Vec::new(),
        response_bytes: 0,
        response_sha256: None,
    };
    let asked = |head: &str| Exchange {
        seq: 1,
        request_head_sha256: Some(head.to_owned()),
        ..recorded(None)
    };
    let dir: io::Result<Dir> = Err(io::Error::other("unused"));
    let serve = |rec: Exchange, head: &str| {
        let mut next = 0;
        replay(&[rec], &dir, &mut next, &mut asked(head)).map_err(|Refusal(c, d)| (c, d))
    };
    let Err((code, _)) = serve(recorded(Some("sha256:h")), "sha256:h") else {
        panic!("a recorded timeout was not served as one");
    };
    assert_eq!(code, "network.timeout");
    let Err((code, detail)) = serve(recorded(Some("sha256:h")), "sha256:other") else {
        panic!("another head was served");
    };
    assert_eq!(code, "network.replay_unrecorded");
    assert!(detail.contains("other headers"), "{detail}");
    let Err((code, detail)) = serve(recorded(None), "sha256:h") else {
        panic!("a recording without head hashes was served");
    };
    assert_eq!(code, "network.replay_unrecorded");
    assert!(detail.contains("no request-head hash"), "{detail}");
}

/// The reasons read as the texts they replaced: a run that cannot start its broker
/// says them, and a guest's refused request is answered with them.
#[test]
fn reasons_keep_their_text() {
    let path = || PathBuf::from("/etc/runner/ca.pem");
    let io = || io::Error::from_raw_os_error(2);
    let cases = [
        (
            BrokerError::Start(io()).to_string(),
            format!("cannot start the network broker: {}", io()),
        ),
        (
            BrokerError::CaFileUnreadable {
                path: path(),
                source: io(),
            }
            .to_string(),
            format!("network.ca_files /etc/runner/ca.pem: {}", io()),
        ),
        (
            BrokerError::CaFileTooLarge {
                path: path(),
                size: 9 << 20,
            }
            .to_string(),
            format!(
                "network.ca_files /etc/runner/ca.pem: 9437184 bytes, more than \
                 {MAX_CA_FILE_BYTES}"
            ),
        ),
        (
            BrokerError::NoCertificate { path: path() }.to_string(),
            "network.ca_files /etc/runner/ca.pem: no certificate in it".to_owned(),
        ),
        (
            RequestFileError::Read(io()).to_string(),
            format!("cannot read the request: {}", io()),
        ),
        (
            RequestFileError::TooLarge(10).to_string(),
            "the request is larger than 10 bytes".to_owned(),
        ),
    ];
    for (shown, text) in cases {
        assert_eq!(shown, text);
    }
}
