//! Cross-origin iframes (B3, B4) against real Chromium: one served from `localhost` (another
//! site, so site isolation runs it in its own process) and one from another port of 127.0.0.1
//! (same site, other origin, same process). Both are entered by snapshots, refs and locators.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{Routes, harness, has_image, ref_of, serve};
use serde_json::json;

const PAY: &str = r#"<!doctype html><title>Pay</title><body>
<input placeholder="Card number" id="card">
<button onclick="document.getElementById('out').textContent = 'Paid with ' + document.getElementById('card').value">Pay</button>
<button onclick="this.remove()">Remove</button><button onclick="this.remove()">Remove</button>
<p id="out"></p>
<script>document.getElementById('card').addEventListener('keydown', (e) => {
  if (e.key === 'Enter') document.getElementById('out').textContent = 'Enter in ' + location.port; });</script>
</body>"#;

fn top(pay: &str, same: &str) -> String {
    format!(
        r#"<!doctype html><title>Shop</title><h1>Checkout</h1>
<iframe name="pay" title="Payment" src="{pay}/pay" style="margin: 30px; border: 4px solid #000; width: 420px; height: 180px"></iframe>
<div style="height: 900px">spacer</div>
<iframe name="same" title="Coupon" src="{same}/pay" style="width: 420px; height: 180px"></iframe>"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_b4_cross_origin_frames_are_snapshotted_and_acted_in_by_ref_and_locator() {
    let mut frame_routes = Routes::new();
    frame_routes.insert("/pay", ("text/html", PAY.to_string(), ""));
    let other_site = serve(frame_routes.clone()).await.replace("127.0.0.1", "localhost");
    let same_site = serve(frame_routes).await;
    let mut routes = Routes::new();
    routes.insert("/shop", ("text/html", top(&other_site, &same_site), ""));
    routes.insert("/plain", ("text/html", "<title>Plain</title><p>no frames</p>".to_string(), ""));
    let base = serve(routes).await;
    let h = harness();

    // The snapshot enters both frames; their refs name the frame they are in.
    let snap = h.ok(json!({"action": "open", "url": format!("{base}/shop")})).await;
    assert!(!snap.contains("not inspected"), "{snap}");
    assert!(
        snap.contains(&format!("[url={other_site}/pay]")) && snap.contains(&format!("[url={same_site}/pay]")),
        "{snap}"
    );
    let other_part = &snap[snap.find(&format!("[url={other_site}/pay]")).unwrap()..];
    let card = ref_of(other_part, "Card number");
    let pay = ref_of(other_part, "button \"Pay\"");
    assert!(card.starts_with('f') && card.contains('e'), "{card}");
    assert_eq!(card.split('e').next(), pay.split('e').next(), "refs of one frame share its key");

    // Fill and a real mouse click by ref inside the out-of-process frame.
    h.ok(json!({"action": "fill", "target": {"ref": card}, "value": "4242"})).await;
    let r = h.ok(json!({"action": "click", "target": {"ref": pay}})).await;
    assert!(r.contains("Paid with 4242"), "{r}");

    // Strict locators inside a named cross-origin frame: unique works, two matches fail and list both.
    let e = h.err(json!({"action": "click", "target": {"frame": "pay", "role": "button", "name": "Remove"}})).await;
    assert!(e.contains("2 elements match") && e.contains("Remove"), "{e}");
    let e = h.err(json!({"action": "click", "target": {"frame": "pay", "role": "button", "name": "Refund"}})).await;
    assert!(e.contains("no element matches"), "{e}");

    // The same-site frame further down: the page scrolls to it, keys go to its focused field.
    h.ok(json!({"action": "fill", "target": {"frame": "Coupon", "placeholder": "Card number"}, "value": "77"})).await;
    let port = same_site.rsplit(':').next().unwrap();
    let r = h
        .ok(json!({"action": "press", "key": "Enter", "target": {"frame": "same", "placeholder": "Card number"}}))
        .await;
    assert!(r.contains(&format!("Enter in {port}")), "{r}");
    let r = h.ok(json!({"action": "click", "target": {"frame": "same", "role": "button", "name": "Pay"}})).await;
    assert!(r.contains("Paid with 77"), "{r}");

    // An element screenshot inside the frame, and eval reading a field there by ref.
    let snap = h.ok(json!({"action": "snapshot"})).await;
    let other_part = &snap[snap.find(&format!("[url={other_site}/pay]")).unwrap()..];
    let card = ref_of(other_part, "Card number");
    let out = h.call(json!({"action": "screenshot", "target": {"ref": card}})).await;
    assert!(out.is_success() && has_image(&out), "{}", out.text_content());
    let v = h.ok(json!({"action": "eval", "expression": "element.value", "target": {"ref": card}})).await;
    assert!(v.contains("4242"), "{v}");

    // A login saved for the shop is never typed into the payment frame of another origin.
    let cid = h.session.credentials().add(&base, "Shop login", "ada", "pw-frame-secret");
    let e = h
        .err(json!({"action": "fill_credential", "credential_id": cid, "target": {"frame": "pay", "css": "body"}}))
        .await;
    assert!(e.contains("in a frame of") && !e.contains("pw-frame-secret"), "{e}");

    // After the page navigates, a frame ref is stale, with a message to take a new snapshot.
    h.ok(json!({"action": "navigate", "url": format!("{base}/plain")})).await;
    let e = h.err(json!({"action": "click", "target": {"ref": card}})).await;
    assert!(e.contains("snapshot"), "{e}");
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b4_a_frame_is_named_by_the_key_the_snapshot_shows_and_a_miss_points_into_it() {
    let mut frame_routes = Routes::new();
    frame_routes.insert("/pay", ("text/html", PAY.to_string(), ""));
    let other_site = serve(frame_routes).await.replace("127.0.0.1", "localhost");
    let mut routes = Routes::new();
    routes.insert(
        "/one",
        ("text/html", format!(r#"<!doctype html><title>One</title><h1>outer</h1><iframe title="cross" src="{other_site}/pay"></iframe>"#), ""),
    );
    let base = serve(routes).await;
    let h = harness();
    let s = h.ok(json!({"action": "open", "url": format!("{base}/one")})).await;
    let key =
        s.split("[frame=").nth(1).and_then(|r| r.split(']').next()).expect("a frame key in the snapshot").to_string();
    // A locator without frame misses, and says where the element is.
    let e = h.err(json!({"action": "click", "target": {"role": "button", "name": "Pay"}})).await;
    assert!(e.contains(&format!("inside frame {key}")) && e.contains(&format!("\"frame\": \"{key}\"")), "{e}");
    // The key the snapshot prints is accepted as `frame`.
    h.ok(json!({"action": "fill", "target": {"placeholder": "Card number", "frame": key}, "value": "4242"})).await;
    let r = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Pay", "frame": key}})).await;
    assert!(r.contains("Paid with 4242"), "{r}");
    h.session.shutdown().await;
}

/// B4: a locator without `frame` that matches in the top page (or its same-origin frame) and in a
/// cross-origin frame is ambiguous and lists both, as two matches on one page are (it silently
/// acted on the same-origin one); `frame` or a ref then picks one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b4_a_locator_matching_in_a_cross_origin_frame_and_the_page_is_ambiguous() {
    let mut frame_routes = Routes::new();
    frame_routes.insert("/pay", ("text/html", PAY.to_string(), ""));
    let other_site = serve(frame_routes).await.replace("127.0.0.1", "localhost");
    let mut routes = Routes::new();
    routes.insert("/pay", ("text/html", PAY.to_string(), ""));
    routes.insert(
        "/two",
        (
            "text/html",
            format!(
                r#"<!doctype html><title>Two</title><h1>outer</h1><iframe title="cross" src="{other_site}/pay"></iframe><iframe name="same" src="/pay"></iframe>"#
            ),
            "",
        ),
    );
    let base = serve(routes).await;
    let h = harness();
    let s = h.ok(json!({"action": "open", "url": format!("{base}/two")})).await;
    let key =
        s.split("[frame=").nth(1).and_then(|r| r.split(']').next()).expect("a frame key in the snapshot").to_string();
    let e = h.err(json!({"action": "fill", "target": {"placeholder": "Card number"}, "value": "which"})).await;
    assert!(e.contains("2 elements match") && e.contains(&format!("(in frame {key})")), "{e}");
    let e = h.err(json!({"action": "click", "target": {"role": "button", "name": "Pay"}})).await;
    assert!(e.contains("2 elements match"), "{e}");
    // Nothing was filled by the refused call; `frame` picks one.
    let r = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Pay", "frame": key}})).await;
    assert!(r.contains("Paid with") && !r.contains("Paid with which"), "{r}");
    h.session.shutdown().await;
}
