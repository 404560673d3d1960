//! Tools a server runs only as tasks (`execution.taskSupport: "required"`, MCP 2025-11-25).
//!
//! Such a tool answers every plain `tools/call` with an error ("requires task augmentation"),
//! and kodik cannot call it as a task: rmcp follows a later draft of tasks, and its `Tool` drops
//! the `execution` field while parsing. Offered to the model, it could only ever fail, so the
//! field is read from the raw `tools/list` answers — on a stdio server's output as it is read
//! ([`LineSniffer`]), on a streamable-HTTP server's SSE events ([`SniffingHttp`]) — and such
//! tools are left out of [`McpClient::tools`](crate::McpClient::tools).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// Each tool name of the server's `tools/list` answers read so far, and whether it runs only
/// as a task.
#[derive(Clone, Default)]
pub(crate) struct TaskOnly(Arc<Mutex<HashMap<String, bool>>>);

impl TaskOnly {
    /// Whether the server's last listing of `tool` said it runs only as a task.
    pub(crate) fn required(&self, tool: &str) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(tool).copied().unwrap_or(false)
    }

    /// Reads one JSON-RPC message of the server: when it answers `tools/list` (a result with
    /// `tools`, each with an `inputSchema`, and no `content`), notes each tool's `taskSupport`.
    /// Other messages are not parsed: a `tools/list` answer always names `inputSchema`.
    pub(crate) fn sniff(&self, message: &[u8]) {
        if memchr::memmem::find(message, b"\"inputSchema\"").is_none() {
            return;
        }
        let Ok(value) = serde_json::from_slice::<Value>(message) else { return };
        let Some(result) = value.get("result").filter(|r| r.get("content").is_none()) else { return };
        let Some(tools) = result.get("tools").and_then(Value::as_array) else { return };
        let mut known = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for tool in tools {
            if let Some(name) = tool.get("name").and_then(Value::as_str)
                && tool.get("inputSchema").is_some()
            {
                let support = tool.pointer("/execution/taskSupport").and_then(Value::as_str);
                known.insert(name.to_owned(), support == Some("required"));
            }
        }
    }
}

/// The longest line of a stdio server's output kept for [`TaskOnly::sniff`]: a `tools/list`
/// answer of a hundred tools with large schemas is a few hundred KB; the screenshots and file
/// dumps that tool results carry are not copied past this.
const SNIFF_MAX: usize = 4 << 20;

/// Collects a stdio server's output into lines for [`TaskOnly::sniff`].
pub(crate) struct LineSniffer {
    tasks: TaskOnly,
    line: Vec<u8>,
    /// The current line grew past [`SNIFF_MAX`]: not kept.
    skipping: bool,
}

impl LineSniffer {
    pub(crate) fn new(tasks: TaskOnly) -> Self {
        Self { tasks, line: Vec::new(), skipping: false }
    }

    /// Takes the next bytes read from the server.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', bytes) {
            self.keep(&bytes[start..end]);
            if !self.skipping {
                self.tasks.sniff(&self.line);
            }
            self.line.clear();
            if self.line.capacity() > 1 << 16 {
                self.line = Vec::new();
            }
            self.skipping = false;
            start = end + 1;
        }
        self.keep(&bytes[start..]);
    }

    fn keep(&mut self, part: &[u8]) {
        if self.skipping {
            return;
        }
        if self.line.len() + part.len() > SNIFF_MAX {
            self.skipping = true;
            self.line = Vec::new();
        } else {
            self.line.extend_from_slice(part);
        }
    }
}

/// rmcp's reqwest client for streamable HTTP, reading the `tools/list` answers that come as SSE
/// events (the SDKs' default) for [`TaskOnly::sniff`]. One that comes as a plain JSON body is
/// parsed inside rmcp and not seen: its tools are all offered, as before.
#[derive(Clone)]
pub(crate) struct SniffingHttp {
    pub(crate) client: reqwest::Client,
    pub(crate) tasks: TaskOnly,
}

mod http {
    use std::collections::HashMap;
    use std::sync::Arc;

    use futures_util::StreamExt as _;
    use futures_util::stream::BoxStream;
    use reqwest::header::{HeaderName, HeaderValue};
    use rmcp::model::ClientJsonRpcMessage;
    use rmcp::transport::streamable_http_client::{
        SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
    };

    use super::{SniffingHttp, TaskOnly};

    use sse_stream::Sse;

    fn sniffed(
        stream: BoxStream<'static, Result<Sse, SseError>>,
        tasks: &TaskOnly,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let tasks = tasks.clone();
        stream
            .inspect(move |event| {
                if let Ok(Sse { data: Some(data), .. }) = event {
                    tasks.sniff(data.as_bytes());
                }
            })
            .boxed()
    }

    fn sniffed_response(response: StreamableHttpPostResponse, tasks: &TaskOnly) -> StreamableHttpPostResponse {
        match response {
            StreamableHttpPostResponse::Sse(stream, id) => StreamableHttpPostResponse::Sse(sniffed(stream, tasks), id),
            other => other,
        }
    }

    impl StreamableHttpClient for SniffingHttp {
        type Error = reqwest::Error;

        async fn post_message(
            &self,
            uri: Arc<str>,
            message: ClientJsonRpcMessage,
            session_id: Option<Arc<str>>,
            auth_header: Option<String>,
            custom_headers: HashMap<HeaderName, HeaderValue>,
        ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
            let response = self.client.post_message(uri, message, session_id, auth_header, custom_headers).await?;
            Ok(sniffed_response(response, &self.tasks))
        }

        async fn post_message_with_response_limits(
            &self,
            uri: Arc<str>,
            message: ClientJsonRpcMessage,
            session_id: Option<Arc<str>>,
            auth_header: Option<String>,
            custom_headers: HashMap<HeaderName, HeaderValue>,
            limits: StreamableHttpResponseLimits,
        ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
            let response = self
                .client
                .post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
                .await?;
            Ok(sniffed_response(response, &self.tasks))
        }

        async fn post_message_with_max_sse_event_size(
            &self,
            uri: Arc<str>,
            message: ClientJsonRpcMessage,
            session_id: Option<Arc<str>>,
            auth_header: Option<String>,
            custom_headers: HashMap<HeaderName, HeaderValue>,
            max_sse_event_size: usize,
        ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
            let response = self
                .client
                .post_message_with_max_sse_event_size(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    max_sse_event_size,
                )
                .await?;
            Ok(sniffed_response(response, &self.tasks))
        }

        async fn delete_session(
            &self,
            uri: Arc<str>,
            session_id: Arc<str>,
            auth_header: Option<String>,
            custom_headers: HashMap<HeaderName, HeaderValue>,
        ) -> Result<(), StreamableHttpError<Self::Error>> {
            self.client.delete_session(uri, session_id, auth_header, custom_headers).await
        }

        async fn get_stream(
            &self,
            uri: Arc<str>,
            session_id: Option<Arc<str>>,
            last_event_id: Option<String>,
            auth_header: Option<String>,
            custom_headers: HashMap<HeaderName, HeaderValue>,
        ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
            self.client.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await
        }

        async fn get_stream_with_max_sse_event_size(
            &self,
            uri: Arc<str>,
            session_id: Option<Arc<str>>,
            last_event_id: Option<String>,
            auth_header: Option<String>,
            custom_headers: HashMap<HeaderName, HeaderValue>,
            max_sse_event_size: usize,
        ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
            self.client
                .get_stream_with_max_sse_event_size(
                    uri,
                    session_id,
                    last_event_id,
                    auth_header,
                    custom_headers,
                    max_sse_event_size,
                )
                .await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a8_task_support_is_read_from_tools_list_answers_split_anywhere_and_only_from_them() {
        let tasks = TaskOnly::default();
        let list = br#"{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"research","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},{"name":"quick","inputSchema":{},"execution":{"taskSupport":"optional"}},{"name":"plain","inputSchema":{}}]}}"#;
        let mut sniffer = LineSniffer::new(tasks.clone());
        for part in list.chunks(7) {
            sniffer.feed(part);
        }
        assert!(!tasks.required("research"), "not before the line ends");
        sniffer.feed(b"\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n");
        assert!(tasks.required("research"));
        assert!(!tasks.required("quick") && !tasks.required("plain") && !tasks.required("other"));
        // A tool's result that quotes such a listing changes nothing.
        tasks.sniff(br#"{"id":3,"result":{"content":[],"tools":[{"name":"quick","inputSchema":{},"execution":{"taskSupport":"required"}}]}}"#);
        assert!(!tasks.required("quick"));
        // A later listing without the field wins.
        tasks.sniff(br#"{"id":4,"result":{"tools":[{"name":"research","inputSchema":{}}]}}"#);
        assert!(!tasks.required("research"));
    }
}
