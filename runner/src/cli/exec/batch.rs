//! Batch mode of `runner exec`: several requests, or directories of them, run by one
//! process with up to `--jobs N` at once.
//!
//! What the runs share is what does not need isolating: the parsed policy, one wasmtime
//! engine and the verified precompiled guests (one [`Pipeline`]). What each run keeps
//! to itself is what a single `runner exec` has: its own judgement, staging directory,
//! `/out` tmpfs, worker process (with its own store and limits) and result. A run that
//! is rejected or fails does not stop the others.
//!
//! Output: one result per request (as a single run writes it); on stdout the result
//! paths in the order given, or with `--json` one array of objects in that order
//! (`{"request", "verdict", "reasons", "result_path", "outcome", "exit_code",
//! "runtime_sec", "reused"}`); on stderr a line per run as it finishes and a summary. The exit
//! code is the highest of the runs' exit codes (0 only when every request ran).

use super::{ExecCommand, ExecReport, not_run_text};
use runner_contract::exit_codes;
use runner_pipeline::pipeline::Pipeline;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// One entry of the `--json` array: the request it is about, then what a single
/// `runner exec --json` prints for it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct BatchEntry {
    pub request: String,
    #[serde(flatten)]
    pub report: ExecReport,
}

/// Several requests, or any directory, make a batch; a single file is a single run.
pub(super) fn is_batch(requests: &[PathBuf]) -> bool {
    requests.len() > 1 || requests.iter().any(|p| p.is_dir())
}

/// The requests named on the command line, each directory replaced by its `TR-*.md`
/// files (regular files only) in name order.
///
/// # Ambient Authority
///
/// Opens the directories named ([`runner_sandbox::host`]) and lists them.
fn expand(requests: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for path in requests {
        if !path.is_dir() {
            out.push(path.clone());
            continue;
        }
        let entries = runner_sandbox::host::open_dir(path)
            .and_then(|dir| dir.entries())
            .map_err(|e| format!("cannot list directory {}: {e}", path.display()))?;
        let mut found = Vec::new();
        for entry in entries {
            let entry =
                entry.map_err(|e| format!("cannot list directory {}: {e}", path.display()))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if is_file && name.starts_with("TR-") && name.ends_with(".md") {
                found.push(path.join(entry.file_name()));
            }
        }
        if found.is_empty() {
            return Err(format!(
                "directory {} holds no request (TR-*.md)",
                path.display()
            ));
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

/// Run the batch and print its reports; returns the process exit code.
pub(super) fn execute(cmd: &ExecCommand, pipeline: &Pipeline) -> i32 {
    let requests = match expand(&cmd.requests) {
        Ok(requests) => match cmd.shard {
            Some(shard) => shard.select(requests),
            None => requests,
        },
        Err(message) => {
            eprintln!("error: {message}");
            return exit_codes::USAGE;
        }
    };
    let jobs = usize::try_from(cmd.jobs)
        .unwrap_or(1)
        .clamp(1, requests.len().max(1));
    // More than one request: the next workers start while the current ones run.
    if requests.len() > 1 {
        pipeline.set_warm_workers(runner_pipeline::report::warm_workers(jobs));
    }
    let next = AtomicUsize::new(0);
    let done: Mutex<BTreeMap<usize, (i32, ExecReport)>> = Mutex::new(BTreeMap::new());
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(request) = requests.get(index) else {
                        break;
                    };
                    let (code, report) =
                        cmd.run_one(pipeline, request, pipeline.read_request(request));
                    if !cmd.json {
                        print_progress(request, &report);
                    }
                    done.lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .insert(index, (code, report));
                }
            });
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    let done = done
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());

    let mut worst = exit_codes::OK;
    let mut outcomes: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut not_run = 0usize;
    let mut reused = 0usize;
    let mut entries = Vec::with_capacity(done.len());
    for (index, (code, report)) in done {
        worst = worst.max(code);
        match report.run.outcome {
            _ if report.reused => reused += 1,
            Some(outcome) => *outcomes.entry(outcome.as_str()).or_default() += 1,
            None => not_run += 1,
        }
        entries.push(BatchEntry {
            request: requests[index].display().to_string(),
            report,
        });
    }
    if cmd.json {
        if let Err(code) = crate::cli::out_json(&entries) {
            return code;
        }
    } else {
        for entry in &entries {
            if let Some(path) = &entry.report.run.result_path {
                crate::cli::outln!("{path}");
            }
        }
    }
    let ran: usize = outcomes.values().sum();
    let kinds: Vec<String> = outcomes.iter().map(|(k, n)| format!("{k} {n}")).collect();
    eprintln!(
        "batch: {} requests, {ran} ran ({}), {reused} reused, {not_run} not run; {jobs} at a time, {elapsed:.2} s ({:.1} requests/s); exit code {worst}",
        entries.len(),
        if kinds.is_empty() {
            "-".to_owned()
        } else {
            kinds.join(", ")
        },
        entries.len() as f64 / elapsed.max(1e-9),
    );
    worst
}

fn print_progress(request: &Path, report: &ExecReport) {
    // One write per run, so the lines of runs finishing together do not interleave.
    let text = match (&report.run.result_path, report.run.outcome) {
        (Some(path), _) if report.reused => {
            format!(
                "{}: reused (verified, nothing ran): {path}\n",
                request.display()
            )
        }
        (Some(path), Some(outcome)) => format!(
            "{}: {outcome}, exit code {}, {:.3} s: {path}\n",
            request.display(),
            report.run.exit_code.unwrap_or(-1),
            report.run.runtime_sec.unwrap_or(0.0)
        ),
        _ => not_run_text(request, &report.reasons),
    };
    eprint!("{text}");
}
