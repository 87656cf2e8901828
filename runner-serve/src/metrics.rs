//! `runner serve --metrics ADDR`: the host's counters in the Prometheus text format on
//! `GET /metrics`, and `GET /healthz`, answered by a small HTTP responder on a thread.
//!
//! The metrics: `runner_serve_requests_total{verdict,outcome}` (ACCEPT with the run's
//! outcome, REJECT, RETRY), `runner_serve_latency_seconds` (a histogram, from the
//! request's `.md` appearing to its result published), `runner_serve_queue_depth`
//! (requests seen in the inbox and not claimed yet) and
//! `runner_serve_worker_failures_total{code}` (attempts that failed for a reason that is
//! not the request's: the sandbox, the results directory, the guest),
//! `runner_serve_warm_workers` (workers started ahead and waiting for a request),
//! `runner_serve_worker_starts_total{kind}` (runs handed a `warm` worker, runs that
//! started one `cold`, runs `retried_cold` because their warm worker died before reading
//! the request) and `runner_serve_warm_workers_replaced_total` (idle warm workers found
//! dead and replaced).
//!
//! The responder is hyper's HTTP/1.1 server on a runtime of its own: every connection is
//! served concurrently, at most 64 at once, each with 2 s to send its request line and
//! headers (at most 8 KiB), 10 s in all, one request each. It serves a scraper, not the
//! public: bind it to loopback unless a scraper elsewhere needs it.

use super::Handled;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use runner_contract::verdict::ServeVerdict;
use runner_sandbox::worker::PoolCounters;
use runner_sandbox::worker::PoolStats;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;

/// The host's metrics.
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    latency: Histogram,
    queue_depth: Gauge,
    worker_failures: Family<Labels, Counter>,
    warm_workers: Gauge,
    worker_starts: Family<Labels, Counter>,
    replaced: Counter,
    /// The pipeline's warm-worker counters, read at each render.
    pools: OnceLock<Arc<PoolCounters>>,
    /// What the counters said at the last render (the metrics count the difference).
    seen: Mutex<PoolStats>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let requests = Family::<Labels, Counter>::default();
        // 1 ms to about 33 s.
        let latency = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        let queue_depth = Gauge::default();
        let worker_failures = Family::<Labels, Counter>::default();
        let mut registry = Registry::with_prefix("runner_serve");
        registry.register(
            "requests",
            "Requests handled, by verdict (ACCEPT, REJECT, RETRY) and the run's outcome",
            requests.clone(),
        );
        registry.register(
            "latency_seconds",
            "From a request's .md appearing in the inbox to its result published",
            latency.clone(),
        );
        registry.register(
            "queue_depth",
            "Requests seen in the inbox and not claimed yet",
            queue_depth.clone(),
        );
        registry.register(
            "worker_failures",
            "Attempts that failed for a reason that is not the request's, by reason code",
            worker_failures.clone(),
        );
        let warm_workers = Gauge::default();
        let worker_starts = Family::<Labels, Counter>::default();
        let replaced = Counter::default();
        registry.register(
            "warm_workers",
            "Workers started ahead (engine built, guest module loaded) and waiting for a request",
            warm_workers.clone(),
        );
        registry.register(
            "worker_starts",
            "Runs by how their worker started: warm (taken ready), cold (started for the run), retried_cold (the warm one died before reading its request)",
            worker_starts.clone(),
        );
        registry.register(
            "warm_workers_replaced",
            "Idle warm workers found dead, reaped and replaced",
            replaced.clone(),
        );
        Self {
            registry,
            requests,
            latency,
            queue_depth,
            worker_failures,
            warm_workers,
            worker_starts,
            replaced,
            pools: OnceLock::new(),
            seen: Mutex::new(PoolStats::default()),
        }
    }

    /// Report what the warm-worker pools behind `counters` do.
    pub fn watch_workers(&self, counters: Arc<PoolCounters>) {
        let _ = self.pools.set(counters);
    }

    fn update_workers(&self) {
        let Some(pools) = self.pools.get() else {
            return;
        };
        let now = pools.snapshot();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        self.warm_workers
            .set(i64::try_from(now.ready).unwrap_or(i64::MAX));
        for (kind, now, before) in [
            ("warm", now.warm_runs, seen.warm_runs),
            ("cold", now.cold_runs, seen.cold_runs),
            ("retried_cold", now.retried_cold, seen.retried_cold),
        ] {
            self.worker_starts
                .get_or_create(&vec![("kind", kind.to_owned())])
                .inc_by(now.saturating_sub(before));
        }
        self.replaced
            .inc_by(now.replaced.saturating_sub(seen.replaced));
        *seen = now;
    }

    /// Counts one request handled.
    pub fn observe(&self, handled: &Handled) {
        let outcome = match handled.run.outcome {
            Some(kind) => kind.as_str(),
            None if handled.recovered => "recovered",
            None => "none",
        };
        self.requests
            .get_or_create(&vec![
                ("verdict", handled.verdict.as_str().to_owned()),
                ("outcome", outcome.to_owned()),
            ])
            .inc();
        if let Some(latency) = handled.latency_sec {
            self.latency.observe(latency);
        }
        if handled.verdict == ServeVerdict::Retry {
            for reason in &handled.reasons {
                self.worker_failures
                    .get_or_create(&vec![("code", reason.code.clone())])
                    .inc();
            }
        }
    }

    pub fn set_queue_depth(&self, depth: usize) {
        self.queue_depth
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        self.update_workers();
        let mut text = String::new();
        if let Err(e) = encode(&mut text, &self.registry) {
            text = format!("# the metrics could not be encoded: {e}\n");
        }
        text
    }
}

/// Connections answered at once; one past the cap is closed at once (a scraper retries).
const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to send its request line and headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one connection may last in all, reading the answer included.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds `addr` and answers `/metrics` and `/healthz` with hyper's HTTP/1.1 server on a
/// thread of its own, each connection concurrently (at most `MAX_CONNECTIONS`, each
/// bounded by `HEADER_READ_TIMEOUT` and `CONNECTION_TIMEOUT`, one request per
/// connection), so a slow client holds only its own connection; returns the bound
/// address (a port 0 is chosen by the kernel).
///
/// # Ambient authority
/// Listens on a TCP socket.
pub fn serve_http(addr: SocketAddr, metrics: Arc<Metrics>) -> io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    let listener = {
        let _entered = runtime.enter();
        tokio::net::TcpListener::from_std(listener)?
    };
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || runtime.block_on(accept_loop(listener, metrics)))?;
    Ok(bound)
}

/// Accepts for as long as the process lives: each connection on a task of its own.
async fn accept_loop(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of descriptors, say: pause instead of spinning on the error.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let metrics = Arc::clone(&metrics);
                async move { Ok::<_, Infallible>(answer(&request, &metrics)) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(false)
                .max_buf_size(8192)
                .serve_connection(TokioIo::new(stream), service);
            // An error is the client's (it went away, timed out, sent garbage): its
            // connection is closed and nothing else is affected.
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await;
            drop(slot);
        });
    }
}

fn answer<B>(request: &Request<B>, metrics: &Metrics) -> Response<Full<Bytes>> {
    let text = "text/plain; charset=utf-8";
    let (status, content_type, body) = match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.render(),
        ),
        (&Method::GET, "/healthz") => (StatusCode::OK, text, "ok\n".to_owned()),
        (&Method::GET, _) => (
            StatusCode::NOT_FOUND,
            text,
            "not found: try /metrics or /healthz\n".to_owned(),
        ),
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            text,
            "only GET\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_by_verdict_and_outcome() {
        let m = Metrics::new();
        let mut h = Handled::new(std::ffi::OsStr::new("TR-a.md"), ServeVerdict::Accept);
        h.run.outcome = Some(runner_contract::outcome::OutcomeKind::Completed);
        h.latency_sec = Some(0.05);
        m.observe(&h);
        m.observe(&Handled {
            reasons: vec![runner_core::request::Reason::new(
                "result.write",
                "disk full",
                None,
            )],
            ..Handled::new(std::ffi::OsStr::new("TR-b.md"), ServeVerdict::Retry)
        });
        m.set_queue_depth(3);
        let text = m.render();
        assert!(
            text.contains(r#"runner_serve_requests_total{verdict="ACCEPT",outcome="completed"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("runner_serve_latency_seconds_count 1"),
            "{text}"
        );
        assert!(text.contains("runner_serve_queue_depth 3"), "{text}");
        assert!(
            text.contains(r#"runner_serve_worker_failures_total{code="result.write"} 1"#),
            "{text}"
        );
    }
}
