//! Helpers shared by this crate's unit tests.

/// Asserts that each `(input, code)` case yields `code` among `codes(input)`, naming the
/// input, the wanted code and what it got when one does not.
pub(crate) fn assert_each_yields<C: AsRef<str>>(
    cases: &[(&str, &str)],
    codes: impl Fn(&str) -> Vec<C>,
) {
    for (input, code) in cases {
        let got: Vec<String> = codes(input).iter().map(|c| c.as_ref().to_owned()).collect();
        assert!(
            got.iter().any(|c| c == code),
            "{input:?}: wanted {code}, got {got:?}"
        );
    }
}

/// Every string of at most `max_len` characters of `alphabet`, shortest first.
pub(crate) fn all_strings(alphabet: &[char], max_len: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut last = vec![String::new()];
    for _ in 0..max_len {
        last = last
            .iter()
            .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
            .collect();
        out.extend(last.iter().cloned());
    }
    out
}

/// A fixed pseudo-random sequence (xorshift64): varied test input, the same on every run.
pub(crate) struct Xorshift(u64);

impl Xorshift {
    /// The sequence from `seed` (not zero).
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next number of the sequence below `below` (not zero).
    pub(crate) fn below(&mut self, below: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % u64::try_from(below).unwrap_or(u64::MAX)).unwrap_or(0)
    }
}
