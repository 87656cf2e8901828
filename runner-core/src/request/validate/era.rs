//! The ERA backend's `## Command` section.

use super::fields::FrontMatter;
use crate::policy::Policy;
use crate::request::Work;
use crate::request::command;
use crate::request::document::Reasons;
use crate::request::frontmatter::Line;
use crate::request::sections::{self, Section};

pub(super) fn era_command(
    s: &Section<'_>,
    fm: &FrontMatter,
    policy: &Policy,
    r: &mut Reasons,
) -> Option<Work> {
    let content: Vec<&Line<'_>> = s.content_lines().collect();
    if content
        .iter()
        .any(|l| sections::fence_marker(l.text).is_some())
    {
        r.add(
            "command.code_fence",
            "the command must be plain text, not a code fence",
            content[0].number,
        );
        return None;
    }
    if content.len() > 1 {
        r.add(
            "command.multiple_lines",
            format!(
                "the command must be exactly one line, found {}",
                content.len()
            ),
            content[1].number,
        );
        return None;
    }
    let line = content.first()?;
    let command_line = command::strip_inline_code(line.text);
    let mut ok = true;
    for p in command::shell_syntax(command_line) {
        r.add(p.code, p.message, line.number);
        ok = false;
    }
    let words = match command::words(command_line) {
        Ok(words) => words,
        Err(p) => {
            r.add(p.code, p.message, line.number);
            return None;
        }
    };
    let program = &words[0];
    let guest = if program.contains('/') {
        r.add(
            "command.host_path",
            format!("the program `{program}` must be a bare name such as `python`, not a path"),
            line.number,
        );
        None
    } else {
        // Several guests may share a program word (`python`): the request's `language`
        // picks among them; without one, the first guest registering the word.
        let by_language = fm
            .language
            .as_deref()
            .and_then(|lang| policy.guest_for_language(lang))
            .filter(|g| g.programs.iter().any(|p| p == program));
        match by_language.or_else(|| policy.guest_for_program(program)) {
            Some(g) => Some(g.guest.clone()),
            None => {
                let known: Vec<&str> = policy
                    .guests
                    .iter()
                    .flat_map(|g| g.programs.iter().map(String::as_str))
                    .collect();
                r.add("command.unknown_program", format!("`{program}` is not a registered guest program (registered: {}); nothing runs on the host", known.join(", ")), line.number);
                None
            }
        }
    };
    for p in command::path_problems(&words[1..]) {
        r.add(p.code, p.message, line.number);
        ok = false;
    }
    let guest = guest?;
    if let Some(lang) = &fm.language
        && policy.guest_for_language(lang).map(|g| g.guest.as_str()) != Some(guest.as_str())
    {
        r.add("command.guest_mismatch", format!("the program `{program}` selects guest `{guest}`, but `language: {lang}` selects another"), line.number);
        ok = false;
    }
    let environment = fm
        .language
        .as_deref()
        .and_then(|lang| policy.environment_for_language(lang))
        .map(|e| e.name.clone());
    ok.then(|| Work::Era {
        command_line: command_line.to_owned(),
        argv: words,
        guest,
        environment,
    })
}
