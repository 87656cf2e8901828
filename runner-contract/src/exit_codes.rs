//! Exit codes: a documented public contract (listed in the README). Hosts branch on
//! these numbers, so they never change meaning.

/// Every file accepted; for `exec`, the request ran and a result was written
/// (whatever the guest's own exit status: that is in the result).
pub const OK: i32 = 0;
/// At least one document was judged and rejected (validate, exec on a bad request,
/// verify finding a mismatch).
pub const REJECT: i32 = 1;
/// Usage error: bad flags or arguments (clap's own errors use this code too).
pub const USAGE: i32 = 2;
/// I/O or environment error: a file could not be read or written, a guest could not
/// be fetched, the results directory is unwritable.
pub const IO: i32 = 3;
/// Staging refused to run: a declared input is missing, not a regular file, or its
/// sha256 differs from the request. Nothing executed.
pub const INPUT_MISMATCH: i32 = 4;
/// `replay --check`: the run was reproduced and at least one output drifted.
pub const DRIFT: i32 = 5;
/// Internal error: a bug in the runner. The message says what happened.
pub const INTERNAL: i32 = 70;

/// All codes with their meaning, for `--help`, the man page and the README table
/// (`runner/tests/it/readme.rs` checks that the README shows exactly [`markdown_table`]).
pub const TABLE: &[(i32, &str)] = &[
    (
        OK,
        "success: every file accepted / the run finished and its result was written (whatever the guest's own exit status)",
    ),
    (
        REJECT,
        "a document was rejected (reasons printed); for `exec`, nothing ran; `verify` found a difference; `replay` refused; `gate` quarantined a file",
    ),
    (
        USAGE,
        "usage error: bad flags or arguments, an invalid policy",
    ),
    (
        IO,
        "I/O or environment error (unreadable file, unwritable results directory, guest unavailable)",
    ),
    (
        INPUT_MISMATCH,
        "a declared input is missing, not a regular file, a symlink, or its sha256 differs; nothing ran",
    ),
    (
        DRIFT,
        "`replay --check`: an output (or an input) drifted from the lock, with `--across-upgrade` too (MATCH_ACROSS_UPGRADE is 0)",
    ),
    (INTERNAL, "internal error in the runner"),
];

/// The exit-code table as Markdown, as the README shows it.
pub fn markdown_table() -> String {
    let mut table = String::from("| code | meaning |\n|---|---|\n");
    for (code, meaning) in TABLE {
        table.push_str(&format!("| {code} | {meaning} |\n"));
    }
    table
}
