//! Behaviour tests of kodik-search's `images` (SPEC IDs in the test names).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (common.md)
mod common;

use base64::Engine as _;
use common::Env;
use image::{DynamicImage, GenericImageView as _, ImageFormat, RgbaImage};
use kodik_core::{Content, ToolOutput};
use serde_json::json;

fn picture(w: u32, h: u32) -> DynamicImage {
    DynamicImage::ImageRgba8(RgbaImage::from_fn(w, h, |x, y| image::Rgba([(x % 256) as u8, (y % 256) as u8, 90, 255])))
}

fn encoded(img: &DynamicImage, f: ImageFormat) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    if f == ImageFormat::Jpeg {
        DynamicImage::ImageRgb8(img.to_rgb8()).write_to(&mut buf, f).unwrap();
    } else {
        img.write_to(&mut buf, f).unwrap();
    }
    buf.into_inner()
}

fn sent(out: &ToolOutput) -> (Vec<u8>, String) {
    let img = out.content.iter().find_map(|c| match c {
        Content::Image { data, mime_type } => Some((data.clone(), mime_type.clone())),
        _ => None,
    });
    let (data, mime) = img.unwrap_or_else(|| panic!("no image in {}", out.text_content()));
    (base64::engine::general_purpose::STANDARD.decode(data).unwrap(), mime)
}

#[tokio::test]
async fn r5_large_png_is_downscaled_and_original_size_reported() {
    let env = Env::new();
    env.write("shot.png", encoded(&picture(2100, 700), ImageFormat::Png));
    let out = env.call("read_file", json!({"path": "shot.png"})).await;
    assert!(out.is_success(), "{}", out.text_content());
    let (bytes, mime) = sent(&out);
    assert_eq!(mime, "image/png");
    let img = image::load_from_memory_with_format(&bytes, ImageFormat::Png).unwrap();
    assert_eq!(img.dimensions(), (2048, 682));
    let t = out.text_content();
    assert!(t.contains("2100×700") && t.contains("Downscaled to 2048×682"), "{t}");
    assert_eq!(out.meta["image"]["width"], 2100);
}

#[tokio::test]
async fn r5_large_near_square_image_is_downscaled_small_image_sent_unchanged() {
    let env = Env::new();
    env.write("sq.jpg", encoded(&picture(1200, 1100), ImageFormat::Jpeg));
    let out = env.call("read_file", json!({"path": "sq.jpg"})).await;
    let (bytes, mime) = sent(&out);
    assert_eq!(mime, "image/jpeg", "JPEG keeps its format");
    let (w, h) = image::load_from_memory_with_format(&bytes, ImageFormat::Jpeg).unwrap().dimensions();
    assert!(w < 1200 && h < 1100 && u64::from(w * h) <= 1_150_000, "{w}x{h}");
    assert!(out.text_content().contains("original size is 1200×1100"));

    let small = encoded(&picture(300, 200), ImageFormat::Png);
    env.write("small.png", &small);
    let out = env.call("read_file", json!({"path": "small.png"})).await;
    assert_eq!(sent(&out).0, small, "an image within limits goes out byte for byte");
    assert!(!out.text_content().contains("Downscaled"));
}

#[tokio::test]
async fn r5_webp_keeps_its_format_and_gif_becomes_a_static_png() {
    let env = Env::new();
    env.write("big.webp", encoded(&picture(2100, 500), ImageFormat::WebP));
    let out = env.call("read_file", json!({"path": "big.webp"})).await;
    let (bytes, mime) = sent(&out);
    assert_eq!(mime, "image/webp");
    assert_eq!(image::load_from_memory_with_format(&bytes, ImageFormat::WebP).unwrap().dimensions(), (2048, 487));

    env.write("anim.gif", encoded(&picture(40, 30), ImageFormat::Gif));
    let out = env.call("read_file", json!({"path": "anim.gif"})).await;
    let (bytes, mime) = sent(&out);
    assert_eq!(mime, "image/png");
    assert_eq!(image::load_from_memory_with_format(&bytes, ImageFormat::Png).unwrap().dimensions(), (40, 30));
    assert!(out.text_content().contains("static PNG"), "{}", out.text_content());
}

#[tokio::test]
async fn r5_not_an_image_and_too_large_are_errors() {
    let env = Env::new();
    env.write("fake.png", "this is text, not a picture\n");
    let e = env.err("read_file", json!({"path": "fake.png"})).await;
    assert!(e.contains("not a valid PNG, JPEG, GIF or WebP image"), "{e}");
    let mut truncated = encoded(&picture(64, 64), ImageFormat::Png);
    truncated.truncate(60);
    env.write("broken.png", truncated);
    let e = env.err("read_file", json!({"path": "broken.png"})).await;
    assert!(e.contains("not a valid"), "{e}");
    let f = std::fs::File::create(env.root().join("huge.png")).unwrap();
    f.set_len(21 * 1024 * 1024).unwrap();
    let e = env.err("read_file", json!({"path": "huge.png"})).await;
    assert!(e.contains("images are read up to 20971520 bytes"), "{e}");
}
