//! A forbidden-content rule's regular expression, compiled when first used.
//!
//! Compiling the built-in rules costs about 35 ms (measured on the 2-core bench machine;
//! two Unicode-heavy rules take 9 ms each), more than everything else the parent does
//! before a run. A request needs only the request rules to be judged; the result rules
//! are needed once the guest has run, so the pipeline compiles them on a second thread
//! while the worker runs ([`crate::policy::Policy::warm`]). A policy file is still
//! compiled whole at load time, so a bad rule fails before any request is judged; the
//! built-in policy is compiled whole by a unit test instead.

use regex::{Regex, RegexBuilder};
use std::fmt;
use std::sync::{Arc, OnceLock};

/// A rule's pattern: its source and, once compiled, the regex. Clones share the compiled
/// regex, so a rule listed under several targets is compiled once.
#[derive(Clone)]
pub struct RulePattern {
    source: Arc<str>,
    compiled: Arc<OnceLock<Regex>>,
}

impl RulePattern {
    /// Compiles `source` now: an invalid pattern is an error here, never later.
    pub fn compile(source: &str) -> Result<Self, regex::Error> {
        let pattern = Self::deferred(source);
        let regex = build(source)?;
        let _ = pattern.compiled.set(regex);
        Ok(pattern)
    }

    /// Compiles `source` when it is first matched. Only for patterns known to compile
    /// (the built-in policy, which a unit test compiles whole).
    pub fn deferred(source: &str) -> Self {
        Self {
            source: source.into(),
            compiled: Arc::new(OnceLock::new()),
        }
    }

    /// The pattern as written in the policy.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the pattern matches anywhere in `text` (compiling it first if needed).
    pub fn is_match(&self, text: &str) -> bool {
        self.regex().is_match(text)
    }

    /// Compiles the pattern now if it is not yet compiled.
    pub fn warm(&self) {
        let _ = self.regex();
    }

    fn regex(&self) -> &Regex {
        // `deferred` is only given patterns that compile (the built-in policy, checked
        // by `policy::tests::builtin_policy_parses`), so this cannot fail at run time.
        #[allow(clippy::expect_used)]
        self.compiled
            .get_or_init(|| build(&self.source).expect("a built-in rule compiles"))
    }
}

impl fmt::Debug for RulePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RulePattern").field(&&*self.source).finish()
    }
}

fn build(source: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(source)
        .case_insensitive(true)
        .multi_line(true)
        .size_limit(1 << 22)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deferred_and_eager_agree_and_clones_share_the_regex() {
        let eager = RulePattern::compile(r"\bsudo\b").unwrap();
        let lazy = RulePattern::deferred(r"\bsudo\b");
        let clone = lazy.clone();
        assert!(lazy.compiled.get().is_none());
        for text in ["run SUDO now", "pseudo", "sudo"] {
            assert_eq!(eager.is_match(text), lazy.is_match(text), "{text}");
        }
        assert!(
            clone.compiled.get().is_some(),
            "the clone shares the compiled regex"
        );
        assert_eq!(lazy.as_str(), r"\bsudo\b");
        assert!(RulePattern::compile("(").is_err());
    }
}
