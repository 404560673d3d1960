//! Snapshot, refs, strict targets, screenshots and the acting actions against real Chromium
//! (B3, B4, B11, B12). One browser for the whole file: the CI machine has 2 cores.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{Routes, harness, has_image, ref_of, serve};
use serde_json::json;

const FORM: &str = r#"<!doctype html><html><head><title>Login</title></head><body>
<h1>Sign in</h1>
<form id="f" onsubmit="event.preventDefault(); fetch('/api').then(r => r.text()).then(t => {
  document.getElementById('msg').textContent = 'Welcome, ' + document.getElementById('email').value + ' (' + t + ')'; });">
  <label for="email">Email</label><input id="email" type="email">
  <input id="pw" type="password" placeholder="Password">
  <select id="plan" aria-label="Plan"><option value="free">Free</option><option value="pro">Pro</option></select>
  <label><input type="checkbox" id="terms"> I agree</label>
  <button type="submit">Sign in</button>
</form>
<p id="msg"></p>
<ul><li>Alice <button onclick="this.parentNode.remove()">Delete</button></li>
    <li>Bob <button onclick="this.parentNode.remove()">Delete</button></li></ul>
<fancy-card></fancy-card>
<iframe name="inner" src="/frame" title="Inner"></iframe>
<a href="/other">Other page</a>
<div id="log"></div>
<div id="clicks" tabindex="0" ondblclick="this.textContent = 'double'" onclick="if (event.ctrlKey) this.textContent = 'ctrl'"
  oncontextmenu="event.preventDefault(); this.textContent = 'right'">click zone</div>
<div id="box" style="height:80px; overflow:auto"><div style="height:600px">tall</div></div>
<img src="/missing.png" alt="broken">
<div id="card" draggable="true" ondragstart="event.dataTransfer.setData('text/plain', 'card-7')">Card</div>
<div id="bin" ondragover="event.preventDefault()" ondrop="event.preventDefault(); this.textContent = 'dropped ' + event.dataTransfer.getData('text/plain')">Bin</div>
<script>
  customElements.define('fancy-card', class extends HTMLElement {
    constructor() { super(); const r = this.attachShadow({mode: 'open'});
      r.innerHTML = '<button id="sb">Shadow action</button><span id="ss"></span>';
      r.getElementById('sb').onclick = () => { r.getElementById('ss').textContent = 'shadow clicked'; }; }
  });
  document.getElementById('email').addEventListener('keydown', (e) => { if (e.key === 'Enter') document.getElementById('log').textContent = 'enter pressed'; });
  console.log('ready', {user: 'ada', n: 1});
  setTimeout(() => { throw new Error('late boom'); }, 0);
</script></body></html>"#;

const FRAME: &str = r#"<!doctype html><body><button onclick="document.body.insertAdjacentHTML('beforeend', '<p>frame clicked</p>')">Frame button</button></body>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_b4_b11_b12_snapshot_refs_strict_targets_screenshots_and_actions() {
    let mut routes = Routes::new();
    routes.insert("/form", ("text/html", FORM.to_string(), ""));
    routes.insert("/frame", ("text/html", FRAME.to_string(), ""));
    routes.insert("/api", ("text/plain", "ok".to_string(), ""));
    routes.insert("/other", ("text/html", "<title>Other</title><h2>Elsewhere</h2>".to_string(), ""));
    let base = serve(routes).await;
    let h = harness();

    // A field that does not belong to the action is refused before anything starts.
    let e = h.err(json!({"action": "snapshot", "url": "x"})).await;
    assert!(e.contains("not used by action `snapshot`"), "{e}");
    // Before `open` there is no tab.
    let e = h.err(json!({"action": "snapshot"})).await;
    assert!(e.contains("no tab is open"), "{e}");

    // B3: the snapshot shows fields, buttons, shadow DOM and same-origin frame content with refs.
    let snap = h.ok(json!({"action": "open", "url": format!("{base}/form")})).await;
    assert!(snap.contains("Title: Login"), "{snap}");
    assert!(snap.contains(r#"heading "Sign in" [level=1]"#), "{snap}");
    assert!(snap.contains(r#"textbox "Email" [ref="#), "{snap}");
    assert!(snap.contains(r#"[placeholder="Password"]"#) || snap.contains(r#"textbox "Password""#), "{snap}");
    assert!(snap.contains(r#"button "Shadow action" [ref="#), "shadow root content: {snap}");
    assert!(snap.contains(r#"button "Frame button" [ref="#), "frame content: {snap}");
    assert!(snap.contains(r#"link "Other page" [ref="#) && snap.contains("[url=/other]"), "{snap}");
    assert!(snap.contains(r#"combobox "Plan""#) && snap.contains(r#""Free""#), "{snap}");
    let email_ref = ref_of(&snap, r#"textbox "Email""#);

    // B4: an ambiguous target fails and lists what it found, with refs to pick from.
    let e = h.err(json!({"action": "click", "target": {"role": "button", "name": "Delete"}})).await;
    assert!(e.contains("2 elements match role=button name=\"Delete\""), "{e}");
    assert_eq!(e.matches("[ref=").count(), 2, "{e}");
    // Zero matches fail too, listing the elements of that role.
    let e = h.err(json!({"action": "click", "target": {"role": "button", "name": "Launch rockets"}})).await;
    assert!(e.contains("no element matches") && e.contains(r#"button "Sign in""#), "{e}");
    let e = h.err(json!({"action": "click", "target": {"ref": "e999"}})).await;
    assert!(e.contains("take a new snapshot"), "{e}");

    // Acting by ref, label, placeholder, role; the result shows what changed.
    h.ok(json!({"action": "fill", "target": {"ref": email_ref}, "value": "ada@example.com"})).await;
    h.ok(json!({"action": "fill", "target": {"placeholder": "Password"}, "value": "hunter2"})).await;
    let sel = h.ok(json!({"action": "select", "target": {"label": "Plan"}, "values": ["Pro"]})).await;
    assert!(sel.contains(r#"combobox "Plan""#) && sel.contains(r#": "Pro""#), "{sel}");
    let chk = h.ok(json!({"action": "check", "target": {"label": "I agree"}})).await;
    assert!(chk.contains(r#"checkbox "I agree" [checked]"#), "{chk}");
    h.ok(json!({"action": "click", "target": {"role": "button", "name": "Sign in"}})).await;
    let w = h.ok(json!({"action": "wait", "condition": "text", "text": "Welcome, ada@example.com (ok)"})).await;
    assert!(w.contains("is on the page"), "{w}");
    let pressed = h.ok(json!({"action": "press", "key": "Enter", "target": {"label": "Email"}})).await;
    assert!(pressed.contains("enter pressed"), "{pressed}");

    // Double, right and modified clicks (schema checks the modifier names before anything runs).
    let r = h.ok(json!({"action": "click", "target": {"css": "#clicks"}, "double": true})).await;
    assert!(r.contains("Double-clicked") && r.contains(": double"), "{r}");
    let r = h.ok(json!({"action": "click", "target": {"css": "#clicks"}, "button": "right"})).await;
    assert!(r.contains(": right"), "{r}");
    let r = h.ok(json!({"action": "click", "target": {"css": "#clicks"}, "modifiers": ["Control"]})).await;
    assert!(r.contains("with Control held") && r.contains(": ctrl"), "{r}");
    let e = h.err(json!({"action": "click", "target": {"css": "#clicks"}, "modifiers": ["Hyper"]})).await;
    assert!(e.contains("`Hyper` is not a modifier key"), "{e}");

    // Shadow DOM and frames are reachable by strict locators.
    let s = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Shadow action"}})).await;
    assert!(s.contains("shadow clicked"), "{s}");
    let f = h.ok(json!({"action": "click", "target": {"text": "Frame button", "frame": "inner"}})).await;
    assert!(f.contains("frame clicked"), "{f}");
    let e = h.err(json!({"action": "click", "target": {"text": "Frame button", "frame": "nope"}})).await;
    assert!(e.contains("no frame matches") && e.contains("inner"), "{e}");

    // Removing an element makes its ref stale.
    let snap = h.ok(json!({"action": "snapshot"})).await;
    let bob_delete = snap.lines().filter(|l| l.contains(r#"button "Delete""#)).nth(1).unwrap().to_string();
    let bob_ref = ref_of(&bob_delete, "Delete");
    h.ok(json!({"action": "click", "target": {"ref": bob_ref}})).await;
    let e = h.err(json!({"action": "click", "target": {"ref": bob_ref}})).await;
    assert!(e.contains(&bob_ref) && e.contains("take a new snapshot"), "{e}");
    // Now one Delete is left and the same locator is no longer ambiguous.
    h.ok(json!({"action": "hover", "target": {"role": "button", "name": "Delete"}})).await;

    // Screenshots: image content and an id; coordinates only against the latest one.
    let shot = h.call(json!({"action": "screenshot"})).await;
    assert!(shot.is_success() && has_image(&shot), "{}", shot.text_content());
    let sid = shot.meta["screenshot_id"].as_str().unwrap().to_string();
    let el = h.call(json!({"action": "screenshot", "target": {"role": "heading", "name": "Sign in"}})).await;
    assert!(el.is_success() && has_image(&el), "{}", el.text_content());
    let full = h.call(json!({"action": "screenshot", "full_page": true})).await;
    assert!(full.is_success() && full.text_content().contains("full page"));
    let shot2 = h.call(json!({"action": "screenshot"})).await;
    let e = h.err(json!({"action": "click", "target": {"x": 10.0, "y": 10.0, "screenshot_id": sid}})).await;
    assert!(e.contains("not the latest"), "{e}");
    let sid2 = shot2.meta["screenshot_id"].as_str().unwrap().to_string();
    h.ok(json!({"action": "click", "target": {"x": 5.0, "y": 5.0, "screenshot_id": sid2}})).await;

    // HTML5 drag and drop carries its DataTransfer to the drop target.
    let d = h.ok(json!({"action": "drag", "target": {"css": "#card"}, "to": {"css": "#bin"}})).await;
    assert!(d.contains("(HTML5 drag and drop)"), "{d}");
    h.ok(json!({"action": "wait", "condition": "text", "text": "dropped card-7", "timeout": 3000})).await;

    // Scroll a nested container; inspect an element.
    let sc = h.ok(json!({"action": "scroll", "direction": "down", "amount": 100, "target": {"css": "#box"}})).await;
    assert!(sc.contains("by [0,100]"), "{sc}");
    let ins = h.ok(json!({"action": "inspect", "target": {"label": "Email"}})).await;
    assert!(ins.contains(r#"<input id="email" type="email">"#) && ins.contains("display:"), "{ins}");
    h.ok(json!({"action": "resize", "breakpoint": "mobile"})).await;
    let vw = h.ok(json!({"action": "eval", "expression": "location.href + ' ' + (2 + 3) * 2"})).await;
    assert!(vw.ends_with("/form 10\""), "{vw}");

    // B12: eval runs no arbitrary JavaScript.
    let e = h.err(json!({"action": "eval", "expression": "fetch('/steal')"})).await;
    assert!(e.contains("refuses calls"), "{e}");
    let e = h.err(json!({"action": "eval", "expression": "document.title = 'x'"})).await;
    assert!(e.contains("refuses assignments"), "{e}");
    let v = h.ok(json!({"action": "eval", "expression": "element.value", "target": {"label": "Email"}})).await;
    assert!(v.contains("ada@example.com"), "{v}");

    // The page's clipboard, through its own approval.
    h.ok(json!({"action": "write_clipboard", "text": "copied text ✓"})).await;
    let c = h.ok(json!({"action": "read_clipboard"})).await;
    assert!(c.contains("copied text ✓"), "{c}");

    // Console objects arrive with their values; diagnostics has the page error and the 404.
    let c = h.ok(json!({"action": "console"})).await;
    assert!(c.contains(r#"[log] ready {"user":"ada","n":1}"#), "{c}");
    let d = h.ok(json!({"action": "diagnostics"})).await;
    assert!(d.contains("late boom"), "{d}");
    assert!(d.contains("404") && d.contains("missing.png"), "{d}");
    h.ok(json!({"action": "clear_console"})).await;
    let c = h.ok(json!({"action": "console"})).await;
    assert!(c.contains("0 entries"), "{c}");

    // B11: the audit trail has every action, typed values redacted.
    let a = h.ok(json!({"action": "activity"})).await;
    assert!(a.contains("fill") && a.contains("[7 characters, redacted]"), "{a}");
    assert!(!a.contains("hunter2"), "{a}");

    // B4: after navigating, refs of the old page are refused.
    let nav = h.ok(json!({"action": "navigate", "url": format!("{base}/other")})).await;
    assert!(nav.contains(r#"heading "Elsewhere""#), "{nav}");
    let e = h.err(json!({"action": "fill", "target": {"ref": email_ref}, "value": "x"})).await;
    assert!(e.contains("take a new snapshot"), "{e}");
    let back = h.ok(json!({"action": "back"})).await;
    assert!(back.contains("Title: Login"), "{back}");

    let dir = h.session.profile_dir().await.unwrap();
    h.session.shutdown().await;
    assert_no_process_uses(&dir);
}

/// No process is left running with `dir` on its command line (the browser and its helpers).
pub fn assert_no_process_uses(dir: &std::path::Path) {
    let needle = dir.display().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let mut left = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
                let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
                let zombie = stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z'));
                if cmd.contains(&needle) && !zombie {
                    left.push(cmd);
                }
            }
        }
        if left.is_empty() {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "processes left after shutdown: {left:?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
