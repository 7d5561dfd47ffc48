//! `fencepost hooks install|uninstall|status`: the agents' project settings and the
//! git hooks.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::git;
use super::settings::{self, Edited, Entry};
use crate::Failure;
use crate::args::{AgentName, HooksArgs, HooksCommand};

/// The command an agent's settings run. `|| exit 2` keeps the hook closed when
/// `fencepost` itself cannot run (not on PATH: exit 127, which the agents would
/// read as "go ahead").
pub fn hook_command(agent: AgentName) -> String {
    format!("fencepost hook {} || exit 2", agent.name())
}

/// The settings file of `agent` in `project`.
pub fn settings_path(agent: AgentName, project: &Path, local: bool) -> PathBuf {
    match (agent, local) {
        (AgentName::ClaudeCode, false) => project.join(".claude").join("settings.json"),
        (AgentName::ClaudeCode, true) => project.join(".claude").join("settings.local.json"),
        (AgentName::Gemini, _) => project.join(".gemini").join("settings.json"),
    }
}

/// The groups `install` adds for `agent`: the pre-edit event, then SessionEnd.
pub fn entries(agent: AgentName) -> Vec<Entry> {
    let command = hook_command(agent);
    let hook = match agent {
        AgentName::ClaudeCode => json!({"type": "command", "command": command}),
        AgentName::Gemini => json!({"name": "fencepost", "type": "command", "command": command}),
    };
    vec![
        Entry {
            event: agent.pre_tool_event(),
            group: json!({"matcher": agent.matcher(), "hooks": [hook.clone()]}),
        },
        Entry {
            event: "SessionEnd",
            group: json!({"hooks": [hook]}),
        },
    ]
}

const ALL_AGENTS: [AgentName; 2] = [AgentName::ClaudeCode, AgentName::Gemini];

/// Runs `hooks install|uninstall|status`.
pub fn run(command: &HooksCommand) -> Result<std::process::ExitCode, Failure> {
    let (HooksCommand::Install(args) | HooksCommand::Uninstall(args) | HooksCommand::Status(args)) =
        command;
    let project = project_dir(args)?;
    let everything = args.agent.is_empty() && !args.git;
    let agents: Vec<AgentName> = if everything {
        ALL_AGENTS.to_vec()
    } else {
        args.agent.clone()
    };
    let git = args.git || everything;
    // Gemini CLI reads no local (uncommitted) project settings: `--local` would
    // write the committed file after all (a new user's find).
    if args.local && agents.contains(&AgentName::Gemini) {
        return Err(Failure::Error(
            "--local: Gemini CLI has no local project settings file, so its hook would go into \
             the committed .gemini/settings.json; name --agent claude-code alone with --local, \
             and install Gemini's hook without --local (or in your user settings by hand)"
                .into(),
        ));
    }
    // The git hooks' directory is found before any agent's settings are written: a
    // project outside git fails with nothing half-installed.
    let hooks = if git {
        Some(git::hooks_dir(&project).map_err(|e| {
            Failure::Error(if everything {
                let nothing = match command {
                    HooksCommand::Install(_) => "nothing was installed",
                    HooksCommand::Uninstall(_) => "nothing was removed",
                    HooksCommand::Status(_) => "no hook was looked at",
                };
                format!(
                    "{e}; {nothing}. Run it inside the repository, pass \
                     --project DIR, or name the agents alone (--agent claude-code --agent gemini) \
                     for a project without git"
                )
            } else {
                format!("{e}; `--git` needs a git repository (pass --project DIR)")
            })
        })?)
    } else {
        None
    };
    // Every agent's settings are read and edited in memory before anything is
    // written: settings that cannot be edited (not JSON, not UTF-8) fail the whole
    // command with nothing changed.
    for agent in &agents {
        let path = settings_path(*agent, &project, args.local);
        match command {
            HooksCommand::Install(_) => {
                settings::install(read(&path)?.as_deref(), &entries(*agent))
                    .map_err(|why| refuse(&path, why))?;
            }
            HooksCommand::Uninstall(_) => {
                if let Some(text) = read(&path)? {
                    settings::uninstall(&text, &entries(*agent))
                        .map_err(|why| refuse(&path, why))?;
                }
            }
            HooksCommand::Status(_) => {}
        }
    }
    // The git hooks first: their directory is the likelier to refuse a write (a
    // core.hooksPath naming a file), and a refusal then leaves the agents'
    // settings untouched (a breaker: they were written before the failure).
    let mut git_line = match hooks {
        Some(hooks) => Some(
            match command {
                HooksCommand::Install(_) => git::install(&hooks),
                HooksCommand::Uninstall(_) => git::uninstall(&hooks),
                HooksCommand::Status(_) => Ok(git::status(&hooks)),
            }
            .map_err(Failure::Error)?,
        ),
        None => None,
    };
    let mut lines = Vec::new();
    for agent in agents {
        let path = settings_path(agent, &project, args.local);
        let line = match command {
            HooksCommand::Install(_) => install_agent(agent, &path),
            HooksCommand::Uninstall(_) => uninstall_agent(agent, &path),
            HooksCommand::Status(_) => status_agent(agent, &path),
        };
        // Claude Code's other settings file is looked at too: a hook installed
        // with --local is not "not installed" without it (a new user's find).
        let line = line.map(|line| match (agent, command) {
            (AgentName::ClaudeCode, HooksCommand::Status(_) | HooksCommand::Uninstall(_)) => {
                let other = settings_path(agent, &project, !args.local);
                // The command that acts on the other file, for Claude Code alone
                // (`--local` with every agent is refused: Gemini has no local file).
                let verb = if matches!(command, HooksCommand::Status(_)) {
                    "status"
                } else {
                    "uninstall"
                };
                let local = if args.local { "" } else { " --local" };
                let also = if line.contains(": installed") {
                    "also "
                } else {
                    ""
                };
                match read(&other).ok().flatten().map(|text| {
                    settings::installed(&text, &entries(agent)).is_ok_and(|f| f.contains(&true))
                }) {
                    Some(true) => format!(
                        "{line}; the hook is {also}in {} (`fencepost hooks {verb} --agent \
                         claude-code{local}` for that one)",
                        other.display()
                    ),
                    _ => line,
                }
            }
            _ => line,
        });
        match line {
            Ok(line) => lines.push(line),
            Err(failure) => {
                // A write that failed after others were made (a settings file that
                // is a dangling link): what was done is said, not left unknown (a
                // breaker: exit 1 and one line, with the git hooks installed).
                for line in lines.iter().chain(&git_line) {
                    crate::output::emit(line)?;
                }
                return Err(failure);
            }
        }
    }
    // Git runs a submodule's hooks from its own git directory: the guard installed
    // here does not see commits made inside one (a breaker: a held file in a
    // submodule was committed there, and `hooks status` said "installed").
    if git_line.is_some() && project.join(".gitmodules").is_file() {
        let verb = match command {
            HooksCommand::Install(_) => "install",
            HooksCommand::Uninstall(_) => "uninstall",
            HooksCommand::Status(_) => "status",
        };
        git_line = git_line.map(|line| {
            format!(
                "{line}; this repository has submodules (.gitmodules), and git runs each \
                 submodule's own hooks for commits and pushes made inside it: run `fencepost \
                 hooks {verb} --git` inside each submodule for those"
            )
        });
    }
    lines.extend(git_line);
    for line in lines {
        crate::output::emit(&line)?;
    }
    // The hooks run `fencepost` by name: without it on PATH every agent edit is
    // blocked and every commit refused with the shell's "not found" (a new user,
    // who had only the demo's build in target/release).
    if matches!(command, HooksCommand::Install(_)) && !on_path("fencepost") {
        let here = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|dir| dir.display().to_string()))
            .unwrap_or_else(|| "the directory of this binary".into());
        crate::output::report(&format!(
            "warning: there is no `fencepost` on PATH here, and the hooks just installed run \
             `fencepost …` by name: until there is, every guarded edit is blocked and every \
             guarded commit refused. Install it (`cargo install --locked --path cli`) or add \
             {} to PATH",
            crate::output::printable(&here)
        ));
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// Whether an executable `name` is in a directory of PATH.
fn on_path(name: &str) -> bool {
    let file = if cfg!(windows) {
        format!("{name}.exe")
    } else {
        name.to_string()
    };
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(&file).is_file()))
}

/// `--project`, else the top of the current git work tree, else the current
/// directory.
fn project_dir(args: &HooksArgs) -> Result<PathBuf, Failure> {
    let cwd = std::env::current_dir().map_err(|e| {
        Failure::Error(format!(
            "cannot read the current directory ({e}); pass --project DIR"
        ))
    })?;
    let dir = args.project.as_ref().map_or(cwd.clone(), |p| cwd.join(p));
    if !dir.is_dir() {
        return Err(Failure::Error(format!(
            "the project directory {} does not exist; pass an existing --project DIR",
            dir.display()
        )));
    }
    if args.project.is_some() {
        return Ok(dir);
    }
    super::project_root(&dir).map_err(Failure::Error)
}

fn read(path: &Path) -> Result<Option<String>, Failure> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            Failure::Error(format!(
                "cannot use {}: it is not UTF-8 text; fix it or add the hook entries by hand",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Failure::Error(format!(
            "cannot read {} ({e})",
            path.display()
        ))),
    }
}

fn refuse(path: &Path, why: String) -> Failure {
    Failure::Error(format!(
        "cannot edit {}: {why}; fix it, or add the hook entries by hand (see README, \"Guarding agents' own edits\")",
        path.display()
    ))
}

fn write(path: &Path, text: &str) -> Result<(), Failure> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| Failure::Error(format!("cannot create {} ({e})", parent.display())))?;
    }
    std::fs::write(path, text)
        .map_err(|e| Failure::Error(format!("cannot write {} ({e})", path.display())))
}

fn install_agent(agent: AgentName, path: &Path) -> Result<String, Failure> {
    let text = read(path)?;
    match settings::install(text.as_deref(), &entries(agent)).map_err(|why| refuse(path, why))? {
        Edited::Unchanged => Ok(format!(
            "{}: already installed in {}",
            agent.name(),
            path.display()
        )),
        Edited::Text(new) => {
            write(path, &new)?;
            Ok(format!(
                "{}: installed in {} ({} and SessionEnd run `{}`)",
                agent.name(),
                path.display(),
                agent.pre_tool_event(),
                hook_command(agent)
            ))
        }
        Edited::Delete => unreachable!("install never deletes"),
    }
}

fn uninstall_agent(agent: AgentName, path: &Path) -> Result<String, Failure> {
    let Some(text) = read(path)? else {
        return Ok(format!(
            "{}: not installed ({} does not exist)",
            agent.name(),
            path.display()
        ));
    };
    match settings::uninstall(&text, &entries(agent)).map_err(|why| refuse(path, why))? {
        Edited::Unchanged => Ok(format!(
            "{}: not installed in {}",
            agent.name(),
            path.display()
        )),
        Edited::Text(new) => {
            write(path, &new)?;
            Ok(format!("{}: removed from {}", agent.name(), path.display()))
        }
        Edited::Delete => {
            std::fs::remove_file(path)
                .map_err(|e| Failure::Error(format!("cannot remove {} ({e})", path.display())))?;
            // The directory too, if the install created it and it is empty now.
            if let Some(parent) = path.parent() {
                let _ = std::fs::remove_dir(parent);
            }
            Ok(format!(
                "{}: removed {} (the install had created it)",
                agent.name(),
                path.display()
            ))
        }
    }
}

fn status_agent(agent: AgentName, path: &Path) -> Result<String, Failure> {
    let Some(text) = read(path)? else {
        return Ok(format!(
            "{}: not installed ({} does not exist)",
            agent.name(),
            path.display()
        ));
    };
    let events = entries(agent);
    let found = settings::installed(&text, &events).map_err(|why| refuse(path, why))?;
    let have: Vec<&str> = events
        .iter()
        .zip(&found)
        .filter(|(_, f)| **f)
        .map(|(e, _)| e.event)
        .collect();
    Ok(match have.len() {
        0 => format!("{}: not installed in {}", agent.name(), path.display()),
        n if n == events.len() => format!("{}: installed in {}", agent.name(), path.display()),
        _ => format!(
            "{}: partly installed in {} (only {}); run `fencepost hooks install --agent {}`",
            agent.name(),
            path.display(),
            have.join(", "),
            agent.name()
        ),
    })
}
