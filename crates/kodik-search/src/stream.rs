//! [`LateDecoder`]: the reader a big file whose first MiB is UTF-8 (or plain ASCII) is searched
//! through, so that text in another encoding later in it is still decoded (GR3).

use std::io::Read;

use encoding_rs::{Decoder, Encoding, UTF_8};

/// Reads a file that starts as UTF-8 (plain ASCII reads the same in every legacy code page):
/// bytes pass through unchanged up to the line of the first one that is not UTF-8; the bytes
/// from there (up to `sniff` of them) decide the encoding as a whole-file read decides it — a
/// stray bad byte keeps UTF-8 — and the rest is decoded to UTF-8 on the fly. Before, a log whose
/// Windows-1251 lines came after its first MiB was searched as UTF-8, and `Привет` in it was not
/// found.
pub(crate) struct LateDecoder<R> {
    inner: R,
    /// `files.encoding`, for [`kodik_core::text::decode`].
    fallback: Option<&'static Encoding>,
    /// How many bytes past the first non-ASCII one decide the encoding.
    sniff: usize,
    /// `None` before the decision; then `Some(None)` for UTF-8 (passed through as bytes) or
    /// `Some(Some(decoder))` for another encoding.
    decided: Option<Option<Decoder>>,
    /// Bytes read from `inner` and not given out (or decoded) yet, from `raw_at`.
    raw: Vec<u8>,
    raw_at: usize,
    /// Before the decision: how many bytes from `raw_at` are known to pass through as they are.
    passable: usize,
    /// Decoded UTF-8 not given out yet, from `out_at`.
    out: Vec<u8>,
    out_at: usize,
    /// Whether `inner` is exhausted.
    eof: bool,
    /// Whether the decoder has been given the end (it then holds nothing back).
    flushed: bool,
}

impl<R: Read> LateDecoder<R> {
    pub(crate) fn new(inner: R, fallback: Option<&'static Encoding>, sniff: usize) -> Self {
        Self {
            inner,
            fallback,
            sniff: sniff.max(1),
            decided: None,
            raw: Vec::new(),
            raw_at: 0,
            passable: 0,
            out: Vec::new(),
            out_at: 0,
            eof: false,
            flushed: false,
        }
    }

    /// The encoding decided, once decided (UTF-8 when the file is ASCII to its end).
    #[cfg(test)]
    pub(crate) fn encoding(&self) -> Option<&'static Encoding> {
        self.decided.as_ref().map(|d| d.as_ref().map_or(UTF_8, Decoder::encoding))
    }

    /// Reads more of `inner` into `raw` (compacting it first); `false` at the end.
    fn fill(&mut self, want: usize) -> std::io::Result<bool> {
        if self.raw_at > 0 {
            self.raw.drain(..self.raw_at);
            self.raw_at = 0;
        }
        let start = self.raw.len();
        self.raw.resize(start + want.max(1), 0);
        let n = loop {
            match self.inner.read(&mut self.raw[start..]) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                r => break r,
            }
        };
        self.raw.truncate(start + *n.as_ref().unwrap_or(&0));
        Ok(n? > 0)
    }

    /// Decides the encoding from `raw[raw_at..]`, which starts at the line of the first byte
    /// that is not UTF-8.
    fn decide(&mut self) -> std::io::Result<()> {
        while self.raw.len() - self.raw_at < self.sniff {
            let want = self.sniff - (self.raw.len() - self.raw_at);
            if !self.fill(want)? {
                break;
            }
        }
        let window = &self.raw[self.raw_at..];
        let window = &window[..window.len().min(self.sniff)];
        let window = crate::grep::without_cut_character(window);
        // A NUL or UTF-16 guess here is no reason to stop searching what began as text.
        let enc = match kodik_core::text::decode(window, self.fallback) {
            Ok(d) if d.format.encoding.is_ascii_compatible() => d.format.encoding,
            _ => UTF_8,
        };
        self.decided = Some((enc != UTF_8).then(|| enc.new_decoder_without_bom_handling()));
        Ok(())
    }
}

/// Where to stop passing bytes through before text that is not UTF-8, found `valid` bytes into
/// `bytes`: the start of its line, so the encoding decided from there decodes the whole line.
fn line_start(bytes: &[u8], valid: usize) -> usize {
    bytes[..valid].iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1)
}

impl<R: Read> LateDecoder<R> {
    /// Before the decision, with bytes kept back in `raw`: gives out what is still UTF-8, or
    /// decides. `None` when it decided (the caller reads on).
    fn undecided_kept(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        loop {
            let pending = &self.raw[self.raw_at..];
            if self.passable > 0 {
                // Judged already: handing it out in pieces may cut a character, which judged
                // again from the cut would look invalid.
                let n = self.passable.min(buf.len());
                buf[..n].copy_from_slice(&pending[..n]);
                self.raw_at += n;
                self.passable -= n;
                return Ok(Some(n));
            }
            let give = match std::str::from_utf8(pending) {
                Ok(_) => pending.len(),
                // A character cut by the read: read on before judging it.
                Err(e) if e.error_len().is_none() && !self.eof => {
                    if e.valid_up_to() > 0 {
                        e.valid_up_to()
                    } else {
                        if !self.fill(64 << 10)? {
                            self.eof = true;
                        }
                        continue;
                    }
                }
                Err(e) => line_start(pending, e.valid_up_to()),
            };
            if give == 0 {
                if pending.is_empty() {
                    return Ok(Some(0));
                }
                self.decide()?;
                return Ok(None);
            }
            self.passable = give;
        }
    }
}

impl<R: Read> Read for LateDecoder<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.out_at < self.out.len() {
                let n = buf.len().min(self.out.len() - self.out_at);
                buf[..n].copy_from_slice(&self.out[self.out_at..self.out_at + n]);
                self.out_at += n;
                return Ok(n);
            }
            if self.decided.is_none() {
                if self.raw_at < self.raw.len() {
                    match self.undecided_kept(buf)? {
                        Some(n) => return Ok(n),
                        None => continue,
                    }
                }
                // Straight into the caller's buffer: UTF-8 costs one validation (the standard
                // library's, optimised even in a debug build).
                let n = loop {
                    match self.inner.read(buf) {
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        r => break r?,
                    }
                };
                let give = match std::str::from_utf8(&buf[..n]) {
                    Ok(_) => return Ok(n),
                    Err(e) if e.error_len().is_none() => e.valid_up_to(),
                    Err(e) => line_start(&buf[..n], e.valid_up_to()),
                };
                self.raw.clear();
                self.raw_at = 0;
                self.raw.extend_from_slice(&buf[give..n]);
                if give > 0 {
                    return Ok(give);
                }
                continue;
            }
            if matches!(self.decided, Some(None)) && self.raw_at == self.raw.len() {
                // UTF-8 after all: the rest passes straight through.
                return self.inner.read(buf);
            }
            if self.raw_at == self.raw.len() && !self.eof && !self.fill(buf.len().max(64 << 10))? {
                self.eof = true;
            }
            let pending = &self.raw[self.raw_at..];
            match &mut self.decided {
                Some(None) | None => {
                    let n = pending.len().min(buf.len());
                    buf[..n].copy_from_slice(&pending[..n]);
                    self.raw_at += n;
                    return Ok(n);
                }
                Some(Some(_)) if self.flushed => return Ok(0),
                Some(Some(decoder)) => {
                    let last = self.eof;
                    let cap = decoder.max_utf8_buffer_length(pending.len()).unwrap_or(pending.len() * 3 + 16);
                    self.out.clear();
                    self.out_at = 0;
                    self.out.resize(cap.max(16), 0);
                    let (_, read, written, _) = decoder.decode_to_utf8(pending, &mut self.out, last);
                    self.flushed = last && read == pending.len();
                    self.out.truncate(written);
                    self.raw_at += read;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may unwrap (common.md)

    use super::*;

    fn read_all(bytes: &[u8], sniff: usize, chunk: usize) -> (Vec<u8>, &'static Encoding) {
        let mut r = LateDecoder::new(bytes, None, sniff);
        let mut out = Vec::new();
        let mut buf = vec![0; chunk];
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        (out, r.encoding().unwrap_or(UTF_8))
    }

    const SIZES: [(usize, usize); 5] = [(64, 7), (64, 1), (1 << 20, 1), (1 << 20, 8192), (64, 64 << 10)];

    /// Where `got` first differs from `want`, with a little of each from there; `None` if equal.
    fn diff(got: &[u8], want: &[u8]) -> Option<String> {
        let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        (got != want).then(|| {
            let show = |b: &[u8]| String::from_utf8_lossy(&b[at.min(b.len())..(at + 40).min(b.len())]).into_owned();
            format!("at {at} of {}/{}: got {:?}, want {:?}", got.len(), want.len(), show(got), show(want))
        })
    }

    #[test]
    fn gr3_text_after_a_utf8_start_is_decoded_in_its_own_encoding_whatever_the_read_sizes() {
        for start in ["ascii line\n", "строка в utf-8\n"] {
            let head = start.repeat(500);
            let tail = "Привет из 1251, это строка на русском языке\nend\n";
            let (cp1251, _, _) = encoding_rs::WINDOWS_1251.encode(tail);
            let bytes = [head.as_bytes(), &cp1251].concat();
            for (sniff, chunk) in SIZES {
                let (got, enc) = read_all(&bytes, sniff, chunk);
                assert_eq!(diff(&got, format!("{head}{tail}").as_bytes()), None, "sniff {sniff}, chunk {chunk}");
                assert_eq!(enc, encoding_rs::WINDOWS_1251, "sniff {sniff}, chunk {chunk}");
            }
        }
    }

    #[test]
    fn gr3_utf8_and_utf8_with_one_bad_byte_pass_through_unchanged() {
        let text = format!("{}Привет utf8, ещё строка по-русски\n", "ascii line\n".repeat(500));
        let mut damaged = text.clone().into_bytes();
        // In the Cyrillic line: its valid characters outvote the bad byte, as in a whole read.
        let at = damaged.len() - 12;
        damaged.splice(at..at, [0xE9]);
        for (sniff, chunk) in SIZES {
            for (what, bytes) in [("clean", text.as_bytes()), ("damaged", &damaged[..]), ("empty", b"")] {
                let (got, enc) = read_all(bytes, sniff, chunk);
                assert_eq!(diff(&got, bytes), None, "{what}: sniff {sniff}, chunk {chunk}");
                assert_eq!(enc, UTF_8, "{what}: sniff {sniff}, chunk {chunk}");
            }
        }
    }
}
