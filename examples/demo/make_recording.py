#!/usr/bin/env python3
"""Writes the recordings that `kodik agent --demo` and the examples (`codemode_agent`,
`browser_agent`, `lsp_agent`) replay.

Each recording is the kodik-model replay format: {"provider", "model", "exchanges": [{"status",
"headers", "body"}]}, one exchange per model request, the body being the raw server-sent events of
an OpenAI Responses stream (`stream: true`) in the shapes OpenAI documents: response.created,
output_item.added / .done, output_text.delta, function_call_arguments.delta / .done,
custom_tool_call_input.delta / .done (freeform tools such as apply_patch), reasoning summaries and
response.completed with its usage.

The sessions are written by hand here, so they can be read and changed as a script; run
`python3 examples/demo/make_recording.py` from the repository root after a change and commit
the JSON it writes. `crates/kodik-cli/tests/agent.rs` checks every call against the tool
plan a gpt-5 request gets in Code mode.
"""

import json
import os

MODEL = "gpt-5-2025-08-07"
HERE = os.path.dirname(os.path.abspath(__file__))


class Response:
    """One streamed response: items are added in order, then `sse()` renders the event stream."""

    def __init__(self, n, usage):
        self.id = f"resp_demo{n:02d}"
        self.n = n
        self.items = []  # (kind, payload)
        self.usage = usage

    def reasoning(self, summary):
        self.items.append(("reasoning", summary))
        return self

    def text(self, text):
        self.items.append(("message", text))
        return self

    def call(self, call_id, name, args):
        self.items.append(("function_call", (call_id, name, json.dumps(args, ensure_ascii=False))))
        return self

    def custom(self, call_id, name, text):
        self.items.append(("custom_tool_call", (call_id, name, text)))
        return self

    def sse(self):
        seq = 0
        out = []

        def ev(kind, **fields):
            nonlocal seq
            data = {"type": kind, "sequence_number": seq, **fields}
            seq += 1
            line = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
            out.append(f"event: {kind}\ndata: {line}\n\n")

        def response(status, output):
            r = {
                "id": self.id,
                "object": "response",
                "created_at": 1764560000 + self.n,
                "status": status,
                "model": MODEL,
                "output": output,
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "usage": None,
            }
            if status == "completed":
                inp, cached, outp, reasoning = self.usage
                r["usage"] = {
                    "input_tokens": inp,
                    "input_tokens_details": {"cached_tokens": cached},
                    "output_tokens": outp,
                    "output_tokens_details": {"reasoning_tokens": reasoning},
                    "total_tokens": inp + outp,
                }
            return r

        ev("response.created", response=response("in_progress", []))
        ev("response.in_progress", response=response("in_progress", []))
        done_items = []
        for idx, (kind, payload) in enumerate(self.items):
            if kind == "reasoning":
                item_id = f"rs_demo{self.n:02d}{idx}"
                ev("response.output_item.added", output_index=idx,
                   item={"id": item_id, "type": "reasoning", "summary": []})
                part = {"type": "summary_text", "text": ""}
                ev("response.reasoning_summary_part.added", item_id=item_id, output_index=idx,
                   summary_index=0, part=part)
                for piece in chunks(payload):
                    ev("response.reasoning_summary_text.delta", item_id=item_id, output_index=idx,
                       summary_index=0, delta=piece)
                ev("response.reasoning_summary_text.done", item_id=item_id, output_index=idx,
                   summary_index=0, text=payload)
                ev("response.reasoning_summary_part.done", item_id=item_id, output_index=idx,
                   summary_index=0, part={"type": "summary_text", "text": payload})
                item = {"id": item_id, "type": "reasoning",
                        "summary": [{"type": "summary_text", "text": payload}]}
            elif kind == "message":
                item_id = f"msg_demo{self.n:02d}{idx}"
                ev("response.output_item.added", output_index=idx,
                   item={"id": item_id, "type": "message", "status": "in_progress",
                         "role": "assistant", "content": []})
                ev("response.content_part.added", item_id=item_id, output_index=idx, content_index=0,
                   part={"type": "output_text", "annotations": [], "text": ""})
                for piece in chunks(payload):
                    ev("response.output_text.delta", item_id=item_id, output_index=idx, content_index=0,
                       delta=piece, logprobs=[])
                ev("response.output_text.done", item_id=item_id, output_index=idx, content_index=0,
                   text=payload, logprobs=[])
                part = {"type": "output_text", "annotations": [], "text": payload}
                ev("response.content_part.done", item_id=item_id, output_index=idx, content_index=0,
                   part=part)
                item = {"id": item_id, "type": "message", "status": "completed", "role": "assistant",
                        "content": [part]}
            elif kind == "function_call":
                call_id, name, args = payload
                item_id = f"fc_demo{self.n:02d}{idx}"
                ev("response.output_item.added", output_index=idx,
                   item={"id": item_id, "type": "function_call", "status": "in_progress",
                         "arguments": "", "call_id": call_id, "name": name})
                for piece in chunks(args):
                    ev("response.function_call_arguments.delta", item_id=item_id, output_index=idx,
                       delta=piece)
                ev("response.function_call_arguments.done", item_id=item_id, output_index=idx,
                   arguments=args)
                item = {"id": item_id, "type": "function_call", "status": "completed",
                        "arguments": args, "call_id": call_id, "name": name}
            else:  # custom_tool_call: a freeform tool's raw text input
                call_id, name, text = payload
                item_id = f"ctc_demo{self.n:02d}{idx}"
                ev("response.output_item.added", output_index=idx,
                   item={"id": item_id, "type": "custom_tool_call", "status": "in_progress",
                         "call_id": call_id, "name": name, "input": ""})
                for piece in chunks(text):
                    ev("response.custom_tool_call_input.delta", item_id=item_id, output_index=idx,
                       delta=piece)
                ev("response.custom_tool_call_input.done", item_id=item_id, output_index=idx,
                   input=text)
                item = {"id": item_id, "type": "custom_tool_call", "status": "completed",
                        "call_id": call_id, "name": name, "input": text}
            ev("response.output_item.done", output_index=idx, item=item)
            done_items.append(item)
        ev("response.completed", response=response("completed", done_items))
        return "".join(out)


def chunks(text, size=24):
    """Splits text the way a stream delivers it: several deltas per item."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def recording(responses):
    return {
        "provider": "openai-responses",
        "model": "gpt-5",
        "exchanges": [
            {"status": 200, "headers": {"content-type": "text/event-stream"}, "body": r.sse()}
            for r in responses
        ],
    }


PATCH = """*** Begin Patch
*** Update File: slugify.sh
@@ slugify() {
     printf '%s\\n' "$1" |
         tr '[:upper:]' '[:lower:]' |
-        sed -e 's/[^a-z0-9]/-/g' -e 's/^-*//' -e 's/-*$//'
+        sed -e 's/[^a-z0-9][^a-z0-9]*/-/g' -e 's/^-*//' -e 's/-*$//'
 }
*** End Patch
"""

CHANGELOG_SCRIPT = """// Note the fix in CHANGELOG.md, then wait for the background test run.
await tools.read_file({ path: "CHANGELOG.md" }); // edit_file wants the file read first
await tools.edit_file({
  path: "CHANGELOG.md",
  edits: [{
    old_string: "## Unreleased\\n",
    new_string: "## Unreleased\\n\\n- Fixed: `slugify` turns a run of separators into one dash (`Rust & Shell` -> `rust-shell`).\\n",
  }],
});
console.log("CHANGELOG.md: entry added under Unreleased");
// The test run went to the background as term-2: collect its output until it ends.
const seen = [];
for (let i = 0; i < 100; i++) {
  const poll = await tools.get_terminal_output({ terminal_id: "term-2" });
  seen.push(...poll.split("\\n").filter((l) => l && !l.startsWith("(no new output") && !l.includes("still running")));
  if (!poll.includes("still running")) break;
  await sleep(200);
}
return seen.join("\\n");
"""

DEMO = [
    Response(1, (2480, 0, 96, 64))
    .reasoning("The user wants a failing test fixed. First find where slugify lives and what files exist.")
    .text("Let me look at the project first.")
    .call("call_grep", "call_tool", {"name": "grep", "arguments": {"pattern": "slugify", "output_mode": "files_with_matches"}})
    .call("call_glob", "call_tool", {"name": "glob", "arguments": {"pattern": "**/*"}}),
    Response(2, (2950, 2432, 88, 32))
    .text("The library is slugify.sh and test.sh runs its tests. I'll read the code and run the tests.")
    .call("call_read", "call_tool", {"name": "read_file", "arguments": {"path": "slugify.sh"}})
    .call("call_test1", "shell", {"command": "sh test.sh", "description": "Run the slugify tests"}),
    Response(3, (3420, 2944, 210, 128))
    .reasoning("`s/[^a-z0-9]/-/g` replaces every separator with its own dash, so runs are not collapsed.")
    .text("One case fails: `Rust & Shell: a tale` gives `rust---shell--a-tale`. The sed expression turns each separator into its own dash instead of one dash per run. Fixing it:")
    .custom("call_patch", "apply_patch", PATCH),
    Response(4, (3710, 3392, 74, 16))
    .text("Patched. Re-running the tests, and finding the changelog's sections meanwhile.")
    .call("call_test2", "shell", {"command": "sh test.sh", "description": "Re-run the slugify tests"})
    .call("call_sections", "call_tool", {"name": "grep", "arguments": {"pattern": "^## ", "path": "CHANGELOG.md", "output_mode": "content"}}),
    Response(5, (4040, 3648, 30, 0))
    .text("The quick cases pass; the slow end-to-end check is still running in the background. A look at its progress:")
    .call("call_poll", "get_terminal_output", {"terminal_id": "term-2"}),
    Response(6, (4290, 3968, 260, 96))
    .text("While it finishes, one script notes the fix in the changelog and waits for the test run.")
    .call("call_script", "codemode", {"code": CHANGELOG_SCRIPT}),
    Response(7, (4720, 4224, 120, 48))
    .text(
        "Fixed. `slugify` replaced every character outside a-z/0-9 with its own dash, so "
        "`Rust & Shell: a tale` became `rust---shell--a-tale`. The sed expression in slugify.sh now turns "
        "a whole run of them into one dash (`s/[^a-z0-9][^a-z0-9]*/-/g`).\n\n"
        "- slugify.sh: runs of separators collapse to one dash\n"
        "- CHANGELOG.md: the fix is noted under Unreleased\n"
        "- `sh test.sh`: all tests pass, the slow end-to-end check included"
    ),
]

CODEMODE_SCRIPT = """// One script, several tools: list the shell scripts and count their lines.
const files = (await tools.glob({ pattern: "**/*.sh" })).split("\\n").filter((l) => l.endsWith(".sh"));
const counts = [];
for (const f of files) {
  const out = await tools.shell({ command: `wc -l < ${f}` });
  counts.push(`${f}: ${parseInt(out, 10)} lines`);
}
return counts.join("\\n");
"""

CODEMODE_EXAMPLE = [
    Response(1, (1900, 0, 120, 40))
    .text("I'll do this in one code-mode script.")
    .call("call_script", "codemode", {"code": CODEMODE_SCRIPT}),
    Response(2, (2150, 1792, 40, 0))
    .text("Counted in one code-mode script (one glob, one shell call per file): the line counts are in its output above."),
]

# The browser example serves its page on a port chosen at run time: `{{URL}}` stands for
# `http://127.0.0.1:PORT` and the example substitutes it before replaying.
BROWSER_EXAMPLE = [
    # One browser call per response: calls of one response may run concurrently, and these
    # depend on each other (a fill must land before the click that submits it).
    Response(1, (2300, 0, 50, 24))
    .text("I'll open the form first.")
    .call("call_open", "browser", {"action": "open", "url": "{{URL}}/", "storage": "ephemeral"}),
    Response(2, (2700, 2176, 30, 0))
    .call("call_snap", "browser", {"action": "snapshot"}),
    Response(3, (2900, 2560, 60, 16))
    .text("The page has a Name field and a Greet button. Filling in the name:")
    .call("call_fill", "browser", {"action": "fill", "target": {"label": "Name"}, "value": "Ada Lovelace"}),
    Response(4, (3000, 2816, 40, 0))
    .call("call_click", "browser", {"action": "click", "target": {"role": "button", "name": "Greet"}}),
    Response(5, (3150, 2944, 40, 0))
    .call("call_wait", "browser", {"action": "wait", "condition": "text", "text": "Hello, Ada Lovelace!", "timeout": 10000}),
    Response(6, (3250, 3072, 50, 0))
    .text("The form answered \"Hello, Ada Lovelace!\" after I filled in the Name field and pressed Greet."),
]

# `lsp` is deferred in every mode (G12), so it goes through call_tool; read_lints is offered directly.
LSP_EXAMPLE = [
    Response(1, (2400, 0, 110, 48))
    .text("I'll ask the language server where `total` is defined and who uses it, and for the project's errors.")
    .call("call_def", "call_tool", {"name": "lsp", "arguments": {"operation": "definition", "path": "app.py", "line": 4, "symbol": "total"}})
    .call("call_refs", "call_tool", {"name": "lsp", "arguments": {"operation": "references", "path": "shop/prices.py", "line": 1, "symbol": "total"}})
    .call("call_lints", "read_lints", {}),
    Response(2, (3000, 2304, 70, 0))
    .text("`total` is defined in shop/prices.py (line 1) and used in app.py (imported on line 1, called on line 4). "
          "pyright reports one error: app.py line 5 assigns a str to `count`, which is declared `int`."),
]


def write(path, responses):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(recording(responses), f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    write(os.path.join(HERE, "recording.json"), DEMO)
    write(os.path.join(HERE, "..", "codemode_agent.recording.json"), CODEMODE_EXAMPLE)
    write(os.path.join(HERE, "..", "browser_agent.recording.json"), BROWSER_EXAMPLE)
    write(os.path.join(HERE, "..", "lsp_agent.recording.json"), LSP_EXAMPLE)
