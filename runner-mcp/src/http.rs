//! The Streamable HTTP transport (rmcp's own service, served by hyper's HTTP/1.1 server),
//! for an agent that reaches MCP servers by URL instead of starting them.
//!
//! Loopback only: the address must be a loopback IP, or nothing is bound. A local HTTP
//! server is reachable from every web page the user's browser opens, through DNS
//! rebinding, so a request whose `Host` is not this server's loopback address, or which
//! carries an `Origin` other than this server's own, is refused with 403 before any
//! tool sees it. The server is stateless (no sessions to pile up): every POST is judged
//! on its own, under the same four-at-a-time bound as stdio.

use crate::drafts::MAX_TOTAL_INPUT_BYTES;
use crate::server::{DraftServer, ServeError};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The one path the server answers on.
pub const PATH: &str = "/mcp";
/// At most this many connections at once; more are closed on accept.
const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to send its request line and headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one connection may last in all (a draft check or submit takes well under).
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(300);

/// Why `--http` refused its address.
#[derive(Debug, thiserror::Error)]
pub enum AddrError {
    #[error(
        "--http {0:?}: not an address; give a loopback IP and port, e.g. 127.0.0.1:8765 or [::1]:8765"
    )]
    Unparsable(String),
    #[error(
        "--http {0}: not a loopback address; the MCP server listens on 127.0.0.0/8 or ::1 only (an agent elsewhere reaches it through its own tunnel)"
    )]
    NotLoopback(SocketAddr),
}

/// Parses `--http`: an IP address (v4 or v6 in brackets) and port, loopback only.
pub fn parse_loopback(s: &str) -> Result<SocketAddr, AddrError> {
    let addr: SocketAddr = s
        .parse()
        .map_err(|_| AddrError::Unparsable(s.chars().take(200).collect()))?;
    if addr.ip().is_loopback() {
        Ok(addr)
    } else {
        Err(AddrError::NotLoopback(addr))
    }
}

/// The rmcp configuration: stateless JSON answers, the body cap, and the DNS-rebinding
/// checks bound to the address actually listened on.
fn config(bound: SocketAddr, max_draft: u64) -> StreamableHttpServerConfig {
    let port = bound.port();
    let own = match bound {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    };
    let hosts = [own.clone(), "localhost".to_owned()];
    // base64 carries 3 bytes in 4 characters; the rest is JSON framing.
    let body = (MAX_TOTAL_INPUT_BYTES / 3 * 4)
        .saturating_add(usize::try_from(max_draft).unwrap_or(usize::MAX / 2))
        .saturating_add(256 * 1024);
    StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_sse_retry(None)
        .with_max_request_body_bytes(body)
        .with_allowed_hosts(hosts.iter().map(|h| format!("{h}:{port}")))
        .with_allowed_origins(hosts.iter().map(|h| format!("http://{h}:{port}")))
        .enforce_origin_validation()
}

impl DraftServer {
    /// Binds `addr` (loopback, checked by the caller with [`parse_loopback`]), calls
    /// `bound` with the address listened on (a port 0 is the kernel's choice), then
    /// serves Streamable HTTP on [`PATH`] until the process ends.
    ///
    /// # Ambient authority
    /// Listens on a TCP socket.
    pub fn serve_http(
        self,
        addr: SocketAddr,
        bound: impl FnOnce(SocketAddr),
    ) -> Result<(), ServeError> {
        if !addr.ip().is_loopback() {
            return Err(ServeError::Session(
                AddrError::NotLoopback(addr).to_string(),
            ));
        }
        let rt = crate::server::runtime()?;
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| ServeError::Bind(addr, e))?;
            let local = listener
                .local_addr()
                .map_err(|e| ServeError::Bind(addr, e))?;
            let max_draft = self.max_draft_bytes();
            let server = self.clone();
            let service = Arc::new(StreamableHttpService::new(
                move || Ok(server.clone()),
                Arc::new(NeverSessionManager::default()),
                config(local, max_draft),
            ));
            bound(local);
            accept_loop(listener, service).await;
            Ok(())
        })
    }
}

type Service = StreamableHttpService<DraftServer, NeverSessionManager>;

/// Accepts for as long as the process lives: each connection on a task of its own.
async fn accept_loop(listener: tokio::net::TcpListener, service: Arc<Service>) {
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
        let service = Arc::clone(&service);
        tokio::spawn(async move {
            let answer = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let service = Arc::clone(&service);
                async move {
                    if request.uri().path() != PATH {
                        return Ok::<_, Infallible>(not_found());
                    }
                    Ok(service.handle(request).await)
                }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), answer);
            // An error is the client's (it went away, timed out, sent garbage): its
            // connection is closed and nothing else is affected.
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await;
            drop(slot);
        });
    }
}

fn not_found()
-> hyper::Response<http_body_util::combinators::BoxBody<hyper::body::Bytes, Infallible>> {
    use http_body_util::BodyExt as _;
    let mut r = hyper::Response::new(
        http_body_util::Full::new(hyper::body::Bytes::from_static(
            b"not found: the MCP endpoint is /mcp\n",
        ))
        .boxed(),
    );
    *r.status_mut() = hyper::StatusCode::NOT_FOUND;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses() {
        for ok in ["127.0.0.1:8765", "127.1.2.3:0", "[::1]:8765"] {
            assert!(parse_loopback(ok).is_ok(), "{ok}");
        }
        for bad in ["0.0.0.0:8765", "[::]:8765", "192.168.1.2:80", "10.0.0.1:1"] {
            let e = parse_loopback(bad).unwrap_err().to_string();
            assert!(e.contains("not a loopback address"), "{bad}: {e}");
        }
        for bad in ["localhost:8765", "127.0.0.1", "", "http://127.0.0.1:1/"] {
            let e = parse_loopback(bad).unwrap_err().to_string();
            assert!(e.contains("not an address"), "{bad}: {e}");
        }
    }
}
