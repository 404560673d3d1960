#!/usr/bin/env python3
"""kodik's `browser` tool vs Playwright MCP, in one run, over the same MCP stdio protocol.

Both servers drive Debian's Chromium. The flow (open page, snapshot, fill two fields, click,
wait for text, screenshot) runs once to warm up (browser launch included, reported apart) and
then RUNS times; the median wall time per flow is compared. Then both snapshot a page of 2 000
elements and the characters of the answer (what the model pays for) are compared.

  python3 benches/compare_browser.py [RUNS]

Needs: `kodik` built (`cargo build -p kodik-cli`; KODIK=path overrides), Node 20 + npm (installs
@playwright/mcp into $CARGO_TARGET_DIR/playwright-mcp or /tmp/kodik-playwright-mcp, never into
the repository), Debian's chromium (/usr/lib/chromium/chromium).
"""

import http.server
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CHROMIUM = os.environ.get("CHROME", "/usr/lib/chromium/chromium")
PW_VERSION = "0.0.83"

FORM = """<!doctype html><title>Signup</title><h1>Sign up</h1>
<label for=n>Name</label><input id=n> <label for=e>Email</label><input id=e type=email>
<button onclick="setTimeout(() => document.getElementById('o').textContent = 'Welcome ' + document.getElementById('n').value, 50)">Create account</button>
<p id=o></p>"""


def big_page():
    rows = []
    # 400 rows × 5 elements (row, link, text, input, button) = 2 000 elements.
    for i in range(400):
        rows.append(
            f"<li>Item {i} <a href='/item/{i}'>details {i}</a> <input aria-label='qty {i}' value='{i % 7}'>"
            f" <button>Add {i}</button></li>"
        )
    return "<!doctype html><title>Catalog</title><h1>Catalog</h1><ul>" + "".join(rows) + "</ul>"


PAGES = {"/form": FORM, "/big": big_page()}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = PAGES.get(self.path.split("?")[0], "not found").encode()
        self.send_response(200 if self.path.split("?")[0] in PAGES else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


class Mcp:
    """A minimal MCP stdio client: initialize, then tools/call."""

    def __init__(self, argv, cwd=None, env=None):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  cwd=cwd, env=env, text=True, bufsize=1)
        self.n = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "compare_browser", "version": "1"}})
        self.notify("notifications/initialized")

    def notify(self, method, params=None):
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method, "params": params or {}}) + "\n")
        self.p.stdin.flush()

    def request(self, method, params):
        self.n += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}) + "\n")
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError(f"server closed during {method}")
            msg = json.loads(line)
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def call(self, name, args):
        res = self.request("tools/call", {"name": name, "arguments": args})
        text = "".join(c.get("text", "") for c in res.get("content", []) if c.get("type") == "text")
        if res.get("isError"):
            raise RuntimeError(f"{name} {args}: {text[:500]}")
        return text

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=10)
        except Exception:
            self.p.kill()


def ref(snapshot, needle):
    for line in snapshot.splitlines():
        if needle in line and "[ref=" in line:
            return re.search(r"\[ref=([^\]]+)\]", line).group(1)
    raise RuntimeError(f"no ref for {needle!r} in:\n{snapshot[:2000]}")


def kodik_flow(m, base, first):
    m.call("browser", {"action": "open" if first else "navigate", "url": base + "/form"})
    snap = m.call("browser", {"action": "snapshot"})
    m.call("browser", {"action": "fill", "target": {"ref": ref(snap, 'textbox "Name"')}, "value": "Ada"})
    m.call("browser", {"action": "fill", "target": {"ref": ref(snap, 'textbox "Email"')}, "value": "ada@example.com"})
    m.call("browser", {"action": "click", "target": {"ref": ref(snap, 'button "Create account"')}})
    m.call("browser", {"action": "wait", "condition": "text", "text": "Welcome Ada"})
    m.call("browser", {"action": "screenshot"})


def pw_flow(m, base, first):
    m.call("browser_navigate", {"url": base + "/form"})
    snap = m.call("browser_snapshot", {})
    m.call("browser_type", {"element": "Name", "target": ref(snap, 'textbox "Name"'), "text": "Ada"})
    m.call("browser_type", {"element": "Email", "target": ref(snap, 'textbox "Email"'), "text": "ada@example.com"})
    m.call("browser_click", {"element": "Create account", "target": ref(snap, 'button "Create account"')})
    m.call("browser_wait_for", {"text": "Welcome Ada"})
    m.call("browser_take_screenshot", {"scale": "css"})


def measure(name, m, flow, base, runs):
    t = time.perf_counter()
    flow(m, base, True)
    first = time.perf_counter() - t
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        flow(m, base, False)
        times.append(time.perf_counter() - t)
    return first, statistics.median(times), times


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    kodik = os.environ.get("KODIK", os.path.join(target, "debug", "kodik"))
    if not os.path.exists(kodik):
        sys.exit(f"no kodik binary at {kodik}: run cargo build -p kodik-cli (or set KODIK)")
    if not os.path.exists(CHROMIUM):
        sys.exit(f"no Chromium at {CHROMIUM}: apt-get install chromium (or set CHROME)")
    pw_dir = os.path.join(target, "playwright-mcp") if os.path.isdir(target) else "/tmp/kodik-playwright-mcp"
    pw_cli = os.path.join(pw_dir, "node_modules", "@playwright", "mcp", "cli.js")
    if not os.path.exists(pw_cli):
        os.makedirs(pw_dir, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", pw_dir, f"@playwright/mcp@{PW_VERSION}"],
                       check=True, stdout=subprocess.DEVNULL)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    ws = tempfile.mkdtemp(prefix="kodik-bench-ws-")
    cache = tempfile.mkdtemp(prefix="kodik-bench-cache-")
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    results = {}
    snap_chars = {}
    k = Mcp([kodik, "serve", "--workspace", ws], env=env)
    try:
        results["kodik"] = measure("kodik", k, kodik_flow, base, runs)
        k.call("browser", {"action": "navigate", "url": base + "/big"})
        snap_chars["kodik"] = len(k.call("browser", {"action": "snapshot"}))
    finally:
        k.close()
    pw_args = ["node", pw_cli, "--headless", "--isolated", "--executable-path", CHROMIUM]
    if os.geteuid() == 0:
        pw_args.append("--no-sandbox")
    p = Mcp(pw_args, cwd=ws)
    try:
        results["playwright"] = measure("playwright", p, pw_flow, base, runs)
        p.call("browser_navigate", {"url": base + "/big"})
        snap_chars["playwright"] = len(p.call("browser_snapshot", {}))
    finally:
        p.close()
    shutil.rmtree(ws, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)

    kf, km, kt = results["kodik"]
    pf, pm, pt = results["playwright"]
    print(f"flow (open, snapshot, fill ×2, click, wait for text, screenshot), median of {runs}:")
    print(f"  kodik      {km * 1000:7.1f} ms   (first flow incl. launch {kf * 1000:.0f} ms; runs {[round(t * 1000) for t in kt]})")
    print(f"  playwright {pm * 1000:7.1f} ms   (first flow incl. launch {pf * 1000:.0f} ms; runs {[round(t * 1000) for t in pt]})")
    print(f"  ratio kodik/playwright: {km / pm:.2f}× per flow, {kf / pf:.2f}× first flow (target ≤ 0.8×)")
    print("snapshot of a 2 000-element page, characters of the answer:")
    print(f"  kodik {snap_chars['kodik']}, playwright {snap_chars['playwright']}: "
          f"{snap_chars['kodik'] / snap_chars['playwright']:.2f}× (target ≤ 1.0×)")


if __name__ == "__main__":
    main()
