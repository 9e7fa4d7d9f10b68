//! Just enough of the shell's syntax to find the program of `sh -c
//! 'COMMAND'`: its options, the command string's first simple command
//! (quotes removed, assignments and `exec` skipped), and `NAME=VALUE`
//! words. An expansion (`$X`, a glob, `~`) or compound syntax means the
//! program cannot be told.

/// `NAME=VALUE` (a shell's or `env`'s assignment).
pub fn assignment(w: &str) -> Option<(&str, &str)> {
    let (name, value) = w.split_once('=')?;
    let ok = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then_some((name, value))
}

/// `env -S`'s splitting: words at white space, quotes removed.
pub fn split_words(s: &str) -> Vec<String> {
    shell_words(s).into_iter().map(|w| w.text).collect()
}

/// A shell's `-c` string: `sh [OPTIONS] -c 'COMMAND' [NAME [ARG]...]`;
/// `None` for a shell running a script or reading its input.
pub fn dash_c(args: &[String]) -> Option<&str> {
    let mut i = 0;
    let mut with_c = false;
    while let Some(w) = args.get(i) {
        if w == "--" || w == "-" {
            i += 1;
            break;
        }
        if let Some(long) = w.strip_prefix("--") {
            // bash's --rcfile/--init-file take a file.
            if matches!(long, "rcfile" | "init-file") {
                i += 1;
            }
        } else if let Some(cluster) = w.strip_prefix(['-', '+']).filter(|c| !c.is_empty()) {
            with_c |= w.starts_with('-') && cluster.contains('c');
            // -o/+o name a `set -o` option, bash's -O/+O a shopt one.
            i += cluster.chars().filter(|c| matches!(c, 'o' | 'O')).count();
        } else {
            break;
        }
        i += 1;
    }
    with_c.then(|| args.get(i).map(String::as_str)).flatten()
}

/// One word of a shell command string.
#[derive(Debug)]
struct Word {
    text: String,
    /// It has an unquoted expansion (`$`, a backquote, a glob, `~`), so its
    /// text is not what the shell would run.
    expands: bool,
}

/// The words of `s` up to the end of its first simple command (an
/// unquoted `;`, `&`, `|`, `<`, `>`, `(`, `)`, newline or comment).
fn shell_words(s: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut cur: Option<Word> = None;
    let mut chars = s.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            let w = cur.get_or_insert(Word {
                text: String::new(),
                expands: false,
            });
            if c == q {
                quote = None;
            } else if q == '"' && c == '\\' {
                if let Some(n) = chars.next() {
                    w.text.push(n);
                }
            } else {
                w.expands |= q == '"' && matches!(c, '$' | '`');
                w.text.push(c);
            }
            continue;
        }
        match c {
            ' ' | '\t' => {
                if let Some(w) = cur.take() {
                    words.push(w);
                }
            }
            ';' | '&' | '|' | '<' | '>' | '(' | ')' | '\n' => {
                words.extend(cur.take());
                return words;
            }
            '#' if cur.is_none() => {
                return words;
            }
            '\'' | '"' => {
                quote = Some(c);
                cur.get_or_insert(Word {
                    text: String::new(),
                    expands: false,
                });
            }
            '\\' => {
                let w = cur.get_or_insert(Word {
                    text: String::new(),
                    expands: false,
                });
                if let Some(n) = chars.next() {
                    w.text.push(n);
                }
            }
            _ => {
                let w = cur.get_or_insert(Word {
                    text: String::new(),
                    expands: false,
                });
                w.expands |=
                    matches!(c, '$' | '`' | '*' | '?' | '[') || (c == '~' && w.text.is_empty());
                w.text.push(c);
            }
        }
    }
    words.extend(cur);
    words
}

/// Words a shell reads as syntax, not as a program to run.
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do",
    "done", "function", "{", "}", "!", "[[", "]]", "in",
];

/// The first simple command of a `-c` string: its words from the program
/// on, and the `PATH` it assigns.
#[derive(Debug, PartialEq, Eq)]
pub struct Command {
    pub words: Vec<String>,
    pub path: Option<String>,
}

/// The first simple command of `s`, past its assignments (`PATH=...`
/// kept), `exec`, `command`, `time` and `nohup`; `None` when its first
/// word is syntax or an expansion (not a program).
pub fn first_command(s: &str) -> Option<Command> {
    let words = shell_words(s);
    let mut path = None;
    let mut i = 0;
    while let Some(w) = words.get(i) {
        match assignment(&w.text) {
            Some(("PATH", v)) if !w.expands => path = Some(v.to_string()),
            Some(_) => {}
            None => break,
        }
        i += 1;
    }
    // Builtins that run the command that follows them.
    while let Some(w) = words.get(i) {
        match w.text.as_str() {
            "exec" | "command" | "time" | "nohup" if !w.expands => {
                i += 1;
                // exec -a NAME, command -p, time -p.
                while let Some(o) = words.get(i).filter(|o| o.text.starts_with('-')) {
                    i += if o.text == "-a" { 2 } else { 1 };
                }
            }
            _ => break,
        }
    }
    let first = words.get(i)?;
    if first.expands
        || first.text.is_empty()
        || RESERVED.contains(&first.text.as_str())
        || first.text.contains('=')
    {
        return None;
    }
    Some(Command {
        words: words[i..].iter().map(|w| w.text.clone()).collect(),
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn the_command_string_follows_the_options() {
        assert_eq!(dash_c(&w(&["-c", "x y"])), Some("x y"));
        assert_eq!(dash_c(&w(&["-e", "-o", "pipefail", "-c", "x"])), Some("x"));
        assert_eq!(dash_c(&w(&["--norc", "-ec", "x", "name", "a"])), Some("x"));
        assert_eq!(dash_c(&w(&["--rcfile", "f", "-c", "x"])), Some("x"));
        assert_eq!(dash_c(&w(&["script.sh", "-c"])), None);
        assert_eq!(dash_c(&w(&["+c", "x"])), None);
        assert_eq!(dash_c(&w(&["-c"])), None);
    }

    #[test]
    fn the_first_command_is_read_with_its_quotes_removed() {
        let c = first_command("A=1 PATH=/x:/y exec -a n './my prog' \"b c\" d\\ e; f").unwrap();
        assert_eq!(c.words, w(&["./my prog", "b c", "d e"]));
        assert_eq!(c.path.as_deref(), Some("/x:/y"));
        assert_eq!(first_command("prog|cat").unwrap().words, w(&["prog"]));
        assert_eq!(first_command("prog # note").unwrap().words, w(&["prog"]));
        for s in [
            "",
            "# only",
            "$P",
            "`p`",
            "*.x",
            "~/p",
            "{ p; }",
            "for i in 1; do p; done",
            "X=1",
        ] {
            assert_eq!(first_command(s), None, "{s:?}");
        }
        assert_eq!(assignment("PATH=/a=b"), Some(("PATH", "/a=b")));
        assert_eq!(assignment("1X=2"), None);
        assert_eq!(assignment("--x=2"), None);
        assert_eq!(split_words("-i  'a b'  c"), w(&["-i", "a b", "c"]));
    }
}
