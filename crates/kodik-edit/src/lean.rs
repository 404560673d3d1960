//! [`Lean`]: registers a [`TypedTool`] whose arguments may be megabytes (a whole file's
//! content) so that the checks before the call borrow the arguments instead of copying them
//! (issue 18.2). The blanket `Tool` impl of a `TypedTool` deserializes an owned copy for
//! `resources`; this one asks the tool for a borrowed answer.

use async_trait::async_trait;
use kodik_core::{Resource, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool, Workspace};
use serde_json::Value;

/// A tool that can name its resources from the raw arguments without copying them. It must
/// answer what [`TypedTool::resources`] answers for arguments that parse, and nothing for ones
/// that do not.
pub(crate) trait RawResources: TypedTool {
    /// The resources of a call with these raw arguments.
    fn raw_resources(&self, args: &Value, ws: &Workspace) -> Vec<Resource>;
}

/// A [`TypedTool`] registered with borrowed pre-call checks; the call itself is the tool's.
pub(crate) struct Lean<T>(pub(crate) T);

#[async_trait]
impl<T: RawResources> Tool for Lean<T> {
    fn spec(&self) -> &ToolSpec {
        TypedTool::spec(&self.0)
    }

    fn validate(&self, args: &Value) -> Result<(), ToolError> {
        TypedTool::validate_args(&self.0, args)
    }

    fn resources(&self, args: &Value, ws: &Workspace) -> Vec<Resource> {
        self.0.raw_resources(args, ws)
    }

    fn starts_while_streaming(&self, args: &Value) -> bool {
        TypedTool::starts_while_streaming(&self.0, args)
    }

    async fn call(&self, args: Value, cx: &ToolContext) -> ToolOutput {
        Tool::call(&self.0, args, cx).await
    }
}

/// `{"path": …, …}` of a tool whose only resource is that path, borrowed; `None` when `args`
/// would not parse as `R` (the blanket impl then names no resource either).
pub(crate) fn borrowed<'a, R: serde::Deserialize<'a>>(args: &'a Value) -> Option<R> {
    R::deserialize(args).ok()
}

#[cfg(test)]
mod tests {
    use kodik_core::{ToolRegistry, Workspace};
    use serde_json::json;

    #[test]
    fn g2_borrowed_resources_and_checks_answer_what_the_typed_ones_do() {
        let d = tempfile::tempdir().unwrap();
        let ws = Workspace::new(d.path()).unwrap();
        let mut registry = ToolRegistry::new();
        crate::EditToolset::new().register(&mut registry);
        let tool = |name: &str| registry.get(name).unwrap().clone();
        let a = vec![ws.resource("a.txt")];
        let patch = "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-x\n+y\n*** End Patch";
        let cases = [
            ("create_file", json!({"path": "a.txt", "content": "x"}), a.clone()),
            ("edit_file", json!({"path": "a.txt", "edits": [{"old_string": "x", "new_string": "y"}]}), a.clone()),
            ("apply_patch", json!({"input": patch}), vec![ws.resource("a.txt"), ws.resource("b.txt")]),
        ];
        for (name, args, want) in cases {
            assert_eq!(tool(name).resources(&args, &ws), want, "{name}");
            assert!(tool(name).validate(&args).is_ok(), "{name}");
            // Arguments the typed form refuses name no resource and fail the check, with the
            // field named, exactly as before.
            let mut bad = args.clone();
            bad["unknown"] = json!(1);
            assert_eq!(tool(name).resources(&bad, &ws), vec![], "{name}");
            let err = tool(name).validate(&bad).unwrap_err().to_string();
            assert!(err.contains("unknown"), "{name}: {err}");
        }
        let err = tool("create_file").validate(&json!({"path": "a.txt"})).unwrap_err().to_string();
        assert!(err.contains("content"), "{err}");
        let err = tool("apply_patch").validate(&json!({"input": "not a patch"})).unwrap_err().to_string();
        assert!(err.contains("*** Begin Patch"), "{err}");
    }
}
