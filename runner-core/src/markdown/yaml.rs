//! A strict YAML loader for front matter, on top of saphyr's event parser.
//!
//! Front matter is configuration written by a machine and read by a human, so it
//! needs none of YAML's graph features: anchors, aliases and tags are refused
//! outright (which also makes alias-expansion bombs impossible), keys must be plain
//! scalars, duplicate keys are errors that name both lines, and depth and node
//! count are bounded by the policy. Every node keeps its line in the original file.

use saphyr_parser::{Event, Marker, Parser, ScalarStyle};

/// A YAML node with the 1-based line of the original file where it starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Scalar {
        value: String,
        quoted: bool,
        line: usize,
    },
    Seq {
        items: Vec<Node>,
        line: usize,
    },
    Map {
        entries: Vec<Entry>,
        line: usize,
    },
}

/// One key of a mapping.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    pub key_line: usize,
    pub value: Node,
}

impl Node {
    pub fn line(&self) -> usize {
        match self {
            Node::Scalar { line, .. } | Node::Seq { line, .. } | Node::Map { line, .. } => *line,
        }
    }

    /// A short name of the node's kind, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Scalar { quoted: true, .. } => "a quoted string",
            Node::Scalar { value, .. } if is_null(value) => "null",
            Node::Scalar { .. } => "a scalar",
            Node::Seq { .. } => "a list",
            Node::Map { .. } => "a mapping",
        }
    }

    /// The entry under `key` when this is a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map { entries, .. } => entries.iter().find(|e| e.key == key).map(|e| &e.value),
            _ => None,
        }
    }
}

/// A plain scalar that YAML's core schema reads as null.
pub fn is_null(value: &str) -> bool {
    matches!(value, "" | "~" | "null" | "Null" | "NULL")
}

/// Why the front matter could not be loaded. Each carries a line of the original file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    pub code: &'static str,
    pub message: String,
    pub line: usize,
}

/// Budgets from the policy.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub max_depth: usize,
    pub max_nodes: usize,
}

/// Loads one YAML document. `first_line` is the file line of the text's first line.
/// Returns every structural error found (duplicate keys do not stop loading).
pub fn load(text: &str, first_line: usize, budget: Budget) -> Result<Node, Vec<LoadError>> {
    let mut loader = Loader {
        budget,
        nodes: 0,
        errors: Vec::new(),
        stack: Vec::new(),
        root: None,
        documents: 0,
    };
    // saphyr also breaks lines at a lone CR, the file only at LF (a CR before it is part
    // of the ending): count LFs up to the marker's character offset instead, so every
    // line named is the file's.
    let lf_at: Vec<usize> = text
        .chars()
        .enumerate()
        .filter_map(|(i, c)| (c == '\n').then_some(i))
        .collect();
    let line_of = |m: &Marker| first_line + lf_at.partition_point(|&i| i < m.index());
    let mut parser = Parser::new_from_str(text);
    while let Some(event) = parser.next_event() {
        match event {
            Ok((event, span)) => {
                let line = line_of(&span.start);
                if let Err(fatal) = loader.event(event, line) {
                    loader.errors.push(fatal);
                    return Err(loader.errors);
                }
            }
            Err(e) => {
                loader.errors.push(LoadError {
                    code: "yaml.syntax",
                    message: format!("front matter is not valid YAML: {}", e.info()),
                    line: line_of(e.marker()),
                });
                return Err(loader.errors);
            }
        }
    }
    match (loader.root.take(), loader.errors.is_empty()) {
        (Some(root), true) => Ok(root),
        (None, true) => Err(vec![LoadError {
            code: "yaml.not_mapping",
            message: "front matter is empty".into(),
            line: first_line,
        }]),
        (_, false) => Err(loader.errors),
    }
}

/// A sequence or mapping being loaded: its node so far and, for a mapping, the key
/// whose value comes next.
struct Frame {
    node: Node,
    pending_key: Option<(String, usize)>,
}

struct Loader {
    budget: Budget,
    nodes: usize,
    errors: Vec<LoadError>,
    stack: Vec<Frame>,
    root: Option<Node>,
    documents: usize,
}

impl Loader {
    fn event(&mut self, event: Event<'_>, line: usize) -> Result<(), LoadError> {
        let fatal = |code, message: String| LoadError {
            code,
            message,
            line,
        };
        match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => Ok(()),
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(fatal(
                        "yaml.multiple_documents",
                        "front matter holds more than one YAML document".into(),
                    ));
                }
                Ok(())
            }
            Event::Alias(_) => Err(fatal(
                "yaml.alias",
                "YAML aliases (`*name`) are not allowed in front matter".into(),
            )),
            Event::Scalar(value, style, anchor, tag) => {
                self.check_anchor_and_tag(anchor, tag.is_some(), line)?;
                self.count(line)?;
                let quoted = !matches!(style, ScalarStyle::Plain);
                self.push(Node::Scalar {
                    value: value.into_owned(),
                    quoted,
                    line,
                })
            }
            Event::SequenceStart(anchor, tag) => {
                let items = Vec::new();
                self.open(anchor, tag.is_some(), Node::Seq { items, line })
            }
            Event::MappingStart(anchor, tag) => {
                let entries = Vec::new();
                self.open(anchor, tag.is_some(), Node::Map { entries, line })
            }
            Event::SequenceEnd => match self.stack.pop() {
                Some(Frame {
                    node: node @ Node::Seq { .. },
                    ..
                }) => self.push(node),
                _ => Err(fatal("yaml.syntax", "unbalanced sequence".into())),
            },
            Event::MappingEnd => match self.stack.pop() {
                Some(Frame {
                    node: node @ Node::Map { .. },
                    ..
                }) => self.push(node),
                _ => Err(fatal("yaml.syntax", "unbalanced mapping".into())),
            },
        }
    }

    fn check_anchor_and_tag(
        &self,
        anchor: usize,
        tagged: bool,
        line: usize,
    ) -> Result<(), LoadError> {
        if anchor != 0 {
            return Err(LoadError {
                code: "yaml.anchor",
                message: "YAML anchors (`&name`) are not allowed in front matter".into(),
                line,
            });
        }
        if tagged {
            return Err(LoadError {
                code: "yaml.tag",
                message: "YAML tags (`!tag`, `!!type`) are not allowed in front matter".into(),
                line,
            });
        }
        Ok(())
    }

    fn count(&mut self, line: usize) -> Result<(), LoadError> {
        self.nodes += 1;
        if self.nodes > self.budget.max_nodes {
            return Err(LoadError {
                code: "yaml.too_many_nodes",
                message: format!(
                    "front matter has more than {} YAML nodes",
                    self.budget.max_nodes
                ),
                line,
            });
        }
        Ok(())
    }

    /// Starts loading `node`, an empty sequence or mapping.
    fn open(&mut self, anchor: usize, tagged: bool, node: Node) -> Result<(), LoadError> {
        let line = node.line();
        self.check_anchor_and_tag(anchor, tagged, line)?;
        self.count(line)?;
        if self.stack.len() >= self.budget.max_depth {
            return Err(LoadError {
                code: "yaml.too_deep",
                message: format!(
                    "front matter nests deeper than {} levels",
                    self.budget.max_depth
                ),
                line,
            });
        }
        self.stack.push(Frame {
            node,
            pending_key: None,
        });
        Ok(())
    }

    /// Attaches a finished node to its parent (or makes it the root).
    fn push(&mut self, node: Node) -> Result<(), LoadError> {
        match self
            .stack
            .last_mut()
            .map(|f| (&mut f.node, &mut f.pending_key))
        {
            None => {
                if !matches!(node, Node::Map { .. }) {
                    return Err(LoadError {
                        code: "yaml.not_mapping",
                        message: format!(
                            "front matter must be a mapping of keys to values, found {}",
                            node.kind()
                        ),
                        line: node.line(),
                    });
                }
                self.root = Some(node);
                Ok(())
            }
            Some((Node::Seq { items, .. }, _)) => {
                items.push(node);
                Ok(())
            }
            // A frame is a sequence or a mapping; a scalar never is one.
            Some((Node::Scalar { line, .. }, _)) => Err(LoadError {
                code: "yaml.syntax",
                message: "a value inside a scalar".into(),
                line: *line,
            }),
            Some((Node::Map { entries, .. }, pending_key)) => match pending_key.take() {
                None => match node {
                    Node::Scalar { value, line, .. } => {
                        if let Some(first) = entries.iter().find(|e| e.key == value) {
                            self.errors.push(LoadError {
                                code: "yaml.duplicate_key",
                                message: format!(
                                    "key `{value}` appears twice (first on line {})",
                                    first.key_line
                                ),
                                line,
                            });
                        }
                        *pending_key = Some((value, line));
                        Ok(())
                    }
                    other => Err(LoadError {
                        code: "yaml.complex_key",
                        message: format!(
                            "mapping keys must be plain strings, found {}",
                            other.kind()
                        ),
                        line: other.line(),
                    }),
                },
                Some((key, key_line)) => {
                    entries.push(Entry {
                        key,
                        key_line,
                        value: node,
                    });
                    Ok(())
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: Budget = Budget {
        max_depth: 8,
        max_nodes: 200,
    };

    fn codes(text: &str) -> Vec<&'static str> {
        match load(text, 2, BUDGET) {
            Ok(_) => vec![],
            Err(errors) => errors.iter().map(|e| e.code).collect(),
        }
    }

    #[test]
    fn loads_mapping_with_lines() {
        let node = load(
            "a: 1\nb:\n  - path: \"/in/x\"\n    sha256: abc\n",
            2,
            BUDGET,
        )
        .unwrap();
        let Node::Map { entries, .. } = &node else {
            panic!("not a map")
        };
        assert_eq!(entries[0].key, "a");
        assert_eq!(entries[0].key_line, 2);
        assert_eq!(entries[1].key_line, 3);
        let Node::Seq { items, .. } = &entries[1].value else {
            panic!("not a seq")
        };
        assert_eq!(items[0].line(), 4);
        assert_eq!(
            items[0].get("path"),
            Some(&Node::Scalar {
                value: "/in/x".into(),
                quoted: true,
                line: 4
            })
        );
    }

    #[test]
    fn rejection_table() {
        let cases: &[(&str, &str)] = &[
            ("a: 1\na: 2\n", "yaml.duplicate_key"),
            ("a: &x [1]\nb: *x\n", "yaml.anchor"),
            ("b: *x\n", "yaml.syntax"),
            ("a: !!python/object:os.system x\n", "yaml.tag"),
            ("- 1\n- 2\n", "yaml.not_mapping"),
            ("? [a]\n: 1\n", "yaml.complex_key"),
            ("a: [[[[[[[[[[1]]]]]]]]]]\n", "yaml.too_deep"),
            ("a: 1\n---\nb: 2\n", "yaml.multiple_documents"),
            ("a: 'unterminated\n", "yaml.syntax"),
            ("", "yaml.not_mapping"),
        ];
        crate::test_support::assert_each_yields(cases, codes);
    }

    #[test]
    fn too_many_nodes() {
        let text: String = (0..300).map(|i| format!("k{i}: {i}\n")).collect();
        assert_eq!(codes(&text), vec!["yaml.too_many_nodes"]);
    }

    /// Found by fuzzing (fuzz_request): YAML breaks lines at a lone CR, the file does not,
    /// so every line after one was named too far down, even past the end of the file.
    #[test]
    fn lines_are_file_lines_even_after_a_lone_cr() {
        let node = load("a: x\rb: y\nc: 1\n", 2, BUDGET).unwrap();
        let Node::Map { entries, .. } = &node else {
            panic!("not a map")
        };
        let lines: Vec<(&str, usize)> = entries
            .iter()
            .map(|e| (e.key.as_str(), e.key_line))
            .collect();
        assert_eq!(lines, [("a", 2), ("b", 2), ("c", 3)]);
        let errors = load("a: 1\r\r\r\r\r\rb\nc", 2, BUDGET).unwrap_err();
        assert!(errors.iter().all(|e| e.line <= 3), "{errors:?}");
    }

    /// Found by fuzzing (fuzz_yaml, fuzz/regressions/fuzz_yaml/): a syntax error at the
    /// end of a text without a final newline was named on the line after the text
    /// (saphyr's marker sits past the end there); in a request, on the closing `---`.
    #[test]
    fn a_syntax_error_at_the_end_names_the_last_line() {
        let errors = load("a: 1\nb", 2, BUDGET).unwrap_err();
        assert_eq!(
            errors.iter().map(|e| (e.code, e.line)).collect::<Vec<_>>(),
            [("yaml.syntax", 3)]
        );
        let errors = load("a: 1\nb: \"x\\ry\"\nc", 1, BUDGET).unwrap_err();
        assert_eq!(errors.iter().map(|e| e.line).collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn billion_laughs_is_refused_at_the_first_anchor() {
        let text = "a: &a [\"lol\",\"lol\"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n";
        assert_eq!(codes(text), vec!["yaml.anchor"]);
    }
}
