//! The replay lock: its types, sealing and strict parsing, and the in-toto statement are
//! `runner-core`'s (no I/O); reading a result's set from disk and checking it is
//! [`verify`].

/// RFC 8785 canonical JSON (in `runner-core`, which has no I/O).
pub mod verify;
