//! Argument types of the web tools: `web_fetch` and `web_search` (SPEC W1–W5).

use kodik_core::{Effect, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::{ToolArgs, spec};

/// The specs of `web_fetch` and `web_search`.
pub fn specs() -> Vec<ToolSpec> {
    vec![spec::<WebFetchArgs>(), spec::<WebSearchArgs>()]
}

/// Arguments of `web_fetch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebFetchArgs {
    /// The page to fetch. Must be `https://`; plain `http://` is allowed only for localhost.
    pub url: String,
    /// Words to look for. When given, only the sections of the page whose text holds them are
    /// returned, each with its heading, in page order (the start of the page if none match).
    /// Use it on long documentation pages to save context.
    pub query: Option<String>,
    /// Where to continue a long page: the byte offset of a section, as printed in the outline
    /// or as "next offset" at the end of the previous result (default 0). With `query`, the
    /// search for matching sections starts there.
    #[serde(default, deserialize_with = "lenient_offset")]
    pub offset: Option<u64>,
}

/// An offset given as a JSON integer or as a string holding one (`"offset": "100"`, as models
/// often write numbers), the way `shell`'s `timeout` is read; the schema still says integer.
/// Anything else (negative, fractional, words) is an error naming the field.
fn lenient_offset<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a byte offset (a whole number, 0 or more)")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            u64::try_from(v).map(Some).map_err(|_| E::custom(format!("`offset` must be 0 or more, got {v}")))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
            // 100.0 is a whole number written by a JSON encoder that only has floats.
            if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < u64::MAX as f64 {
                Ok(Some(v as u64))
            } else {
                Err(E::custom(format!("`offset` must be a whole number of bytes, 0 or more, got {v}")))
            }
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            let t = v.trim();
            if t.is_empty() {
                return Ok(None);
            }
            match t.parse::<u64>() {
                Ok(n) => Ok(Some(n)),
                Err(_) => match t.parse::<f64>() {
                    Ok(f) => self.visit_f64(f),
                    Err(_) => Err(E::custom(format!(
                        "`offset` must be a byte offset such as 32757 (as printed in the outline or as \"Next \
                         offset\"), got {v:?}"
                    ))),
                },
            }
        }
    }
    d.deserialize_any(V)
}

impl ToolArgs for WebFetchArgs {
    const NAME: &'static str = "web_fetch";
    const EFFECT: Effect = Effect::Network;
    const DESCRIPTION: &'static str = "Fetch a web page and return its content as Markdown (cut at 32 KB; 30-second \
timeout; pages rendered by JavaScript are loaded in a headless browser). HTTPS only; plain HTTP only for localhost. \
Pass `query` to get only the sections that mention its words, which keeps long pages small. Typical use: web_search \
to discover, then web_fetch the most promising result to read it in full.";
}

/// Arguments of `web_search`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebSearchArgs {
    /// What to search for, as you would type it into a search engine: library and version
    /// names, the exact error message, the API in question.
    pub query: String,
    /// At most this many results (default 10).
    #[schemars(range(min = 1, max = 20))]
    pub limit: Option<u32>,
}

impl ToolArgs for WebSearchArgs {
    const NAME: &'static str = "web_search";
    const EFFECT: Effect = Effect::Network;
    const DESCRIPTION: &'static str = "Search the web for current information you have no link for: latest library \
versions and APIs, unfamiliar error messages, breaking changes, official documentation pages. Returns ranked results \
(title, URL, snippet), usually with a synthesized answer; waits at most 30 seconds. Then read the best result in full \
with web_fetch.";
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<WebFetchArgs, kodik_core::ToolError> {
        kodik_core::parse_args::<WebFetchArgs>("web_fetch", &v)
    }

    #[test]
    fn w2_offset_given_as_a_numeric_string_is_read_as_the_number() {
        let url = "https://example.com/";
        assert_eq!(parse(json!({"url": url, "offset": "100"})).unwrap().offset, Some(100));
        assert_eq!(parse(json!({"url": url, "offset": " 32757 "})).unwrap().offset, Some(32757));
        assert_eq!(parse(json!({"url": url, "offset": 100})).unwrap().offset, Some(100));
        assert_eq!(parse(json!({"url": url, "offset": 100.0})).unwrap().offset, Some(100));
        assert_eq!(parse(json!({"url": url, "offset": null})).unwrap().offset, None);
        assert_eq!(parse(json!({"url": url})).unwrap().offset, None);
        for bad in [json!("ten"), json!(-5), json!("-5"), json!(1.5), json!(true)] {
            let e = parse(json!({"url": url, "offset": bad})).unwrap_err().to_string();
            assert!(e.contains("offset"), "{bad}: {e}");
        }
    }

    #[test]
    fn w2_the_offset_schema_still_says_integer() {
        let schema = serde_json::to_value(schemars::schema_for!(WebFetchArgs)).unwrap();
        let offset = &schema["properties"]["offset"];
        assert!(offset.to_string().contains("integer"), "{offset}");
    }
}
