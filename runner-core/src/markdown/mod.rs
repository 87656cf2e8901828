//! The markdown toolkit shared by the request validator (`runner::request::validate`)
//! and every gate validator (`runner::gate`): the parsers ([`frontmatter`], [`yaml`],
//! [`sections`], [`rendered`], [`visible`]), what every validator does with them ([`document`]) and
//! what the gate's validators add ([`fields`]). They report [`Reason`]s.

pub mod document;
pub mod fields;
pub mod frontmatter;
pub mod rendered;
pub mod sections;
pub mod visible;
pub mod yaml;

use serde::Serialize;

/// Why a document was rejected: a stable code, a message naming the problem, and the
/// 1-based line of the original file when there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Reason {
    pub code: String,
    pub message: String,
    pub line: Option<usize>,
}

impl Reason {
    pub fn new(code: impl Into<String>, message: impl Into<String>, line: Option<usize>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            line,
        }
    }
}
