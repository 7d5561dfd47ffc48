//! Batches: a JSON array of requests on one line (MCP 2025-03-26 servers must
//! accept them). rmcp takes one message per line, so each member goes to it alone,
//! and the answers are gathered here and sent back as one array.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Value, json};

use super::{Pending, Screened, before_initialize, screen_message};

/// The batches (a JSON array of requests on one line) whose answers are still
/// being gathered: rmcp takes one message per line, so each request of a batch
/// goes to it alone, and its responses are sent back together, as one array.
#[derive(Default)]
pub(super) struct Batches {
    /// The batch a forwarded request belongs to, by its id (as JSON text).
    of_id: HashMap<String, u64>,
    /// Each open batch: the responses gathered, and how many are still to come.
    open: HashMap<u64, (Vec<Value>, usize)>,
    next: u64,
}

impl Batches {
    /// Opens a batch holding `answered` (responses made here) that waits for the
    /// responses to `ids`; `None` (nothing to wait for) gives `answered` back.
    pub(super) fn open(&mut self, answered: Vec<Value>, ids: Vec<String>) -> Option<Vec<Value>> {
        if ids.is_empty() {
            return Some(answered);
        }
        let batch = self.next;
        self.next += 1;
        self.open.insert(batch, (answered, ids.len()));
        for id in ids {
            self.of_id.insert(id, batch);
        }
        None
    }

    /// Takes `response` (to request `id`) into its batch: `None` when it belongs
    /// to none, `Some(None)` while its batch waits for more, `Some(Some(all))`
    /// when it completed the batch.
    pub(super) fn gather(&mut self, id: &str, response: Value) -> Option<Option<Vec<Value>>> {
        let batch = self.of_id.remove(id)?;
        let (responses, left) = self.open.get_mut(&batch)?;
        responses.push(response);
        *left -= 1;
        if *left > 0 {
            return Some(None);
        }
        Some(self.open.remove(&batch).map(|(all, _)| all))
    }

    /// Request `id` was cancelled, so no response to it will come (MCP: none is
    /// sent): its batch stops waiting for it. The batch's responses when that
    /// completed it.
    pub(super) fn cancelled(&mut self, id: &str) -> Option<Vec<Value>> {
        let batch = self.of_id.remove(id)?;
        let (_, left) = self.open.get_mut(&batch)?;
        *left -= 1;
        if *left > 0 {
            return None;
        }
        self.open.remove(&batch).map(|(all, _)| all)
    }

    /// Whether a request with `id` is waiting in a batch.
    pub(super) fn waits(&self, id: &str) -> bool {
        self.of_id.contains_key(id)
    }
}

/// The request a `notifications/cancelled` names, as JSON text, if `message` is one.
pub(super) fn cancelled_request(message: &Value) -> Option<String> {
    (message.get("method").and_then(Value::as_str) == Some("notifications/cancelled"))
        .then(|| {
            message
                .get("params")?
                .get("requestId")
                .map(Value::to_string)
        })
        .flatten()
}

/// A batch: each message screened, the answers made here gathered, and the
/// requests to forward registered (in `pending`, and as a batch in `batches`,
/// before any goes to rmcp, so no response can outrun its batch). Returns the
/// lines to forward, one message each, and the replies to send now: the batch's
/// answers when none of its requests went to rmcp, an error for an empty batch,
/// nothing for a batch of notifications (and the answers of an earlier batch a
/// cancellation in this one completed).
pub(super) fn screen_batch(
    messages: &[Value],
    initialize_sent: bool,
    batches: &Mutex<Batches>,
    pending: &Pending,
) -> (Vec<String>, Vec<Value>) {
    if messages.is_empty() {
        let message = "Invalid Request: an empty batch";
        tracing::info!("batch: {message}");
        let reply = json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32600, "message": message}});
        return (Vec::new(), vec![reply]);
    }
    let mut batches = batches.lock().unwrap();
    let (mut answered, mut forward, mut ids) = (Vec::new(), Vec::new(), Vec::<String>::new());
    let mut now = Vec::new();
    for message in messages {
        let id = message.get("id").map(Value::to_string);
        let screened = if id.as_ref().is_some_and(|id| {
            ids.contains(id) || batches.waits(id) || pending.lock().unwrap().contains_key(id)
        }) {
            // Two answers to one id could not be told apart.
            let text = "Invalid Request: another request of this batch, or one still \
                        unanswered, has this id";
            Screened::Answer(
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": text}}),
                format!("batch: {text}"),
            )
        } else {
            screen_in_batch(message, initialize_sent)
        };
        match screened {
            Screened::Answer(reply, summary) => {
                tracing::info!("{summary}");
                answered.push(reply);
            }
            Screened::Forward(what) => {
                if let Some((id, what)) = what {
                    pending.lock().unwrap().insert(id.clone(), what);
                    ids.push(id);
                }
                if let Some(request) = cancelled_request(message) {
                    pending.lock().unwrap().remove(&request);
                }
                if let Some(request) = cancelled_request(message)
                    && let Some(all) = batches.cancelled(&request)
                    && !all.is_empty()
                {
                    // An earlier batch, completed by this cancellation.
                    now.push(Value::Array(all));
                }
                forward.push(message.to_string());
            }
            Screened::Drop(why) => tracing::warn!("dropped from a batch: {why}"),
        }
    }
    now.extend(
        batches
            .open(answered, ids)
            .filter(|answers| !answers.is_empty())
            .map(Value::Array),
    );
    (forward, now)
}

/// One message of a batch, screened as a line of its own is, with the checks a
/// batch adds: an element that is not an object is an invalid request, and
/// `initialize` must come alone (MCP: it is never part of a batch).
fn screen_in_batch(message: &Value, initialize_sent: bool) -> Screened {
    let invalid = |text: &str| {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        Screened::Answer(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": text}}),
            format!("batch: {text}"),
        )
    };
    if !message.is_object() {
        return invalid("Invalid Request: each member of a batch must be a request object");
    }
    if message.get("method").and_then(Value::as_str) == Some("initialize") {
        return invalid("Invalid Request: initialize cannot be part of a batch; send it alone");
    }
    match screen_message(message) {
        Screened::Forward(Some((id, what))) if !initialize_sent && what != "ping" => {
            before_initialize(&id, &what)
        }
        other => other,
    }
}
