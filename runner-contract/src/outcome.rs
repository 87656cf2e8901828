//! How a run ended, as `outcome` in a result's front matter, its lock and `--json`.

use serde::{Deserialize, Serialize};

/// How a run ended. Exactly one of these fires; it is recorded in the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// The guest exited on its own (with any exit code).
    Completed,
    /// The wall-clock deadline fired.
    TimedOut,
    /// The guest tried to grow its memory past the limit.
    MemoryExceeded,
    /// The CPU-time budget ran out.
    CpuExhausted,
    /// stdout, stderr or `/out` hit its cap.
    OutputLimit,
    /// The guest trapped (or the worker died of a signal we did not send).
    Trapped,
}

impl OutcomeKind {
    /// Every kind, in the order the result document lists them.
    pub const ALL: [Self; 6] = [
        Self::Completed,
        Self::TimedOut,
        Self::MemoryExceeded,
        Self::CpuExhausted,
        Self::OutputLimit,
        Self::Trapped,
    ];

    /// The kind `as_str` spells as `word`; `None` for any other text.
    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == word)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::TimedOut => "timed_out",
            Self::MemoryExceeded => "memory_exceeded",
            Self::CpuExhausted => "cpu_exhausted",
            Self::OutputLimit => "output_limit",
            Self::Trapped => "trapped",
        }
    }

    /// The exit code recorded for a run that a limit ended (the guest's own code, if
    /// any, goes into `Outcome::detail`); `None` for `Completed`, which records the
    /// guest's own code. The numbers follow shell conventions: 124 as `timeout(1)`,
    /// 128 + the signal that would have ended a native process otherwise (SIGXCPU for
    /// CPU, SIGKILL as an OOM kill, SIGPIPE for a closed output, SIGABRT for a trap).
    pub fn conventional_exit_code(self) -> Option<i32> {
        match self {
            Self::Completed => None,
            Self::TimedOut => Some(124),
            Self::CpuExhausted => Some(128 + 24),
            Self::MemoryExceeded => Some(128 + 9),
            Self::OutputLimit => Some(128 + 13),
            Self::Trapped => Some(128 + 6),
        }
    }
}

impl std::fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}
