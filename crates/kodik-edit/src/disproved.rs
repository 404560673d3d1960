//! Diagnostics the project on disk disproves (E9): the language server's view lacks something
//! the project's own tooling supplies, so the "error" would send the model after a problem its
//! edit did not make and the project does not have. Only edit results drop them: `read_lints`
//! reports everything the server says, so nothing is hidden from a model that asks.
//!
//! Dropped, each only when the disk says so:
//! - "Cannot find module './x'" for a relative module that exists (the server has not seen it
//!   yet);
//! - test-runner globals (`describe`, `it`, `expect`, …) when no runner's types are installed
//!   in any `node_modules` above the file: the runner injects them, TypeScript cannot know;
//! - in a Deno project (a `deno.json`/`deno.jsonc` at or above the file, inside the
//!   workspace): the `Deno` global and the Node globals Deno 2 provides, `jsr:`, `npm:`,
//!   `node:`, `http(s):` imports and those mapped in the Deno config, and "an import path can
//!   only end with a '.ts' extension" (Deno requires the extension).

use std::cell::OnceCell;
use std::path::{Path, PathBuf};

use kodik_core::Diagnostic;

/// The globals test runners inject (jest, mocha, jasmine, vitest with `globals`, bun test).
const RUNNER_GLOBALS: &[&str] = &[
    "describe",
    "it",
    "test",
    "suite",
    "expect",
    "beforeEach",
    "afterEach",
    "beforeAll",
    "afterAll",
    "jest",
    "vi",
    "xit",
    "xdescribe",
    "fit",
    "fdescribe",
];

/// Where a runner's global types live under `node_modules`: with any of them installed, a
/// missing runner global is a real configuration error (`types` in tsconfig, a missing import
/// from `vitest`) and stays.
const RUNNER_TYPES: &[&str] =
    &["@types/jest", "@types/mocha", "@types/jasmine", "@types/bun", "bun-types", "vitest", "@jest/globals"];

/// Globals a Deno project has that TypeScript's default libraries lack: `Deno`, and the Node
/// globals Deno 2 defines.
const DENO_GLOBALS: &[&str] = &["Deno", "process", "Buffer", "global", "setImmediate", "clearImmediate"];

/// Module specifiers only Deno resolves.
const DENO_SCHEMES: &[&str] = &["jsr:", "npm:", "node:", "https:", "http:"];

/// The file extensions TypeScript's server checks, the only diagnostics these rules concern.
const SCRIPT_EXTENSIONS: &[&str] = &["ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs"];

/// What the project around one written file says, looked up on disk once and only when a
/// diagnostic needs it.
pub(crate) struct Project<'a> {
    file: &'a Path,
    roots: &'a [PathBuf],
    /// The text of the Deno config governing the file, when it is in a Deno project.
    deno: OnceCell<Option<String>>,
    runner_types: OnceCell<bool>,
}

impl<'a> Project<'a> {
    /// The project around `file`, confined to the workspace `roots`.
    pub(crate) fn new(file: &'a Path, roots: &'a [PathBuf]) -> Self {
        Self { file, roots, deno: OnceCell::new(), runner_types: OnceCell::new() }
    }

    /// Whether the project on disk shows `d` is not a real error of the file.
    pub(crate) fn disproves(&self, d: &Diagnostic) -> bool {
        let msg = d.message.as_str();
        if relative_module_exists(msg, self.file) {
            return true;
        }
        if !self.file.extension().and_then(|e| e.to_str()).is_some_and(|e| SCRIPT_EXTENSIONS.contains(&e)) {
            return false;
        }
        if let Some((name, rest)) = quoted_after(msg, "Cannot find name ") {
            let runner_hint = rest.starts_with(". Do you need to install type definitions for a test runner?");
            if RUNNER_GLOBALS.contains(&name) && (rest == "." || runner_hint) && !self.runner_types_installed() {
                return true;
            }
            let node_hint = rest.starts_with(". Do you need to install type definitions for node?");
            return DENO_GLOBALS.contains(&name) && (rest == "." || node_hint) && self.deno_config().is_some();
        }
        if let Some((module, rest)) = quoted_after(msg, "Cannot find module ") {
            // 2307 ("… or its corresponding type declarations.") and 2792 ("… Did you mean to
            // set the 'moduleResolution' option …"); not advice about how an existing file is
            // imported.
            let plain = rest == "." || rest == " or its corresponding type declarations." || rest.contains("'paths'");
            return plain
                && self.deno_config().is_some_and(|config| {
                    DENO_SCHEMES.iter().any(|s| module.starts_with(s)) || import_mapped(config, module)
                });
        }
        // 5097 (TypeScript 5) and 2691 (before it): Deno imports name the file with its `.ts`.
        let ts_extension = msg.starts_with("An import path can only end with a '.ts")
            || msg.starts_with("An import path cannot end with a '.ts");
        ts_extension && self.deno_config().is_some()
    }

    fn runner_types_installed(&self) -> bool {
        *self.runner_types.get_or_init(|| {
            // TypeScript looks for types in every `node_modules` above the file, so this does too.
            self.file.ancestors().skip(1).any(|dir| {
                let modules = dir.join("node_modules");
                modules.is_dir() && RUNNER_TYPES.iter().any(|t| modules.join(t).is_dir())
            })
        })
    }

    fn deno_config(&self) -> Option<&str> {
        self.deno
            .get_or_init(|| {
                let root =
                    self.roots.iter().filter(|r| self.file.starts_with(r)).max_by_key(|r| r.as_os_str().len())?;
                let dir = self.file.parent()?;
                dir.ancestors().take_while(|d| d.starts_with(root)).find_map(|d| {
                    let config = ["deno.json", "deno.jsonc"]
                        .iter()
                        .find_map(|name| std::fs::read_to_string(d.join(name)).ok())?;
                    Some(with_import_map(config, d, root))
                })
            })
            .as_deref()
    }
}

/// The Deno config with the text of the import map it names (`"importMap": "./import_map.json"`,
/// relative to the config's folder and inside the workspace) appended: its `imports` map bare
/// specifiers as the config's own would.
fn with_import_map(mut config: String, dir: &Path, root: &Path) -> String {
    let named = config.split_once("\"importMap\"").and_then(|(_, rest)| {
        let value = rest.trim_start().strip_prefix(':')?.trim_start().strip_prefix('"')?;
        value.split_once('"').map(|(v, _)| dir.join(v))
    });
    if let Some(map) =
        named.filter(|m| m.starts_with(root) && !m.components().any(|c| c == std::path::Component::ParentDir))
        && let Ok(text) = std::fs::read_to_string(map)
    {
        config.push('\n');
        config.push_str(&text);
    }
    config
}

/// `'name'` (or `"name"`) right after `prefix` at the start of `msg`, and what follows it.
fn quoted_after<'m>(msg: &'m str, prefix: &str) -> Option<(&'m str, &'m str)> {
    let rest = msg.strip_prefix(prefix)?;
    let quote = rest.chars().next().filter(|c| matches!(c, '\'' | '"'))?;
    let rest = &rest[1..];
    let end = rest.find(quote)?;
    Some((&rest[..end], &rest[end + 1..]))
}

/// Whether the Deno config maps `module` in its `imports` (as the specifier itself or as a
/// prefix ending in `/`). A quoted key is looked for in the text, so comments in a `.jsonc`
/// need no parser; a false match needs the specifier written, quoted, in the Deno config.
fn import_mapped(config: &str, module: &str) -> bool {
    let quoted = |key: &str| config.contains(&format!("\"{key}\""));
    quoted(module) || module.match_indices('/').any(|(i, _)| quoted(&module[..i]) || quoted(&module[..=i]))
}

/// "Cannot find module './x'" for a relative module that exists on disk is the editor's stale
/// view, not a real error. Only the bare message: one that goes on with advice ("Consider
/// using '--resolveJsonModule'…") is the server objecting to how an existing file is imported,
/// and stays.
fn relative_module_exists(msg: &str, path: &Path) -> bool {
    let Some((module, rest)) = quoted_after(msg, "Cannot find module ") else { return false };
    if !module.starts_with('.') {
        return false;
    }
    if !matches!(rest.trim(), "" | "." | "or its corresponding type declarations.") {
        return false;
    }
    let Some(dir) = path.parent() else { return false };
    let base = dir.join(module);
    let exts = ["", ".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".d.ts", ".json"];
    exts.iter().any(|e| {
        let mut p = base.clone().into_os_string();
        p.push(e);
        Path::new(&p).is_file()
    }) || ["index.ts", "index.js", "index.tsx"].iter().any(|i| base.join(i).is_file())
}

#[cfg(test)]
mod tests {
    use kodik_core::DiagnosticSeverity;

    use super::*;

    fn diag(m: &str) -> Diagnostic {
        Diagnostic { line: 1, column: 1, severity: DiagnosticSeverity::Error, message: m.into(), source: None }
    }

    #[test]
    fn e9_missing_relative_module_that_exists_is_dropped() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("util.ts"), "export const a = 1;").unwrap();
        let file = d.path().join("main.ts");
        let roots = [d.path().to_path_buf()];
        let p = Project::new(&file, &roots);
        assert!(p.disproves(&diag("Cannot find module './util' or its corresponding type declarations.")));
        assert!(!p.disproves(&diag("Cannot find module './missing'.")));
        assert!(!p.disproves(&diag("Cannot find module 'react'.")));
        std::fs::write(d.path().join("data.json"), "{}").unwrap();
        assert!(p.disproves(&diag("Cannot find module './data.json'.")));
        // The file is there, but the server says it cannot be imported that way: a real error.
        let advice = "Cannot find module './data.json'. Consider using '--resolveJsonModule' to import module with \
                      '.json' extension.";
        assert!(!p.disproves(&diag(advice)));
    }

    /// E9: with a runner's types installed, a missing `describe` is the project's real
    /// configuration error and stays; other unknown names always stay.
    #[test]
    fn e9_runner_globals_stay_when_runner_types_are_installed_and_other_names_always() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("src/a.test.ts");
        let roots = [d.path().to_path_buf()];
        let hint = "Cannot find name 'describe'. Do you need to install type definitions for a test runner? Try \
                    `npm i --save-dev @types/jest` or `npm i --save-dev @types/mocha`.";
        assert!(Project::new(&file, &roots).disproves(&diag(hint)));
        assert!(Project::new(&file, &roots).disproves(&diag("Cannot find name 'expect'.")));
        assert!(!Project::new(&file, &roots).disproves(&diag("Cannot find name 'expectt'.")));
        assert!(!Project::new(&file, &roots).disproves(&diag("Cannot find name 'Deno'.")));
        // Not a script: the rules are TypeScript's.
        assert!(!Project::new(&d.path().join("a.py"), &roots).disproves(&diag("Cannot find name 'expect'.")));
        std::fs::create_dir_all(d.path().join("node_modules/@types/jest")).unwrap();
        assert!(!Project::new(&file, &roots).disproves(&diag(hint)));
        assert!(!Project::new(&file, &roots).disproves(&diag("Cannot find name 'expect'.")));
    }

    /// E9: a Deno config only counts inside the workspace; its import map names bare
    /// specifiers; a bare module it does not map stays an error.
    #[test]
    fn e9_deno_rules_need_a_deno_config_inside_the_workspace() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(d.path().join("deno.json"), "{}").unwrap();
        let file = ws.join("src/main.ts");
        let roots = [ws.clone()];
        let jsr = diag("Cannot find module 'jsr:@std/assert' or its corresponding type declarations.");
        assert!(!Project::new(&file, &roots).disproves(&jsr), "a deno.json above the workspace does not count");
        std::fs::write(
            ws.join("deno.jsonc"),
            "{\n  // map\n  \"imports\": {\"@std/path\": \"jsr:@std/path@^1\", \"lib/\": \"./lib/\"}\n}\n",
        )
        .unwrap();
        let p = Project::new(&file, &roots);
        assert!(p.disproves(&jsr));
        assert!(p.disproves(&diag("Cannot find module '@std/path' or its corresponding type declarations.")));
        assert!(p.disproves(&diag("Cannot find module '@std/path/posix' or its corresponding type declarations.")));
        assert!(p.disproves(&diag("Cannot find module 'lib/x.ts' or its corresponding type declarations.")));
        assert!(!p.disproves(&diag("Cannot find module 'react' or its corresponding type declarations.")));
        assert!(p.disproves(&diag("Cannot find name 'Deno'.")));
        assert!(p.disproves(&diag(
            "An import path can only end with a '.ts' extension when 'allowImportingTsExtensions' is enabled."
        )));
        assert!(!p.disproves(&diag("Type 'string' is not assignable to type 'number'.")));
    }

    /// E9: the entries of an import map kept in its own file (`"importMap"` in the Deno config)
    /// count as the config's own; a module it does not map stays an error.
    #[test]
    fn e9_deno_import_map_in_its_own_file_maps_bare_specifiers() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().to_path_buf();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(ws.join("deno.json"), "{ \"importMap\" : \"./maps/import_map.json\" }").unwrap();
        std::fs::create_dir_all(ws.join("maps")).unwrap();
        std::fs::write(ws.join("maps/import_map.json"), "{\"imports\": {\"oak\": \"https://deno.land/x/oak/mod.ts\"}}")
            .unwrap();
        let file = ws.join("src/main.ts");
        let roots = [ws.clone()];
        let p = Project::new(&file, &roots);
        assert!(p.disproves(&diag("Cannot find module 'oak' or its corresponding type declarations.")));
        assert!(!p.disproves(&diag("Cannot find module 'react' or its corresponding type declarations.")));
    }
}
