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
