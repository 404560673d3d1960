//! The argument types of every kodik tool, their JSON Schemas, and their provider formats.
//!
//! Usable without any tool implementation: an agent that implements the tools itself can take
//! the schemas from here. Tool crates take their [`ToolSpec`] from here too, so what `kodik
//! schema` prints is exactly what the tools advertise.
//!
//! Each argument struct implements [`ToolArgs`]; its doc comments become the descriptions the
//! model reads.
//!
//! ```
//! let specs = kodik_schema::all();
//! assert!(specs.iter().any(|s| s.name == "read_file"));
//! let openai = kodik_schema::providers::render(&specs[0], kodik_schema::providers::Format::OpenAi);
//! assert_eq!(openai["type"], "function");
//! ```

use kodik_core::{Effect, ToolSpec};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub mod agent;
pub mod browser;
pub mod codemode;
pub mod edit;
pub mod harness;
pub mod lsp;
pub mod providers;
pub mod search;
pub mod shell;
pub mod web;

/// The argument struct of one tool.
pub trait ToolArgs: DeserializeOwned + JsonSchema + Send + 'static {
    /// The tool's name.
    const NAME: &'static str;
    /// What the tool may affect.
    const EFFECT: Effect;
    /// What the model reads about the tool.
    const DESCRIPTION: &'static str;
}

/// The JSON Schema of `A`, with every subschema inlined (providers dislike `$ref`) and
/// without the `$schema` and `title` keys.
pub fn input_schema<A: JsonSchema>() -> Value {
    let generator =
        schemars::generate::SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true).into_generator();
    let mut value = generator.into_root_schema_for::<A>().to_value();
    if let Value::Object(map) = &mut value {
        map.remove("$schema");
        map.remove("title");
    }
    value
}

/// The spec of the tool whose arguments are `A`.
pub fn spec<A: ToolArgs>() -> ToolSpec {
    ToolSpec::new(A::NAME, A::DESCRIPTION, input_schema::<A>(), A::EFFECT)
}

/// Every built-in tool's spec, sorted by name.
pub fn all() -> Vec<ToolSpec> {
    let mut specs: Vec<ToolSpec> = [
        search::specs(),
        edit::specs(),
        shell::specs(),
        lsp::specs(),
        web::specs(),
        browser::specs(),
        agent::specs(),
        codemode::specs(),
        harness::specs(),
    ]
    .into_iter()
    .flatten()
    .collect();
    specs.sort_by(|a, b| a.name.cmp(&b.name));
    specs
}

/// The spec of the built-in tool called `name`.
pub fn find(name: &str) -> Option<ToolSpec> {
    all().into_iter().find(|s| s.name == name)
}
