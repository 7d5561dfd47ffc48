//! `fencepost-test-child`: the child the CLI tests give to `fencepost run`, on every
//! platform (no `sh`, so the same tests run on Windows). Built only for the tests
//! (feature `test-child`); never installed.
//!
//! Usage: `fencepost-test-child STEP…`, steps run in order; the first that fails
//! ends the process with its code. `$FP` names the `fencepost` binary;
//! `FENCEPOST_*` come from `run`.
//!
//! | step | does | fails with |
//! | --- | --- | --- |
//! | `exit=N` | exits with N | |
//! | `env=FILE` | writes FENCEPOST_TOKEN, _STORE, _RESOURCE, _LOCK, _FILE (or `unset`), one a line | 2 |
//! | `check` | `$FP check` of its own token on its own resource | fencepost's code |
//! | `break=REASON` | `$FP break` of its resource, as an operator would | 92 |
//! | `touch=FILE` | creates FILE | 2 |
//! | `remove=FILE` | removes FILE | 2 |
//! | `count=PREFIX:FILE` | writes to FILE how many names in its directory start with PREFIX | 2 |
//! | `started=FILE` | writes its token and a newline to FILE | 2 |
//! | `pid=FILE` | writes its pid to FILE (complete when it appears) | 2 |
//! | `sleep=MS` | sleeps | |
//! | `wait-for=FILE` | waits until FILE exists (30 s at most, then goes on) | |
//! | `critical=LOG` | creates `busy` exclusively, checks its token, appends it to LOG, removes `busy` | 9 (overlap), 8 (check) |
//! | `repeat=N -- ARGS…` | runs `$FP ARGS…` N times (the rest of the line) | the number of runs that failed |
//!
//! Spawning retries Wine's rare `ERROR_INTERNAL_ERROR` (docs/windows.md).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Output, Stdio};
use std::time::{Duration, Instant};

/// `ERROR_INTERNAL_ERROR`: Wine's `CreateProcess` fails with it, rarely, under load.
const ERROR_INTERNAL_ERROR: i32 = 1359;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match steps(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => ExitCode::from(code),
    }
}

fn steps(args: &[String]) -> Result<(), u8> {
    let mut rest = args.iter();
    while let Some(step) = rest.next() {
        let (name, value) = step.split_once('=').unwrap_or((step, ""));
        match name {
            "exit" => return Err(value.parse().map_err(|_| fail(2, "exit=N"))?),
            "env" => write(value, env_lines())?,
            "check" => fencepost(&own(&["check"]), 0)?,
            "break" => {
                let mut args = vec!["break".to_string()];
                args.extend(resource());
                args.extend(["--reason".to_string(), value.to_string()]);
                fencepost(&args, 92)?;
            }
            "touch" => write(value, String::new())?,
            "remove" => {
                std::fs::remove_file(value).map_err(|e| fail(2, &format!("{value}: {e}")))?
            }
            "count" => {
                let Some((prefix, file)) = value.split_once(':') else {
                    return Err(fail(2, "count=PREFIX:FILE"));
                };
                let names = std::fs::read_dir(".").map_err(|e| fail(2, &format!(".: {e}")))?;
                let n = names
                    .filter(|e| {
                        e.as_ref()
                            .is_ok_and(|e| e.file_name().to_string_lossy().starts_with(prefix))
                    })
                    .count();
                write(file, format!("{n}\n"))?;
            }
            "started" => write(value, format!("{}\n", var("FENCEPOST_TOKEN")))?,
            "pid" => {
                // Complete when it appears: written aside, then moved into place.
                let aside = format!("{value}.tmp");
                write(&aside, std::process::id().to_string())?;
                std::fs::rename(&aside, value).map_err(|e| fail(2, &format!("{value}: {e}")))?;
            }
            "sleep" => std::thread::sleep(Duration::from_millis(number(value)?)),
            "wait-for" => {
                let deadline = Instant::now() + Duration::from_secs(30);
                while !PathBuf::from(value).exists() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            "critical" => critical(value)?,
            "repeat" => {
                let times = number(value)?;
                let Some("--") = rest.next().map(String::as_str) else {
                    return Err(fail(2, "repeat=N needs `-- ARGS…`"));
                };
                let command: Vec<String> = rest.cloned().collect();
                let failed = (0..times)
                    .filter(|_| fencepost(&command, 1).is_err())
                    .count();
                return if failed == 0 {
                    Ok(())
                } else {
                    Err(u8::try_from(failed).unwrap_or(u8::MAX))
                };
            }
            _ => return Err(fail(2, &format!("unknown step {step:?}"))),
        }
    }
    Ok(())
}

/// One critical section: two children inside at once make the second fail to
/// create `busy`.
fn critical(log: &str) -> Result<(), u8> {
    if let Err(e) = OpenOptions::new().write(true).create_new(true).open("busy") {
        return Err(fail(9, &format!("overlap: busy marker: {e}")));
    }
    fencepost(&own(&["check"]), 8)?;
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .map_err(|e| fail(2, &format!("{log}: {e}")))?;
    writeln!(file, "{}", var("FENCEPOST_TOKEN")).map_err(|e| fail(2, &format!("{log}: {e}")))?;
    drop(file);
    std::thread::sleep(Duration::from_millis(10));
    std::fs::remove_file("busy").map_err(|e| fail(2, &format!("busy: {e}")))
}

/// `--lock NAME` or `--file PATH`: the resource `run` gave us.
fn resource() -> Vec<String> {
    match std::env::var("FENCEPOST_FILE") {
        Ok(file) => vec!["--file".into(), file],
        Err(_) => vec!["--lock".into(), var("FENCEPOST_LOCK")],
    }
}

/// `COMMAND <our resource> <our token>`.
fn own(command: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = command.iter().map(|s| s.to_string()).collect();
    args.extend(resource());
    args.push(var("FENCEPOST_TOKEN"));
    args
}

/// Runs `$FP args`; a non-zero exit is passed on as fencepost's own code, or as
/// `code` when that is not 0. Inherits stderr; drops stdout.
fn fencepost(args: &[String], code: u8) -> Result<(), u8> {
    let output = spawn_retrying(Command::new(var("FP")).args(args))?;
    match output.status.code() {
        Some(0) => Ok(()),
        Some(actual) => Err(if code == 0 {
            u8::try_from(actual).unwrap_or(1)
        } else {
            code
        }),
        None => Err(fail(code.max(1), "fencepost ended by a signal")),
    }
}

/// Runs `command` to its end, retrying when Wine fails to create the process
/// (`ERROR_INTERNAL_ERROR`), or when `run` could not start its child for that
/// reason (exit 126, reported on stderr).
fn spawn_retrying(command: &mut Command) -> Result<Output, u8> {
    command.stdout(Stdio::null()).stderr(Stdio::piped());
    for _ in 0..5 {
        match command.output() {
            Ok(output) => {
                let stderr = String::from_utf8_lossy(&output.stderr);
                let wine_flake = output.status.code() == Some(126)
                    && stderr.contains(&format!("(os error {ERROR_INTERNAL_ERROR})"));
                if !wine_flake {
                    eprint!("{stderr}");
                    return Ok(output);
                }
            }
            Err(e) if e.raw_os_error() == Some(ERROR_INTERNAL_ERROR) => {}
            Err(e) => return Err(fail(2, &format!("cannot start {:?}: {e}", command))),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(fail(
        2,
        "process creation kept failing with ERROR_INTERNAL_ERROR",
    ))
}

fn env_lines() -> String {
    [
        "FENCEPOST_TOKEN",
        "FENCEPOST_STORE",
        "FENCEPOST_RESOURCE",
        "FENCEPOST_LOCK",
        "FENCEPOST_FILE",
    ]
    .iter()
    .map(|name| std::env::var(name).unwrap_or_else(|_| "unset".into()) + "\n")
    .collect()
}

fn write(path: &str, content: String) -> Result<(), u8> {
    std::fs::write(path, content).map_err(|e| fail(2, &format!("{path}: {e}")))
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

fn number(value: &str) -> Result<u64, u8> {
    value
        .parse()
        .map_err(|_| fail(2, &format!("not a number: {value:?}")))
}

/// Reports on stderr and returns `code`.
fn fail(code: u8, message: &str) -> u8 {
    eprintln!("fencepost-test-child: {message}");
    code
}
