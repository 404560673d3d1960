//! Argument types of the shell tools.

use kodik_core::ToolSpec;

/// The specs of this module's tools.
pub fn specs() -> Vec<ToolSpec> {
    Vec::new()
}
