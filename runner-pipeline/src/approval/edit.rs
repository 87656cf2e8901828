//! Minimal text edits of a request: replace or insert whole lines of the front matter and
//! the body, keeping every other byte (BOM, line endings, comments, layout) as found, and
//! atomic writes of the result.
//!
//! Lines are numbered as [`runner_core::request::frontmatter::lines`] numbers them, so line
//! numbers from the YAML loader and the section parser address the same lines here.

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt, PermissionsExt};
use runner_core::policy::Policy;
use runner_core::request::frontmatter;
use runner_core::request::yaml::{self, Node};
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::Path;

/// Why a document could not be edited: a message and the line it concerns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
pub struct EditError {
    pub message: String,
    pub line: Option<usize>,
}

impl EditError {
    pub fn new(message: impl Into<String>, line: Option<usize>) -> Self {
        Self {
            message: message.into(),
            line,
        }
    }
}

/// One line of the file and the ending it had (`"\n"`, `"\r\n"`, or `""` for the last).
#[derive(Debug, Clone, PartialEq, Eq)]
struct RawLine {
    text: String,
    eol: &'static str,
}

/// A document as lines with their endings; [`Document::text`] gives back the exact
/// bytes when nothing was edited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    lines: Vec<RawLine>,
    edits: Vec<Edit>,
}

/// Replace lines `start..end` (0-based, `start == end` inserts) with `new`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Edit {
    start: usize,
    end: usize,
    new: Vec<String>,
}

impl Document {
    pub fn parse(text: &str) -> Self {
        let count = text.matches('\n').count();
        let lines = text
            .split('\n')
            .enumerate()
            .map(|(i, seg)| {
                let last = i == count;
                match seg.strip_suffix('\r') {
                    Some(t) if !last => RawLine {
                        text: t.to_owned(),
                        eol: "\r\n",
                    },
                    _ => RawLine {
                        text: seg.to_owned(),
                        eol: if last { "" } else { "\n" },
                    },
                }
            })
            .collect();
        Self {
            lines,
            edits: Vec::new(),
        }
    }

    /// The text of 1-based line `n` (without its ending).
    pub fn line(&self, n: usize) -> Option<&str> {
        self.lines.get(n.wrapping_sub(1)).map(|l| l.text.as_str())
    }

    /// Replaces 1-based lines `first..end` (end exclusive) with `new`.
    pub fn replace(&mut self, first: usize, end: usize, new: Vec<String>) {
        self.edits.push(Edit {
            start: first - 1,
            end: end - 1,
            new,
        });
    }

    /// Inserts `new` before 1-based line `before`.
    pub fn insert_before(&mut self, before: usize, new: Vec<String>) {
        self.replace(before, before, new);
    }

    /// The CRLF-or-LF ending most lines have (LF when tied).
    fn dominant_eol(&self) -> &'static str {
        let crlf = self.lines.iter().filter(|l| l.eol == "\r\n").count();
        let lf = self.lines.iter().filter(|l| l.eol == "\n").count();
        if crlf > lf { "\r\n" } else { "\n" }
    }

    /// The edited text. Edits must not overlap; new lines take the ending of the line
    /// they replace or follow, so a CRLF file stays CRLF.
    pub fn text(&self) -> String {
        let mut lines = self.lines.clone();
        let mut edits = self.edits.clone();
        edits.sort_by_key(|e| std::cmp::Reverse((e.start, e.end)));
        let dominant = self.dominant_eol();
        for e in edits {
            let neighbour = if e.start < e.end {
                e.start
            } else {
                e.start.saturating_sub(1)
            };
            let eol = match lines.get(neighbour).map(|l| l.eol) {
                Some("") | None => dominant,
                Some(eol) => eol,
            };
            let mut new: Vec<RawLine> = e
                .new
                .into_iter()
                .map(|text| RawLine { text, eol })
                .collect();
            // Inserting after the last line of a file without a final newline: that
            // line gets one, and the new last line goes without, as the file did.
            if e.start == e.end
                && e.start == lines.len()
                && let (Some(prev), Some(last)) = (lines.last_mut(), new.last_mut())
            {
                prev.eol = dominant;
                last.eol = "";
            }
            // Replacing the last line keeps the file's lack of a final newline.
            if e.end == lines.len()
                && e.start < e.end
                && let Some(last) = new.last_mut()
            {
                last.eol = "";
            }
            lines.splice(e.start..e.end, new);
        }
        let mut out = String::new();
        for l in &lines {
            out.push_str(&l.text);
            out.push_str(l.eol);
        }
        out
    }
}

/// The front matter's top-level keys and where each one's lines are.
#[derive(Debug, Clone)]
pub struct FrontMatter {
    pub root: Node,
    /// Top-level keys with their 1-based lines, in order.
    keys: Vec<(String, usize)>,
    /// Line of the closing `---`.
    pub closing_line: usize,
}

impl FrontMatter {
    /// Loads the front matter of `text` for editing. Refused: no front matter, YAML that
    /// does not load, a mapping that is not one key per line starting in column 1 (a flow
    /// mapping), and a lone carriage return (YAML would count lines differently).
    pub fn load(text: &str, policy: &Policy) -> Result<Self, EditError> {
        if let Some(line) = lone_cr_line(text) {
            return Err(EditError::new(
                "a carriage return that does not end a line; the file cannot be edited safely",
                Some(line),
            ));
        }
        let split = frontmatter::split(text).map_err(|e| match e {
            frontmatter::SplitError::Missing => {
                EditError::new("the file does not begin with `---` front matter", Some(1))
            }
            frontmatter::SplitError::Unterminated => {
                EditError::new("the front matter has no closing `---` line", Some(1))
            }
        })?;
        let budget = yaml::Budget {
            max_depth: policy.request.max_yaml_depth,
            max_nodes: policy.request.max_yaml_nodes,
        };
        let root = yaml::load(&split.front_matter, split.front_matter_first_line, budget).map_err(
            |errors| match errors.into_iter().next() {
                Some(e) => EditError::new(format!("{}: {}", e.code, e.message), Some(e.line)),
                None => EditError::new("the front matter does not load", None),
            },
        )?;
        let Node::Map { entries, .. } = &root else {
            return Err(EditError::new("the front matter is not a mapping", Some(2)));
        };
        let lines: Vec<&str> = frontmatter::lines(text).map(|l| l.text).collect();
        let mut keys: Vec<(String, usize)> = Vec::with_capacity(entries.len());
        for e in entries {
            let at = lines.get(e.key_line - 1).copied().unwrap_or("");
            let starts = [
                e.key.clone(),
                format!("\"{}\"", e.key),
                format!("'{}'", e.key),
            ]
            .iter()
            .any(|k| at.starts_with(k.as_str()));
            let after_previous = keys.last().is_none_or(|(_, l)| e.key_line > *l);
            if !starts || !after_previous {
                return Err(EditError::new(
                    format!(
                        "front matter key `{}` is not on a line of its own in column 1; only a block mapping can be edited",
                        e.key
                    ),
                    Some(e.key_line),
                ));
            }
            keys.push((e.key.clone(), e.key_line));
        }
        Ok(Self {
            root,
            keys,
            closing_line: split.closing_line,
        })
    }

    /// The lines of top-level `key`: its key line up to the next key, without trailing
    /// blank lines and column-1 comments (they belong to what follows). 1-based, end
    /// exclusive.
    pub fn key_block(&self, doc: &Document, key: &str) -> Option<(usize, usize)> {
        let i = self.keys.iter().position(|(k, _)| k == key)?;
        let start = self.keys[i].1;
        let mut end = self.keys.get(i + 1).map_or(self.closing_line, |(_, l)| *l);
        while end - 1 > start {
            let t = doc.line(end - 1).unwrap_or("");
            if t.trim().is_empty() || t.starts_with('#') {
                end -= 1;
            } else {
                break;
            }
        }
        Some((start, end))
    }

    /// The value of top-level `key`.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.root.get(key)
    }
}

/// The 1-based line of the first CR not followed by LF.
fn lone_cr_line(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let at = bytes
        .iter()
        .enumerate()
        .position(|(i, &b)| b == b'\r' && bytes.get(i + 1) != Some(&b'\n'))?;
    Some(bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1)
}

/// A file written under a temporary name in the directory of the file it is to replace,
/// synced, with its mode set, and not yet in place: [`Replacement::commit`] renames it
/// over its target; dropping it uncommitted removes it. It works through a handle on
/// that directory, opened once.
pub struct Replacement {
    dir: Dir,
    tmp: String,
    target: OsString,
    committed: bool,
}

impl Replacement {
    /// Renames the file over its target and syncs the directory, so the new content is
    /// either fully there or not at all.
    pub fn commit(mut self) -> io::Result<()> {
        self.dir.rename(&self.tmp, &self.dir, &self.target)?;
        self.committed = true;
        // A directory sync makes the rename durable; a filesystem that cannot sync a
        // directory still renamed atomically.
        if let Ok(d) = self.dir.open(".") {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Drop for Replacement {
    fn drop(&mut self) {
        if !self.committed {
            let _ = self.dir.remove_file(&self.tmp);
        }
    }
}

/// A temporary file beside `path` holding `bytes` (synced, mode `mode`), not yet in
/// place ([`Replacement`]).
///
/// # Ambient authority
/// Opens `path`'s directory ([`runner_sandbox::host::open_parent`]) and creates a file
/// in it.
pub fn stage_beside(path: &Path, bytes: &[u8], mode: u32) -> io::Result<Replacement> {
    let (dir, target) = runner_sandbox::host::open_parent(path)?;
    let mut attempt = 0u32;
    let (tmp, mut file) = loop {
        let tmp = format!(".runner-{}.tmp", crate::result::unique(attempt));
        let new = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .clone();
        match dir.open_with(&tmp, &new) {
            Ok(file) => break (tmp, file),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            Err(e) => return Err(e),
        }
    };
    let staged = Replacement {
        dir,
        tmp,
        target,
        committed: false,
    };
    file.write_all(bytes)?;
    file.set_permissions(cap_std::fs::Permissions::from_mode(mode))?;
    file.sync_all()?;
    Ok(staged)
}

/// Writes `bytes` to `path` atomically (temporary file beside it, then rename), keeping
/// the permissions of the file it replaces (0644 for a new one). A symlink at `path` is
/// refused rather than replaced by a file.
///
/// # Ambient authority
/// Writes in `path`'s directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mode = existing_mode(path)?.unwrap_or(0o644);
    stage_beside(path, bytes, mode)?.commit()
}

/// The permission bits of the file at `path`, `None` when there is none; an error for a
/// symlink or a non-regular file.
///
/// # Ambient authority
/// Opens `path`'s directory ([`runner_sandbox::host::open_parent`]).
pub fn existing_mode(path: &Path) -> io::Result<Option<u32>> {
    let meta =
        runner_sandbox::host::open_parent(path).and_then(|(dir, name)| dir.symlink_metadata(name));
    match meta {
        Ok(m) if m.file_type().is_symlink() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a symlink; refusing to replace it with a file",
                path.display()
            ),
        )),
        Ok(m) if !m.is_file() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        )),
        Ok(m) => Ok(Some(m.permissions().mode() & 0o7777)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_exactly() {
        for text in [
            "",
            "a",
            "a\n",
            "a\r\nb\r\n",
            "\u{feff}---\r\nx: 1\n---\nend",
            "a\n\n\n",
        ] {
            assert_eq!(Document::parse(text).text(), text, "{text:?}");
        }
    }

    #[test]
    fn edits_keep_line_endings() {
        let mut d = Document::parse("a\r\nb\r\nc\r\n");
        d.replace(2, 3, vec!["B1".into(), "B2".into()]);
        d.insert_before(1, vec!["z".into()]);
        assert_eq!(d.text(), "z\r\na\r\nB1\r\nB2\r\nc\r\n");
        let mut d = Document::parse("a\nb");
        d.insert_before(3, vec!["c".into()]);
        assert_eq!(d.text(), "a\nb\nc");
        let mut d = Document::parse("a\nb");
        d.replace(2, 3, vec!["B".into()]);
        assert_eq!(d.text(), "a\nB");
    }

    #[test]
    fn key_blocks() {
        let text = "---\na: 1\nlist:\n  - x\n  - y\n\n# about b\nb: |\n  text\n---\nbody\n";
        let fm = FrontMatter::load(text, &Policy::builtin()).unwrap();
        let doc = Document::parse(text);
        assert_eq!(fm.key_block(&doc, "a"), Some((2, 3)));
        assert_eq!(fm.key_block(&doc, "list"), Some((3, 6)));
        assert_eq!(fm.key_block(&doc, "b"), Some((8, 10)));
        assert_eq!(fm.key_block(&doc, "c"), None);
        assert_eq!(fm.closing_line, 10);
        // A sequence in column 1 belongs to its key.
        let text = "---\nlist:\n- x\n- y\nz: 1\n---\n";
        let fm = FrontMatter::load(text, &Policy::builtin()).unwrap();
        assert_eq!(fm.key_block(&Document::parse(text), "list"), Some((2, 5)));
    }

    #[test]
    fn refuses_what_it_cannot_edit_safely() {
        let p = Policy::builtin();
        assert!(FrontMatter::load("---\n{a: 1, b: 2}\n---\n", &p).is_err());
        assert!(FrontMatter::load("---\na: 1\rb: 2\n---\n", &p).is_err());
        assert!(FrontMatter::load("no front matter\n", &p).is_err());
        assert!(FrontMatter::load("---\na: [\n---\n", &p).is_err());
        assert!(FrontMatter::load("---\n\"a\": 1\n---\n", &p).is_ok());
    }

    #[test]
    fn atomic_write_keeps_mode_and_refuses_symlinks() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.md");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let link = dir.path().join("l.md");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert!(write_atomic(&link, b"x").is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        // No temporary file left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 2);
    }
}
