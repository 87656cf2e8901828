//! The README and the book (docs/src) are part of the contract: the book's exit-code table
//! is `exit_codes::TABLE`; every command block marked runnable (a fence opened with
//! "```sh runnable") in README.md or a book chapter runs as written, with bash
//! (`-euo pipefail`), the built binaries first on `PATH`, in a scratch directory holding a
//! copy of `examples/` and `policies/`, and exits 0; every relative link in the book leads
//! to a file of the book and, when it names one, to a heading there; every chapter is in
//! SUMMARY.md; the page of every command's help is what the built binary prints.
//! Runnable blocks are kept fast and offline (validate, verify, guest list, policy show,
//! a monty exec, an ERA exec on the fetched default guest); commands that need a download
//! stay in plain `sh` blocks.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::repo;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

fn readme() -> String {
    std::fs::read_to_string(repo().join("README.md")).expect("README.md")
}

/// The book's sources: every `*.md` under docs/src, by path relative to it, sorted.
fn book_pages() -> BTreeMap<PathBuf, String> {
    let src = repo().join("docs/src");
    let mut pages = BTreeMap::new();
    let mut dirs = vec![src.clone()];
    // Bounded: the book is a few dozen files in a few directories.
    while let Some(dir) = dirs.pop() {
        assert!(pages.len() < 1000, "docs/src holds more than 1000 pages");
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                pages.insert(
                    path.strip_prefix(&src).expect("under docs/src").to_owned(),
                    text,
                );
            }
        }
    }
    pages
}

/// README.md and the book's pages, each with the name failures report it by.
fn documents() -> Vec<(String, String)> {
    let mut docs = vec![("README.md".to_owned(), readme())];
    for (path, text) in book_pages() {
        docs.push((format!("docs/src/{}", path.display()), text));
    }
    docs
}

/// The runnable blocks: (line of the opening fence, body).
fn runnable_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match &mut current {
            None if line.trim_end() == "```sh runnable" => current = Some((i + 1, String::new())),
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(current.take()),
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    assert!(current.is_none(), "a runnable block is not closed");
    blocks
}

#[test]
fn the_exit_code_table_is_the_one_in_exit_codes() {
    let table = runner_contract::exit_codes::markdown_table();
    let page = "docs/src/reference/exit-codes.md";
    let text = std::fs::read_to_string(repo().join(page)).expect(page);
    assert!(
        text.contains(&table),
        "{page}'s exit-code table differs from exit_codes::TABLE; it must read:\n{table}"
    );
}

#[test]
fn the_block_parser_finds_only_closed_runnable_fences() {
    let text =
        "a\n```sh runnable\necho 1\n```\n```sh\nnot me\n```\n```sh runnable\necho 2\necho 3\n```\n";
    let blocks = runnable_blocks(text);
    assert_eq!(
        blocks,
        vec![
            (2, "echo 1\n".to_owned()),
            (8, "echo 2\necho 3\n".to_owned())
        ]
    );
}

#[test]
fn every_runnable_block_in_the_readme_and_the_book_runs() {
    let documents = documents();
    let readme_blocks = runnable_blocks(&documents[0].1).len();
    assert!(
        readme_blocks >= 3,
        "expected the README's runnable blocks, found {readme_blocks}"
    );
    let blocks: Vec<(String, usize, String)> = documents
        .iter()
        .flat_map(|(name, text)| {
            runnable_blocks(text)
                .into_iter()
                .map(move |(line, body)| (name.clone(), line, body))
        })
        .collect();
    assert!(
        blocks.len() > readme_blocks,
        "expected runnable blocks in the book too, found only the README's"
    );
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_runner"))
        .parent()
        .expect("binary directory")
        .to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut failures = Vec::new();
    for (name, line, body) in blocks {
        // A fresh scratch copy per block: blocks are independent of each other.
        let scratch = tempfile::tempdir().expect("tempdir");
        for dir in ["examples", "policies"] {
            let status = Command::new("cp")
                .arg("-R")
                .arg(repo().join(dir))
                .arg(scratch.path())
                .status()
                .expect("cp");
            assert!(status.success(), "copying {dir}");
        }
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &body])
            .current_dir(scratch.path())
            .env("PATH", &path)
            .env("TMPDIR", scratch.path())
            .env_remove("RUNNER_LOG")
            .env_remove("RUNNER_LOG_FORMAT")
            .output()
            .expect("bash");
        if !out.status.success() {
            failures.push(format!(
                "{name}:{line}: exit {:?}\n--- block\n{body}--- stdout\n{}--- stderr\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The anchor mdBook gives a heading: its text lowercased, alphanumerics, `_` and `-`
/// kept, whitespace made `-`, the rest dropped (mdbook-html's `id_from_content`).
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c)
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// What the link check reads of a page: its headings' anchors (repeats numbered `-1`,
/// `-2`, … as mdBook numbers them) and its links and images (destination, line).
struct PageLinks {
    anchors: HashSet<String>,
    links: Vec<(String, usize)>,
}

fn page_links(text: &str) -> PageLinks {
    let mut anchors = HashSet::new();
    let mut links = Vec::new();
    let mut heading: Option<String> = None;
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    for (event, range) in Parser::new_ext(text, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let id = anchor_of(&heading.take().unwrap_or_default());
                let mut unique = id.clone();
                let mut n = 0;
                // Bounded by the number of headings already seen.
                while !anchors.insert(unique.clone()) {
                    n += 1;
                    unique = format!("{id}-{n}");
                }
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                links.push((dest_url.into_string(), line_of(range.start)));
            }
            _ => {}
        }
    }
    PageLinks { anchors, links }
}

/// `base/../x` made plain, without touching the file system; `None` when it climbs above
/// the book's root.
fn resolve(base: &Path, rel: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in base.join(rel).components() {
        match part {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Every link problem in the book: a relative link to a page or file the book does not
/// have (a link out of docs/src is one: mdBook does not copy the target), to a heading the
/// page does not have, and a page SUMMARY.md does not list.
fn book_link_problems(pages: &BTreeMap<PathBuf, String>, src: &Path) -> Vec<String> {
    let parsed: BTreeMap<&PathBuf, PageLinks> =
        pages.iter().map(|(p, t)| (p, page_links(t))).collect();
    let mut problems = Vec::new();
    for (page, links) in &parsed {
        let dir = page.parent().unwrap_or(Path::new(""));
        for (dest, line) in &links.links {
            let at = format!("docs/src/{}:{line}: `{dest}`", page.display());
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = dest.split_once('#').unwrap_or((dest.as_str(), ""));
            let target = if file.is_empty() {
                Some((*page).clone())
            } else {
                resolve(dir, file)
            };
            let Some(target) = target else {
                problems.push(format!("{at} leaves the book's sources"));
                continue;
            };
            let is_page = target.extension().is_some_and(|e| e == "md");
            if (is_page && !parsed.contains_key(&target))
                || (!is_page && !src.join(&target).is_file())
            {
                problems.push(format!("{at}: no file docs/src/{}", target.display()));
                continue;
            }
            if !anchor.is_empty() {
                match parsed.get(&target) {
                    Some(t) if t.anchors.contains(anchor) => {}
                    Some(_) => problems.push(format!(
                        "{at}: docs/src/{} has no heading with the anchor #{anchor}",
                        target.display()
                    )),
                    None => {
                        problems.push(format!("{at}: an anchor into a file that is not a page"))
                    }
                }
            }
        }
    }
    match parsed.get(&PathBuf::from("SUMMARY.md")) {
        None => problems.push("docs/src/SUMMARY.md is missing".to_owned()),
        Some(summary) => {
            let listed: BTreeSet<PathBuf> = summary
                .links
                .iter()
                .filter_map(|(dest, _)| resolve(Path::new(""), dest.split('#').next()?))
                .collect();
            for page in pages.keys() {
                if page != Path::new("SUMMARY.md") && !listed.contains(page) {
                    problems.push(format!(
                        "docs/src/{} is not listed in SUMMARY.md",
                        page.display()
                    ));
                }
            }
        }
    }
    problems
}

#[test]
fn every_link_in_the_book_leads_to_a_page_and_heading_it_has() {
    let src = repo().join("docs/src");
    let pages = book_pages();
    assert!(
        pages.len() >= 20,
        "expected the book's pages, found {}",
        pages.len()
    );
    let problems = book_link_problems(&pages, &src);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_link_check_finds_missing_pages_headings_and_unlisted_pages() {
    let book = [
        (
            "SUMMARY.md",
            "# Summary\n\n- [A](a.md)\n- [Gone](gone.md)\n",
        ),
        (
            "a.md",
            "# A page\n\n## Same\n\n## Same\n\n[ok](#same-1) [ok](b/c.md#the-c-heading) \
             [bad](#nope) [bad](b/c.md#nope) [bad](missing.md) [out](../../README.md) \
             [web](https://example.org/x.md)\n",
        ),
        ("b/c.md", "# The `C` heading\n"),
    ];
    let pages: BTreeMap<PathBuf, String> = book
        .iter()
        .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
        .collect();
    let problems = book_link_problems(&pages, Path::new("/nonexistent"));
    let expected = [
        "docs/src/SUMMARY.md:4: `gone.md`: no file docs/src/gone.md",
        "docs/src/a.md:7: `#nope`: docs/src/a.md has no heading with the anchor #nope",
        "docs/src/a.md:7: `b/c.md#nope`: docs/src/b/c.md has no heading with the anchor #nope",
        "docs/src/a.md:7: `missing.md`: no file docs/src/missing.md",
        "docs/src/a.md:7: `../../README.md` leaves the book's sources",
        "docs/src/b/c.md is not listed in SUMMARY.md",
    ];
    for e in expected {
        assert!(
            problems.iter().any(|p| p == e),
            "missing problem {e:?} in {problems:#?}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
}

/// The page of every command's help: `runner --help`, then `runner WORDS --help` for each
/// man page `man/runner-WORDS.1` (so every command and subcommand), as the binary prints it.
fn cli_help_page() -> String {
    let mut names: Vec<String> = std::fs::read_dir(repo().join("man"))
        .expect("man/")
        .map(|e| {
            e.expect("man/ entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter_map(|n| n.strip_suffix(".1").map(str::to_owned))
        .collect();
    names.sort();
    let mut page = String::from(
        "# Every command's help\n\n\
         <!-- Written from the built binary's --help: `just book-cli` rewrites it, and \
         `cargo test --test it -- readme::` fails while it is stale. -->\n\n\
         What `runner COMMAND --help` prints, for every command (`runner help COMMAND` prints \
         the same; `man -l man/runner-COMMAND.1` shows it as a man page).\n",
    );
    for name in names {
        let words: Vec<&str> = name.split('-').skip(1).collect();
        let out = Command::new(env!("CARGO_BIN_EXE_runner"))
            .args(&words)
            .arg("--help")
            .env_remove("RUNNER_LOG")
            .env("NO_COLOR", "1")
            .output()
            .expect("runner --help");
        assert!(
            out.status.success(),
            "runner {} --help: {:?}",
            words.join(" "),
            out.status
        );
        let help = String::from_utf8(out.stdout).expect("help is UTF-8");
        let title = std::iter::once("runner")
            .chain(words.iter().copied())
            .collect::<Vec<_>>()
            .join(" ");
        page.push_str(&format!(
            "\n## `{title}`\n\n```text\n{}\n```\n",
            help.trim_end()
        ));
    }
    page
}

#[test]
fn the_cli_help_page_is_what_the_binary_prints() {
    let rel = "docs/src/reference/cli-help.md";
    let path = repo().join(rel);
    let page = cli_help_page();
    if std::env::var_os("RUNNER_WRITE_CLI_HELP").is_some() {
        std::fs::write(&path, &page).expect(rel);
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == page,
        "{rel} is stale: `just book-cli` rewrites it from the built binary"
    );
}
