//! A mounted server's images as model providers take them (R5, as `read_file` sends its own):
//! PNG, JPEG, GIF or WebP, valid base64, the longer side at most 2048 px. Providers refuse
//! anything else with HTTP 400 (Anthropic: SVG, bad base64, a side over 8000 px), and the image
//! stays in the conversation's history, so every later request, `--last` included, would fail
//! the same way. An image kodik cannot send becomes a note saying why.

use std::io::Cursor;

use base64::Engine as _;
use image::{GenericImageView as _, ImageFormat, ImageReader};
use kodik_core::Content;

/// The longest side sent (R5).
const MAX_SIDE: u32 = 2048;

/// `data` (base64, declared as `mime_type`) as content a model provider accepts: the image as it
/// is when it already fits; downscaled (GIF: its first frame, as PNG) when a side is over
/// [`MAX_SIDE`]; else a note.
pub(crate) fn model_image(data: String, mime_type: String) -> Content {
    let not_shown =
        |why: &str| Content::text(format!("[image {mime_type}, {} bytes of base64, not shown: {why}]", data.len()));
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data.trim()) else {
        return not_shown("its data is not valid base64");
    };
    let Ok(reader) = ImageReader::new(Cursor::new(&bytes)).with_guessed_format() else {
        return not_shown("it could not be read");
    };
    let format = match reader.format() {
        Some(f @ (ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::Gif | ImageFormat::WebP)) => f,
        _ => return not_shown("only PNG, JPEG, GIF and WebP images can be shown to the model"),
    };
    let Ok((w, h)) = reader.into_dimensions() else {
        return not_shown("it is not a valid image");
    };
    // Named by what the bytes are, not by what the server declared.
    let actual = format.to_mime_type();
    if w.max(h) <= MAX_SIDE {
        return Content::Image { data, mime_type: actual.to_owned() };
    }
    let decoded = ImageReader::new(Cursor::new(&bytes)).with_guessed_format().ok().and_then(|r| r.decode().ok());
    let Some(img) = decoded else {
        return not_shown("it is not a valid image");
    };
    let small = img.resize(MAX_SIDE, MAX_SIDE, image::imageops::FilterType::Triangle);
    let out_format = if format == ImageFormat::Jpeg { ImageFormat::Jpeg } else { ImageFormat::Png };
    let mut out = Cursor::new(Vec::new());
    let small = if out_format == ImageFormat::Jpeg { image::DynamicImage::ImageRgb8(small.to_rgb8()) } else { small };
    if small.write_to(&mut out, out_format).is_err() {
        return not_shown("it could not be downscaled");
    }
    let (sw, sh) = small.dimensions();
    tracing::debug!(from = %format!("{w}x{h}"), to = %format!("{sw}x{sh}"), "MCP image downscaled");
    Content::Image {
        data: base64::engine::general_purpose::STANDARD.encode(out.into_inner()),
        mime_type: out_format.to_mime_type().to_owned(),
    }
}
