//! `runner mcp`: CORE's door to the runner. An MCP server (the official Rust SDK, rmcp,
//! over stdio, or Streamable HTTP on loopback) whose tools read the policy, judge a draft request with the runner's own
//! validator, hand a draft in to a drafts directory, say where a draft is, and return a
//! result only when the gate accepts it; and the drafts directory the operator works
//! from (`runner drafts list`, `runner drafts reject`, `runner approve --drafts`).
//!
//! The approval stays with the operator: no tool approves, signs, edits the policy or
//! runs anything, and nothing the server writes ever lands in an inbox a host serves.

pub mod drafts;
pub mod http;
pub mod judge;
pub mod server;
pub mod staging;

pub use drafts::Drafts;
pub use judge::HostDirs;
pub use server::DraftServer;
