//! The human's escapes from fencepost's guards, spotted in an agent's shell
//! command (README, "Guarding agents' own edits"): an agent asking for one is
//! blocked. A deterrent, not a lock: a command can always hide them (a script
//! file, a variable); this catches the spellings an agent would plainly type.

/// The ways around fencepost a shell command can take, by what gives them away
/// (lowercased; git's config keys are case-insensitive).
const ESCAPES: [(&str, &str); 6] = [
    (
        "--no-verify",
        "git's --no-verify, which skips the commit and push guard",
    ),
    (
        "fencepost_guard=",
        "FENCEPOST_GUARD, which turns the commit guard off",
    ),
    (
        "fencepost_hooks=",
        "FENCEPOST_HOOKS, which turns the edit hook off",
    ),
    (
        "core.hookspath",
        "core.hooksPath, which moves git's hooks (and the guard) away",
    ),
    (
        "fencepost hooks uninstall",
        "`fencepost hooks uninstall`, which removes the guard",
    ),
    (
        "fencepost break",
        "`fencepost break`, a human operator's override of another holder's lease",
    ),
];

/// The programs that run git's commands, and so take its `--no-verify`.
const GIT_PROGRAMS: [&str; 2] = ["git", "hub"];

/// How deep `sh -c '…'` and `eval …` are looked into.
const NESTING: usize = 4;

use super::shell::{OP, SHELLS, commands_of, shell_words};

/// The escape `command` takes, if any.
pub fn guard_escape(command: &str) -> Option<&'static str> {
    escape_within(command, NESTING)
}

fn escape_within(command: &str, depth: usize) -> Option<&'static str> {
    let lower = command.to_lowercase();
    let words = shell_words(&lower);
    let cased = shell_words(command);
    if commit_no_verify(&cased) {
        return Some(ESCAPES[0].1);
    }
    if let Some(what) = fencepost_override(&words) {
        return Some(what);
    }
    let found = ESCAPES.iter().find(|(needle, _)| {
        if *needle == "core.hookspath" {
            hooks_path_moved(&words)
        } else if needle.starts_with("--") {
            // A flag of a git command: a word of its own (not inside `grep
            // no-verify`, nor inside a quoted commit message that mentions it), or
            // an abbreviation git takes for it (`--no-veri`: `--no-ver` could be
            // `--no-verbose`). Only git's skips the guard: `cargo package
            // --no-verify` and `grep --no-verify README.md` were blocked (a new
            // user).
            git_no_verify(&cased, needle)
        } else if needle.starts_with("fencepost ") {
            // Judged on its words by `fencepost_override` (its help is no escape).
            false
        } else {
            lower.contains(needle)
        }
    });
    if let Some((_, what)) = found {
        return Some(what);
    }
    // A command run by a shell or `eval`: looked into as a command of its own (a
    // breaker: `sh -c 'git commit --no-verify'` went through).
    if depth == 0 {
        return None;
    }
    for (at, word) in cased.iter().enumerate() {
        let name = word.rsplit('/').next().unwrap_or(word);
        let inner = match name {
            // `-c`, alone or among other short options (`bash -lc`, `sh -ec`: a
            // breaker; agents' shells run commands as `bash -lc`).
            _ if SHELLS.contains(&name) => cased
                .get(at + 1..)
                .and_then(|rest| {
                    rest.iter()
                        .position(|w| {
                            w.strip_prefix('-')
                                .is_some_and(|o| !o.starts_with('-') && o.contains('c'))
                        })
                        .map(|c| at + 1 + c + 1)
                })
                .and_then(|i| cased.get(i))
                .cloned(),
            "eval" => Some(
                cased[at + 1..]
                    .iter()
                    .map(|w| w.strip_prefix(OP).unwrap_or(w))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            // A command git runs for each submodule, or after each commit of a
            // rebase (a breaker: `git submodule foreach 'git commit --no-verify'`
            // and `git rebase --exec '…'` went through).
            "foreach" => cased[at + 1..]
                .iter()
                .find(|w| !w.starts_with('-'))
                .cloned(),
            _ if word == "--exec" || word == "-x" => cased.get(at + 1).cloned(),
            _ if word.starts_with("--exec=") => Some(word["--exec=".len()..].to_string()),
            _ => None,
        };
        if let Some(what) = inner.and_then(|inner| escape_within(&inner, depth - 1)) {
            return Some(what);
        }
    }
    None
}

/// The reason given when an agent's shell command would get around the guard.
pub fn escape_reason(what: &str) -> String {
    format!(
        "fencepost blocked this command: it uses {what}. Getting around fencepost is the \
         human's decision, not an agent's. Do not run it in another form; leave the files \
         another session holds out of your commits, wait for them, or ask the human."
    )
}

/// True when `words` run `git commit` with `-n`, its short `--no-verify`: as a
/// word of its own or in a cluster of short options (`-an`) before any option
/// that takes the rest as its value (`-mn` is the message "n"); the value of an
/// option (`-m -n`, `--message -ignore`) is skipped. A new user's find: `git
/// commit -n` went through.
fn commit_no_verify(words: &[String]) -> bool {
    // Commit's short options that take a value (in the same word, or the next).
    const VALUED: &str = "mFcCtSu";
    for command in commands_of(words, "git") {
        let i = subcommand_at(&command);
        if command.get(i).is_none_or(|w| w != "commit") {
            continue;
        }
        let mut words = command[i + 1..].iter();
        while let Some(word) = words.next() {
            if word == "--" {
                break;
            }
            if COMMIT_LONG_VALUED.contains(&word.as_str()) {
                words.next();
                continue;
            }
            let Some(cluster) = word.strip_prefix('-').filter(|c| !c.starts_with('-')) else {
                continue;
            };
            for (at, c) in cluster.char_indices() {
                if c == 'n' {
                    return true;
                }
                if VALUED.contains(c) {
                    // The value is the rest of the word, or (`-m` ending it) the
                    // next word.
                    if at + c.len_utf8() == cluster.len() && "mFcCt".contains(c) {
                        words.next();
                    }
                    break;
                }
            }
        }
    }
    false
}

/// True when a git command among `words` (as typed) is given `needle`, git's
/// `--no-verify`, as an option: a word of its own or an abbreviation git takes
/// for it (`--no-veri`; `--no-ver` could be `--no-verbose`). Not after `--` (a
/// path), not as an option's value (`-m --no-verify`), and not for a command
/// that runs no hook (`git grep -e --no-verify`, `git stash push -m …`: a
/// breaker found each blocked). An unknown command may be an alias of `commit`,
/// so it is looked into.
fn git_no_verify(words: &[String], needle: &str) -> bool {
    // Commands that run none of the guarded hooks (pre-commit, pre-push,
    // pre-merge-commit, pre-applypatch), whatever their `--no-verify` skips.
    const HOOKLESS: [&str; 36] = [
        "grep",
        "log",
        "show",
        "diff",
        "status",
        "stash",
        "add",
        "rm",
        "mv",
        "branch",
        "tag",
        "checkout",
        "switch",
        "restore",
        "reset",
        "fetch",
        "clone",
        "init",
        "blame",
        "describe",
        "rev-parse",
        "ls-files",
        "notes",
        "help",
        "rev-list",
        "range-diff",
        "rebase",
        "cherry-pick",
        "revert",
        "shortlog",
        "format-patch",
        "clean",
        "reflog",
        "cat-file",
        "ls-tree",
        "submodule",
    ];
    GIT_PROGRAMS.iter().any(|program| {
        commands_of(words, program).into_iter().any(|command| {
            let i = subcommand_at(&command);
            let subcommand = command.get(i).map_or("", String::as_str);
            if HOOKLESS.contains(&subcommand) {
                return false;
            }
            let valued = valued_options(subcommand);
            let mut args = command.iter().skip(i + 1);
            while let Some(word) = args.next() {
                if word == "--" {
                    return false;
                }
                if valued.iter().any(|list| list.contains(&word.as_str())) {
                    args.next();
                    continue;
                }
                let word = word.to_lowercase();
                if word == needle || (word.len() >= 9 && needle.starts_with(word.as_str())) {
                    return true;
                }
            }
            false
        })
    })
}

/// The options of git's `subcommand` whose value is the next word (so that a
/// value spelt `--no-verify` is not taken for the flag). Options that take none
/// (`commit -s`, `am -s`, `pull -t`) are not among them: the word after them is
/// looked at (a breaker: `git commit -s --no-verify` went through when every
/// command shared one list). An unknown command (an alias, say) skips nothing.
fn valued_options(subcommand: &str) -> [&'static [&'static str]; 2] {
    match subcommand {
        "commit" => [&["-m", "-F", "-c", "-C", "-t"], &COMMIT_LONG_VALUED],
        "push" => [
            &["-o", "--push-option", "--repo", "--receive-pack", "--exec"],
            &[],
        ],
        "merge" => [
            &[
                "-m",
                "-F",
                "-s",
                "-X",
                "--message",
                "--file",
                "--strategy",
                "--strategy-option",
            ],
            &[],
        ],
        "pull" => [
            &[
                "-s",
                "-X",
                "--strategy",
                "--strategy-option",
                "--upload-pack",
            ],
            &[],
        ],
        "am" => [&["--patch-format", "--resolvemsg"], &[]],
        _ => [&[], &[]],
    }
}

/// Where git's subcommand is among a git command's words: past git's own options
/// (and the values of those that take the next word).
fn subcommand_at(command: &[String]) -> usize {
    let mut i = 0;
    while i < command.len() && command[i].starts_with('-') {
        i += if GIT_VALUED.contains(&command[i].as_str()) {
            2
        } else {
            1
        };
    }
    i
}

/// Commit's long options whose value may be the next word.
const COMMIT_LONG_VALUED: [&str; 11] = [
    "--message",
    "--file",
    "--author",
    "--date",
    "--template",
    "--reuse-message",
    "--reedit-message",
    "--fixup",
    "--squash",
    "--cleanup",
    "--trailer",
];

/// git's own options whose value is the next word.
const GIT_VALUED: [&str; 7] = [
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--super-prefix",
    "--config-env",
];

/// True when `words` set git's `core.hooksPath` (lowercased words): `git -c
/// core.hooksPath=…`, the key given to git's environment (`GIT_CONFIG_KEY_0=…`,
/// `--config-env`), or `git config [set] core.hooksPath VALUE`. Reading it (`git
/// config --get core.hooksPath`, `grep hooksPath .git/config`, `echo`) or unsetting
/// it (which puts git's own hooks back) moves nothing (a breaker: every mention
/// was blocked, an agent looking into why a commit was refused among them).
fn hooks_path_moved(words: &[String]) -> bool {
    const KEY: &str = "core.hookspath";
    if words
        .iter()
        .any(|w| w.contains("core.hookspath=") || w.contains("=core.hookspath"))
    {
        return true;
    }
    commands_of(words, "git").into_iter().any(|command| {
        let Some(config) = command.iter().position(|w| w == "config") else {
            return false;
        };
        let args = &command[config + 1..];
        let Some(key) = args.iter().position(|w| w == KEY) else {
            return false;
        };
        let reading = args[..key].iter().any(|w| {
            matches!(
                w.as_str(),
                "--get"
                    | "--get-all"
                    | "--get-regexp"
                    | "--unset"
                    | "--unset-all"
                    | "get"
                    | "unset"
                    | "--list"
                    | "-l"
            )
        });
        !reading && args[key + 1..].iter().any(|w| !w.starts_with('-'))
    })
}

/// `fencepost break` or `fencepost hooks uninstall` with options between
/// (`fencepost --store DIR break`, as the refusals print it for a human): the
/// override, if any (a breaker: only the contiguous spelling was caught).
fn fencepost_override(words: &[String]) -> Option<&'static str> {
    for command in commands_of(words, "fencepost") {
        let mut i = 0;
        while i < command.len() && command[i].starts_with('-') {
            i += if command[i] == "--store" { 2 } else { 1 };
        }
        // Reading its help changes nothing (a new user: `fencepost break --help`
        // was blocked).
        let help = command[i..].iter().any(|w| w == "--help" || w == "-h");
        match command.get(i).map(String::as_str) {
            _ if help => {}
            Some("break") => return Some(ESCAPES[5].1),
            Some("hooks") if command.get(i + 1).is_some_and(|w| w == "uninstall") => {
                return Some(ESCAPES[4].1);
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spellings an agent would plainly type are escapes (new users and
    /// breakers found each of them going through).
    #[test]
    fn escapes_in_their_plain_spellings_are_found() {
        for command in [
            "git commit -n -m x",
            "git commit -anm wip",
            "git -C sub commit -n",
            "git --git-dir .git commit -n",
            "cd a && /usr/bin/git commit -n",
            "(git commit -n -m x)",
            "echo `git commit -n`",
            "git commit --no-verify -m x",
            "git commit --no-veri -m x",
            "git push --no-verif",
            "git commit $'--no-verify'",
            "sh -c 'git commit --no-verify -m x'",
            "bash -c \"git commit -n -m x\"",
            "eval git commit -n",
            "fencepost --store /x break --file a --reason r",
            "fencepost  break --lock l --reason r",
            "fencepost --store=/x break --lock l",
            "fencepost --store /x hooks uninstall",
            "git config core.hooksPath /dev/null",
            "git config --local core.hooksPath .nohooks",
            "git config set core.hooksPath /tmp/x",
            "git -c core.hooksPath=/dev/null commit -m x",
            "git -c Core.HooksPath=/x push",
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/x git commit",
            "git --config-env=core.hooksPath=NOHOOKS commit -m x",
            "sh -c 'git config core.hooksPath x'",
            "git commit {--no-verify,} -m x",
            "git commit -m x {-n,}",
            "git push --no-{verify,thing}",
            "hub commit --no-verify -m x",
            "cargo fmt && git commit --no-verify -m x",
            "xargs git commit --no-verify",
            // Plain spellings a breaker found going through.
            "git commit \\\n  --no-verify -m x",
            "git commit -a \\\n  -n -m x",
            "bash -lc 'git commit --no-verify -m x'",
            "sh -ec 'git commit --no-verify -m x'",
            "# commit what we have, it's fine\ngit commit --no-verify -m wip",
            "git commit -F - <<'EOF'\nDon't break it\nEOF\ngit push --no-verify",
            "cat <<EOF > msg\nit's\nEOF\ngit commit -n -F msg",
            "# it's stuck\nfencepost break --session abc --reason x",
            "git config \\\n core.hooksPath /dev/null",
            "git merge --no-verify topic",
            "git -C sub push --no-verify origin main",
            "git ci --no-verify -m x",
            "git commit -m x --no-verify -- a",
            // After an option that takes no value, a substitution, a redirection
            // (a breaker found each going through).
            "git commit -s --no-verify -m fix",
            "git commit -o --no-verify src/a.rs -m x",
            "git am -s --no-verify x.patch",
            "git pull -t --no-verify",
            "git push origin $(git branch --show-current) --no-verify",
            "git push origin `git branch --show-current` --no-verify",
            "git commit -m $(date +%s) --no-verify",
            "git commit -m wip --no-verify>/dev/null",
            "git commit -m wip 2>&1 --no-verify",
            "echo `git commit -n`",
            "x=$(git commit --no-verify -m x)",
            // A breaker's second round.
            "bash <<'EOF'\ngit commit -am wip --no-verify\nEOF",
            "sh -s <<EOF\ngit push --no-verify\nEOF",
            "git submodule foreach 'git commit -am bump --no-verify'",
            "git submodule foreach --recursive 'git commit -n -m x'",
            "git rebase -i --exec 'git commit --amend --no-edit --no-verify' HEAD~3",
            "git rebase -x 'git commit --amend -n' HEAD~2",
            "git commit -m wip &>/dev/null --no-verify",
            "git commit -m ';' --no-verify",
            "git commit -m '|' -n",
            "fish -c 'git commit --no-verify -m x'",
            "git commit -m \"$(cat <<'EOF'\nSupport the 27\" display\nEOF\n)\" --no-verify",
        ] {
            assert!(guard_escape(command).is_some(), "{command}");
        }
    }

    /// Harmless commands that only look alike pass: a flag's word inside a
    /// quoted message, an option's value, `-n` of other commands.
    #[test]
    fn lookalikes_pass() {
        for command in [
            "git commit -mn",
            "git commit -m 'fix --no-verify handling'",
            "git commit -m \"-ignore\"",
            "git commit -m -n",
            "git commit --message -n",
            "git push -n",
            "git log -n 3; git commit -m x",
            "grep -n foo src",
            "git commit -m x -- -n",
            "git commit --no-ver",
            "echo core.hooksPath",
            "git config --get core.hooksPath",
            "git config core.hooksPath",
            "git config get core.hooksPath",
            "git config --unset core.hooksPath",
            "grep -n hooksPath .git/config",
            "git config core.hooksPath; git status",
            // Other programs' --no-verify, and fencepost's help (a new user found
            // each blocked).
            "cargo package --no-verify",
            "cargo publish --no-verify && git status",
            "grep --no-verify README.md",
            "fencepost break --help",
            "fencepost break -h",
            "fencepost hooks uninstall --help",
            "echo 'run fencepost break to end it'",
            "git commit -F - <<'EOF'\nfix: handle --no-verify in our own tool\nEOF",
            "echo hi # git commit --no-verify",
            // A path, an option's value, a command that runs no hook (a breaker
            // found each blocked).
            "git commit -m x -- --no-verify",
            "git commit -m --no-verify",
            "git grep -e --no-verify",
            "git grep --no-verify",
            "git stash push -m --no-verify",
            "git log --grep --no-verify",
            "git rev-list --all --grep --no-verify",
            "git range-diff --no-verify",
            "git push -o --no-verify origin",
            "git merge -s --no-verify",
            "git commit -m \"$(git log -1 --format=%s)\" -- --no-verify",
            // Claude Code's usual commit message (a breaker: blocked as `-n`).
            "git commit -m \"$(cat <<'EOF'\nReplace \"head -n 5\" with a limit option\nEOF\n)\"",
            "git commit -m \"$(cat <<'EOF'\nUse grep -rn and git push --no-verify in docs (ls -lan)\nEOF\n)\"",
            "cat <<'EOF' | python3\nprint(\"git commit --no-verify\")\nEOF",
        ] {
            assert_eq!(guard_escape(command), None, "{command}");
        }
    }
}
