//! The strict YAML loader: never panics, never builds more nodes or deeper nesting than
//! the budget allows, and every line it reports lies inside the text it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runner::policy::Policy;
use runner::request::yaml::{Budget, Node, load};
use std::sync::LazyLock;

static POLICY: LazyLock<Policy> = LazyLock::new(Policy::builtin);

/// Nodes as the loader counts them (every scalar, key scalars included, and every
/// collection) and the deepest nesting of collections.
fn measure(node: &Node, depth: usize, nodes: &mut usize, deepest: &mut usize) {
    *nodes += 1;
    match node {
        Node::Scalar { .. } => {}
        Node::Seq { items, .. } => {
            *deepest = (*deepest).max(depth + 1);
            for item in items {
                measure(item, depth + 1, nodes, deepest);
            }
        }
        Node::Map { entries, .. } => {
            *deepest = (*deepest).max(depth + 1);
            for (i, e) in entries.iter().enumerate() {
                *nodes += 1; // the key
                assert!(
                    entries[..i].iter().all(|other| other.key != e.key),
                    "duplicate key {:?} accepted",
                    e.key
                );
                measure(&e.value, depth + 1, nodes, deepest);
            }
        }
    }
}

fn lines_within(node: &Node, first: usize, last: usize) {
    assert!(
        (first..=last).contains(&node.line()),
        "line {} outside {first}..={last}",
        node.line()
    );
    match node {
        Node::Scalar { .. } => {}
        Node::Seq { items, .. } => items.iter().for_each(|n| lines_within(n, first, last)),
        Node::Map { entries, .. } => entries.iter().for_each(|e| {
            assert!((first..=last).contains(&e.key_line));
            lines_within(&e.value, first, last)
        }),
    }
}

fn check(text: &str, first_line: usize, budget: Budget) {
    // The text's lines end at LF only (YAML also breaks at a lone CR; the file does not).
    let last = first_line + text.matches('\n').count();
    match load(text, first_line, budget) {
        Ok(root) => {
            assert!(matches!(root, Node::Map { .. }));
            let (mut nodes, mut deepest) = (0, 0);
            measure(&root, 0, &mut nodes, &mut deepest);
            assert!(
                nodes <= budget.max_nodes,
                "{nodes} nodes > {}",
                budget.max_nodes
            );
            assert!(
                deepest <= budget.max_depth,
                "depth {deepest} > {}",
                budget.max_depth
            );
            lines_within(&root, first_line, last);
        }
        Err(errors) => {
            assert!(!errors.is_empty());
            for e in &errors {
                assert!(e.code.starts_with("yaml."), "{}", e.code);
                assert!(
                    (first_line..=last).contains(&e.line),
                    "{e:?} outside {first_line}..={last}"
                );
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let policy = &*POLICY;
    check(
        &text,
        2,
        Budget {
            max_depth: policy.request.max_yaml_depth,
            max_nodes: policy.request.max_yaml_nodes,
        },
    );
    // Small budgets (taken from the first two bytes), so the fuzzer meets the limits
    // without writing 2000 nodes.
    if let [depth, nodes, ..] = data {
        check(
            &text,
            1,
            Budget {
                max_depth: usize::from(depth % 10),
                max_nodes: usize::from(*nodes),
            },
        );
    }
});
