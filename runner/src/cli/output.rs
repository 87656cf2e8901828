//! How the command line talks to people and to host programs: the global `--quiet`,
//! `--verbose` and `--log-format` settings, colour, the progress line, and structured
//! logs through `tracing`.
//!
//! The rules: stdout carries only the command's answer (a path, a verdict, or one JSON
//! document with `--json`); everything else goes to stderr. Progress is drawn only when
//! stderr is a terminal (and never with `--quiet` or JSON logs); elsewhere progress
//! messages are `info` log events, shown with `-v`. Colour is used only on a terminal,
//! never when `NO_COLOR` is set, always when `CLICOLOR_FORCE` is set (and `NO_COLOR` is
//! not). With `--log-format json` (or `RUNNER_LOG_FORMAT=json`) every line on stderr is
//! one JSON object, errors included.

use std::fmt::Display;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The format of log lines on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (for host programs).
    Json,
}

/// The settings every command's output follows, decided once at start-up.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub quiet: bool,
    pub verbose: u8,
    pub log_format: LogFormat,
    /// Colour on stdout (a terminal, and the environment allows it).
    pub color_stdout: bool,
    /// Colour on stderr.
    pub color_stderr: bool,
    /// stderr is a terminal: progress may be drawn there.
    pub stderr_terminal: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            quiet: false,
            verbose: 0,
            log_format: LogFormat::Text,
            color_stdout: false,
            color_stderr: false,
            stderr_terminal: false,
        }
    }
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// The settings in force (defaults when [`init`] was not called, as in library tests).
pub fn settings() -> Settings {
    SETTINGS.get().copied().unwrap_or_default()
}

/// Whether colour may be used on a stream: `NO_COLOR` (non-empty) wins, then
/// `CLICOLOR_FORCE` (non-empty, not `0`), then `CLICOLOR=0`, then "is it a terminal
/// that is not `TERM=dumb`".
pub fn color_allowed(is_terminal: bool, var: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    let set = |name: &str| var(name).is_some_and(|v| !v.is_empty());
    if set("NO_COLOR") {
        return false;
    }
    if set("CLICOLOR_FORCE") && var("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
        return true;
    }
    if var("CLICOLOR").is_some_and(|v| v == "0") {
        return false;
    }
    is_terminal && var("TERM").is_none_or(|t| t != "dumb")
}

/// Decides the settings and installs the log subscriber (stderr only). `log_format`
/// `None` means `$RUNNER_LOG_FORMAT` or text; the filter is `$RUNNER_LOG` when set (for
/// example `runner=debug`), else from the flags: `-q` errors only, default warnings,
/// `-v` info (progress), `-vv` debug, `-vvv` trace.
pub fn init(quiet: bool, verbose: u8, log_format: Option<LogFormat>) -> Result<Settings, String> {
    let log_format = match log_format {
        Some(f) => f,
        None => match runner_sandbox::env::var("RUNNER_LOG_FORMAT") {
            Err(_) => LogFormat::Text,
            Ok(v) if v.is_empty() || v == "text" => LogFormat::Text,
            Ok(v) if v == "json" => LogFormat::Json,
            Ok(v) => {
                return Err(format!(
                    "RUNNER_LOG_FORMAT={v:?}: expected `text` or `json`"
                ));
            }
        },
    };
    let env = runner_sandbox::env::var_os;
    let chosen = Settings {
        quiet,
        verbose,
        log_format,
        color_stdout: color_allowed(std::io::stdout().is_terminal(), env),
        color_stderr: color_allowed(std::io::stderr().is_terminal(), env)
            && log_format == LogFormat::Text,
        stderr_terminal: std::io::stderr().is_terminal(),
    };
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    let filter = match runner_sandbox::env::var("RUNNER_LOG") {
        Ok(directives) if !directives.is_empty() => {
            tracing_subscriber::EnvFilter::try_new(&directives)
                .map_err(|e| format!("RUNNER_LOG={directives:?}: {e}"))?
        }
        _ => tracing_subscriber::EnvFilter::new(format!("warn,runner={level}")),
    };
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    // A second init (tests calling `execute` twice) keeps the first subscriber.
    let _ = match log_format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
        LogFormat::Text => builder
            .with_ansi(chosen.color_stderr)
            .without_time()
            .with_target(false)
            .try_init(),
    };
    let _ = SETTINGS.set(chosen);
    Ok(settings())
}

/// A colour for [`paint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Good,
    Bad,
    Warn,
    Dim,
}

/// Which stream a painted text is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// `text` in `style` when colour is allowed on `stream`, else `text` as it is.
pub fn paint(text: &str, style: Style, stream: Stream) -> String {
    let s = settings();
    let on = match stream {
        Stream::Stdout => s.color_stdout,
        Stream::Stderr => s.color_stderr,
    };
    if !on {
        return text.to_owned();
    }
    let code = match style {
        Style::Good => "32",
        Style::Bad => "1;31",
        Style::Warn => "33",
        Style::Dim => "2",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// A verdict word for stdout, coloured by what it means.
pub fn verdict(word: &str) -> String {
    let style = match word {
        "ACCEPT" | "MATCH" | "ok" => Style::Good,
        "REJECT" | "DRIFT" | "REFUSED" | "FAILED" => Style::Bad,
        _ => return word.to_owned(),
    };
    paint(word, style, Stream::Stdout)
}

/// Reports an error: `error: MESSAGE` on stderr, or an `ERROR` JSON log line with
/// `--log-format json`. Shown even with `--quiet`.
pub fn error(message: impl Display) {
    if settings().log_format == LogFormat::Json {
        tracing::error!("{message}");
    } else {
        eprintln!("{}: {message}", paint("error", Style::Bad, Stream::Stderr));
    }
}

/// Reports a warning (`warning: MESSAGE`, or a `WARN` JSON log line); hidden by `--quiet`.
pub fn warning(message: impl Display) {
    let s = settings();
    if s.log_format == LogFormat::Json {
        tracing::warn!("{message}");
    } else if !s.quiet {
        eprintln!(
            "{}: {message}",
            paint("warning", Style::Warn, Stream::Stderr)
        );
    }
}

/// A human note on stderr (a summary, a hint); an `INFO` JSON log line with
/// `--log-format json`; hidden by `--quiet`.
pub fn note(message: impl Display) {
    let s = settings();
    if s.log_format == LogFormat::Json {
        tracing::info!("{message}");
    } else if !s.quiet {
        eprintln!("{message}");
    }
}

/// A progress line for a long step (guest download, first compile, a batch of runs).
///
/// On a terminal it draws one status line on stderr, redrawn with the elapsed time while
/// a step runs; [`Progress::step`] keeps the finished step's line and starts a new one,
/// [`Progress::update`] replaces the line (for counters). Off a terminal, with `--quiet`
/// or with JSON logs nothing is drawn: every message is an `info` log event instead
/// (`-v` shows them). Dropping it ends the line.
pub struct Progress {
    shared: Option<Arc<Shared>>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    state: Mutex<(String, Instant)>,
    stop: AtomicBool,
}

const SPINNER: [char; 4] = ['|', '/', '-', '\\'];

impl Progress {
    /// A progress line, drawn only when the settings allow it (see the type's docs).
    pub fn new() -> Self {
        let s = settings();
        let draw = s.stderr_terminal && !s.quiet && s.log_format == LogFormat::Text;
        Self::with_drawing(draw)
    }

    fn with_drawing(draw: bool) -> Self {
        if !draw {
            return Self {
                shared: None,
                ticker: None,
            };
        }
        let shared = Arc::new(Shared {
            state: Mutex::new((String::new(), Instant::now())),
            stop: AtomicBool::new(false),
        });
        let for_thread = Arc::clone(&shared);
        let ticker = std::thread::Builder::new()
            .name("runner-progress".into())
            .spawn(move || {
                let mut frame = 0usize;
                while !for_thread.stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(120));
                    frame = frame.wrapping_add(1);
                    if let Ok(state) = for_thread.state.lock()
                        && !state.0.is_empty()
                    {
                        draw_line(&state.0, state.1.elapsed(), Some(SPINNER[frame % 4]));
                    }
                }
            })
            .ok();
        Self {
            shared: ticker.as_ref().map(|_| shared),
            ticker,
        }
    }

    /// Ends the current step (its line stays) and starts `message`.
    pub fn step(&self, message: &str) {
        tracing::info!(target: "runner::progress", "{message}");
        if let Some(shared) = &self.shared
            && let Ok(mut state) = shared.state.lock()
        {
            if !state.0.is_empty() {
                draw_line(&state.0, state.1.elapsed(), None);
                eprintln!();
            }
            *state = (message.to_owned(), Instant::now());
            draw_line(message, Duration::ZERO, Some(SPINNER[0]));
        }
    }

    /// Replaces the current line's text (a counter: `12/40 runs`), keeping its clock.
    pub fn update(&self, message: &str) {
        tracing::debug!(target: "runner::progress", "{message}");
        if let Some(shared) = &self.shared
            && let Ok(mut state) = shared.state.lock()
        {
            state.0 = message.to_owned();
        }
    }

    /// A callback for the library's `progress: &mut dyn FnMut(&str)` parameters.
    pub fn callback(&self) -> impl FnMut(&str) + '_ {
        move |m: &str| self.step(m)
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.stop.store(true, Ordering::Relaxed);
            if let Some(t) = self.ticker.take() {
                let _ = t.join();
            }
            if let Ok(state) = shared.state.lock()
                && !state.0.is_empty()
            {
                draw_line(&state.0, state.1.elapsed(), None);
                eprintln!();
            }
        }
    }
}

/// Redraws the status line: `\r`, clear to end of line, spinner, message, elapsed time.
fn draw_line(message: &str, elapsed: Duration, spinner: Option<char>) {
    let mut err = std::io::stderr().lock();
    let secs = elapsed.as_secs();
    let clock = if secs >= 1 {
        format!(" ({secs} s)")
    } else {
        String::new()
    };
    let lead = spinner.map_or(String::from(" "), |c| c.to_string());
    let _ = write!(err, "\r\x1b[2K{lead} {message}{clock}");
    let _ = err.flush();
}

/// What the pipeline reports a run's preparation through: a [`Progress`] line per run.
pub fn progress_reporter() -> runner_pipeline::pipeline::MakeProgress {
    Box::new(|| {
        let bar = Progress::new();
        Box::new(move |message: &str| bar.step(message))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn colour_follows_no_color_and_clicolor_force() {
        /// (stderr is a terminal, environment, colour expected)
        type Case = (bool, &'static [(&'static str, &'static str)], bool);
        let table: &[Case] = &[
            (true, &[], true),
            (false, &[], false),
            (true, &[("NO_COLOR", "1")], false),
            (true, &[("NO_COLOR", "")], true),
            (false, &[("CLICOLOR_FORCE", "1")], true),
            (false, &[("CLICOLOR_FORCE", "0")], false),
            (true, &[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")], false),
            (true, &[("CLICOLOR", "0")], false),
            (true, &[("TERM", "dumb")], false),
        ];
        for (tty, vars, want) in table {
            assert_eq!(color_allowed(*tty, env(vars)), *want, "tty={tty} {vars:?}");
        }
    }

    #[test]
    fn progress_off_a_terminal_draws_nothing_and_spawns_no_thread() {
        let p = Progress::with_drawing(false);
        p.step("compiling");
        p.update("1/2");
        assert!(p.shared.is_none() && p.ticker.is_none());
    }

    #[test]
    fn paint_without_colour_returns_the_text() {
        // Library tests never call init(): colour is off.
        assert_eq!(paint("REJECT", Style::Bad, Stream::Stdout), "REJECT");
        assert_eq!(verdict("ACCEPT"), "ACCEPT");
    }
}
