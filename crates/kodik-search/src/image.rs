//! Images for `read_file` (R5): PNG, JPEG, GIF, WebP up to 20 MB; large ones downscaled.
//!
//! PNG, JPEG and WebP keep their format (WebP is re-encoded losslessly, the encoder `image`
//! 0.25 has); a GIF always goes out as a static PNG of its first frame. An image that needs no
//! downscaling is sent as its original bytes.

use std::io::Cursor;
use std::path::Path;

use image::{DynamicImage, GenericImageView as _, ImageFormat, ImageReader};
use kodik_core::{Content, ToolOutput};
use serde_json::json;

use crate::config::SearchConfig;
use crate::error::SearchError;
use crate::util::human_bytes;

const EXTENSIONS: [&str; 5] = ["png", "jpg", "jpeg", "gif", "webp"];

/// Whether `path` has an image extension `read_file` opens as an image.
pub(crate) fn is_image_path(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)))
}

/// The size to send an image of `w`×`h` at: longer side at most `max_side`; a near-square
/// image (sides within 25%) at most `square_max_pixels`.
pub(crate) fn target_size(w: u32, h: u32, config: &SearchConfig) -> (u32, u32) {
    if w == 0 || h == 0 {
        return (w, h);
    }
    let (wf, hf) = (f64::from(w), f64::from(h));
    let mut scale: f64 = 1.0;
    let longer = wf.max(hf);
    if longer > f64::from(config.image_max_side) {
        scale = f64::from(config.image_max_side) / longer;
    }
    let near_square = longer / wf.min(hf) <= 1.25;
    let pixels = wf * hf;
    let limit = config.image_square_max_pixels as f64;
    if near_square && pixels * scale * scale > limit {
        scale = scale.min((limit / pixels).sqrt());
    }
    if scale >= 1.0 {
        return (w, h);
    }
    (((wf * scale).floor() as u32).max(1), ((hf * scale).floor() as u32).max(1))
}

/// Decodes, downscales where needed, and returns the image with a line describing it.
pub(crate) fn render(shown: &str, bytes: &[u8], config: &SearchConfig) -> Result<ToolOutput, SearchError> {
    let invalid = |reason: String| SearchError::InvalidImage { path: shown.to_string(), reason };
    let reader = ImageReader::new(Cursor::new(bytes)).with_guessed_format().map_err(|e| invalid(e.to_string()))?;
    let format = match reader.format() {
        Some(f @ (ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::Gif | ImageFormat::WebP)) => f,
        Some(other) => return Err(invalid(format!("its content is {other:?}, which is not supported"))),
        None => return Err(invalid("its content is not a known image format".into())),
    };
    // For a GIF this decodes the first frame only.
    let img = reader.decode().map_err(|e| invalid(e.to_string()))?;
    let (w, h) = img.dimensions();
    let (tw, th) = target_size(w, h, config);
    let resized = (tw, th) != (w, h);
    let name = format_name(format);

    let (out, sent_format) = match (format, resized) {
        (ImageFormat::Gif, _) => {
            let frame = if resized { img.resize_exact(tw, th, image::imageops::FilterType::Triangle) } else { img };
            (encode(shown, &frame, ImageFormat::Png)?, ImageFormat::Png)
        }
        (f, false) => (bytes.to_vec(), f),
        (f, true) => {
            let small = img.resize_exact(tw, th, image::imageops::FilterType::Triangle);
            (encode(shown, &small, f)?, f)
        }
    };
    let mime = sent_format.to_mime_type();

    let mut text = format!("Image `{shown}`: {name}, {w}×{h} px, {}.", human_bytes(bytes.len() as u64));
    if resized {
        text.push_str(&format!(" Downscaled to {tw}×{th} px for sending; the original size is {w}×{h} px."));
    }
    if format == ImageFormat::Gif {
        text.push_str(" Sent as a static PNG of the GIF's first frame.");
    }
    let meta = json!({
        "path": shown,
        "image": {
            "format": name,
            "width": w,
            "height": h,
            "sent_width": tw,
            "sent_height": th,
            "downscaled": resized,
            "mime_type": mime,
        }
    });
    Ok(ToolOutput { content: vec![Content::text(text), Content::image(&out, mime)], ..ToolOutput::text("") }
        .with_meta(meta))
}

fn encode(shown: &str, img: &DynamicImage, format: ImageFormat) -> Result<Vec<u8>, SearchError> {
    let mut buf = Cursor::new(Vec::new());
    let result = if format == ImageFormat::Jpeg {
        img.write_with_encoder(image::codecs::jpeg::JpegEncoder::new_with_quality(&mut buf, 85))
    } else {
        img.write_to(&mut buf, format)
    };
    result.map_err(|e| SearchError::ImageEncode { path: shown.to_string(), reason: e.to_string() })?;
    Ok(buf.into_inner())
}

fn format_name(f: ImageFormat) -> &'static str {
    match f {
        ImageFormat::Png => "PNG",
        ImageFormat::Jpeg => "JPEG",
        ImageFormat::Gif => "GIF",
        ImageFormat::WebP => "WebP",
        _ => "image",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r5_downscale_rules() {
        let c = SearchConfig::default();
        assert_eq!(target_size(800, 600, &c), (800, 600), "small images stay");
        assert_eq!(target_size(4096, 1024, &c), (2048, 512), "long side capped at 2048");
        let (w, h) = target_size(1500, 1400, &c);
        assert!(u64::from(w) * u64::from(h) <= c.image_square_max_pixels, "{w}x{h}");
        assert!(w > 1000 && h > 900);
        assert_eq!(target_size(2000, 500, &c), (2000, 500), "wide, not near-square, under 2048");
    }
}
