//! Declared inputs: the `inputs` field, the `/in` path rules, and the `## Input Files` section.

use super::body::path_tokens;
use super::fields::FrontMatter;
use crate::digest::is_sha256_hex;
use crate::request::DeclaredInput;
use crate::request::document::{self, Reasons, scalar_str};
use crate::request::sections::Section;
use crate::request::yaml::{self, Node};

pub(super) fn declared_inputs(
    r: &mut Reasons,
    node: &Node,
    declared_paths: &mut Vec<String>,
) -> Vec<DeclaredInput> {
    let items = match node {
        Node::Seq { items, .. } => items,
        Node::Scalar {
            value,
            quoted: false,
            ..
        } if yaml::is_null(value) => return Vec::new(),
        other => {
            r.add(
                "inputs.type",
                format!(
                    "`inputs` must be a list of {{path, sha256}}, found {}",
                    other.kind()
                ),
                other.line(),
            );
            return Vec::new();
        }
    };
    let mut inputs: Vec<DeclaredInput> = Vec::new();
    for item in items {
        let Node::Map { entries, line } = item else {
            r.add(
                "inputs.type",
                format!(
                    "each input must be a mapping with `path` and `sha256`, found {}",
                    item.kind()
                ),
                item.line(),
            );
            continue;
        };
        document::known_keys(
            entries,
            &["path", "sha256"],
            "inputs.unknown_key",
            "an input",
            r,
        );
        let path = item.get("path").and_then(scalar_str);
        let sha = item.get("sha256").and_then(scalar_str);
        let Some(path) = path else {
            r.add("inputs.path_missing", "an input has no `path`", *line);
            continue;
        };
        let path_line = item.get("path").map_or(*line, Node::line);
        declared_paths.push(path.clone());
        if let Some(problem) = input_path_problem(&path) {
            r.add(problem.0, problem.1, path_line);
            continue;
        }
        match sha {
            None => r.add(
                "inputs.hash_missing",
                format!("input `{path}` has no sha256: every declared input needs its hash"),
                *line,
            ),
            Some(sha) if !is_sha256_hex(&sha) => r.add(
                "inputs.hash_format",
                format!("the sha256 of input `{path}` must be 64 lowercase hex characters"),
                item.get("sha256").map_or(*line, Node::line),
            ),
            Some(sha) => {
                if inputs.iter().any(|i| i.path == path) {
                    r.add(
                        "inputs.duplicate_path",
                        format!(
                            "input `{path}` is declared twice (paths are compared after Unicode NFC normalization, so two spellings of one name are one path)"
                        ),
                        path_line,
                    );
                } else {
                    inputs.push(DeclaredInput { path, sha256: sha });
                }
            }
        }
    }
    inputs
}

/// Problems with an input path: must be `/in/<relative path>` without `..`, `.`, empty
/// components, backslashes or control characters.
pub fn input_path_problem(path: &str) -> Option<(&'static str, String)> {
    let Some(rel) = path.strip_prefix("/in/") else {
        return Some((
            "inputs.path_outside_in",
            format!("input path `{path}` must be under /in/"),
        ));
    };
    let components: Vec<&str> = rel.split('/').collect();
    if components.contains(&"..") {
        return Some((
            "inputs.path_traversal",
            format!("input path `{path}` climbs out with `..`"),
        ));
    }
    if rel.is_empty()
        || components.iter().any(|c| c.is_empty() || *c == ".")
        || path.contains('\\')
        || path.chars().any(char::is_control)
        || path.len() > 1024
    {
        return Some((
            "inputs.path_invalid",
            format!("input path `{path}` is not a plain relative file path under /in/"),
        ));
    }
    None
}

pub(super) fn input_files_section(s: &Section<'_>, fm: &FrontMatter, r: &mut Reasons) {
    let mut named: Vec<document::Listed> = Vec::new();
    for line in s.content_lines() {
        let tokens: Vec<&str> = path_tokens(line.text).collect();
        let path = tokens
            .iter()
            .find(|t| t.starts_with("/in/") || **t == "/in");
        let sha = document::listed_sha256(&tokens);
        if let Some(path) = path {
            named.push(((*path).to_owned(), sha.map(str::to_owned), line.number));
        } else if let Some(p) = tokens.iter().find(|t| t.starts_with('/')) {
            r.add(
                "inputs.path_outside_in",
                format!("`## Input Files` names `{p}`, which is not under /in/"),
                line.number,
            );
        }
    }
    let line_hint = fm
        .inputs_line
        .map(|l| format!(" (front matter `inputs` on line {l})"))
        .unwrap_or_default();
    let words = document::ListingWords {
        not_listed: ("inputs.section_missing_file", &|path| {
            format!(
                "input `{path}` is declared in the front matter but not listed in `## Input Files`"
            )
        }),
        hash_missing: Some(("inputs.section_hash_missing", &|path| {
            format!("`## Input Files` lists `{path}` without its sha256")
        })),
        hash_mismatch: ("inputs.section_hash_mismatch", &|path, listed, declared| {
            format!(
                "`## Input Files` gives sha256 {listed} for `{path}`, the front matter {declared}"
            )
        }),
        undeclared: ("inputs.section_undeclared_file", &|path| {
            format!(
                "`## Input Files` lists `{path}`, which the front matter `inputs` does not declare{line_hint}"
            )
        }),
    };
    document::cross_check_listing(
        s,
        &named,
        fm.inputs
            .iter()
            .map(|i| (i.path.as_str(), i.sha256.as_str())),
        &|path| fm.declared_paths.iter().any(|p| p == path),
        &words,
        r,
    );
}
