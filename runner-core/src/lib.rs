//! `runner-core`: what `runner` decides, with no I/O. It judges text and data handed to
//! it and never reaches the host: no files, no processes, no environment, no network,
//! no wasmtime. The crates above hand it bytes and get back values or reasons.
//!
//! - [`markdown`]: the one markdown toolkit that the request validator and every gate
//!   validator share: front matter ([`markdown::frontmatter`], [`markdown::yaml`]),
//!   sections and fences ([`markdown::sections`]), text a renderer would show
//!   differently ([`markdown::rendered`]), field readers, [`markdown::document::Reasons`],
//!   escaping and clipping ([`markdown::document`]), and the gate's layout and
//!   labelled-line rules ([`markdown::fields`]).
//! - [`rules`]: the policy's rules about documents (the request budgets and the
//!   forbidden-content rules), [`rule_pattern`] (their compiled patterns) and
//!   [`forbidden`] (the scan that applies them).
//! - [`policy`]: the operator's policy parsed from text (its tables: [`rules`],
//!   [`policy::confinement`], [`policy::determinism`], [`net`] for `[network]` and the
//!   egress log, [`environment`] for `[[environments]]`, the approval keys).
//! - [`lock`]: the replay lock (its pins, sealing, strict parsing) and the in-toto
//!   statement, with what they record: [`run`] (limits, outcome, usage) and
//!   [`determinism`] (the clocks and entropy a run saw).
//! - [`result`]: the Tool Execution Result document, rendered from a run's facts.
//! - [`normalize`]: text normalization for hashing and the scanner's deobfuscated view.
//! - [`digest`]: sha256 over bytes; [`jcs`]: RFC 8785 canonical JSON and its digest.
//!
//! The authority line is enforced here, not just written down: the workspace clippy
//! configuration refuses `std::fs`, `std::process::Command` and `std::env::var*`
//! (`disallowed-methods`), and this crate *forbids* exceptions to it outside its own
//! unit tests, so no `#[allow]` can bring them back. `tests/no_io.rs` checks the rest
//! (no `std::fs`/`process`/`env`/`net` path in the library sources, no I/O crate among
//! its dependencies).

#![cfg_attr(not(test), forbid(clippy::disallowed_methods))]

pub mod decode;
pub mod determinism;
pub mod digest;
pub mod environment;
pub mod forbidden;
pub mod jcs;
pub mod lock;
pub mod markdown;
pub mod net;
pub mod normalize;
pub mod policy;
pub mod request;
pub mod result;
pub mod rule_pattern;
pub mod rules;
pub mod run;
#[cfg(test)]
mod test_support;
