//! The `## Command` rules: a single plain line, no shell syntax, split into words
//! without a shell, a program that maps to a registered guest, and path arguments that
//! stay inside `/in`, `/out` or the working directory.

/// A problem with the command, as a reason code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandProblem {
    pub code: &'static str,
    pub message: String,
}

fn problem(code: &'static str, message: impl Into<String>) -> CommandProblem {
    CommandProblem {
        code,
        message: message.into(),
    }
}

/// Shell syntax that a single plain command must not contain, checked in this order
/// (longest first, so `&&` is reported as chaining, not as background).
const SHELL_SYNTAX: &[(&str, &str, &str)] = &[
    ("<<", "command.heredoc", "a heredoc (`<<`)"),
    ("&&", "command.chaining", "command chaining (`&&`)"),
    ("||", "command.chaining", "command chaining (`||`)"),
    (";", "command.chaining", "command chaining (`;`)"),
    ("|", "command.pipeline", "a pipeline (`|`)"),
    (">", "command.redirection", "redirection (`>`)"),
    ("<", "command.redirection", "redirection (`<`)"),
    (
        "$(",
        "command.substitution",
        "command substitution (`$(…)`)",
    ),
    (
        "`",
        "command.substitution",
        "command substitution (backticks)",
    ),
    (
        "${",
        "command.variable_expansion",
        "variable expansion (`${…}`)",
    ),
    ("&", "command.background", "a background operator (`&`)"),
];

/// Strips one pair of enclosing inline-code backticks (`` `python x.py` ``), the
/// markdown form the schema's own example uses.
pub fn strip_inline_code(line: &str) -> &str {
    let t = line.trim();
    match t.strip_prefix('`').and_then(|r| r.strip_suffix('`')) {
        Some(inner) if !inner.contains('`') && !inner.is_empty() => inner.trim(),
        _ => t,
    }
}

/// Every shell-syntax problem in `line`.
pub fn shell_syntax(line: &str) -> Vec<CommandProblem> {
    let mut found: Vec<CommandProblem> = Vec::new();
    let mut rest = line.to_owned();
    for (token, code, what) in SHELL_SYNTAX {
        if rest.contains(token) {
            found.push(problem(code, format!("the command contains {what}; a request runs exactly one command, without a shell")));
            rest = rest.replace(token, " ");
        }
    }
    if has_variable(&rest) {
        found.push(problem(
            "command.variable_expansion",
            "the command contains variable expansion (`$NAME`); there is no shell to expand it",
        ));
    }
    found
}

fn has_variable(s: &str) -> bool {
    let b = s.as_bytes();
    b.windows(2).any(|w| {
        w[0] == b'$'
            && (w[1].is_ascii_alphabetic()
                || w[1] == b'_'
                || w[1] == b'{'
                || w[1] == b'('
                || w[1].is_ascii_digit())
    })
}

/// Splits a command line into words without a shell.
pub fn words(line: &str) -> Result<Vec<String>, CommandProblem> {
    let words = shell_words::split(line).map_err(|e| {
        problem(
            "command.unparseable",
            format!("the command cannot be split into words: {e}"),
        )
    })?;
    if words.is_empty() {
        return Err(problem("command.empty", "the command is empty"));
    }
    Ok(words)
}

/// Checks every path-like argument: absolute paths must be under `/in/` or `/out/`,
/// no argument may climb with `..`, and home (`~`) paths are host paths.
pub fn path_problems(args: &[String]) -> Vec<CommandProblem> {
    let mut found = Vec::new();
    for arg in args {
        let mut host = false;
        for value in path_candidates(arg) {
            if value.starts_with('~') {
                found.push(problem(
                    "command.host_path",
                    format!("argument `{arg}` names a home directory, a host path"),
                ));
            } else if value.starts_with('/') && !is_sandbox_path(value) {
                host = true;
            }
        }
        if host || arg.to_ascii_lowercase().contains("file:") {
            found.push(problem(
                "command.host_path",
                format!(
                    "argument `{arg}` names a host path; only /in/… and /out/… exist in the sandbox"
                ),
            ));
        }
        if arg
            .split(['/', '\\', '=', ':', ',', '@'])
            .any(|c| c == "..")
        {
            found.push(problem(
                "command.path_traversal",
                format!("argument `{arg}` climbs out with `..`"),
            ));
        }
    }
    found.dedup();
    found
}

/// The places a path can hide in one argument: the whole word, the value after
/// `--flag=`, the value glued to a short flag (`-o/etc/x`), and each piece between
/// `=`, `:`, `,` and `@` (`file:///etc/x`, `@/etc/x`, `a.csv,/etc/x`).
fn path_candidates(arg: &str) -> Vec<&str> {
    let mut out = vec![arg];
    if let Some((flag, value)) = arg.split_once('=')
        && flag.starts_with('-')
    {
        out.push(value);
    }
    if arg.len() > 2 && arg.starts_with('-') && !arg.starts_with("--") && arg.is_char_boundary(2) {
        out.push(&arg[2..]);
    }
    out.extend(arg.split(['=', ':', ',', '@']).filter(|p| !p.is_empty()));
    out
}

/// `/in`, `/out`, or a path under either.
pub fn is_sandbox_path(path: &str) -> bool {
    ["/in", "/out"]
        .iter()
        .any(|root| path == *root || path.strip_prefix(root).is_some_and(|r| r.starts_with('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(line: &str) -> Vec<&'static str> {
        let mut codes: Vec<_> = shell_syntax(line).into_iter().map(|p| p.code).collect();
        if let Ok(w) = words(line) {
            codes.extend(path_problems(&w[1..]).into_iter().map(|p| p.code));
        }
        codes
    }

    #[test]
    fn shell_syntax_table() {
        let cases: &[(&str, &str)] = &[
            ("python a.py; rm -rf /out", "command.chaining"),
            ("python a.py && echo hi", "command.chaining"),
            ("python a.py || true", "command.chaining"),
            ("python a.py | tee /out/x", "command.pipeline"),
            ("python a.py > /out/x", "command.redirection"),
            ("python a.py < /in/x", "command.redirection"),
            ("python a.py <<EOF", "command.heredoc"),
            ("python $(which x)", "command.substitution"),
            ("python `id`", "command.substitution"),
            ("python a.py $HOME", "command.variable_expansion"),
            ("python a.py ${X}", "command.variable_expansion"),
            ("python a.py &", "command.background"),
            ("python /etc/passwd", "command.host_path"),
            ("python a.py --in=/proc/self/environ", "command.host_path"),
            ("python ../a.py", "command.path_traversal"),
            ("python /in/../etc/x", "command.path_traversal"),
            ("python ~/x.py", "command.host_path"),
            ("python /input/x.py", "command.host_path"),
        ];
        crate::test_support::assert_each_yields(cases, codes);
    }

    #[test]
    fn clean_commands() {
        for line in [
            "python -u script.py --in /in/input.csv --out /out/output.json",
            "python3 /in/a.py --out=/out/x.json",
            "python -c \"print('hi')\"",
            "python /in/x.py /out",
        ] {
            assert!(codes(line).is_empty(), "{line:?}: {:?}", codes(line));
        }
    }

    #[test]
    fn inline_code_is_unwrapped() {
        assert_eq!(strip_inline_code("`python a.py`"), "python a.py");
        assert_eq!(strip_inline_code("python a.py"), "python a.py");
        assert_eq!(strip_inline_code("`a` `b`"), "`a` `b`");
    }

    #[test]
    fn unbalanced_quotes() {
        assert_eq!(words("python 'a").unwrap_err().code, "command.unparseable");
    }
}
