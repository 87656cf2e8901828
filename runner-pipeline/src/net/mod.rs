//! The network allowlist: what the operator allows (`[network]` in the
//! policy), the egress log every exchange is recorded in, and the broker that performs
//! a guest's HTTP(S) requests on its behalf ([`broker`]).
//!
//! The worker holds no network at all. A run that asked for `network: allowlist` gets a
//! private exchange directory `/net` (inside `/out`'s tmpfs, so its caps apply, and
//! removed before `/out` is collected): the guest writes a request file there, the
//! runner's broker thread (in the parent, outside the sandbox) checks it against the
//! allowlist, performs it, and writes the response file back. Any WASI guest can speak
//! this protocol with plain file calls; the ERA guests get `urllib.request.urlopen`
//! wired to it by a read-only `sitecustomize.py` ([`SITECUSTOMIZE`]).

pub mod broker;

/// Where the exchange directory appears in the guest.
pub const GUEST_EXCHANGE: &str = "/net";
/// Where the read-only directory holding [`SITECUSTOMIZE`] appears in the guest: first
/// on its one `PYTHONPATH`, so this `sitecustomize` is the one `site` imports.
pub const GUEST_LIB: &str = "/usr/lib/runner-net";
/// The guest side of the protocol for the ERA (CPython) guests: a urllib handler.
pub const SITECUSTOMIZE: &str = include_str!("sitecustomize.py");
