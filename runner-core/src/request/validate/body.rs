//! The sections of the body each backend requires, the outputs and the risk assessment.

use super::era::era_command;
use super::fields::FrontMatter;
use super::inputs::input_files_section;
use super::monty::{monty_code, monty_inputs};
use crate::policy::Policy;
use crate::request::BackendKind;
use crate::request::document::{self, Reasons};
use crate::request::sections::{self, Section};
use crate::request::{RiskAssessment, Work};
use std::collections::BTreeMap;

const ERA_SECTIONS: &[&str] = &[
    "Command",
    "Input Files",
    "Output Expectations",
    "Risk Assessment",
];

const MONTY_SECTIONS: &[&str] = &["Code", "Output Expectations", "Risk Assessment"];

const MONTY_OPTIONAL: &[&str] = &["Inputs (JSON)"];

/// Section rules. Returns the work, outputs and risk assessment when all are valid.
pub(super) fn body_rules(
    body: &sections::Body<'_>,
    fm: &FrontMatter,
    policy: &Policy,
    r: &mut Reasons,
) -> Option<(Work, Vec<String>, RiskAssessment)> {
    if !fm.backend_known {
        return None;
    }
    let (required, optional, other): (&[&str], &[&str], &[&str]) = match fm.backend {
        BackendKind::Era => (ERA_SECTIONS, &[], &["Code", "Inputs (JSON)"]),
        BackendKind::Monty => (MONTY_SECTIONS, MONTY_OPTIONAL, &["Command", "Input Files"]),
    };
    let backend_name = match fm.backend {
        BackendKind::Era => "ERA",
        BackendKind::Monty => "monty",
    };
    let mut found: BTreeMap<&'static str, &Section<'_>> = BTreeMap::new();
    for s in &body.sections {
        let canonical = required
            .iter()
            .chain(optional)
            .find(|t| t.eq_ignore_ascii_case(&s.title));
        match canonical {
            Some(t) => {
                document::file_section(&mut found, t, s, r);
            }
            None if other.iter().any(|t| t.eq_ignore_ascii_case(&s.title)) => r.add(
                "body.section_wrong_backend",
                format!("section `## {}` belongs to the other backend; a {backend_name} request has: {}", s.title, required.join(", ")),
                s.heading_line,
            ),
            None => r.add("body.unknown_section", format!("unknown section `## {}` (a {backend_name} request has: {})", s.title, required.iter().chain(optional).copied().collect::<Vec<_>>().join(", ")), s.heading_line),
        }
    }
    let end_line = body
        .sections
        .last()
        .and_then(|s| s.lines.last().map(|l| l.number))
        .unwrap_or(1);
    document::required_sections(&found, required, end_line, r);
    let outputs = found
        .get("Output Expectations")
        .map(|s| output_paths(s, r))
        .unwrap_or_default();
    let risk = found
        .get("Risk Assessment")
        .and_then(|s| risk_assessment(s, r));
    let work = match fm.backend {
        BackendKind::Era => {
            if let Some(s) = found.get("Input Files") {
                input_files_section(s, fm, r);
            }
            found
                .get("Command")
                .and_then(|s| era_command(s, fm, policy, r))
        }
        BackendKind::Monty => {
            let code = found.get("Code").and_then(|s| monty_code(s, r));
            let inputs_json = match found.get("Inputs (JSON)") {
                None => Some(None),
                Some(s) => monty_inputs(s, r).map(Some),
            };
            match (code, inputs_json) {
                (Some(code), Some(inputs_json)) => Some(Work::Monty { code, inputs_json }),
                _ => None,
            }
        }
    };
    match (work, risk) {
        (Some(work), Some(risk)) => Some((work, outputs, risk)),
        _ => None,
    }
}

pub(super) fn path_tokens(text: &str) -> impl Iterator<Item = &str> {
    // Markdown wraps paths in backticks, quotes, brackets and emphasis, and follows them
    // with punctuation: "`/out/x.json`:" is the path /out/x.json. A trailing `..` is a
    // path component, never punctuation.
    text.split_whitespace()
        .map(trim_path_token)
        .filter(|t| !t.is_empty())
}

/// A path token without its markdown dressing (`approval::seal` reads lines the same way).
pub fn trim_path_token(token: &str) -> &str {
    let mut t = token.trim_start_matches(['`', '"', '\'', '(', '[', '*', '<', '{']);
    loop {
        let before = t;
        t = t.trim_end_matches(|c: char| {
            matches!(
                c,
                '`' | '"' | '\'' | ')' | ']' | '*' | '>' | '}' | ',' | ':' | ';'
            )
        });
        if t.ends_with('.') && !t.ends_with("..") {
            t = &t[..t.len() - 1];
        }
        if t == before {
            return t;
        }
    }
}

fn output_paths(s: &Section<'_>, r: &mut Reasons) -> Vec<String> {
    let mut outputs = Vec::new();
    for line in s.content_lines() {
        for token in path_tokens(line.text) {
            if !token.starts_with('/') {
                continue;
            }
            if token.split('/').any(|c| c == "..") {
                r.add(
                    "outputs.path_traversal",
                    format!("output path `{token}` climbs out with `..`"),
                    line.number,
                );
            } else if token == "/out" || token.starts_with("/out/") {
                outputs.push(token.to_owned());
            } else {
                r.add(
                    "outputs.path_outside_out",
                    format!("output path `{token}` must be under /out/"),
                    line.number,
                );
            }
        }
    }
    outputs
}

fn risk_assessment(s: &Section<'_>, r: &mut Reasons) -> Option<RiskAssessment> {
    let mut fields: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for line in s.content_lines() {
        let t = line.text.trim().trim_start_matches(['-', '*', '+']).trim();
        let Some((key, value)) = t.split_once(':') else {
            continue;
        };
        let key = key.replace(['*', '_', '`'], "").trim().to_ascii_lowercase();
        let value = value.replace(['*', '`'], "").trim().to_owned();
        fields.entry(key).or_insert((value, line.number));
    }
    let mut field = |name: &str, allowed: Option<&[&str]>, code: &str| -> Option<String> {
        match fields.get(name) {
            None => {
                r.add(
                    "risk.missing_field",
                    format!("`## Risk Assessment` must include `{}:`", capitalize(name)),
                    s.heading_line,
                );
                None
            }
            Some((value, line)) if value.is_empty() => {
                r.add(
                    "risk.empty_field",
                    format!("`{}:` is empty", capitalize(name)),
                    *line,
                );
                None
            }
            Some((value, line)) => match allowed {
                Some(allowed) if !allowed.contains(&value.to_ascii_lowercase().as_str()) => {
                    r.add(
                        code,
                        format!(
                            "`{}:` must be one of {}, found `{value}`",
                            capitalize(name),
                            allowed.join("|")
                        ),
                        *line,
                    );
                    None
                }
                Some(_) => Some(value.to_ascii_lowercase()),
                None => Some(value.clone()),
            },
        }
    };
    let level = field("risk level", Some(&["low", "medium", "high"]), "risk.level");
    let justification = field("justification", None, "risk.empty_field");
    let data_sensitivity = field(
        "data sensitivity",
        Some(&["public", "internal", "confidential"]),
        "risk.data_sensitivity",
    );
    let network_rationale = field("network rationale", None, "risk.empty_field");
    Some(RiskAssessment {
        level: level?,
        justification: justification?,
        data_sensitivity: data_sensitivity?,
        network_rationale: network_rationale?,
    })
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
