//! Coordinates read off screenshots, and text and keys typed into fields, against real Chromium
//! (B3, B4): what the model is told it clicked or typed is what the page got.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{Routes, harness, serve};
use serde_json::json;

/// A page without a viewport meta tag: a phone lays it out 980 px wide and shows it scaled down.
const WIDE: &str = r#"<!doctype html><title>Right</title><body style="margin:0;width:980px">
<button style="position:absolute;left:600px;top:100px;width:300px;height:100px" onclick="out.textContent='RIGHT clicked'">Right</button>
<button style="position:absolute;left:200px;top:20px;width:200px;height:60px" onclick="out.textContent='LEFT clicked'">Left</button>
<div id="out" style="position:absolute;top:300px">none</div></body>"#;

/// B3, B4: on a phone viewport the screenshot is the scaled page the device shows; a point read
/// off that image clicks what the image shows there, and the result says the image's scale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_b4_a_point_read_off_a_scaled_phone_screenshot_clicks_what_the_image_shows() {
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", WIDE.to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    h.ok(json!({"action": "resize", "breakpoint": "mobile"})).await;
    let shot = h.call(json!({"action": "screenshot"})).await;
    let s = shot.text_content();
    assert!(shot.is_success(), "{s}");
    assert!(s.contains("390×844 px image"), "the text must give the image's own size: {s}");
    let sid = shot.meta["screenshot_id"].as_str().unwrap().to_string();
    // In the 390 px image the Right button spans x 240–358, y 40–80.
    let c = h.ok(json!({"action": "click", "target": {"x": 300, "y": 60, "screenshot_id": sid}})).await;
    assert!(c.contains("RIGHT clicked"), "{c}");
    let e = h.err(json!({"action": "click", "target": {"x": 600, "y": 60, "screenshot_id": sid}})).await;
    assert!(e.contains("outside screenshot"), "{e}");
    h.session.shutdown().await;
}

/// A rich-text editor in the manner of Lexical or Slate: it keeps its own model of the text, fed
/// by `beforeinput`, and renders the model back over any other change of its DOM.
const EDITOR: &str = r#"<!doctype html><title>Editor</title>
<div id="ed" contenteditable="true" role="textbox" aria-label="Message" style="border:1px solid;min-height:30px"></div>
<button onclick="out.textContent='sent: '+JSON.stringify(model)">Send</button><div id="out">-</div>
<div id="plain" contenteditable="true" role="textbox" aria-label="Notes">old notes</div>
<script>
let model=''; const ed=document.getElementById('ed'); let rendering=false;
function render(){ rendering=true; ed.textContent=model; rendering=false; }
ed.addEventListener('beforeinput', e => { e.preventDefault();
  if (e.inputType==='insertText'||e.inputType==='insertReplacementText') { const sel=getSelection();
    const all=sel.toString()===ed.textContent&&ed.textContent.length>0; model=(all?'':model)+(e.data||''); }
  else if (e.inputType.startsWith('delete')) { model=model.slice(0,-1) }
  render(); });
new MutationObserver(() => { if (!rendering&&ed.textContent!==model) render() }).observe(ed, {childList:true,characterData:true,subtree:true});
</script>"#;

/// B3: `fill` on a rich-text editor types the text as a user's input arrives, so the editor's
/// own model gets it (and sends it); a plain contenteditable has its text replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_fill_reaches_a_rich_text_editor_that_keeps_its_own_model() {
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", EDITOR.to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    let f = h.ok(json!({"action": "fill", "target": {"label": "Message"}, "value": "hello team"})).await;
    assert!(f.contains("Filled"), "{f}");
    let c = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Send"}})).await;
    assert!(c.contains(r#"sent: "hello team""#), "{c}");
    // Filling again replaces the text, as select-all and typing does.
    h.ok(json!({"action": "fill", "target": {"label": "Message"}, "value": "second"})).await;
    let c = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Send"}})).await;
    assert!(c.contains(r#"sent: "second""#), "{c}");
    h.ok(json!({"action": "fill", "target": {"label": "Notes"}, "value": "new notes"})).await;
    let s = h.ok(json!({"action": "snapshot"})).await;
    assert!(s.contains("new notes") && !s.contains("old notes"), "{s}");
    h.session.shutdown().await;
}

const DATES: &str = r#"<!doctype html><title>Dates</title>
<label for="d">Date</label><input type="date" id="d">
<label for="n">Num</label><input type="number" id="n">
<label for="r">Range</label><input type="range" id="r" min=0 max=100>
<label for="t">Notes</label><textarea id="t"></textarea>"#;

/// B3: a value the field does not keep (a date in another format, letters in a number field, a
/// range value out of bounds) is an error that says the format and what the field holds, and
/// leaves the field as it was; values the field keeps are filled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_fill_with_a_value_the_field_rejects_fails_and_says_the_format() {
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", DATES.to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    let e = h.err(json!({"action": "fill", "target": {"label": "Date"}, "value": "02/29/2024"})).await;
    assert!(e.contains("did not take \"02/29/2024\"") && e.contains("YYYY-MM-DD"), "{e}");
    let e = h.err(json!({"action": "fill", "target": {"label": "Num"}, "value": "abc"})).await;
    assert!(e.contains("did not take \"abc\"") && e.contains("number"), "{e}");
    h.ok(json!({"action": "fill", "target": {"label": "Range"}, "value": "40"})).await;
    let e = h.err(json!({"action": "fill", "target": {"label": "Range"}, "value": "150"})).await;
    assert!(e.contains("0 to 100") && e.contains("would hold \"100\"") && e.contains("(\"40\")"), "{e}");
    h.ok(json!({"action": "fill", "target": {"label": "Date"}, "value": "2024-02-29"})).await;
    h.ok(json!({"action": "fill", "target": {"label": "Notes"}, "value": "line one\r\nline two"})).await;
    let v = h.ok(json!({"action": "eval", "expression": "element.value", "target": {"label": "Range"}})).await;
    assert!(v.contains("\"40\""), "{v}");
    let v = h.ok(json!({"action": "eval", "expression": "element.value", "target": {"label": "Date"}})).await;
    assert!(v.contains("2024-02-29"), "{v}");
    h.session.shutdown().await;
}

/// B4: a point of a screenshot taken before the page scrolled is refused (it shows another place
/// now); a screenshot after the scroll is good for points again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b4_a_screenshot_taken_before_a_scroll_is_refused_for_points() {
    let buttons: String = (0..30)
        .map(|i| {
            format!(
                "<button style=\"display:block;height:100px;width:300px\" onclick=\"out.textContent='B{i}'\">B{i}</button>"
            )
        })
        .collect();
    let page = format!(
        "<!doctype html><title>SC</title><div id=\"out\" style=\"position:fixed;right:0;top:0\">-</div>{buttons}"
    );
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", page, ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    let shot = h.call(json!({"action": "screenshot"})).await;
    let sid = shot.meta["screenshot_id"].as_str().unwrap().to_string();
    h.ok(json!({"action": "scroll", "direction": "down", "amount": 1000})).await;
    let e = h.err(json!({"action": "click", "target": {"x": 100, "y": 60, "screenshot_id": sid}})).await;
    assert!(e.contains("scrolled since screenshot") && e.contains("take a new screenshot"), "{e}");
    let shot = h.call(json!({"action": "screenshot"})).await;
    let sid = shot.meta["screenshot_id"].as_str().unwrap().to_string();
    let c = h.ok(json!({"action": "click", "target": {"x": 100, "y": 60, "screenshot_id": sid}})).await;
    assert!(c.contains("text: B10"), "{c}");
    h.session.shutdown().await;
}

/// B3: `press` with Shift types the shifted character, as a user's keyboard does (`Shift+b` typed
/// "b", `Shift+1` typed "1"); the page sees the shifted key with Shift held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_press_with_shift_types_the_shifted_character() {
    const KEYS: &str = r#"<!doctype html><title>Keys</title>
<input id="k" aria-label="Keys" value="hello world" onkeydown="kd.textContent+='['+event.key+(event.shiftKey?'+shift':'')+']'"><div id="kd">log:</div>"#;
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", KEYS.to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    h.ok(json!({"action": "click", "target": {"label": "Keys"}})).await;
    h.ok(json!({"action": "press", "key": "End"})).await;
    h.ok(json!({"action": "press", "key": "Shift+b"})).await;
    let p = h.ok(json!({"action": "press", "key": "Shift+1"})).await;
    assert!(p.contains("hello worldB!"), "{p}");
    assert!(p.contains("[B+shift][!+shift]"), "{p}");
    h.session.shutdown().await;
}

/// B3: small results say the right thing: a relative URL gets the full one on the current
/// page's origin (it suggested `http:///x`), a javascript: URL is named as such, one character is
/// "1 character", and `select` on a custom combobox says how to choose in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_relative_and_javascript_urls_one_character_and_custom_comboboxes_are_said_right() {
    const PAGE: &str = r#"<!doctype html><title>Small</title><label for="n">Name</label><input id="n">
<div role="combobox" aria-label="Fruit" aria-expanded="false" tabindex="0">Apple</div>"#;
    let mut routes = Routes::new();
    routes.insert("/a/page", ("text/html", PAGE.to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/a/page")})).await;
    let e = h.err(json!({"action": "navigate", "url": "/popup.html"})).await;
    assert!(e.contains(&format!("relative URL; give a full one with scheme and host, e.g. {base}/popup.html")), "{e}");
    let e = h.err(json!({"action": "navigate", "url": "javascript:alert(1)"})).await;
    assert!(e.contains("is a javascript: URL, which the browser does not open"), "{e}");
    let f = h.ok(json!({"action": "fill", "target": {"label": "Name"}, "value": "A"})).await;
    assert!(f.contains("with 1 character."), "{f}");
    let e =
        h.err(json!({"action": "select", "target": {"role": "combobox", "name": "Fruit"}, "values": ["Pear"]})).await;
    assert!(e.contains("is not a select element; it is a custom widget: click it, then click the option"), "{e}");
    h.session.shutdown().await;
}
