//! The [`Tool`] trait, its typed layer [`TypedTool`], and the [`ToolSpec`] a tool advertises.

use std::sync::Arc;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::ToolContext;
use crate::error::ToolError;
use crate::output::ToolOutput;
use crate::workspace::{Resource, Workspace};

/// What a tool may affect. Approval policies, the scheduler's start rule (G4) and the
/// harness's modes are decided by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Reads files or state; changes nothing.
    ReadOnly,
    /// Creates, changes or deletes files.
    MutatesFiles,
    /// Starts or controls processes.
    Process,
    /// Talks to the network.
    Network,
    /// Drives a browser.
    Browser,
    /// Talks to the user or other agents, or keeps conversation state (todo, memory, plan).
    Conversation,
}

impl Effect {
    /// Whether a call of this kind may start while the model's response still streams (G4).
    pub fn starts_while_streaming(self) -> bool {
        matches!(self, Self::ReadOnly | Self::Process | Self::Network)
    }
}

/// How a tool presents itself to the model and to the scheduler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name (never depends on the model, G10).
    pub name: String,
    /// What the model reads about the tool.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// What the tool may affect.
    pub effect: Effect,
    /// Whether calls may start before the response is complete (G4).
    pub streaming_start: bool,
}

impl ToolSpec {
    /// A spec whose streaming start follows from its effect.
    pub fn new(name: impl Into<String>, description: impl Into<String>, input_schema: Value, effect: Effect) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            effect,
            streaming_start: effect.starts_while_streaming(),
        }
    }
}

/// A tool the model can call.
///
/// Most tools implement [`TypedTool`] instead and get this trait for free.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Name, description, schema and effect.
    fn spec(&self) -> &ToolSpec;

    /// Checks the arguments without running anything; errors here come before approval (S8).
    fn validate(&self, _args: &Value) -> Result<(), ToolError> {
        Ok(())
    }

    /// The resources (files) this call would mutate, for same-resource ordering (G2).
    fn resources(&self, _args: &Value, _ws: &Workspace) -> Vec<Resource> {
        Vec::new()
    }

    /// The resources (files) this call only reads. A later call that mutates one of them waits
    /// for this read, so a read and an edit of one file in one turn run in the model's order;
    /// reads of the same file still run together.
    fn reads(&self, _args: &Value, _ws: &Workspace) -> Vec<Resource> {
        Vec::new()
    }

    /// Whether this call may start while the model's response still streams (G4). By default
    /// the spec's [`ToolSpec::streaming_start`]; a tool that runs another tool (`call_tool`)
    /// answers for the tool it would run.
    fn starts_while_streaming(&self, _args: &Value) -> bool {
        self.spec().streaming_start
    }

    /// Whether this call may act on anything, so it waits for every earlier call of its turn
    /// and every later call waits for it (G2, G4): a code-mode script calls other tools, and
    /// which files they touch is known only as it runs. Default `false`.
    fn orders_all_calls(&self, _args: &Value) -> bool {
        false
    }

    /// For a tool that calls other tools (code mode): the same tool without `withheld`, the
    /// tools one request may not use (switched off in the mode, or not for this model), so it
    /// cannot reach them on the model's behalf (G10, G11). `None`: this tool calls no other.
    fn narrowed(&self, _withheld: &[String]) -> Option<Arc<dyn Tool>> {
        None
    }

    /// The MCP server this tool comes from, shown in approval requests (G13); `None` for
    /// built-in tools.
    fn server(&self) -> Option<&str> {
        None
    }

    /// Runs the call. Never panics on bad input: every failure is a result.
    async fn call(&self, args: Value, cx: &ToolContext) -> ToolOutput;
}

/// A tool written against its argument struct.
///
/// Arguments are deserialized before anything runs; a failure becomes one
/// [`ToolError::InvalidInput`] naming the field.
#[async_trait]
pub trait TypedTool: Send + Sync {
    /// The argument struct; its doc comments are the schema descriptions the model reads.
    type Args: DeserializeOwned + Send + 'static;

    /// Name, description, schema and effect.
    fn spec(&self) -> &ToolSpec;

    /// The resources this call would mutate (G2).
    fn resources(&self, _args: &Self::Args, _ws: &Workspace) -> Vec<Resource> {
        Vec::new()
    }

    /// The resources this call only reads; see [`Tool::reads`].
    fn reads(&self, _args: &Self::Args, _ws: &Workspace) -> Vec<Resource> {
        Vec::new()
    }

    /// What [`Tool::starts_while_streaming`] answers for this tool (G4); by default the spec's
    /// [`ToolSpec::streaming_start`]. Takes the raw arguments so the default parses nothing.
    fn starts_while_streaming(&self, _args: &Value) -> bool {
        TypedTool::spec(self).streaming_start
    }

    /// What [`Tool::orders_all_calls`] answers for this tool; default `false`.
    fn orders_all_calls(&self, _args: &Value) -> bool {
        false
    }

    /// What [`Tool::narrowed`] gives for this tool; default `None`.
    fn narrowed(&self, _withheld: &[String]) -> Option<Arc<dyn Tool>> {
        None
    }

    /// Checks beyond the schema (e.g. S8's "command must be a string"), before approval.
    fn check(&self, _args: &Self::Args) -> Result<(), ToolError> {
        Ok(())
    }

    /// What [`Tool::validate`] does for this tool: by default, deserializes a copy of `args`
    /// into [`Self::Args`] and runs [`Self::check`]. A tool whose arguments may be megabytes
    /// (a whole-file edit) can override it with a check that borrows instead of copying; it
    /// must accept and refuse exactly what the default does.
    fn validate_args(&self, args: &Value) -> Result<(), ToolError> {
        let parsed = parse_args::<Self::Args>(&TypedTool::spec(self).name, args)?;
        self.check(&parsed)
    }

    /// Runs the call.
    async fn run(&self, args: Self::Args, cx: &ToolContext) -> Result<ToolOutput, ToolError>;
}

/// serde's message with the Rust type it expected (`expected struct ReadFileArgs`) said as the
/// JSON the model must send (`expected a JSON object`): the model never sees the type's name.
fn without_type_names(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("expected struct ") {
        out.push_str(&rest[..at]);
        out.push_str("expected a JSON object");
        rest = &rest[at + "expected struct ".len()..];
        rest = rest.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_');
    }
    out.push_str(rest);
    out
}

/// Deserializes `args` into `A`, naming the offending field on failure.
pub fn parse_args<A: DeserializeOwned>(tool: &str, args: &Value) -> Result<A, ToolError> {
    // `null` arguments mean "no arguments" for every provider we speak to.
    if args.is_null() {
        return parse_owned_args(tool, Value::Null);
    }
    not_an_object(tool, args)?;
    serde_path_to_error::deserialize::<_, A>(args).map_err(|e| invalid_input(tool, e))
}

/// [`parse_args`] for arguments the caller owns: strings move into `A` instead of being
/// copied, which matters for a whole-file edit carrying megabytes.
pub fn parse_owned_args<A: DeserializeOwned>(tool: &str, args: Value) -> Result<A, ToolError> {
    let args = if args.is_null() { Value::Object(Default::default()) } else { args };
    not_an_object(tool, &args)?;
    serde_path_to_error::deserialize::<_, A>(args).map_err(|e| invalid_input(tool, e))
}

/// Arguments that are not a JSON object are refused as a whole: every tool's schema is an
/// object, and serde would otherwise read a list as the fields in declaration order.
fn not_an_object(tool: &str, args: &Value) -> Result<(), ToolError> {
    let got = match args {
        Value::Object(_) => return Ok(()),
        Value::String(s) if s.trim_start().starts_with('{') => {
            "a string holding JSON; send the object itself, not a string of it"
        }
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
    };
    Err(ToolError::InvalidInput {
        tool: tool.to_string(),
        field: None,
        message: format!("expected a JSON object of named arguments, got {got}"),
    })
}

fn invalid_input(tool: &str, e: serde_path_to_error::Error<serde_json::Error>) -> ToolError {
    let path = e.path().to_string();
    let field = (path != ".").then_some(path);
    let inner = without_type_names(&e.into_inner().to_string());
    let message = match &field {
        Some(f) => format!("{f}: {inner}"),
        None => inner,
    };
    ToolError::InvalidInput { tool: tool.to_string(), field, message }
}

#[async_trait]
impl<T: TypedTool> Tool for T {
    fn spec(&self) -> &ToolSpec {
        TypedTool::spec(self)
    }

    fn validate(&self, args: &Value) -> Result<(), ToolError> {
        TypedTool::validate_args(self, args)
    }

    fn starts_while_streaming(&self, args: &Value) -> bool {
        TypedTool::starts_while_streaming(self, args)
    }

    fn orders_all_calls(&self, args: &Value) -> bool {
        TypedTool::orders_all_calls(self, args)
    }

    fn narrowed(&self, withheld: &[String]) -> Option<Arc<dyn Tool>> {
        TypedTool::narrowed(self, withheld)
    }

    fn resources(&self, args: &Value, ws: &Workspace) -> Vec<Resource> {
        match parse_args::<T::Args>(&TypedTool::spec(self).name, args) {
            Ok(a) => TypedTool::resources(self, &a, ws),
            Err(_) => Vec::new(),
        }
    }

    fn reads(&self, args: &Value, ws: &Workspace) -> Vec<Resource> {
        match parse_args::<T::Args>(&TypedTool::spec(self).name, args) {
            Ok(a) => TypedTool::reads(self, &a, ws),
            Err(_) => Vec::new(),
        }
    }

    async fn call(&self, args: Value, cx: &ToolContext) -> ToolOutput {
        let parsed = match parse_owned_args::<T::Args>(&TypedTool::spec(self).name, args) {
            Ok(a) => a,
            Err(e) => return e.into_output(),
        };
        if let Err(e) = self.check(&parsed) {
            return e.into_output();
        }
        match self.run(parsed, cx).await {
            Ok(out) => out,
            Err(e) => e.into_output(),
        }
    }
}

/// A shared, type-erased tool.
pub type DynTool = Arc<dyn Tool>;
