//! A small, forgiving reader of shell command lines: enough to find each simple command's
//! program and arguments (for the S6 interactive rules) and the words that may be paths (for
//! the G16 `.kodikignore` check). It is not a shell parser: quoting, operators, redirections,
//! comments and heredocs are understood; expansions (`$x`, `$(…)`, globs) are marked dynamic
//! and not interpreted. Checks built on it are best effort.

/// One word of a command line after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// The text with quotes removed.
    pub text: String,
    /// Holds an unquoted expansion or glob, so its real value is unknown.
    pub dynamic: bool,
}

/// One simple command: the words between operators.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SimpleCommand {
    /// Program and arguments (assignments and redirections excluded).
    pub words: Vec<Word>,
    /// Targets of redirections (`> out.txt`, `< in.txt`).
    pub redirects: Vec<Word>,
    /// Its output goes into a pipe (`cmd | …`).
    pub piped_out: bool,
    /// Its stdin is given: a pipe into it, a `<` redirect, a heredoc or a here-string. A REPL
    /// given its input that way runs it as a script.
    pub stdin_fed: bool,
}

impl SimpleCommand {
    /// The argument words as plain strings.
    pub fn args(&self) -> Vec<String> {
        self.words.iter().map(|w| w.text.clone()).collect()
    }
}

#[derive(Default)]
struct Reader {
    commands: Vec<SimpleCommand>,
    current: SimpleCommand,
    word: String,
    in_word: bool,
    dynamic: bool,
    /// The next word is the target of this redirection.
    redirect_next: bool,
    /// The next word is a heredoc delimiter.
    heredoc_next: Option<bool>,
    /// Delimiters (and whether `<<-`) of heredocs whose bodies start after the next newline.
    pending_heredocs: Vec<(String, bool)>,
    /// The next word is a here-string, not a path.
    herestring_next: bool,
}

impl Reader {
    fn push_char(&mut self, c: char) {
        self.word.push(c);
        self.in_word = true;
    }

    fn end_word(&mut self) {
        if !self.in_word {
            return;
        }
        let text = std::mem::take(&mut self.word);
        let word = Word { text, dynamic: std::mem::take(&mut self.dynamic) };
        self.in_word = false;
        let herestring = std::mem::take(&mut self.herestring_next);
        let redirect = std::mem::take(&mut self.redirect_next);
        if let Some(dash) = self.heredoc_next.take() {
            self.pending_heredocs.push((word.text, dash));
        } else if redirect {
            self.current.redirects.push(word);
        } else if !(herestring || self.current.words.is_empty() && is_assignment(&word.text)) {
            // Leading `NAME=value` words are assignments, not the program.
            self.current.words.push(word);
        }
    }

    fn end_command(&mut self, piped: bool) {
        self.end_word();
        let mut cmd = std::mem::take(&mut self.current);
        cmd.piped_out = piped;
        if !cmd.words.is_empty() || !cmd.redirects.is_empty() {
            self.commands.push(cmd);
        }
        self.current.stdin_fed = piped;
    }
}

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// Splits a command line into simple commands.
pub(crate) fn parse(line: &str) -> Vec<SimpleCommand> {
    let chars: Vec<char> = line.chars().collect();
    let mut r = Reader::default();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' => r.end_word(),
            '\n' => {
                r.end_command(false);
                i = skip_heredoc_bodies(&chars, i + 1, &mut r.pending_heredocs);
                continue;
            }
            '#' if !r.in_word => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '\\' => {
                if let Some(&n) = chars.get(i + 1) {
                    if n != '\n' {
                        r.push_char(n);
                    }
                    i += 2;
                    continue;
                }
            }
            '\'' => {
                r.in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    r.word.push(chars[i]);
                    i += 1;
                }
            }
            '"' => {
                r.in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    match chars[i] {
                        '\\' if i + 1 < chars.len() && matches!(chars[i + 1], '"' | '\\' | '$' | '`') => {
                            r.word.push(chars[i + 1]);
                            i += 1;
                        }
                        '$' | '`' => {
                            r.dynamic = true;
                            let end = skip_expansion(&chars, i);
                            r.word.extend(&chars[i..end]);
                            i = end;
                            continue;
                        }
                        ch => r.word.push(ch),
                    }
                    i += 1;
                }
            }
            '$' | '`' => {
                r.dynamic = true;
                r.in_word = true;
                let end = skip_expansion(&chars, i);
                r.word.extend(&chars[i..end]);
                i = end;
                continue;
            }
            '*' | '?' | '[' if r.in_word || chars.get(i + 1).is_some_and(|n| !n.is_whitespace()) => {
                r.dynamic = true;
                r.push_char(c);
            }
            ';' | '(' | ')' => r.end_command(false),
            '|' => {
                let next = chars.get(i + 1).copied();
                r.end_command(!matches!(next, Some('|')));
                if matches!(next, Some('|') | Some('&')) {
                    i += 1;
                }
            }
            '&' if chars.get(i + 1) == Some(&'>') => {
                r.end_word();
                i += 2;
                if chars.get(i) == Some(&'>') {
                    i += 1;
                }
                r.redirect_next = true;
                continue;
            }
            '&' => {
                r.end_command(false);
                if chars.get(i + 1) == Some(&'&') {
                    i += 1;
                }
            }
            '<' | '>' => {
                // A word made only of digits right before is a file descriptor (`2>`).
                if r.in_word && !r.dynamic && r.word.chars().all(|d| d.is_ascii_digit()) {
                    r.word.clear();
                    r.in_word = false;
                } else {
                    r.end_word();
                }
                let mut op = String::from(c);
                i += 1;
                while let Some(&n) = chars.get(i) {
                    if matches!(n, '<' | '>' | '&' | '|' | '-') && op.len() < 3 {
                        op.push(n);
                        i += 1;
                    } else {
                        break;
                    }
                }
                if matches!(op.as_str(), "<" | "<<" | "<<-" | "<<<") {
                    r.current.stdin_fed = true;
                }
                match op.as_str() {
                    "<<" => r.heredoc_next = Some(false),
                    "<<-" => r.heredoc_next = Some(true),
                    "<<<" => r.herestring_next = true,
                    o if o.ends_with('&') => {
                        // `2>&1`, `>&-`: the target is a descriptor, not a file.
                        while chars.get(i).is_some_and(|d| d.is_ascii_digit() || *d == '-') {
                            i += 1;
                        }
                    }
                    _ => r.redirect_next = true,
                }
                continue;
            }
            _ => r.push_char(c),
        }
        i += 1;
    }
    r.end_command(false);
    r.commands
}

/// Index just past a `$…`/`` `…` `` expansion starting at `start`.
fn skip_expansion(chars: &[char], start: usize) -> usize {
    let mut i = start;
    if chars[i] == '`' {
        i += 1;
        while i < chars.len() && chars[i] != '`' {
            i += 1;
        }
        return (i + 1).min(chars.len());
    }
    i += 1;
    match chars.get(i) {
        Some('(') | Some('{') => {
            let (open, close) = if chars[i] == '(' { ('(', ')') } else { ('{', '}') };
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == open {
                    depth += 1;
                } else if chars[i] == close {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                i += 1;
            }
            chars.len()
        }
        _ => {
            while i < chars.len() && (chars[i].is_alphanumeric() || matches!(chars[i], '_' | '@' | '*' | '#' | '?')) {
                i += 1;
            }
            i
        }
    }
}

/// Skips heredoc bodies that start at `i`, returning where commands resume.
fn skip_heredoc_bodies(chars: &[char], mut i: usize, pending: &mut Vec<(String, bool)>) -> usize {
    for (delim, dash) in pending.drain(..) {
        loop {
            if i >= chars.len() {
                return i;
            }
            let end = chars[i..].iter().position(|c| *c == '\n').map_or(chars.len(), |p| i + p);
            let line: String = chars[i..end].iter().collect();
            i = (end + 1).min(chars.len());
            let line = if dash { line.trim_start_matches('\t') } else { line.as_str() };
            if line == delim {
                break;
            }
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn programs(line: &str) -> Vec<String> {
        parse(line).iter().map(|c| c.words.first().map(|w| w.text.clone()).unwrap_or_default()).collect()
    }

    #[test]
    fn operators_split_commands_and_quotes_are_removed() {
        let cmds = parse("cd 'a b' && FOO=1 ls -la \"x y\"| grep z; echo a\\ b &");
        assert_eq!(programs("cd 'a b' && FOO=1 ls -la \"x y\"| grep z; echo a\\ b &"), ["cd", "ls", "grep", "echo"]);
        assert_eq!(cmds[0].args(), ["cd", "a b"]);
        assert_eq!(cmds[1].args(), ["ls", "-la", "x y"]);
        assert!(cmds[1].piped_out && !cmds[2].piped_out);
        assert_eq!(cmds[3].args(), ["echo", "a b"]);
    }

    #[test]
    fn redirections_and_descriptors() {
        let cmds = parse("make 2>&1 >build.log <in.txt &>all.log");
        assert_eq!(cmds[0].args(), ["make"]);
        let r: Vec<_> = cmds[0].redirects.iter().map(|w| w.text.as_str()).collect();
        assert_eq!(r, ["build.log", "in.txt", "all.log"]);
    }

    #[test]
    fn heredoc_bodies_and_comments_are_not_commands() {
        let line = "cat <<'EOF' > out.txt\nvim inside\nEOF\n# vim comment\nls";
        assert_eq!(programs(line), ["cat", "ls"]);
        assert_eq!(programs("cat <<-END\n\tless x\n\tEND\necho ok"), ["cat", "echo"]);
    }

    #[test]
    fn stdin_from_a_pipe_a_redirect_or_a_heredoc_is_seen() {
        let fed = |line: &str| parse(line).iter().map(|c| c.stdin_fed).collect::<Vec<_>>();
        assert_eq!(fed("echo x | python3"), [false, true]);
        assert_eq!(fed("sqlite3 t.db < q.sql; python3"), [true, false]);
        assert_eq!(fed("python3 <<'EOF'\nprint(1)\nEOF\nnode"), [true, false]);
        assert_eq!(fed("bc <<< 1+1 || python3 2>&1"), [true, false]);
        assert_eq!(fed("a > out.txt && b"), [false, false]);
    }

    #[test]
    fn expansions_are_dynamic() {
        let cmds = parse("cat $HOME/x \"$(pwd)/y\" *.rs plain");
        let dynamic: Vec<bool> = cmds[0].words.iter().map(|w| w.dynamic).collect();
        assert_eq!(dynamic, [false, true, true, true, false]);
    }
}
