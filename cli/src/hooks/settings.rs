//! Adds hook entries to an agent's JSON settings file and removes them again,
//! editing the text in place: every byte outside the added entries is kept, and
//! removing what was added gives back the original bytes. Both agents keep hooks as
//! `{"hooks": {"EVENT": [ {matcher, hooks: [{type, command}]}, … ]}}`.
//!
//! Insertions are compact JSON placed right after the last member or element of
//! the object or array they join (`,ENTRY`), or inside an empty one; a removal
//! takes out the entry and the separator before it. An object or array the install
//! created (recognisable by its compact spelling, `"EVENT":[ENTRY]`) goes with its
//! last entry. The one ambiguity: an empty `"EVENT":[]` or `"hooks":{}` the user
//! wrote with no space at all reads as the install's own, and goes too (an empty
//! list of hooks: nothing that ran is lost).

use serde_json::Value;

/// One group to add under `hooks.EVENT`.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The event name (`PreToolUse`, `BeforeTool`, `SessionEnd`).
    pub event: &'static str,
    /// The matcher group, `{"matcher": …, "hooks": [{"type": "command", …}]}`.
    pub group: Value,
}

/// True when a matcher group runs a fencepost command (`fencepost hook …`): ours.
pub fn is_ours(group: &Value) -> bool {
    group
        .get("hooks")
        .and_then(Value::as_array)
        .is_some_and(|hooks| {
            hooks.iter().any(|hook| {
                hook.get("command")
                    .and_then(Value::as_str)
                    .is_some_and(|command| command.contains("fencepost hook "))
            })
        })
}

/// True when a matcher group runs the hook of the agent `entry`'s group runs
/// (`fencepost hook AGENT`, however the rest of the command is spelt), not another
/// agent's: `fencepost hook claude-code` under Gemini's event blocks every Gemini
/// edit.
fn runs_entry(group: &Value, entry: &Entry) -> bool {
    let agents = |group: &Value| -> Vec<String> {
        group
            .get("hooks")
            .and_then(Value::as_array)
            .map(|hooks| {
                hooks
                    .iter()
                    .filter_map(|hook| hook.get("command").and_then(Value::as_str))
                    .filter_map(|command| command.split_once("fencepost hook "))
                    .filter_map(|(_, rest)| rest.split_whitespace().next())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let wanted = agents(&entry.group);
    agents(group).iter().any(|agent| wanted.contains(agent))
}

/// What an edit comes to.
#[derive(Debug, PartialEq, Eq)]
pub enum Edited {
    /// Nothing to change.
    Unchanged,
    /// The new text of the file.
    Text(String),
    /// The file held nothing but what the install created: delete it.
    Delete,
}

/// The text of a settings file the install creates.
pub fn created(entries: &[Entry]) -> String {
    let mut hooks = serde_json::Map::new();
    for entry in entries {
        hooks
            .entry(entry.event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .expect("created as an array")
            .push(entry.group.clone());
    }
    let mut root = serde_json::Map::new();
    root.insert("hooks".into(), Value::Object(hooks));
    let mut text = serde_json::to_string_pretty(&Value::Object(root)).expect("serializable");
    text.push('\n');
    text
}

/// Which of `entries` the settings text has (an entry of ours under its event).
pub fn installed(text: &str, entries: &[Entry]) -> Result<Vec<bool>, String> {
    let value = parse_object(text)?;
    Ok(entries
        .iter()
        .map(|entry| {
            groups(&value, entry.event)
                .iter()
                .any(|group| runs_entry(group, entry))
        })
        .collect())
}

/// `text` (None: no file yet) with every entry of `entries` that is missing added.
pub fn install(text: Option<&str>, entries: &[Entry]) -> Result<Edited, String> {
    let Some(text) = text else {
        return Ok(Edited::Text(created(entries)));
    };
    // A file that is there but blank (empty, or whitespace) keeps its bytes in
    // front, and the settings follow without their final newline, so that
    // `uninstall` tells it from a file the install created and gives the bytes
    // back instead of deleting the file (a breaker: an empty settings.json was
    // deleted, "the install had created it").
    if text.trim().is_empty() {
        return Ok(Edited::Text(format!(
            "{text}{}",
            created(entries).trim_end()
        )));
    }
    let mut text = text.to_string();
    let mut changed = false;
    for entry in entries {
        let value = parse_object(&text)?;
        let present = groups(&value, entry.event);
        if present.iter().any(|group| runs_entry(group, entry)) {
            continue;
        }
        // Another fencepost hook command under this event (another agent's, or an
        // older spelling): adding ours beside it would leave it running, and
        // saying "installed" would be false (a breaker).
        if present.iter().any(is_ours) {
            return Err(format!(
                "its \"hooks\".\"{}\" already runs another fencepost hook command than ours \
                 (another agent's?); remove it with `fencepost hooks uninstall` for this agent, \
                 then install again",
                entry.event
            ));
        }
        let group = serde_json::to_string(&entry.group).expect("serializable");
        let root = Span::parse(&text)?;
        let (at, insert) = match root.member("hooks") {
            None => (
                root.insertion_point(),
                format!(
                    "{}\"hooks\":{{{}:[{group}]}}",
                    root.separator(),
                    quoted(entry.event)
                ),
            ),
            Some(hooks) if !matches!(hooks.kind, Kind::Object(_)) => {
                return Err("its \"hooks\" is not a JSON object".into());
            }
            Some(hooks) => match hooks.member(entry.event) {
                None => (
                    hooks.insertion_point(),
                    format!("{}{}:[{group}]", hooks.separator(), quoted(entry.event)),
                ),
                Some(array) if !matches!(array.kind, Kind::Array(_)) => {
                    return Err(format!(
                        "its \"hooks\".\"{}\" is not a JSON array",
                        entry.event
                    ));
                }
                Some(array) => (
                    array.insertion_point(),
                    format!("{}{group}", array.separator()),
                ),
            },
        };
        text.insert_str(at, &insert);
        changed = true;
    }
    Ok(if changed {
        Edited::Text(text)
    } else {
        Edited::Unchanged
    })
}

/// `text` with every group of ours under the events of `entries` removed.
pub fn uninstall(text: &str, entries: &[Entry]) -> Result<Edited, String> {
    let made = created(entries);
    if text == made {
        return Ok(Edited::Delete);
    }
    // Installed into a blank file: its blank bytes back.
    if let Some(blank) = text.strip_suffix(made.trim_end())
        && blank.trim().is_empty()
    {
        return Ok(Edited::Text(blank.to_string()));
    }
    let mut text = text.to_string();
    let mut changed = false;
    // Later events first: an install adds them in order, so each removal undoes the
    // latest insertion still in place.
    let mut events: Vec<&str> = Vec::new();
    for entry in entries {
        if !events.contains(&entry.event) {
            events.push(entry.event);
        }
    }
    for event in events.iter().rev() {
        loop {
            parse_object(&text)?;
            let root = Span::parse(&text)?;
            let Some(hooks) = root.member_full("hooks") else {
                break;
            };
            let Some(array) = hooks.value.member_full(event) else {
                break;
            };
            let Kind::Array(elements) = &array.value.kind else {
                break;
            };
            let Some(index) = elements.iter().position(|e| {
                is_ours(&serde_json::from_str(&text[e.start..e.end]).unwrap_or(Value::Null))
            }) else {
                break;
            };
            let element = &elements[index];
            let member_text = &text[array.start..array.value.end];
            let created_member =
                format!("{}:[{}]", quoted(event), &text[element.start..element.end]);
            let range = if elements.len() == 1 && member_text == created_member {
                hooks.value.removal(array.index)
            } else {
                array.value.removal(index)
            };
            text.replace_range(range, "");
            changed = true;
        }
    }
    // A `"hooks":{}` left behind is the one the install created.
    let root = Span::parse(&text)?;
    if let Some(hooks) = root.member_full("hooks")
        && &text[hooks.start..hooks.value.end] == "\"hooks\":{}"
    {
        text.replace_range(root.removal(hooks.index), "");
        changed = true;
    }
    Ok(if changed {
        Edited::Text(text)
    } else {
        Edited::Unchanged
    })
}

fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

fn parse_object(text: &str) -> Result<Value, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("it is not valid JSON ({e})"))?;
    if !value.is_object() {
        return Err("it is not a JSON object".into());
    }
    // The spans refuse a key given twice (serde_json keeps the last silently).
    Span::parse(text)?;
    Ok(value)
}

/// The groups under `hooks.EVENT`.
fn groups<'a>(value: &'a Value, event: &str) -> &'a [Value] {
    value
        .get("hooks")
        .and_then(|hooks| hooks.get(event))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A JSON value's byte range in the text, and its members or elements.
#[derive(Debug)]
struct Span {
    start: usize,
    end: usize,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Object(Vec<Member>),
    Array(Vec<Span>),
    Scalar,
}

/// An object member: from its key's opening quote to the end of its value.
#[derive(Debug)]
struct Member {
    key: String,
    start: usize,
    value: Span,
}

/// A member found by name, with its position among the object's members.
struct Found<'a> {
    index: usize,
    start: usize,
    value: &'a Span,
}

impl Span {
    /// Parses `text` (already known to be valid JSON) into spans.
    fn parse(text: &str) -> Result<Span, String> {
        let bytes = text.as_bytes();
        let mut at = skip_ws(bytes, 0);
        let span = parse_value(bytes, &mut at)?;
        Ok(span)
    }

    fn member(&self, key: &str) -> Option<&Span> {
        self.member_full(key).map(|found| found.value)
    }

    fn member_full(&self, key: &str) -> Option<Found<'_>> {
        let Kind::Object(members) = &self.kind else {
            return None;
        };
        members
            .iter()
            .enumerate()
            .find(|(_, m)| m.key == key)
            .map(|(index, m)| Found {
                index,
                start: m.start,
                value: &m.value,
            })
    }

    /// Where an insertion goes: after the last member or element, or right after
    /// the opening bracket of an empty one.
    fn insertion_point(&self) -> usize {
        match &self.kind {
            Kind::Object(members) => members.last().map_or(self.start + 1, |m| m.value.end),
            Kind::Array(elements) => elements.last().map_or(self.start + 1, |e| e.end),
            Kind::Scalar => self.end,
        }
    }

    /// `,` before an insertion into a non-empty object or array.
    fn separator(&self) -> &'static str {
        let empty = match &self.kind {
            Kind::Object(members) => members.is_empty(),
            Kind::Array(elements) => elements.is_empty(),
            Kind::Scalar => true,
        };
        if empty { "" } else { "," }
    }

    /// The byte range that removes member or element `index` and one separator.
    fn removal(&self, index: usize) -> std::ops::Range<usize> {
        let items: Vec<(usize, usize)> = match &self.kind {
            Kind::Object(members) => members.iter().map(|m| (m.start, m.value.end)).collect(),
            Kind::Array(elements) => elements.iter().map(|e| (e.start, e.end)).collect(),
            Kind::Scalar => return self.start..self.start,
        };
        let (start, end) = items[index];
        if index > 0 {
            items[index - 1].1..end
        } else if items.len() > 1 {
            start..items[1].0
        } else {
            start..end
        }
    }
}

fn skip_ws(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && matches!(bytes[at], b' ' | b'\t' | b'\n' | b'\r') {
        at += 1;
    }
    at
}

fn parse_value(bytes: &[u8], at: &mut usize) -> Result<Span, String> {
    let start = *at;
    let broken = || "it is not valid JSON".to_string();
    match bytes.get(start) {
        Some(b'{') => {
            *at += 1;
            let mut members = Vec::new();
            loop {
                *at = skip_ws(bytes, *at);
                match bytes.get(*at) {
                    Some(b'}') => {
                        *at += 1;
                        break;
                    }
                    Some(b',') => {
                        *at += 1;
                        continue;
                    }
                    Some(b'"') => {
                        let key_start = *at;
                        let key_end = string_end(bytes, *at).ok_or_else(broken)?;
                        let key: String = serde_json::from_slice(&bytes[key_start..key_end])
                            .map_err(|_| broken())?;
                        *at = skip_ws(bytes, key_end);
                        if bytes.get(*at) != Some(&b':') {
                            return Err(broken());
                        }
                        *at = skip_ws(bytes, *at + 1);
                        let value = parse_value(bytes, at)?;
                        // serde_json and the agents' own readers take the last of
                        // a key given twice, the span edit the first: an entry
                        // would go where nothing reads it, again on every install.
                        if members.iter().any(|m: &Member| m.key == key) {
                            return Err(format!(
                                "it has the key {} twice in one object, and an agent reads only one of them",
                                quoted(&key)
                            ));
                        }
                        members.push(Member {
                            key,
                            start: key_start,
                            value,
                        });
                    }
                    _ => return Err(broken()),
                }
            }
            Ok(Span {
                start,
                end: *at,
                kind: Kind::Object(members),
            })
        }
        Some(b'[') => {
            *at += 1;
            let mut elements = Vec::new();
            loop {
                *at = skip_ws(bytes, *at);
                match bytes.get(*at) {
                    Some(b']') => {
                        *at += 1;
                        break;
                    }
                    Some(b',') => {
                        *at += 1;
                    }
                    Some(_) => elements.push(parse_value(bytes, at)?),
                    None => return Err(broken()),
                }
            }
            Ok(Span {
                start,
                end: *at,
                kind: Kind::Array(elements),
            })
        }
        Some(b'"') => {
            *at = string_end(bytes, start).ok_or_else(broken)?;
            Ok(Span {
                start,
                end: *at,
                kind: Kind::Scalar,
            })
        }
        Some(_) => {
            while *at < bytes.len()
                && !matches!(
                    bytes[*at],
                    b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'
                )
            {
                *at += 1;
            }
            Ok(Span {
                start,
                end: *at,
                kind: Kind::Scalar,
            })
        }
        None => Err(broken()),
    }
}

/// The index just past the string starting at `at` (its closing quote).
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entries() -> Vec<Entry> {
        vec![
            Entry {
                event: "PreToolUse",
                group: json!({"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "fencepost hook claude-code"}]}),
            },
            Entry {
                event: "SessionEnd",
                group: json!({"hooks": [{"type": "command", "command": "fencepost hook claude-code"}]}),
            },
        ]
    }

    fn round_trip(original: &str) {
        let Edited::Text(with) = install(Some(original), &entries()).unwrap() else {
            panic!("nothing installed into {original}")
        };
        assert_eq!(installed(&with, &entries()).unwrap(), [true, true]);
        assert_eq!(install(Some(&with), &entries()).unwrap(), Edited::Unchanged);
        let Edited::Text(back) = uninstall(&with, &entries()).unwrap() else {
            panic!("nothing removed from {with}")
        };
        assert_eq!(back, original, "installed: {with}");
    }

    #[test]
    fn install_then_uninstall_gives_back_the_original_bytes() {
        round_trip("{}\n");
        round_trip("{ }");
        round_trip("{\n    \"model\": \"opus\"\n}\n");
        round_trip("{\"hooks\": {}}");
        round_trip("{\"hooks\": { }, \"x\": [1, 2]}");
        round_trip(
            "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"./lint.sh\"}]}\n    ]\n  }\n}\n",
        );
        round_trip("{\"hooks\":{\"PreToolUse\": [],\"SessionEnd\":[ ]},\"s\":\"a\\\"}\"}");
    }

    #[test]
    fn a_blank_file_gets_its_bytes_back() {
        for blank in ["", "\n", "  \n\t"] {
            let Edited::Text(text) = install(Some(blank), &entries()).unwrap() else {
                panic!()
            };
            assert_eq!(installed(&text, &entries()).unwrap(), [true, true]);
            assert_eq!(install(Some(&text), &entries()).unwrap(), Edited::Unchanged);
            assert_eq!(
                uninstall(&text, &entries()).unwrap(),
                Edited::Text(blank.to_string()),
                "{blank:?}"
            );
        }
    }

    #[test]
    fn a_created_file_is_deleted_again() {
        let Edited::Text(text) = install(None, &entries()).unwrap() else {
            panic!()
        };
        assert_eq!(text, created(&entries()));
        assert_eq!(uninstall(&text, &entries()).unwrap(), Edited::Delete);
    }

    #[test]
    fn a_reformatted_entry_is_still_removed() {
        let text = "{\"hooks\": {\"PreToolUse\": [\n  {\"matcher\": \"Bash\", \"hooks\": []},\n  {\n    \"matcher\": \"Edit|Write\",\n    \"hooks\": [{\"type\": \"command\", \"command\": \"fencepost hook claude-code\"}]\n  }\n]}}";
        let Edited::Text(back) = uninstall(text, &entries()).unwrap() else {
            panic!()
        };
        assert_eq!(
            back,
            "{\"hooks\": {\"PreToolUse\": [\n  {\"matcher\": \"Bash\", \"hooks\": []}\n]}}"
        );
    }

    /// Another agent's hook under this agent's event is not taken for ours: the
    /// install refuses (with how to go on) rather than say "installed" beside it,
    /// and `installed` says it is missing. The same agent's hook spelt otherwise
    /// (without `|| exit 2`) is ours.
    #[test]
    fn another_agents_hook_is_not_ours() {
        let other = r#"{"hooks":{"PreToolUse":[{"matcher":"Edit","hooks":[{"type":"command","command":"fencepost hook gemini || exit 2"}]}]}}"#;
        let error = install(Some(other), &entries()).unwrap_err();
        assert!(error.contains("another fencepost hook command"), "{error}");
        assert_eq!(installed(other, &entries()).unwrap(), [false, false]);
        let older = r#"{"hooks":{"PreToolUse":[{"matcher":"Edit","hooks":[{"type":"command","command":"fencepost hook claude-code"}]}]}}"#;
        assert_eq!(installed(older, &entries()).unwrap(), [true, false]);
    }

    #[test]
    fn settings_that_are_not_an_object_are_refused() {
        assert!(install(Some("[1]"), &entries()).is_err());
        assert!(install(Some("{\"hooks\": 3}"), &entries()).is_err());
        assert!(install(Some("{// comment\n}"), &entries()).is_err());
    }

    /// A key given twice: the agent reads the last `"hooks"`, so an entry put into
    /// the first is never run, and every install added another copy while status
    /// said "not installed" (found by the breaker). Refused, unchanged.
    #[test]
    fn settings_with_a_key_given_twice_are_refused() {
        for text in [
            "{\"hooks\":{\"PreToolUse\":[]},\"hooks\":{\"Stop\":[]}}",
            "{\"hooks\":{\"PreToolUse\":[],\"PreToolUse\":[]}}",
        ] {
            let refused = install(Some(text), &entries()).unwrap_err();
            assert!(refused.contains("twice"), "{refused}");
            assert!(uninstall(text, &entries()).is_err(), "{text}");
            assert!(installed(text, &entries()).is_err(), "{text}");
        }
    }
}
