//! Sealing a draft: compute the sha256 of every file it declares under `/in/` (front
//! matter `inputs` entries, with or without a hash, and files named in `## Input Files`)
//! and write those hashes into the front matter and the section. Nothing else changes:
//! the `inputs:` block is replaced whole (or inserted before the closing `---`), and in
//! `## Input Files` only the hash on each path's line is replaced or added, and a line is
//! appended for each declared file the section does not name.

use super::edit::{Document, EditError, FrontMatter};
use crate::stage::{self, InputsRoot, StageError};
use runner_core::policy::Policy;
use runner_core::request::frontmatter;
use runner_core::request::sections;
use runner_core::request::validate::{input_path_problem, trim_path_token};
use runner_core::request::yaml::{self, Node};
use runner_core::result::render::yaml_str;

/// One sealed input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedInput {
    pub path: String,
    /// 64 lowercase hex.
    pub sha256: String,
}

/// The sealed text and what was hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub text: String,
    pub inputs: Vec<SealedInput>,
}

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The draft cannot be read or edited (no front matter, YAML that does not load,
    /// `inputs` of the wrong shape).
    #[error("{0}")]
    Draft(#[from] EditError),
    /// Inputs that cannot be sealed, each named: missing, a symlink, not a regular file,
    /// or a path outside `/in/`.
    #[error("{}", .0.join("; "))]
    Inputs(Vec<String>),
}

/// Seals `text`, reading the declared inputs from `inputs` as staging will (no
/// symlinks, no hard links).
///
/// # Ambient authority
/// Opens `inputs` and the files in it (through [`stage::hash_input`]).
pub fn seal(text: &str, inputs: &InputsRoot, policy: &Policy) -> Result<Sealed, SealError> {
    let fm = FrontMatter::load(text, policy)?;
    let mut doc = Document::parse(text);

    let mut paths: Vec<String> = Vec::new();
    for path in front_matter_paths(&fm)? {
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    let split = frontmatter::split(text)
        .map_err(|_| EditError::new("the front matter cannot be split", Some(1)))?;
    let body = sections::parse(&split.body);
    let section = body
        .sections
        .iter()
        .find(|s| s.title.eq_ignore_ascii_case("Input Files"));
    // (line, path) for every section line that names a file under /in/.
    let named: Vec<(usize, String)> = section
        .map(|s| {
            s.content_lines()
                .filter_map(|l| path_on_line(l.text).map(|p| (l.number, p.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    for (_, path) in &named {
        if !paths.contains(path) {
            paths.push(path.clone());
        }
    }

    let inputs = hash_all(&paths, inputs)?;
    let hash_of = |path: &str| {
        inputs
            .iter()
            .find(|i| i.path == path)
            .map(|i| i.sha256.as_str())
    };

    if !inputs.is_empty() {
        let mut block = vec!["inputs:".to_owned()];
        for i in &inputs {
            block.push(format!("  - path: {}", yaml_str(&i.path)));
            block.push(format!("    sha256: \"{}\"", i.sha256));
        }
        match fm.key_block(&doc, "inputs") {
            Some((start, end)) => doc.replace(start, end, block),
            None => doc.insert_before(fm.closing_line, block),
        }
    }
    if let Some(section) = section {
        for (line, path) in &named {
            if let (Some(text), Some(sha)) = (doc.line(*line), hash_of(path)) {
                let updated = with_hash(text, sha);
                doc.replace(*line, line + 1, vec![updated]);
            }
        }
        let missing: Vec<String> = inputs
            .iter()
            .filter(|i| !named.iter().any(|(_, p)| *p == i.path))
            .map(|i| format!("- `{}` sha256: {}", i.path, i.sha256))
            .collect();
        if !missing.is_empty() {
            let after = section
                .content_lines()
                .last()
                .map_or(section.heading_line, |l| l.number);
            doc.insert_before(after + 1, missing);
        }
    }
    Ok(Sealed {
        text: doc.text(),
        inputs,
    })
}

/// The `path` of every front matter `inputs` entry, in order.
fn front_matter_paths(fm: &FrontMatter) -> Result<Vec<String>, EditError> {
    let items = match fm.get("inputs") {
        None => return Ok(Vec::new()),
        Some(Node::Scalar {
            value,
            quoted: false,
            ..
        }) if yaml::is_null(value) => return Ok(Vec::new()),
        Some(Node::Seq { items, .. }) => items,
        Some(other) => {
            return Err(EditError::new(
                format!(
                    "`inputs` must be a list of {{path, sha256}}, found {}",
                    other.kind()
                ),
                Some(other.line()),
            ));
        }
    };
    let mut paths = Vec::with_capacity(items.len());
    for item in items {
        match item.get("path") {
            Some(Node::Scalar { value, .. }) => paths.push(value.clone()),
            _ => {
                return Err(EditError::new(
                    "each input must be a mapping with a `path`",
                    Some(item.line()),
                ));
            }
        }
    }
    Ok(paths)
}

/// Hashes every path, naming every one that cannot be sealed.
fn hash_all(paths: &[String], root: &InputsRoot) -> Result<Vec<SealedInput>, SealError> {
    let mut problems = Vec::new();
    let mut inputs = Vec::with_capacity(paths.len());
    for path in paths {
        if let Some((_, message)) = input_path_problem(path) {
            problems.push(message);
            continue;
        }
        match stage::hash_input(root, path) {
            Ok(sha256) => inputs.push(SealedInput {
                path: path.clone(),
                sha256,
            }),
            Err(e @ StageError::InputsDir(_)) => {
                problems.push(e.to_string());
                break;
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    if problems.is_empty() {
        Ok(inputs)
    } else {
        Err(SealError::Inputs(problems))
    }
}

/// Whitespace-separated tokens with their byte offsets.
fn tokens(line: &str) -> Vec<(usize, &str)> {
    line.split_whitespace()
        .map(|t| (t.as_ptr() as usize - line.as_ptr() as usize, t))
        .collect()
}

/// Byte offset of `inner` (a subslice of `outer`) inside `outer`.
fn offset_in(outer: &str, inner: &str) -> usize {
    inner.as_ptr() as usize - outer.as_ptr() as usize
}

/// The first path under `/in/` a line names, read as the validator reads it.
fn path_on_line(line: &str) -> Option<&str> {
    line.split_whitespace()
        .map(trim_path_token)
        .find(|t| t.starts_with("/in/"))
}

/// A token without markdown dressing (but with a trailing `:`, which labels a value).
fn undressed(token: &str) -> &str {
    token.trim_matches(|c: char| matches!(c, '`' | '"' | '\'' | '*' | '(' | ')' | '[' | ']'))
}

/// A word that stands in for a hash in a draft: `TODO`, `<sha256>`, `?`, `""`, `…`.
fn is_placeholder(token: &str) -> bool {
    let t = undressed(token).trim_matches(|c| c == '<' || c == '>');
    let lower = t.to_ascii_lowercase();
    (token.starts_with('<') && token.ends_with('>'))
        || t.is_empty()
        || [
            "todo",
            "tbd",
            "fixme",
            "pending",
            "unknown",
            "none",
            "null",
            "hash",
            "sha256",
            "hex",
            "placeholder",
        ]
        .contains(&lower.as_str())
        || t.chars()
            .all(|c| matches!(c, 'x' | 'X' | '?' | '.' | '-' | '_' | '…'))
}

/// The line with its hash set to `sha`: an existing 64-hex hash is replaced; a
/// `sha256:` label gets the hash (replacing a placeholder after it); otherwise
/// ` sha256: <hex>` is inserted right after the path.
fn with_hash(line: &str, sha: &str) -> String {
    let toks = tokens(line);
    let splice =
        |start: usize, end: usize, new: &str| format!("{}{new}{}", &line[..start], &line[end..]);
    for (off, tok) in &toks {
        let t = trim_path_token(tok);
        let h = t
            .strip_prefix("sha256:")
            .or_else(|| t.strip_prefix("sha256="))
            .unwrap_or(t);
        if h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()) {
            let start = off + offset_in(tok, h);
            return splice(start, start + 64, sha);
        }
    }
    for (i, (off, tok)) in toks.iter().enumerate() {
        let t = undressed(tok);
        let label = t
            .get(..7)
            .filter(|p| p.eq_ignore_ascii_case("sha256:") || p.eq_ignore_ascii_case("sha256="));
        if label.is_none() {
            continue;
        }
        let rest = &t[7..];
        if !rest.is_empty() {
            let start = off + offset_in(tok, rest);
            return splice(start, start + rest.len(), sha);
        }
        let label_end = off + tok.len();
        return match toks.get(i + 1) {
            Some((noff, next)) if is_placeholder(next) => {
                // The placeholder without its dressing (`<hash>` in backticks keeps
                // the backticks); an empty one (`""`) goes whole.
                let inner = undressed(next);
                if inner.is_empty() {
                    splice(*noff, noff + next.len(), sha)
                } else {
                    let start = noff + offset_in(next, inner);
                    splice(start, start + inner.len(), sha)
                }
            }
            _ => splice(label_end, label_end, &format!(" {sha}")),
        };
    }
    match toks
        .iter()
        .find(|(_, tok)| trim_path_token(tok).starts_with("/in/"))
    {
        Some((off, tok)) => {
            let end = off + tok.len();
            splice(end, end, &format!(" sha256: {sha}"))
        }
        None => line.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    const H: &str = "baee897a2a8444f00a97ec5737e416b651af2e195161f4292eced15072999550";

    #[test]
    fn hash_on_a_line() {
        let old = "cb57b76eef265b42ce1f31b6ac92750cf272c9ce5353b55bbbfe66ce8aaeb89f";
        for (line, want) in [
            (
                "- `/in/stats.py` (the analysis script)".to_owned(),
                format!("- `/in/stats.py` sha256: {H} (the analysis script)"),
            ),
            (
                format!("- `/in/stats.py` sha256: {old} (x)"),
                format!("- `/in/stats.py` sha256: {H} (x)"),
            ),
            (
                format!("- `/in/stats.py` `sha256:{old}`"),
                format!("- `/in/stats.py` `sha256:{H}`"),
            ),
            (
                "- `/in/stats.py` sha256: TODO (x)".to_owned(),
                format!("- `/in/stats.py` sha256: {H} (x)"),
            ),
            (
                "- `/in/stats.py` sha256: `<hash>`".to_owned(),
                format!("- `/in/stats.py` sha256: `{H}`"),
            ),
            (
                "- `/in/stats.py` sha256: <fill-in> (x)".to_owned(),
                format!("- `/in/stats.py` sha256: {H} (x)"),
            ),
            (
                "- `/in/stats.py` sha256:TBD".to_owned(),
                format!("- `/in/stats.py` sha256:{H}"),
            ),
            (
                "- `/in/stats.py` sha256: (to be filled)".to_owned(),
                format!("- `/in/stats.py` sha256: {H} (to be filled)"),
            ),
            (
                "- `/in/stats.py` sha256:".to_owned(),
                format!("- `/in/stats.py` sha256: {H}"),
            ),
            (
                "/in/stats.py".to_owned(),
                format!("/in/stats.py sha256: {H}"),
            ),
        ] {
            assert_eq!(with_hash(&line, H), want, "{line}");
        }
    }

    #[test]
    fn placeholders() {
        for p in ["TODO", "`TBD`", "<sha256>", "\"\"", "?", "xxxx", "…", "-"] {
            assert!(is_placeholder(p), "{p}");
        }
        for p in ["(the", "script", "abc"] {
            assert!(!is_placeholder(p), "{p}");
        }
    }

    #[test]
    fn seals_front_matter_and_section() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/b.txt"), "b").unwrap();
        let draft = "---\r\nx: 1\r\ninputs:\r\n  - path: \"/in/a.txt\"\r\n# keep me\r\ny: 2\r\n---\r\n# T\r\n\r\n## Input Files\r\n- `/in/d/b.txt`: more\r\n\r\n## Command\r\n`python x.py`\r\n";
        let sealed = seal(draft, &InputsRoot::named(dir.path()), &Policy::builtin()).unwrap();
        let (ha, hb) = (
            runner_core::digest::sha256_hex(b"a"),
            runner_core::digest::sha256_hex(b"b"),
        );
        let want = format!(
            "---\r\nx: 1\r\ninputs:\r\n  - path: \"/in/a.txt\"\r\n    sha256: \"{ha}\"\r\n  - path: \"/in/d/b.txt\"\r\n    sha256: \"{hb}\"\r\n# keep me\r\ny: 2\r\n---\r\n# T\r\n\r\n## Input Files\r\n- `/in/d/b.txt`: sha256: {hb} more\r\n- `/in/a.txt` sha256: {ha}\r\n\r\n## Command\r\n`python x.py`\r\n"
        );
        assert_eq!(sealed.text, want);
        // Sealing again changes nothing.
        assert_eq!(
            seal(
                &sealed.text,
                &InputsRoot::named(dir.path()),
                &Policy::builtin()
            )
            .unwrap()
            .text,
            want
        );
    }

    #[test]
    fn refuses_naming_every_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join("link.txt")).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let draft = "---\ninputs:\n  - path: \"/in/link.txt\"\n  - path: \"/in/gone.txt\"\n  - path: \"/in/sub\"\n  - path: \"/etc/passwd\"\n---\n";
        let Err(SealError::Inputs(problems)) =
            seal(draft, &InputsRoot::named(dir.path()), &Policy::builtin())
        else {
            panic!("sealed");
        };
        let all = problems.join("\n");
        for name in ["/in/link.txt", "/in/gone.txt", "/in/sub", "/etc/passwd"] {
            assert!(all.contains(name), "{name} not named in {all}");
        }
        assert!(all.contains("symlink"), "{all}");
        assert!(all.contains("missing"), "{all}");
    }

    #[test]
    fn inserts_inputs_when_the_front_matter_has_none() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let draft = "---\nx: 1\n---\n## Input Files\n- /in/a.txt\n";
        let sealed = seal(draft, &InputsRoot::named(dir.path()), &Policy::builtin()).unwrap();
        let ha = runner_core::digest::sha256_hex(b"a");
        assert_eq!(
            sealed.text,
            format!(
                "---\nx: 1\ninputs:\n  - path: \"/in/a.txt\"\n    sha256: \"{ha}\"\n---\n## Input Files\n- /in/a.txt sha256: {ha}\n"
            )
        );
        // No inputs at all: nothing to change.
        let none = "---\nx: 1\n---\n## Input Files\nnone\n";
        assert_eq!(
            seal(none, &InputsRoot::named(dir.path()), &Policy::builtin())
                .unwrap()
                .text,
            none
        );
    }
}
