//! Times the request validator: a typical ~5 KB request (the csv-stats example with a
//! realistic Justification and Output Expectations) over many iterations, and one 8 MiB
//! hostile request full of near-miss patterns under a policy whose `max_bytes` is raised
//! to 16 MiB.
//!
//! `cargo run --release --example bench_validate [-- ITERATIONS]`

use runner_core::policy::DEFAULT_POLICY_TOML;
use runner_core::policy::Policy;
use runner_core::request;
use std::hint::black_box;
use std::time::{Duration, Instant};

const EXAMPLE: &str = include_str!("../../examples/csv-stats/TR-20261121-100000Z-csv-stats.md");
const HOSTILE_BYTES: usize = 8 * 1024 * 1024;

fn main() {
    let iterations: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let builtin = Policy::builtin();

    let typical = typical_request();
    check_accepted(&typical, &builtin);
    let per_call = time_per_call(&typical, &builtin, iterations);
    println!(
        "typical request ({} bytes, {} lines): {:.1} µs per validation (mean of {iterations})",
        typical.len(),
        typical.lines().count(),
        per_call.as_secs_f64() * 1e6
    );

    let policy = raised_policy(16 * 1024 * 1024);
    let hostile = hostile_request(HOSTILE_BYTES);
    let started = Instant::now();
    let result = black_box(request::validate(black_box(hostile.as_bytes()), &policy));
    let elapsed = started.elapsed();
    let reasons = result.as_ref().err().map_or(0, Vec::len);
    println!(
        "hostile request ({:.1} MiB, {} lines): {:.1} ms, {} reasons",
        hostile.len() as f64 / (1024.0 * 1024.0),
        hostile.lines().count(),
        elapsed.as_secs_f64() * 1e3,
        reasons
    );

    // The forbidden rules' Unicode `\b` keeps the regex engine off its lazy DFA (it falls
    // back to the PikeVM); the same rules with ASCII word boundaries show what that costs.
    // The two differ only beside non-ASCII word characters, which the folding mostly removes.
    let ascii = ascii_word_boundaries(&builtin.text);
    let per_call = time_per_call(&typical, &ascii, iterations);
    println!(
        "  same, forbidden rules with ASCII \\b: typical {:.1} µs per validation",
        per_call.as_secs_f64() * 1e6
    );
    let ascii_raised = ascii_word_boundaries(&policy.text);
    let started = Instant::now();
    black_box(request::validate(black_box(hostile.as_bytes()), &ascii_raised).is_ok());
    println!(
        "  same, forbidden rules with ASCII \\b: hostile {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
}

/// `policy_text` with every `\b` in the forbidden patterns made an ASCII word boundary.
fn ascii_word_boundaries(policy_text: &str) -> Policy {
    let text = policy_text.replace("\\b", "(?-u:\\b)");
    match Policy::parse(&text, "bench-ascii") {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

/// The csv-stats example, padded to about 5 KB with the prose a real request carries.
fn typical_request() -> String {
    let justification = "- Justification: reads two small declared files (the analysis script and a CSV of \
        station readings) and writes one JSON summary under /out; no network, no secrets, no \
        third-party modules: the script uses only csv, json and statistics from the standard \
        library. The readings are public weather observations already published by the stations. \
        The run is deterministic: the same inputs give byte-identical output, so a replay can \
        check the result hash. Memory stays far below the limit (the CSV has a few hundred rows).";
    let outputs = "- `/out/summary.json`: one object per station with days, mean_temp_c and total_rain_mm.\n\
        - `/out/by_day.csv`: one row per station and day with the daily mean temperature and rain.\n\
        - `/out/report.md`: a short human-readable report with a table per station and the overall \
        warmest and wettest day, for the operator to read before the result is promoted.\n\
        - stdout: one line per station, in the order the stations first appear in the CSV.\n\
        - stderr: empty on success; a malformed row is reported with its line number and skipped.\n\
        - exit code 0 when every row parsed, 2 when some rows were skipped (still a usable summary).\n";
    let mut text = EXAMPLE
        .replace(
            "- Justification: reads two small declared files and writes one JSON summary; no network, no secrets.",
            justification,
        )
        .replace(
            "- `/out/summary.json`: one object per station with days, mean_temp_c and total_rain_mm.\n- stdout: one line per station.\n",
            outputs,
        );
    // More realistic detail until the request is about 5 KB.
    let detail = "- `/out/notes.txt`: the per-station row counts, the first and last date seen, and the \
        number of readings without rain data, one station per line.\n";
    let mut n = 0;
    while text.len() < 5 * 1024 {
        n += 1;
        text = text.replace(
            "- stdout: one line per station",
            &format!(
                "{}- stdout: one line per station",
                detail.replace("notes", &format!("notes{n}"))
            ),
        );
    }
    text
}

fn check_accepted(text: &str, policy: &Policy) {
    if let Err(reasons) = request::validate(text.as_bytes(), policy) {
        eprintln!("the typical request must be valid; reasons: {reasons:#?}");
        std::process::exit(1);
    }
}

fn time_per_call(text: &str, policy: &Policy, iterations: u32) -> Duration {
    // Warm up (regex lazy state, allocator).
    for _ in 0..iterations.min(50) {
        black_box(request::validate(black_box(text.as_bytes()), policy).is_ok());
    }
    let started = Instant::now();
    for _ in 0..iterations {
        black_box(request::validate(black_box(text.as_bytes()), policy).is_ok());
    }
    started.elapsed() / iterations.max(1)
}

/// The built-in policy with `request.max_bytes` replaced.
fn raised_policy(max_bytes: u64) -> Policy {
    let text =
        DEFAULT_POLICY_TOML.replace("max_bytes = 1048576", &format!("max_bytes = {max_bytes}"));
    assert_ne!(
        text, DEFAULT_POLICY_TOML,
        "the built-in policy no longer says `max_bytes = 1048576`"
    );
    match Policy::parse(&text, "bench") {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

/// A valid front matter and section skeleton whose Output Expectations hold `size` bytes
/// of random-ish text dense with near-misses of every forbidden pattern, shell syntax,
/// spaced-out letters, homoglyphs, invisible characters and long single-letter runs.
fn hostile_request(size: usize) -> String {
    const FRAGMENTS: &[&str] = &[
        "pip",
        "install",
        "p i p",
        "i n s t a l l",
        "ｐｉｐ",
        "рiр",
        "curl",
        "|",
        "sh",
        "wget",
        "apt-get",
        "npm",
        "i",
        "AKIA",
        "ghp_",
        "-----BEGIN",
        "PRIVATE",
        "KEY-----",
        "password",
        "=",
        ":",
        "/etc",
        "/proc",
        "/dev/",
        "~/",
        "$HOME",
        "sudo",
        "chmod",
        "4755",
        "\u{200b}",
        "\u{202e}",
        "`",
        "$(",
        "&&",
        ";",
        "..",
        "/out/",
        "/in/",
        "a",
        "b",
        "c",
        "x y z",
        "lorem",
        "ipsum",
        "station",
        "temp_c",
        "0123456789",
        "é",
        "e\u{301}",
    ];
    let mut out = String::from(EXAMPLE);
    out.truncate(
        EXAMPLE
            .find("- stdout: one line per station.")
            .expect("the example's Output Expectations"),
    );
    // xorshift: deterministic, no dependency.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut line_len = 0;
    while out.len() < size {
        let r = next();
        out.push_str(FRAGMENTS[(r % FRAGMENTS.len() as u64) as usize]);
        line_len += 1;
        if (r >> 32) % 24 == 0 || line_len > 40 {
            out.push_str("\n- ");
            line_len = 0;
        } else {
            out.push(' ');
        }
    }
    out.push_str("\n\n## Risk Assessment\n- Risk level: low\n- Justification: x\n- Data sensitivity: public\n- Network rationale: none\n");
    out
}
