//! How the escape check reads a shell command: split into words as a POSIX
//! shell splits them (quotes, escapes, here-documents, command substitutions,
//! brace expansion), with operators told apart from quoted words, and the commands
//! of a program found among them (`cli/src/hooks/escape.rs` judges them).

/// The shells whose `-c` command, or here-document, is a command of its own.
pub(super) const SHELLS: [&str; 6] = ["sh", "bash", "zsh", "dash", "ksh", "fish"];

/// What marks an operator among [`shell_words`]' words, so that a quoted `';'`
/// (a word) is not taken for a `;` (a breaker: `git commit -m ';' --no-verify`).
pub(super) const OP: char = '\u{1}';

/// The operator `c` as a word.
fn op(c: char) -> String {
    format!("{OP}{c}")
}

/// True when `word` is the operator `c`.
fn is_op(word: &str, c: char) -> bool {
    word.strip_prefix(OP)
        .is_some_and(|rest| rest.len() == c.len_utf8() && rest.starts_with(c))
}

/// Words that end a command: what follows is another command.
fn ends_command(word: &str) -> bool {
    [';', '&', '|', '\n', '(', ')', '`']
        .iter()
        .any(|&c| is_op(word, c))
}

/// `command` split into words as a POSIX shell splits them: on blanks outside
/// quotes, with `'…'`, `$'…'`, `"…"` and backslash escapes taken out; `;`, `&`,
/// `|`, `(`, `)`, `` ` `` and newlines are words of their own (they end a command),
/// marked by [`OP`], as are redirections.
pub(super) fn shell_words(command: &str) -> Vec<String> {
    let (mut words, mut word, mut in_word) = (Vec::new(), String::new(), false);
    let mut chars = command.chars().peekable();
    let end = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '$' if chars.peek() == Some(&'\'') => {
                // ANSI-C quoting: escapes are kept as typed, which still shows a
                // flag spelt plainly inside.
                chars.next();
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '\'' => break,
                        '\\' => word.extend(chars.next()),
                        c => word.push(c),
                    }
                }
            }
            '\'' => {
                in_word = true;
                word.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        // A command substitution is part of the quoted word, quotes
                        // and here-documents inside it too (a breaker: Claude Code's
                        // `-m "$(cat <<'EOF' … "head -n 5" … EOF )"` was split at
                        // the inner quote, and `-n` taken for commit's).
                        '$' if chars.peek() == Some(&'(') => {
                            chars.next();
                            word.push_str("$(");
                            word.push_str(&substitution_text(&mut chars));
                            word.push(')');
                        }
                        c => word.push(c),
                    }
                }
            }
            // A backslash before a newline joins the lines (a breaker: `git
            // commit \<newline> --no-verify` was two commands).
            '\\' if chars.peek() == Some(&'\n') => {
                chars.next();
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            // A comment, to the end of its line: an apostrophe in it opens no quote
            // (a breaker: `# it's fine` hid the next line's command).
            '#' if !in_word => while chars.next_if(|&c| c != '\n').is_some() {},
            '<' if !in_word && chars.peek() == Some(&'<') && !shell_reads(&words) => {
                // A here-document: its body, from the next line to its delimiter,
                // is text, not commands (a breaker: "Don't" in a commit message
                // opened a quote that hid `git push --no-verify` after it).
                chars.next();
                chars.next_if_eq(&'-');
                let mut rest: String = chars.clone().collect();
                let line_end = rest.find('\n').unwrap_or(rest.len());
                let delimiter = rest[..line_end]
                    .split_whitespace()
                    .next()
                    .map(|d| d.trim_matches(['\'', '"']).to_string())
                    .filter(|d| !d.is_empty() && !d.starts_with('<'));
                if let Some(delimiter) = delimiter {
                    // The rest of this line stays a command; the body is dropped.
                    let body_start = (line_end + 1).min(rest.len());
                    let body_end = rest[body_start..]
                        .split_inclusive('\n')
                        .scan(body_start, |at, line| {
                            let start = *at;
                            *at += line.len();
                            Some((start, *at, line.trim() == delimiter))
                        })
                        .find(|(_, _, last)| *last)
                        .map_or(rest.len(), |(_, end, _)| end);
                    rest.replace_range(body_start..body_end, "");
                    end(&mut word, &mut in_word, &mut words);
                    let mut done: Vec<String> =
                        words.into_iter().flat_map(braces_expanded).collect();
                    done.append(&mut shell_words(&rest));
                    return done;
                }
            }
            // A redirection ends the word before it (`--no-verify>/dev/null`, a
            // breaker); `>&`, `<&` and `&>` name a descriptor or both outputs, not
            // a new command.
            '>' | '<' => {
                end(&mut word, &mut in_word, &mut words);
                chars.next_if(|&c| c == '&' || c == '>' || c == '|');
                words.push(op('>'));
            }
            '&' if chars.peek() == Some(&'>') => {
                end(&mut word, &mut in_word, &mut words);
                chars.next();
                chars.next_if_eq(&'>');
                words.push(op('>'));
            }
            ';' | '&' | '|' | '\n' | '(' | ')' | '`' => {
                end(&mut word, &mut in_word, &mut words);
                words.push(op(c));
            }
            c if c.is_whitespace() => end(&mut word, &mut in_word, &mut words),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end(&mut word, &mut in_word, &mut words);
    // Brace expansion, as the shell makes it: `{--no-verify,}` is `--no-verify`
    // and an empty word (a breaker's spelling). Quoted braces are expanded too,
    // which at worst blocks a quoted message spelling an escape in braces.
    words.into_iter().flat_map(braces_expanded).collect()
}

/// True when the command being split (the words since the last operator) runs a
/// shell, whose here-document is its script: commands, not text (a breaker:
/// `bash <<'EOF'` with `git commit --no-verify` in its body went through).
fn shell_reads(words: &[String]) -> bool {
    words
        .iter()
        .rev()
        .take_while(|w| !ends_command(w))
        .last()
        .is_some_and(|first| SHELLS.contains(&first.rsplit('/').next().unwrap_or(first)))
}

/// The text of a command substitution inside double quotes, after its `$(`, up to
/// its closing `)` (consumed, not returned): nested parentheses, quotes and
/// here-document bodies are taken whole, so a quote or parenthesis in them closes
/// nothing.
fn substitution_text(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> String {
    let mut text = String::new();
    let mut depth = 1usize;
    while let Some(c) = chars.next() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            '\'' => {
                text.push(c);
                for c in chars.by_ref() {
                    text.push(c);
                    if c == '\'' {
                        break;
                    }
                }
                continue;
            }
            '"' => {
                text.push(c);
                while let Some(c) = chars.next() {
                    text.push(c);
                    match c {
                        '\\' => text.extend(chars.next()),
                        '"' => break,
                        _ => {}
                    }
                }
                continue;
            }
            '\\' => {
                text.push(c);
                text.extend(chars.next());
                continue;
            }
            '<' if chars.peek() == Some(&'<') => {
                // A here-document: its delimiter line, then its body to the line
                // that is the delimiter.
                let mut line = String::from("<");
                while let Some(c) = chars.next_if(|&c| c != '\n') {
                    line.push(c);
                }
                let delimiter = line
                    .trim_start_matches(['<', '-'])
                    .split_whitespace()
                    .next()
                    .map(|d| d.trim_matches(['\'', '"']).to_string())
                    .unwrap_or_default();
                text.push_str(&line);
                while let Some(c) = chars.next() {
                    text.push(c);
                    if c == '\n' {
                        let mut body = String::new();
                        while let Some(c) = chars.next_if(|&c| c != '\n') {
                            body.push(c);
                        }
                        text.push_str(&body);
                        if delimiter.is_empty() || body.trim() == delimiter {
                            break;
                        }
                    }
                }
                continue;
            }
            _ => {}
        }
        text.push(c);
    }
    text
}

/// The words a shell's brace expansion makes of `word` (`a{b,c}d`: `abd`, `acd`),
/// at most [`BRACE_WORDS_MAX`] of them; a word without a `{…,…}` is itself.
fn braces_expanded(word: String) -> Vec<String> {
    let mut done = Vec::new();
    let mut pending = vec![word];
    while let Some(word) = pending.pop() {
        let group = word.find('{').and_then(|open| {
            let close = open + word[open..].find('}')?;
            word[open..close].contains(',').then_some((open, close))
        });
        match group {
            Some((open, close)) if done.len() + pending.len() < BRACE_WORDS_MAX => {
                for alternative in word[open + 1..close].split(',') {
                    pending.push(format!(
                        "{}{alternative}{}",
                        &word[..open],
                        &word[close + 1..]
                    ));
                }
            }
            _ => done.push(word),
        }
    }
    done.reverse();
    done
}

/// How many words one word's brace expansion may make before the rest is left as
/// typed (a command is a line an agent typed, not a generator).
const BRACE_WORDS_MAX: usize = 64;

/// The commands among `words` that run `program` (a word that is it, or a path
/// ending in it): for each, the words after it up to the end of its command.
/// A command substitution inside the command (`$(…)`, or backquotes when the
/// command is not itself inside them) is one word of it and does not end it
/// (a breaker: `git push origin $(git branch --show-current) --no-verify` hid the
/// flag); the command inside is found as a command of its own.
pub(super) fn commands_of(words: &[String], program: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (at, word) in words.iter().enumerate() {
        if word.rsplit('/').next() == Some(program) {
            // Inside backquotes itself: the next backquote closes it.
            let inside_ticks = words[..at].iter().filter(|w| is_op(w, '`')).count() % 2 == 1;
            let (mut depth, mut in_ticks) = (0usize, false);
            let mut command = Vec::new();
            for w in &words[at + 1..] {
                match w.as_str() {
                    // One word in its place: it may be an option's value.
                    w if is_op(w, '(') && depth == 0 && !in_ticks => {
                        depth = 1;
                        command.push("$(…)".to_string());
                    }
                    w if is_op(w, '(') => depth += 1,
                    w if is_op(w, ')') && depth > 0 => depth -= 1,
                    w if is_op(w, '`') && !inside_ticks && depth == 0 => {
                        in_ticks = !in_ticks;
                        if in_ticks {
                            command.push("`…`".to_string());
                        }
                    }
                    _ if depth > 0 || in_ticks => {}
                    w if ends_command(w) => break,
                    // The `$` of a `$(`.
                    "$" => {}
                    _ => command.push(w.clone()),
                }
            }
            found.push(command);
        }
    }
    found
}
