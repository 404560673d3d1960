//! An incremental Server-Sent Events parser (WHATWG "event stream interpretation").
//!
//! Bytes arrive in arbitrary chunks; [`SseParser::feed`] hands every complete event to a callback
//! as borrowed `(event, data)` strings, so the hot path copies each data line once. Lines may end
//! in `\n`, `\r\n` or a lone `\r`, also when the `\r` and `\n` arrive in different chunks.

/// One dispatched event, borrowed from the parser's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` field, empty when the event had none (the spec's default type is `message`).
    pub event: &'a str,
    /// The `data:` lines joined with `\n`.
    pub data: &'a str,
}

/// Why the byte stream is not an event stream.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SseError {
    /// A field value is not UTF-8.
    #[error("the event stream is not UTF-8 near byte {offset}")]
    NotUtf8 {
        /// Offset of the offending line in the whole stream.
        offset: u64,
    },
}

/// Incremental parser state: the unfinished line and the event being built.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of a line that has not ended yet.
    partial: Vec<u8>,
    /// The current event's type.
    event: String,
    /// The current event's data (lines joined with `\n`, no trailing newline).
    data: String,
    /// Whether the current event has at least one `data` field (empty data lines count).
    has_data: bool,
    /// The previous chunk ended in `\r`: a leading `\n` of the next chunk belongs to it.
    skip_lf: bool,
    /// Bytes consumed so far, for error positions.
    offset: u64,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `chunk`, calling `on_event` for each complete event. The callback's error stops
    /// parsing and is returned; the parser must not be fed again after an error.
    pub fn feed<E>(&mut self, chunk: &[u8], mut on_event: impl FnMut(SseEvent<'_>) -> Result<(), E>) -> Result<(), E>
    where
        E: From<SseError>,
    {
        let mut rest = chunk;
        if self.skip_lf {
            self.skip_lf = false;
            if let Some((&b'\n', tail)) = rest.split_first() {
                rest = tail;
                self.offset += 1;
            }
        }
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', rest) {
            let line_end = pos;
            let mut next = pos + 1;
            if rest[pos] == b'\r' {
                match rest.get(pos + 1) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            let line_offset = self.offset;
            if self.partial.is_empty() {
                self.line(&rest[..line_end], line_offset, &mut on_event)?;
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(&rest[..line_end]);
                let result = self.line(&line, line_offset, &mut on_event);
                line.clear();
                self.partial = line;
                result?;
            }
            self.offset += next as u64;
            rest = &rest[next..];
        }
        self.partial.extend_from_slice(rest);
        Ok(())
    }

    /// Whether bytes of an unfinished event are buffered (a stream that ends here was cut off).
    pub fn has_pending(&self) -> bool {
        !self.partial.is_empty() || self.has_data
    }

    fn line<E>(
        &mut self,
        line: &[u8],
        offset: u64,
        on_event: &mut impl FnMut(SseEvent<'_>) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<SseError>,
    {
        if line.is_empty() {
            if self.has_data {
                let result = on_event(SseEvent { event: &self.event, data: &self.data });
                self.data.clear();
                self.has_data = false;
                self.event.clear();
                return result;
            }
            self.event.clear();
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                let value = std::str::from_utf8(value).map_err(|_| SseError::NotUtf8 { offset })?;
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            b"event" => {
                let value = std::str::from_utf8(value).map_err(|_| SseError::NotUtf8 { offset })?;
                self.event.clear();
                self.event.push_str(value);
            }
            // `id` and `retry` steer browser reconnection, which a model response never uses.
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_chunks(input: &[u8], size: usize) -> Vec<(String, String)> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in input.chunks(size) {
            parser
                .feed(chunk, |e| {
                    out.push((e.event.to_owned(), e.data.to_owned()));
                    Ok::<(), SseError>(())
                })
                .unwrap();
        }
        out
    }

    #[test]
    fn every_chunking_and_line_ending_gives_the_same_events() {
        let text = "event: a\ndata: {\"x\":1}\n\n: comment\ndata:two\ndata:  lines\n\nid: 7\nretry: 5\ndata\n\nevent: only\n\ndata: last\n\n";
        let expected = vec![
            ("a".to_owned(), "{\"x\":1}".to_owned()),
            (String::new(), "two\n lines".to_owned()),
            (String::new(), String::new()),
            (String::new(), "last".to_owned()),
        ];
        for ending in ["\n", "\r\n", "\r"] {
            let input = text.replace('\n', ending);
            for size in [1, 2, 3, 7, 64, input.len()] {
                assert_eq!(parse_in_chunks(input.as_bytes(), size), expected, "ending {ending:?} chunk {size}");
            }
        }
    }

    #[test]
    fn an_unfinished_event_is_reported_pending_and_bad_utf8_is_an_error() {
        let mut parser = SseParser::new();
        parser.feed(b"data: half", |_| Ok::<(), SseError>(())).unwrap();
        assert!(parser.has_pending());
        let mut parser = SseParser::new();
        let err = parser.feed(b"data: ok\n\ndata: \xff\xfe\n\n", |_| Ok::<(), SseError>(())).unwrap_err();
        assert_eq!(err, SseError::NotUtf8 { offset: 10 });
    }
}
