//! SPEC N1 (and E13 for notebooks) through the real `edit_notebook` tool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Env;
use kodik_core::ToolStatus;
use serde_json::{Value, json};

/// Laid out the way Jupyter writes notebooks: one-space indent, sorted keys, final newline,
/// plus fields nbformat does not define.
const NB: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "id": "intro",
   "metadata": {},
   "source": [
    "# Title\n",
    "Some “text”."
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 3,
   "id": "calc",
   "metadata": {
    "tags": ["keep-me"],
    "zeta_unknown": {"b": 1, "a": 2}
   },
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "42\n"
     ]
    }
   ],
   "source": [
    "x = 40\n",
    "print(x + 2)"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 4,
   "id": "plot",
   "metadata": {},
   "outputs": [
    {
     "data": {"text/plain": ["<Figure>"]},
     "metadata": {},
     "output_type": "display_data"
    }
   ],
   "source": [
    "plot(x)"
   ]
  }
 ],
 "metadata": {
  "kernelspec": {
   "display_name": "Python 3",
   "language": "python",
   "name": "python3"
  },
  "custom_top_level": true
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

fn nb_env() -> Env {
    let env = Env::new();
    // Re-render once so the fixture is in the exact layout serde_json produces for this indent.
    let v: Value = serde_json::from_str(NB).unwrap();
    let text = kodik_edit::notebook::render_like(&v, NB).unwrap();
    env.write("nb.ipynb", &text);
    env
}

fn cells(env: &Env) -> Vec<Value> {
    let v: Value = serde_json::from_str(&env.text("nb.ipynb")).unwrap();
    v["cells"].as_array().unwrap().clone()
}

#[test]
fn n1_rendering_an_untouched_notebook_gives_back_the_same_bytes() {
    let env = nb_env();
    let text = env.text("nb.ipynb");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(kodik_edit::notebook::render_like(&v, &text).unwrap(), text);
    let keys: Vec<&String> = v["cells"][1]["metadata"]["zeta_unknown"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["b", "a"], "key order survives parsing");
}

#[tokio::test]
async fn n1_insert_markdown_cell_keeps_every_other_byte() {
    let env = nb_env();
    let before = env.text("nb.ipynb");
    let out = env
        .call(
            "edit_notebook",
            json!({"target_notebook": "nb.ipynb", "operation": "insert", "cell_index": 1,
                   "cell_type": "markdown", "new_source": "## Step 1\nExplain."}),
        )
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    let after = env.text("nb.ipynb");
    let c = cells(&env);
    assert_eq!(c.len(), 4);
    assert_eq!(c[1]["cell_type"], "markdown");
    assert_eq!(c[1]["source"], json!(["## Step 1\n", "Explain."]));
    assert!(c[1]["id"].as_str().is_some_and(|id| !id.is_empty()), "nbformat 4.5 cells get an id");
    // Everything before the insertion point and everything from the next cell on is unchanged.
    let split = before.find("  {\n   \"cell_type\": \"code\",\n   \"execution_count\": 3").unwrap();
    assert!(after.starts_with(&before[..split]));
    assert!(after.ends_with(&before[split..]), "untouched cells, outputs, metadata and indentation survive");
}

#[tokio::test]
async fn n1_edit_by_id_with_old_string_keeps_other_outputs_and_clears_stale_ones() {
    let env = nb_env();
    let out = env
        .call(
            "edit_notebook",
            json!({"target_notebook": "nb.ipynb", "operation": "edit", "cell_id": "calc",
                   "old_string": "x = 40", "new_string": "x = 41"}),
        )
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().contains("-x = 40") && out.text_content().contains("+x = 41"));
    let c = cells(&env);
    assert_eq!(c[1]["source"], json!(["x = 41\n", "print(x + 2)"]));
    assert_eq!(c[1]["outputs"], json!([]), "outputs of the old code are stale");
    assert_eq!(c[1]["metadata"]["tags"], json!(["keep-me"]));
    assert_eq!(c[2]["outputs"][0]["output_type"], "display_data", "untouched cell keeps its outputs");
    assert_eq!(c[2]["execution_count"], 4);
}

#[tokio::test]
async fn n1_edit_whole_source_and_delete_by_index() {
    let env = nb_env();
    let out = env
        .call(
            "edit_notebook",
            json!({"target_notebook": "nb.ipynb", "operation": "edit", "cell_index": 0, "new_source": "# New title"}),
        )
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(cells(&env)[0]["source"], json!(["# New title"]));
    let out =
        env.call("edit_notebook", json!({"target_notebook": "nb.ipynb", "operation": "delete", "cell_index": 2})).await;
    assert!(out.is_success(), "{}", out.text_content());
    let c = cells(&env);
    assert_eq!(c.len(), 2);
    assert_eq!(c[1]["id"], "calc");
    let out =
        env.call("edit_notebook", json!({"target_notebook": "nb.ipynb", "operation": "delete", "cell_index": 7})).await;
    assert!(out.text_content().contains("the notebook has 2 cells"), "{}", out.text_content());
}

#[tokio::test]
async fn n1_languages_come_from_the_kernel_and_unknown_ones_are_refused() {
    let env = nb_env();
    let v: Value = serde_json::from_str(&env.text("nb.ipynb")).unwrap();
    assert_eq!(kodik_edit::notebook::notebook_language(&v).as_deref(), Some("python"));
    let out = env
        .call(
            "edit_notebook",
            json!({"target_notebook": "nb.ipynb", "operation": "insert", "cell_index": 0, "cell_type": "code",
                   "cell_language": "cobol", "new_source": "x"}),
        )
        .await;
    assert!(out.text_content().contains("python, javascript, typescript, r, julia, sql"), "{}", out.text_content());
    let out = env
        .call(
            "edit_notebook",
            json!({"target_notebook": "nb.ipynb", "operation": "insert", "cell_index": 0, "cell_type": "code",
                   "cell_language": "sql", "new_source": "%%sql\nSELECT 1"}),
        )
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(cells(&env)[0]["outputs"], json!([]));
}

#[tokio::test]
async fn n1_invalid_notebook_json_is_a_clear_error_and_never_rewritten() {
    let env = Env::new();
    env.write("bad.ipynb", "{\n \"cells\": [\n");
    let out = env
        .call("edit_notebook", json!({"target_notebook": "bad.ipynb", "operation": "delete", "cell_index": 0}))
        .await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("not valid notebook JSON"), "{}", out.text_content());
    assert_eq!(env.text("bad.ipynb"), "{\n \"cells\": [\n");
    env.write("old.ipynb", "{\"nbformat\": 3, \"worksheets\": []}");
    let out = env
        .call("edit_notebook", json!({"target_notebook": "old.ipynb", "operation": "delete", "cell_index": 0}))
        .await;
    assert!(out.text_content().contains("nbformat 4"), "{}", out.text_content());
}

#[tokio::test]
async fn e13_n1_notebook_edits_take_part_in_checkpoints() {
    let env = nb_env();
    let before = env.bytes("nb.ipynb");
    env.call("edit_notebook", json!({"target_notebook": "nb.ipynb", "operation": "delete", "cell_index": 0})).await;
    assert_ne!(env.bytes("nb.ipynb"), before);
    env.tools.checkpoints().undo_turn();
    assert_eq!(env.bytes("nb.ipynb"), before);
}

/// A notebook not written by Jupyter (ASCII escapes, hand-formatted one-line objects): an edit,
/// an insert and a delete rewrite only the cells they change; every other byte stays, and new
/// text follows the file's escaping (N1).
#[tokio::test]
async fn n1_untouched_parts_of_a_hand_formatted_ascii_notebook_stay_byte_identical() {
    let cell0 = "{\n   \"cell_type\": \"code\",\n   \"execution_count\": 1,\n   \"metadata\": {\"tags\": [\"keep\"]},\n   \
                 \"outputs\": [],\n   \"source\": [\n    \"a = 'caf\\u00e9 \\u2713'\\n\",\n    \"a\"\n   ]\n  }";
    let cell1 = "{\n   \"cell_type\": \"markdown\",\n   \"metadata\": {},\n   \"source\": [\n    \"text\"\n   ]\n  }";
    let head = "{\n \"cells\": [\n  ";
    let tail = "\n ],\n \"custom_field\": {\"a\": 1},\n \"metadata\": {\"kernelspec\": {\"display_name\": \"Python 3\", \
                \"language\": \"python\", \"name\": \"python3\"}},\n \"nbformat\": 4,\n \"nbformat_minor\": 4\n}\n";
    let original = format!("{head}{cell0},\n  {cell1}{tail}");
    let env = Env::new();
    env.write("esc.ipynb", &original);
    env.read("esc.ipynb");
    let call = |args: Value| env.call("edit_notebook", args);

    let out = call(serde_json::json!({"target_notebook": "esc.ipynb", "operation": "edit", "cell_index": 1,
        "old_string": "text", "new_string": "texte ✓"}))
    .await;
    assert!(out.is_success(), "{}", out.text_content());
    let cell1_edited = cell1.replace("\"text\"", "\"texte \\u2713\"");
    assert_eq!(env.text("esc.ipynb"), format!("{head}{cell0},\n  {cell1_edited}{tail}"));

    let out = call(serde_json::json!({"target_notebook": "esc.ipynb", "operation": "insert", "cell_index": 1,
        "cell_type": "markdown", "new_source": "é"}))
    .await;
    assert!(out.is_success(), "{}", out.text_content());
    let inserted =
        "{\n   \"cell_type\": \"markdown\",\n   \"metadata\": {},\n   \"source\": [\n    \"\\u00e9\"\n   ]\n  }";
    assert_eq!(env.text("esc.ipynb"), format!("{head}{cell0},\n  {inserted},\n  {cell1_edited}{tail}"));

    for (at, want) in [(2, format!("{head}{cell0},\n  {inserted}{tail}")), (0, format!("{head}{inserted}{tail}"))] {
        let out =
            call(serde_json::json!({"target_notebook": "esc.ipynb", "operation": "delete", "cell_index": at})).await;
        assert!(out.is_success(), "{}", out.text_content());
        assert_eq!(env.text("esc.ipynb"), want);
    }
}
