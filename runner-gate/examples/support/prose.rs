//! Varied prose for the benchmarks: paragraphs of sentences drawn from a fixed vocabulary
//! by a fixed pseudo-random sequence (the same text on every run), wrapped at 100
//! columns, so no two lines are alike and nothing is won by a line seen before.

const SUBJECTS: &[&str] = &[
    "The scheme",
    "The canonical form",
    "The serializer",
    "Each encoder",
    "The reference parser",
    "The second draft",
    "The test suite",
    "A conforming reader",
    "The survey",
    "The cohort study",
    "The authors",
    "The working group",
    "The appendix",
    "The benchmark",
    "The sample",
    "The measured corpus",
    "The registry",
    "Every participant",
    "The control group",
    "The model",
    "The follow-up analysis",
    "The replication",
    "The dataset",
    "The protocol",
    "The review panel",
];
const VERBS: &[&str] = &[
    "sorts",
    "records",
    "compares",
    "reports",
    "estimates",
    "describes",
    "normalizes",
    "weighs",
    "summarizes",
    "separates",
    "groups",
    "orders",
    "measures",
    "tabulates",
    "revisits",
    "bounds",
    "rounds",
    "encodes",
    "observes",
    "attributes",
    "contrasts",
    "relates",
    "documents",
    "lists",
];
const OBJECTS: &[&str] = &[
    "object members by their UTF-16 code units",
    "numbers as ECMAScript prints them",
    "the mean difference between the two arms",
    "the variance of repeated readings",
    "string escapes in their shortest form",
    "the share of records with missing fields",
    "the seasonal pattern of admissions",
    "the error of each floating point conversion",
    "the order of keys in nested objects",
    "the median time to the first response",
    "the confidence interval of the primary outcome",
    "duplicate names in a single object",
    "the effect of sample size on precision",
    "the decline in yield across the plots",
    "the rate of agreement between the reviewers",
    "the drift of the sensor over a season",
    "the cost of each pass over the input",
    "the growth of the population in each decade",
    "the distribution of citation counts",
    "the ratio of observed to expected cases",
    "the number of distinct values per column",
    "the weight of evidence for each claim",
    "the spread of temperatures along the transect",
    "the latency of each lookup in the index",
];
const LINKS: &[&str] = &[
    "and",
    "but",
    "while",
    "whereas",
    "so that",
    "although",
    "because",
    "since",
    "yet",
    "and therefore",
    "which means",
    "after which",
];
const CLAUSES: &[&str] = &[
    "the figures differ in form, not value",
    "the estimate narrows as the sample grows",
    "no record is dropped",
    "the result matches the earlier survey",
    "two readings disagree",
    "the rounding rule is stated once",
    "the remaining cases are listed in a table",
    "the interval excludes zero",
    "the difference is within the stated tolerance",
    "the ordering is stable under repetition",
    "the trend reverses in the final year",
    "the panel notes a small bias",
    "the method is described in an appendix",
    "the sites report at different intervals",
    "the same key never appears twice",
    "the outliers are kept and flagged",
    "each step is reported with its uncertainty",
    "most of the variation lies between sites",
    "the encoding round-trips exactly",
    "the second measurement confirms the first",
];
const QUALIFIERS: &[&str] = &[
    "in most cases",
    "on average",
    "for the larger cohort",
    "in the pilot phase",
    "across all sites",
    "at the higher dose",
    "in the revised edition",
    "for short inputs",
    "under the stricter definition",
    "after adjustment for age",
    "in the northern plots",
    "for every tested value",
    "within each stratum",
    "before the change of method",
];

/// A small fixed pseudo-random sequence (xorshift64*).
struct Sequence(u64);

impl Sequence {
    fn next(&mut self, below: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % below
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.next(from.len())]
    }
}

/// One sentence, with its own numbers.
fn sentence(seq: &mut Sequence) -> String {
    let mut s = format!(
        "{} {} {} {} {} {}",
        seq.pick(SUBJECTS),
        seq.pick(VERBS),
        seq.pick(OBJECTS),
        seq.pick(QUALIFIERS),
        seq.pick(LINKS),
        seq.pick(CLAUSES)
    );
    match seq.next(6) {
        0 => s.push_str(&format!(
            " (section {}.{}, page {})",
            1 + seq.next(12),
            1 + seq.next(9),
            1 + seq.next(300)
        )),
        1 => s.push_str(&format!(
            " (n = {}, {}.{}%)",
            10 + seq.next(5000),
            seq.next(100),
            seq.next(10)
        )),
        2 => s.push_str(&format!(
            "; the values {}.{} and {}e{} differ",
            seq.next(1000),
            seq.next(100),
            1 + seq.next(9),
            seq.next(30)
        )),
        3 => s.push_str(&format!(" in {}", 1950 + seq.next(76))),
        _ => {}
    }
    if seq.next(3) == 0 {
        s.push_str(" [C1]");
    }
    s.push('.');
    s
}

/// About `size` bytes of prose: paragraphs of 3 to 8 sentences wrapped at 100 columns,
/// a blank line between paragraphs.
pub fn varied_prose(size: usize) -> String {
    let mut seq = Sequence(0x9e37_79b9_7f4a_7c15);
    let mut text = String::with_capacity(size + 200);
    while text.len() < size {
        let mut line = String::new();
        for _ in 0..3 + seq.next(6) {
            for word in sentence(&mut seq).split(' ') {
                if !line.is_empty() && line.len() + 1 + word.len() > 100 {
                    text.push_str(&line);
                    text.push('\n');
                    line.clear();
                }
                if !line.is_empty() {
                    line.push(' ');
                }
                line.push_str(word);
            }
        }
        text.push_str(&line);
        text.push_str("\n\n");
    }
    text
}
