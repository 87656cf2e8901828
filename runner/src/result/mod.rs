//! The Tool Execution Result document.
