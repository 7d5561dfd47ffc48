//! The stdio framing in front of rmcp: every request gets an answer, and one
//! readable log line.
//!
//! rmcp reads one JSON-RPC message per line and drops a line it cannot decode
//! without replying. For a truncated line that is right (it is not a message), but a
//! complete request that `serde_json` refuses — a lone surrogate escape such as
//! `"\ud800"`, or nesting deeper than its recursion limit — then hangs its client
//! forever, and `tools/call` whose `params` is `null`, an array or a string is
//! answered "method not found". This layer sits between stdin/stdout and rmcp:
//!
//! - a complete JSON object that cannot be decoded (or is not UTF-8) is answered here
//!   with its own `id`: `-32700` (parse error) for a bad string or bad bytes,
//!   `-32600` (invalid request) for
//!   nesting too deep; a line that is not a complete JSON object is still dropped
//!   (a peer that echoes errors cannot start a storm);
//! - `tools/call` without an object `params`, without a string `name` or with
//!   `arguments` that are not an object is answered `-32602` (invalid params);
//! - a request whose `jsonrpc` is not `"2.0"` is answered `-32600`, and one whose
//!   `params` is neither an object nor an array `-32602`, with its `id` (rmcp's
//!   answer had none);
//! - a request whose `id` MCP does not allow (null, a fraction, an object), or
//!   whose `id` cannot be read (`1e400`), is answered `-32600` / `-32700` with
//!   `"id": null`, and so is any error rmcp sends without an `id`;
//! - a batch (a JSON array, which MCP 2025-03-26 servers must accept) is taken
//!   apart: each member is screened as above and forwarded alone, and the answers
//!   go back as one array once every forwarded request was answered or cancelled;
//!   an empty batch, a member that is not an object, `initialize` in a batch and
//!   an id repeated in flight are answered `-32600`;
//! - a request other than `ping` before any `initialize` is answered `-32002`
//!   (server not initialized), naming what to send first;
//! - rmcp's "method not found" (`-32601`) also names the method asked for and the
//!   methods there are, and its "tool not found" the tool asked for and where the
//!   tools are listed;
//! - everything else goes to rmcp unchanged, and each request's outcome is logged
//!   once, at info, when its response goes out (`tools/call claim (id 3): ok`).
//!
//! Pinned by `server/tests/polish.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

mod batch;

use batch::{Batches, cancelled_request, screen_batch};

/// Bytes buffered between this layer and rmcp in each direction.
const PIPE_BYTES: usize = 1 << 16;

/// What a request was, by id, until its response is logged.
type Pending = Arc<Mutex<HashMap<String, String>>>;

/// The task that writes rmcp's output (and this layer's answers) to stdout.
pub struct Writer(JoinHandle<()>);

impl Writer {
    /// Waits (at most `limit`) until everything rmcp wrote is on stdout, so the last
    /// response before end of input is not lost when the process exits.
    pub async fn flush(self, limit: std::time::Duration) {
        let _ = tokio::time::timeout(limit, self.0).await;
    }
}

/// Starts the layer over the process's stdin and stdout: the transport rmcp serves
/// on (it reads requests from the first stream and writes responses to the second),
/// and the stdout writer.
pub fn stdio() -> ((DuplexStream, DuplexStream), Writer) {
    let (input, mut to_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let (output, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let (lines, mut outgoing) = mpsc::unbounded_channel::<String>();
    let pending: Pending = Arc::default();
    let batches: Arc<Mutex<Batches>> = Arc::default();
    let gathered = Arc::clone(&batches);

    // stdin → rmcp, answering here what rmcp would drop or misanswer.
    let answers = lines.clone();
    let requests = Arc::clone(&pending);
    tokio::spawn(async move {
        let mut stdin = BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        // An `initialize` went to rmcp: from then on requests are its to answer.
        let mut initialize_sent = false;
        loop {
            line.clear();
            match stdin.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line);
            // Parsed once, for the batch and cancellation checks and the screen.
            let parsed = serde_json::from_str::<Value>(text.trim());
            // A batch (MCP 2025-03-26: a server must accept them): each request
            // is screened and forwarded alone, and the answers go back as one
            // array (a breaker: the batch was refused whole).
            if let Ok(Value::Array(messages)) = &parsed {
                let (forward, now) = screen_batch(messages, initialize_sent, &batches, &requests);
                for reply in now {
                    let _ = answers.send(reply.to_string());
                }
                for mut one in forward {
                    one.push('\n');
                    if to_rmcp.write_all(one.as_bytes()).await.is_err() {
                        return;
                    }
                }
                continue;
            }
            if let Ok(message) = &parsed
                && let Some(request) = cancelled_request(message)
            {
                // No answer comes to a cancelled request (MCP): its id is free
                // again, and a batch waiting for it waits no more.
                requests.lock().unwrap().remove(&request);
                if let Some(all) = batches.lock().unwrap().cancelled(&request)
                    && !all.is_empty()
                {
                    let _ = answers.send(Value::Array(all).to_string());
                }
            }
            let mut screened = match std::str::from_utf8(&line) {
                Ok(_) => screen_parsed(text.trim(), parsed),
                Err(error) => not_utf8(text.trim(), &error),
            };
            // An id still in flight: rmcp would take the new request's answer for
            // the old one's and drop one of them (a breaker: a claim sent with id 5,
            // then a ping with id 5, held the lock and its answer never came).
            if let Screened::Forward(Some((id, what))) = &screened
                && (requests.lock().unwrap().contains_key(id) || batches.lock().unwrap().waits(id))
            {
                let text = format!(
                    "Invalid Request: request {id} is still unanswered; give each request \
                     in flight an id of its own"
                );
                screened = Screened::Answer(
                    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": text}}),
                    format!("{what} (id {id}): {text}"),
                );
            }
            if let Screened::Forward(Some((id, what))) = &screened {
                if what == "initialize" {
                    initialize_sent = true;
                } else if !initialize_sent && what != "ping" {
                    screened = before_initialize(id, what);
                }
            }
            match screened {
                Screened::Forward(what) => {
                    if let Some((id, what)) = what {
                        requests.lock().unwrap().insert(id, what);
                    }
                    if to_rmcp.write_all(&line).await.is_err() {
                        break;
                    }
                    if !line.ends_with(b"\n") && to_rmcp.write_all(b"\n").await.is_err() {
                        break;
                    }
                }
                Screened::Answer(reply, summary) => {
                    tracing::info!("{summary}");
                    let _ = answers.send(reply.to_string());
                }
                Screened::Drop(why) => {
                    tracing::warn!("dropped a line that is not a JSON-RPC message: {why}")
                }
            }
        }
        // End of input: rmcp sees it and ends the session.
        let _ = to_rmcp.shutdown().await;
    });

    // rmcp → the line queue, logging each response against its request.
    tokio::spawn(async move {
        let mut from_rmcp = BufReader::new(from_rmcp).lines();
        while let Ok(Some(line)) = from_rmcp.next_line().await {
            let (line, response) = relay_response(&pending, line);
            // A response to a request of a batch waits for the batch's others.
            let line = match response {
                Some(response) => match response.get("id").map(Value::to_string) {
                    Some(id) => match gathered.lock().unwrap().gather(&id, response) {
                        None => Some(line),
                        Some(None) => None,
                        Some(Some(all)) => Some(Value::Array(all).to_string()),
                    },
                    None => Some(line),
                },
                None => Some(line),
            };
            let Some(line) = line else { continue };
            if lines.send(line).is_err() {
                break;
            }
        }
    });

    // The line queue → stdout: one writer, so our answers never interleave with
    // rmcp's.
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = outgoing.recv().await {
            let written = async {
                stdout.write_all(line.as_bytes()).await?;
                stdout.write_all(b"\n").await?;
                stdout.flush().await
            };
            if written.await.is_err() {
                break;
            }
        }
    });
    ((input, output), Writer(writer))
}

/// What to do with one input line.
#[derive(Debug, PartialEq)]
enum Screened {
    /// Pass it to rmcp; for a request, its id and what it asks, for the log.
    Forward(Option<(String, String)>),
    /// Answer it here with this response, logging this summary.
    Answer(Value, String),
    /// Not a message: drop it, saying why at warn.
    Drop(String),
}

#[cfg(test)]
fn screen(line: &str) -> Screened {
    screen_parsed(line, serde_json::from_str::<Value>(line))
}

/// What to do with `line`, given what parsing it gave.
fn screen_parsed(line: &str, parsed: serde_json::Result<Value>) -> Screened {
    if line.is_empty() {
        return Screened::Drop("an empty line".into());
    }
    match parsed {
        Ok(message) => screen_message(&message),
        Err(error) => match complete_object_id(line) {
            Some(id) => {
                let (code, message) = if error.to_string().contains("recursion limit") {
                    (
                        -32600,
                        "Invalid Request: the message nests deeper than 128 levels".to_string(),
                    )
                } else {
                    (-32700, format!("Parse error: {error}"))
                };
                let summary = format!("request (id {id}): {message}");
                Screened::Answer(
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
                    summary,
                )
            }
            None => Screened::Drop(error.to_string()),
        },
    }
}

/// A line that is not UTF-8: rmcp drops it without a word, so a complete request
/// (its `id` read from the line with the bad bytes replaced) is answered `-32700`
/// here; anything else is dropped (a breaker: a request with a `\xff` byte in a
/// string got no reply, and its client hung).
fn not_utf8(lossy: &str, error: &std::str::Utf8Error) -> Screened {
    match complete_object_id(lossy) {
        Some(id) => {
            let message = format!(
                "Parse error: the message is not valid UTF-8 (a bad byte at offset {}); \
                 JSON-RPC messages are UTF-8 text",
                error.valid_up_to()
            );
            let summary = format!("request (id {id}): {message}");
            Screened::Answer(
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32700, "message": message}}),
                summary,
            )
        }
        None => Screened::Drop(format!("not UTF-8: {error}")),
    }
}

fn screen_message(message: &Value) -> Screened {
    let (Some(method), Some(id)) = (
        message.get("method").and_then(Value::as_str),
        message.get("id"),
    ) else {
        if let Some(method) = message.get("method").and_then(Value::as_str) {
            tracing::debug!("notification {method}");
        }
        return Screened::Forward(None);
    };
    // An id MCP does not allow (null, a fraction, an object or array): rmcp
    // answered -32600 without any `id` (a breaker); answered here, with id null
    // since the request's own cannot be used.
    let integer = |n: &serde_json::Number| n.is_i64() || n.is_u64();
    if !(id.is_string() || id.as_number().is_some_and(integer)) {
        let text = "Invalid Request: \"id\" must be a string or an integer \
                    (not null, a fraction, an object or an array)";
        return Screened::Answer(
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": text}}),
            format!("{method} (id {id}): {text}"),
        );
    }
    // rmcp answers these -32600 without the request's `id`, which JSON-RPC 2.0
    // requires (found by a breaker); answered here with it.
    let shape = if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        Some((-32600, "Invalid Request: \"jsonrpc\" must be \"2.0\""))
    } else if message
        .get("params")
        .is_some_and(|p| !(p.is_object() || p.is_array() || p.is_null()))
    {
        Some((
            -32602,
            "Invalid params: \"params\" must be an object (tools/list names the tools and their arguments)",
        ))
    } else {
        None
    };
    if let Some((code, message)) = shape {
        return Screened::Answer(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
            format!("{method} (id {id}): {message}"),
        );
    }
    let params = message.get("params");
    if method == "tools/call"
        && let Some(message) = tools_call_shape_error(params)
    {
        return Screened::Answer(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": message}}),
            format!("tools/call (id {id}): {message}"),
        );
    }
    let tool = params
        .filter(|_| method == "tools/call")
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .map(|name| format!(" {name}"))
        .unwrap_or_default();
    Screened::Forward(Some((id.to_string(), format!("{method}{tool}"))))
}

/// The answer to request `what` (id `id`, as JSON text) sent before `initialize`:
/// `-32002` (server not initialized, the code LSP gives it) saying what to send
/// first. rmcp's own answer was "-32602 request _meta is missing or has malformed
/// required fields: io.modelcontextprotocol/protocolVersion, …", which names
/// nothing a client can act on (pinned by
/// `server/tests/polish.rs::a_request_before_initialize_is_told_to_initialize_first`).
fn before_initialize(id: &str, what: &str) -> Screened {
    let id: Value = serde_json::from_str(id).unwrap_or(Value::Null);
    let message = format!(
        "Server not initialized: {what} came before initialize; send initialize, \
         then notifications/initialized, then {what} again"
    );
    Screened::Answer(
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32002, "message": message}}),
        format!("{what} (id {id}): {message}"),
    )
}

/// What is wrong with the shape of a `tools/call`'s `params`, if anything: they must
/// be an object whose `name` is a string and whose `arguments`, when given, is an
/// object (or null). rmcp fails to decode anything else and answers "method not
/// found", which told a client that sent `"arguments": "x"` that `tools/call` does
/// not exist (found by a breaker; pinned by
/// `server/tests/polish.rs::tools_call_with_params_of_the_wrong_shape_is_invalid_params`).
fn tools_call_shape_error(params: Option<&Value>) -> Option<&'static str> {
    let Some(params) = params.and_then(Value::as_object) else {
        return Some(concat!(
            "Invalid params: tools/call takes an object, ",
            "{\"name\": TOOL, \"arguments\": {...}} (tools/list names the tools)"
        ));
    };
    if !params.get("name").is_some_and(Value::is_string) {
        return Some(concat!(
            "Invalid params: tools/call needs \"name\", a tool's name as a string: ",
            "{\"name\": TOOL, \"arguments\": {...}} (tools/list names the tools)"
        ));
    }
    match params.get("arguments") {
        None | Some(Value::Null | Value::Object(_)) => None,
        Some(_) => Some(concat!(
            "Invalid params: tools/call's \"arguments\" must be an object of the tool's ",
            "arguments, {\"name\": TOOL, \"arguments\": {...}} (tools/list gives each ",
            "tool's input schema)"
        )),
    }
}

/// What this server answers; named in the reply to any other method.
const METHODS: &str = "initialize, ping, tools/list and tools/call (tools/list names the tools)";

/// Logs, at info, how the request a response answers ended, and returns the
/// response to send: rmcp's own, except that "method not found" also names the
/// method asked for and the methods there are (rmcp says only "Method not found").
/// Also returns the response parsed (`None`: not JSON), so the batch gathering
/// after it need not parse the line again.
fn relay_response(pending: &Pending, line: String) -> (String, Option<Value>) {
    let Ok(mut response) = serde_json::from_str::<Value>(&line) else {
        return (line, None);
    };
    let Some(id) = response.get("id").cloned() else {
        // An error rmcp sent without an `id` (a request it could not decode, such
        // as one naming `id` twice): JSON-RPC 2.0 requires `"id": null` there (a
        // breaker).
        if let Some(fields) = response.as_object_mut()
            && fields.contains_key("error")
        {
            fields.insert("id".into(), Value::Null);
            return (response.to_string(), Some(response));
        }
        return (line, Some(response));
    };
    let Some(what) = pending.lock().unwrap().remove(&id.to_string()) else {
        return (line, Some(response));
    };
    let line = if response["error"]["code"] == -32601 {
        let message = format!("Method not found: {what}; this server answers {METHODS}");
        response["error"]["message"] = Value::String(message);
        response.to_string()
    } else if response["error"]["code"] == -32602
        && response["error"]["message"] == "tool not found"
        && let Some(tool) = what.strip_prefix("tools/call ")
    {
        // rmcp says only "tool not found": name the tool asked for, and where the
        // tools there are are listed.
        let message = format!("tool not found: {tool}; tools/list names the tools this server has");
        response["error"]["message"] = Value::String(message);
        response.to_string()
    } else {
        line
    };
    let outcome = if let Some(error) = response.get("error") {
        format!(
            "error {}: {}",
            error["code"],
            error["message"].as_str().unwrap_or_default()
        )
    } else if response["result"]["isError"] == true {
        let text = response["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        format!("tool error: {text}")
    } else {
        "ok".to_string()
    };
    tracing::info!("{what} (id {id}): {outcome}");
    (line, Some(response))
}

/// The `id` of `line` when it is one complete JSON object (its closing brace ends
/// the line) whose top level has an `id` that is a number, a string or null; found
/// by scanning, without building the nesting `serde_json` refused. `None` for a
/// truncated line or anything else.
fn complete_object_id(line: &str) -> Option<Value> {
    let bytes = line.as_bytes();
    if bytes.first() != Some(&b'{') {
        return None;
    }
    let mut depth = 0usize;
    let mut i = 0;
    let mut id = None;
    let mut expect_key = false;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let end = string_end(bytes, i)?;
                if depth == 1 && expect_key {
                    let key = &line[i + 1..end];
                    let mut j = end + 1;
                    while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if key == "id" && bytes.get(j) == Some(&b':') {
                        // An id that cannot be read (`1e400`, out of range) is
                        // answered with id null, as JSON-RPC asks when the id
                        // cannot be told (a breaker: no reply at all); a
                        // truncated line still never closes, and is dropped.
                        id = Some(scalar_at(line, j + 1).unwrap_or(Value::Null));
                    }
                }
                expect_key = false;
                i = end;
            }
            b'{' => {
                depth += 1;
                expect_key = true;
            }
            b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return (line[i + 1..].trim().is_empty()).then_some(id).flatten();
                }
            }
            b',' if depth == 1 => expect_key = true,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the quote closing the string that opens at `start`.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// A number, string or null starting at `from` (after whitespace), as JSON.
fn scalar_at(line: &str, from: usize) -> Option<Value> {
    let rest = line[from..].trim_start();
    let start = line.len() - rest.len();
    let bytes = line.as_bytes();
    let end = if rest.starts_with('"') {
        string_end(bytes, start)? + 1
    } else {
        start
            + rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
                .unwrap_or(rest.len())
    };
    match serde_json::from_str::<Value>(&line[start..end]).ok()? {
        id @ (Value::Number(_) | Value::String(_) | Value::Null) => Some(id),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_of_a_complete_object_is_found_past_deep_nesting_and_bad_strings() {
        let deep = format!(
            "{{\"jsonrpc\":\"2.0\",\"params\":{}1{},\"id\":7}}",
            "[".repeat(1000),
            "]".repeat(1000)
        );
        assert_eq!(complete_object_id(&deep), Some(json!(7)));
        assert_eq!(
            complete_object_id(r#"{"id":"a\"b","method":"x","params":{"s":"\ud800"}}"#),
            Some(json!("a\"b"))
        );
        assert_eq!(
            complete_object_id(r#"{"params":{"id":3},"id":4}"#),
            Some(json!(4))
        );
        assert_eq!(
            complete_object_id(r#"{"jsonrpc":"2.0","id":4,"method":"x""#),
            None
        );
        assert_eq!(complete_object_id(r#"{"method":"x"}"#), None);
        assert_eq!(complete_object_id("not json"), None);
    }

    #[test]
    fn tools_call_without_object_params_is_invalid_params() {
        for params in ["null", "[]", "\"x\""] {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{params}}}"#);
            match screen(&line) {
                Screened::Answer(reply, _) => {
                    assert_eq!(reply["error"]["code"], -32602, "{params}");
                    assert_eq!(reply["id"], 9);
                }
                other => panic!("{params}: {other:?}"),
            }
        }
        for params in [
            r#"{"name":"status","arguments":"x"}"#,
            r#"{"name":"status","arguments":[1]}"#,
            r#"{"name":7,"arguments":{}}"#,
            r#"{"arguments":{}}"#,
        ] {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{params}}}"#);
            match screen(&line) {
                Screened::Answer(reply, _) => {
                    assert_eq!(reply["error"]["code"], -32602, "{params}");
                    let message = reply["error"]["message"].as_str().unwrap();
                    assert!(message.starts_with("Invalid params: "), "{message}");
                }
                other => panic!("{params}: {other:?}"),
            }
        }
        for params in [
            r#"{"name":"status","arguments":null}"#,
            r#"{"name":"status","arguments":{}}"#,
        ] {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{params}}}"#);
            assert!(matches!(screen(&line), Screened::Forward(_)), "{params}");
        }
        let ok = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"status"}}"#;
        assert_eq!(
            screen(ok),
            Screened::Forward(Some(("1".into(), "tools/call status".into())))
        );
    }
}
