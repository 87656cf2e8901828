//! Staging: copying declared inputs into a private per-run directory.
