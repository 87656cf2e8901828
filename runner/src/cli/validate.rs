//! `runner validate FILE… [--json]`: judge each document and print its verdict.

use super::read::{Read2, read_document};
use crate::exit_codes;
use crate::policy::Policy;
use crate::request::{self, Reason};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct ValidateCommand {
    /// Documents to judge (tool requests: `TR-….md`).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print one JSON object per file (JSON Lines) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The verdict on one file, as printed with `--json`.
#[derive(Debug, Serialize)]
pub struct FileVerdict {
    pub file: String,
    pub kind: &'static str,
    pub verdict: &'static str,
    pub reasons: Vec<Reason>,
}

impl ValidateCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        let mut code = exit_codes::OK;
        for file in &self.files {
            let (verdict, text, io_failed) = judge(file, policy);
            if io_failed {
                code = exit_codes::IO;
            } else if verdict.verdict == "REJECT" && code == exit_codes::OK {
                code = exit_codes::REJECT;
            }
            if self.json {
                match serde_json::to_string(&verdict) {
                    Ok(line) => println!("{line}"),
                    Err(e) => {
                        eprintln!("error: cannot encode verdict: {e}");
                        return exit_codes::INTERNAL;
                    }
                }
            } else {
                print_human(&verdict, text.as_deref());
            }
        }
        code
    }
}

/// Judges one file: its verdict, its text (for showing lines), and whether reading failed.
pub fn judge(file: &std::path::Path, policy: &Policy) -> (FileVerdict, Option<String>, bool) {
    let name = file.display().to_string();
    let verdict = |verdict, reasons| FileVerdict {
        file: name.clone(),
        kind: "tool_request",
        verdict,
        reasons,
    };
    match read_document(file, policy.request.max_bytes) {
        Err(e) => (
            verdict(
                "REJECT",
                vec![Reason::new(
                    "io.unreadable",
                    format!("cannot read {name}: {e}"),
                    None,
                )],
            ),
            None,
            true,
        ),
        Ok(Read2::TooLarge(size)) => (
            verdict(
                "REJECT",
                vec![Reason::new(
                    "request.too_large",
                    format!(
                        "the file is {size} bytes; the policy allows at most {}",
                        policy.request.max_bytes
                    ),
                    None,
                )],
            ),
            None,
            false,
        ),
        Ok(Read2::Bytes(bytes)) => {
            let text = String::from_utf8(bytes.clone()).ok();
            match request::validate(&bytes, policy) {
                Ok(_) => (verdict("ACCEPT", Vec::new()), text, false),
                Err(reasons) => (verdict("REJECT", reasons), text, false),
            }
        }
    }
}

/// `FILE: VERDICT`, then per reason `FILE:LINE: code: message` and the line itself.
fn print_human(v: &FileVerdict, text: Option<&str>) {
    println!("{}: {}", v.file, v.verdict);
    let lines: Vec<&str> = text
        .map(|t| {
            crate::request::frontmatter::lines(t)
                .map(|l| l.text)
                .collect()
        })
        .unwrap_or_default();
    for reason in &v.reasons {
        match reason.line {
            Some(n) => println!("  {}:{n}: {}: {}", v.file, reason.code, reason.message),
            None => println!("  {}: {}: {}", v.file, reason.code, reason.message),
        }
        if let Some(line) = reason.line.and_then(|n| lines.get(n.wrapping_sub(1))) {
            println!("  {:>5} | {}", reason.line.unwrap_or(0), printable(line));
        }
    }
}

/// A line made safe for a terminal: control and invisible characters shown as escapes,
/// long lines cut.
pub fn printable(line: &str) -> String {
    let mut out = String::new();
    for (i, c) in line.chars().enumerate() {
        if i >= 160 {
            out.push('…');
            break;
        }
        if c.is_control() || crate::normalize::is_invisible(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}
