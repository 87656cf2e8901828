//! The `verdict` of every `--json` report, one enum per kind of judgement, each
//! serialised as the upper-case word hosts match on.

use serde::{Deserialize, Serialize};

/// Defines a verdict enum whose variants serialise as the given words, with `as_str`.
macro_rules! verdict {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $word)] $variant,)+
        }

        impl $name {
            /// The word `--json` prints.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $word,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }
    };
}

verdict! {
    /// A document judged (`validate`, `gate`, `verify`, `exec`): ACCEPT or REJECT.
    Verdict {
        /// Every check passed (and, for `exec`, the request ran).
        Accept = "ACCEPT",
        /// At least one check failed; the report's reasons say which.
        Reject = "REJECT",
    }
}

verdict! {
    /// `replay`: how the re-run compares with the baseline.
    ReplayVerdict {
        /// Every output matched under the pinned runner, engine, guest and policy.
        Match = "MATCH",
        /// Every output matched, and at least one of those pins changed
        /// (`--across-upgrade` only).
        MatchAcrossUpgrade = "MATCH_ACROSS_UPGRADE",
        /// An output or an input differs.
        Drift = "DRIFT",
        /// Nothing ran; the report says why.
        Refused = "REFUSED",
    }
}

verdict! {
    /// One output of a replay beside the baseline's.
    OutputVerdict {
        /// Same sha256.
        Match = "MATCH",
        /// Another sha256, or missing on one side.
        Drift = "DRIFT",
    }
}

verdict! {
    /// One request handled by `runner serve`.
    ServeVerdict {
        /// The request ran (or an earlier result of it was recovered).
        Accept = "ACCEPT",
        /// The request was refused; nothing ran.
        Reject = "REJECT",
        /// The run could not finish for a reason of the host; it will be tried again.
        Retry = "RETRY",
        /// The request was given up after its last allowed delivery.
        Dead = "DEAD",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The serialised word is `as_str`, and it reads back as the same value.
    fn round_trips<T>(value: T, word: &str)
    where
        T: Serialize + for<'de> Deserialize<'de> + PartialEq + std::fmt::Debug + Copy,
    {
        let json = serde_json::to_string(&value).unwrap();
        assert_eq!(json, format!("\"{word}\""));
        assert_eq!(serde_json::from_str::<T>(&json).unwrap(), value);
    }

    #[test]
    fn verdicts_serialise_as_the_words_hosts_match_on() {
        for v in [Verdict::Accept, Verdict::Reject] {
            round_trips(v, v.as_str());
        }
        for v in [
            ReplayVerdict::Match,
            ReplayVerdict::MatchAcrossUpgrade,
            ReplayVerdict::Drift,
            ReplayVerdict::Refused,
        ] {
            round_trips(v, v.as_str());
        }
        for v in [
            ServeVerdict::Accept,
            ServeVerdict::Reject,
            ServeVerdict::Retry,
            ServeVerdict::Dead,
        ] {
            round_trips(v, v.as_str());
        }
        round_trips(OutputVerdict::Drift, "DRIFT");
        assert!(serde_json::from_str::<Verdict>("\"accept\"").is_err());
    }
}
