//! The agents' hook protocols: what each sends on stdin, and how each is told to
//! block. Sources (checked for the design note, `docs/design-06-agent-hooks.md`):
//!
//! - Claude Code: hooks reference, <https://code.claude.com/docs/en/hooks>. Every
//!   event carries `session_id`, `cwd`, `hook_event_name`; `PreToolUse` adds
//!   `tool_name` and `tool_input` (`file_path` for Edit, Write and MultiEdit,
//!   `notebook_path` for NotebookEdit). Exit 2 blocks the tool call and feeds stderr
//!   to the model; any other non-zero exit is a non-blocking error (the edit goes
//!   ahead).
//! - Gemini CLI: hooks reference,
//!   <https://github.com/google-gemini/gemini-cli/blob/main/docs/hooks/reference.md>.
//!   The same base fields; `BeforeTool` adds `tool_name` and `tool_input`
//!   (`file_path` for `write_file` and `replace`, per its file system tools page,
//!   <https://github.com/google-gemini/gemini-cli/blob/main/docs/tools/file-system.md>).
//!   Exit 2 blocks the tool and sends stderr to the agent as the reason; other
//!   non-zero exits are warnings (the tool runs). On exit 0 stdout must be JSON.

use serde_json::Value;

use crate::args::AgentName;

/// What a payload asks the hook to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// An edit tool is about to write these paths (as the payload spells them).
    Edit {
        session: String,
        cwd: Option<String>,
        tool: String,
        paths: Vec<String>,
    },
    /// A shell command the agent is about to run (checked only for ways around
    /// the guard, which are the human's to take).
    Shell { command: String },
    /// The session ended: its claims may go. `session` is its id, or why the
    /// payload names none; `cwd` is the session's working directory, as the
    /// payload names it.
    SessionEnd {
        session: Result<String, String>,
        cwd: Option<String>,
    },
    /// Nothing for fencepost (another tool, another event).
    Ignore,
}

impl AgentName {
    /// Every agent the hook speaks for.
    pub const ALL: [AgentName; 2] = [AgentName::ClaudeCode, AgentName::Gemini];

    /// The name used in sessions, owners and messages.
    pub fn name(self) -> &'static str {
        match self {
            AgentName::ClaudeCode => "claude-code",
            AgentName::Gemini => "gemini",
        }
    }

    /// The event that comes before a tool runs.
    pub fn pre_tool_event(self) -> &'static str {
        match self {
            AgentName::ClaudeCode => "PreToolUse",
            AgentName::Gemini => "BeforeTool",
        }
    }

    /// The edit tools, and the `tool_input` field naming each one's target.
    pub fn edit_tools(self) -> &'static [(&'static str, &'static str)] {
        match self {
            AgentName::ClaudeCode => &[
                ("Edit", "file_path"),
                ("Write", "file_path"),
                ("MultiEdit", "file_path"),
                ("NotebookEdit", "notebook_path"),
            ],
            AgentName::Gemini => &[("write_file", "file_path"), ("replace", "file_path")],
        }
    }

    /// The shell tool, and the `tool_input` field holding its command line.
    pub fn shell_tool(self) -> (&'static str, &'static str) {
        match self {
            AgentName::ClaudeCode => ("Bash", "command"),
            AgentName::Gemini => ("run_shell_command", "command"),
        }
    }

    /// The matcher that sends the edit tools (and the shell tool) to the hook, in the form both agents'
    /// docs show (`Edit|Write`, `write_file|replace`): tool names joined by `|`. The
    /// hook itself ignores any other tool a matcher lets through.
    pub fn matcher(self) -> String {
        let mut names: Vec<&str> = self.edit_tools().iter().map(|(tool, _)| *tool).collect();
        names.push(self.shell_tool().0);
        names.join("|")
    }

    /// What the agent reads on stdout when the hook allows (Gemini parses stdout as
    /// JSON on exit 0; Claude Code needs nothing).
    pub fn allow_stdout(self) -> &'static str {
        match self {
            AgentName::ClaudeCode => "",
            AgentName::Gemini => "{}\n",
        }
    }

    /// The exit code that blocks the tool call, with the reason on stderr (both
    /// agents: 2).
    pub fn block_exit_code(self) -> u8 {
        2
    }
}

/// Parses one payload of `agent`, or says in one line what is wrong with it.
pub fn parse(agent: AgentName, payload: &[u8]) -> Result<Event, String> {
    let value: Value = serde_json::from_slice(payload)
        .map_err(|e| format!("the hook payload on stdin is not JSON ({e})"))?;
    let Value::Object(fields) = &value else {
        return Err("the hook payload on stdin is not a JSON object".into());
    };
    let text = |name: &str| fields.get(name).and_then(Value::as_str);
    let Some(event) = text("hook_event_name") else {
        return Err("the hook payload has no hook_event_name".into());
    };
    let session = || match fields.get("session_id") {
        Some(Value::String(id)) if !id.trim().is_empty() => Ok(id.to_string()),
        // Said as it is: a number is not "no session_id" (a breaker's find).
        Some(Value::String(_)) => Err(format!(
            "the {event} payload's session_id is blank, so fencepost cannot tell whose edit \
             this is"
        )),
        Some(other) => Err(format!(
            "the {event} payload's session_id is not a string ({}), so fencepost cannot tell \
             whose edit this is",
            json_kind(other)
        )),
        None => Err(format!(
            "the {event} payload has no session_id, so fencepost cannot tell whose edit this is"
        )),
    };
    if event == "SessionEnd" {
        return Ok(Event::SessionEnd {
            session: session(),
            cwd: text("cwd").map(str::to_string),
        });
    }
    if event != agent.pre_tool_event() {
        // Another agent's edit event reaching this agent's hook (a settings file
        // copied between agents, a hook installed under the wrong name): ignoring it
        // would let every edit through unclaimed, so it is an error, and the
        // edit is blocked.
        if let Some(other) = AgentName::ALL
            .into_iter()
            .find(|other| *other != agent && other.pre_tool_event() == event)
        {
            return Err(format!(
                "the payload is {}'s {event} event, but the hook was run as `fencepost hook {}`; \
                 reinstall {}'s hooks: `fencepost hooks uninstall --agent {}`, then `fencepost \
                 hooks install --agent {}`",
                other.name(),
                agent.name(),
                other.name(),
                other.name(),
                other.name()
            ));
        }
        return Ok(Event::Ignore);
    }
    let Some(tool) = text("tool_name") else {
        return Err(format!("the {event} payload has no tool_name"));
    };
    let (shell, command_field) = agent.shell_tool();
    if tool == shell {
        let command = fields
            .get("tool_input")
            .and_then(|input| input.get(command_field))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("the {tool} payload has no tool_input.{command_field}"))?;
        return Ok(Event::Shell {
            command: command.to_string(),
        });
    }
    let Some((_, field)) = agent.edit_tools().iter().find(|(name, _)| *name == tool) else {
        // Not an edit tool (the matcher let it through): nothing to claim.
        return Ok(Event::Ignore);
    };
    let path = match fields.get("tool_input").and_then(|input| input.get(*field)) {
        Some(Value::String(path)) if !path.is_empty() => path.as_str(),
        Some(Value::String(_)) => {
            return Err(format!("the {tool} payload's tool_input.{field} is empty"));
        }
        // Present with another type: say so, rather than "missing".
        Some(other) => {
            return Err(format!(
                "the {tool} payload's tool_input.{field} is not a string (it is {})",
                json_kind(other)
            ));
        }
        None => return Err(format!("the {tool} payload has no tool_input.{field}")),
    };
    Ok(Event::Edit {
        session: session()?,
        cwd: text("cwd").map(str::to_string),
        tool: tool.to_string(),
        paths: vec![path.to_string()],
    })
}

/// What kind of JSON value `value` is, for a message.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_edit_tool_names_its_path() {
        let payload = br#"{"session_id":"s1","cwd":"/p","hook_event_name":"PreToolUse",
            "tool_name":"NotebookEdit","tool_input":{"notebook_path":"/p/a.ipynb","new_source":""}}"#;
        assert_eq!(
            parse(AgentName::ClaudeCode, payload).unwrap(),
            Event::Edit {
                session: "s1".into(),
                cwd: Some("/p".into()),
                tool: "NotebookEdit".into(),
                paths: vec!["/p/a.ipynb".into()],
            }
        );
    }

    #[test]
    fn an_edit_without_its_path_or_session_is_an_error() {
        let no_path = br#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Edit","tool_input":{}}"#;
        assert!(parse(AgentName::ClaudeCode, no_path).is_err());
        let no_session = br#"{"hook_event_name":"BeforeTool","tool_name":"replace","tool_input":{"file_path":"a"}}"#;
        assert!(parse(AgentName::Gemini, no_session).is_err());
        assert!(parse(AgentName::Gemini, b"[1]").is_err());
    }

    /// A session_id of the wrong kind is said to be that, not missing (a
    /// breaker's find: a number read "has no session_id").
    #[test]
    fn a_session_id_that_is_no_string_is_said_to_be_so() {
        let edit = |id: &str| {
            format!(
                r#"{{"session_id":{id},"cwd":"/p","hook_event_name":"PreToolUse","tool_name":"Edit","tool_input":{{"file_path":"a"}}}}"#
            )
        };
        let said = |id: &str| parse(AgentName::ClaudeCode, edit(id).as_bytes()).unwrap_err();
        assert!(
            said("5").contains("session_id is not a string (a number)"),
            "{}",
            said("5")
        );
        assert!(said("null").contains("(null)"), "{}", said("null"));
        assert!(
            said(r#""  ""#).contains("session_id is blank"),
            "{}",
            said(r#""  ""#)
        );
    }

    #[test]
    fn other_tools_and_events_are_ignored() {
        let read = br#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"a"}}"#;
        assert_eq!(parse(AgentName::ClaudeCode, read).unwrap(), Event::Ignore);
        let stop = br#"{"session_id":"s","hook_event_name":"Stop"}"#;
        assert_eq!(parse(AgentName::ClaudeCode, stop).unwrap(), Event::Ignore);
    }

    /// One agent's edit event reaching the other's hook blocks (with why), never
    /// passes as "another event" (a new user's find: the hook failed open).
    #[test]
    fn another_agents_edit_event_is_an_error() {
        let claude = br#"{"session_id":"s","cwd":"/p","hook_event_name":"PreToolUse","tool_name":"Edit","tool_input":{"file_path":"a"}}"#;
        let gemini = br#"{"session_id":"s","cwd":"/p","hook_event_name":"BeforeTool","tool_name":"replace","tool_input":{"file_path":"a"}}"#;
        for (agent, payload) in [
            (AgentName::Gemini, &claude[..]),
            (AgentName::ClaudeCode, &gemini[..]),
        ] {
            let error = parse(agent, payload).unwrap_err();
            assert!(error.contains("the hook was run as"), "{error}");
        }
        assert!(parse(AgentName::ClaudeCode, claude).is_ok());
        assert!(parse(AgentName::Gemini, gemini).is_ok());
    }

    #[test]
    fn the_matcher_names_exactly_the_edit_tools() {
        assert_eq!(
            AgentName::ClaudeCode.matcher(),
            "Edit|Write|MultiEdit|NotebookEdit|Bash"
        );
        assert_eq!(
            AgentName::Gemini.matcher(),
            "write_file|replace|run_shell_command"
        );
    }
}
