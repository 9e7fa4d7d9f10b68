//! Looking through the programs that only run another one (`env X=1 prog`,
//! `sh -c 'prog ...'`, `nice -n 5 prog`, ...): from a wrapper's name and
//! arguments, the program it runs and that program's arguments. Text only:
//! nothing is resolved or read here.

use super::shell::{self, assignment, split_words};

/// What a wrapper runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inner {
    pub program: String,
    pub args: Vec<String>,
    /// The `PATH` the wrapper gives it (`env PATH=... prog`).
    pub path: Option<String>,
    /// The directory it runs in (`env -C DIR prog`).
    pub chdir: Option<String>,
}

/// Whether `name` is a wrapper, and what it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unwrapped {
    /// Not a wrapper: decide on the program itself.
    No,
    /// A wrapper running this program.
    Runs(Inner),
    /// A wrapper whose program cannot be told from its arguments (a shell
    /// running a script, `sh -c` of a compound command, `taskset -p`).
    Unknown,
}

/// How a wrapper's options are read (GNU `getopt_long` with `+`: the
/// options end at the first word that is not one, which starts the
/// program's own words).
struct Spec {
    /// Short options that take an argument (`-n 5`, `-n5`).
    short_arg: &'static str,
    /// Long options that take an argument (`--adjustment 5`,
    /// `--adjustment=5`); other long options take one only after `=`.
    long_arg: &'static [&'static str],
    /// Options after which no program follows (`taskset -p`, `chrt -m`).
    short_no_program: &'static str,
    long_no_program: &'static [&'static str],
    /// Words between the options and the program (`taskset`'s mask,
    /// `timeout`'s duration).
    positional: usize,
}

const fn spec(short_arg: &'static str, long_arg: &'static [&'static str]) -> Spec {
    Spec {
        short_arg,
        long_arg,
        short_no_program: "",
        long_no_program: &[],
        positional: 0,
    }
}

/// The wrappers that take a program and options of their own, by name.
fn spec_of(name: &str) -> Option<Spec> {
    Some(match name {
        "nohup" => spec("", &[]),
        "setsid" => spec("", &[]),
        "time" => spec("fo", &["format", "output"]),
        "nice" => spec("n", &["adjustment"]),
        "stdbuf" => spec("ioe", &["input", "output", "error"]),
        "numactl" => Spec {
            short_arg: "iwpPcNCmSfoLMI",
            long_arg: &[
                "interleave",
                "weighted-interleave",
                "preferred",
                "preferred-many",
                "cpubind",
                "cpunodebind",
                "physcpubind",
                "membind",
                "shm",
                "file",
                "offset",
                "length",
                "shmmode",
                "shmid",
            ],
            short_no_program: "sHdD",
            long_no_program: &["show", "hardware", "dump", "dump-nodes"],
            positional: 0,
        },
        "taskset" => Spec {
            short_arg: "",
            long_arg: &[],
            short_no_program: "p",
            long_no_program: &["pid"],
            positional: 1,
        },
        "timeout" => Spec {
            short_arg: "ks",
            long_arg: &["kill-after", "signal"],
            short_no_program: "",
            long_no_program: &[],
            positional: 1,
        },
        "ionice" => Spec {
            short_arg: "cnpPu",
            long_arg: &["class", "classdata", "pid", "pgid", "uid"],
            short_no_program: "pPu",
            long_no_program: &["pid", "pgid", "uid"],
            positional: 0,
        },
        "chrt" => Spec {
            short_arg: "TPD",
            long_arg: &["sched-runtime", "sched-period", "sched-deadline"],
            short_no_program: "pm",
            long_no_program: &["pid", "max"],
            // The priority, when given (digits; some policies take none).
            positional: 0,
        },
        "prlimit" => Spec {
            short_arg: "po",
            long_arg: &["pid", "output"],
            short_no_program: "p",
            long_no_program: &["pid"],
            positional: 0,
        },
        _ => return None,
    })
}

/// Shells whose `-c` string is read.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"];

/// What the wrapper named `name` (a file name) runs, given its arguments.
pub fn unwrap(name: &str, args: &[String]) -> Unwrapped {
    if name == "env" {
        return env(args);
    }
    if SHELLS.contains(&name) {
        return shell(args);
    }
    let Some(spec) = spec_of(name) else {
        return Unwrapped::No;
    };
    let Some(mut at) = skip_options(&spec, args) else {
        return Unwrapped::Unknown;
    };
    at += spec.positional;
    if name == "chrt" && args.get(at).is_some_and(|w| is_number(w)) {
        at += 1;
    }
    runs(&args[at.min(args.len())..], None, None)
}

/// The program and its words, if there is one.
fn runs(words: &[String], path: Option<String>, chdir: Option<String>) -> Unwrapped {
    match words.split_first() {
        Some((p, rest)) if !p.is_empty() => Unwrapped::Runs(Inner {
            program: p.clone(),
            args: rest.to_vec(),
            path,
            chdir,
        }),
        _ => Unwrapped::Unknown,
    }
}

fn is_number(w: &str) -> bool {
    !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit())
}

/// The index of the first word after the options, or `None` when an
/// option means that no program follows.
fn skip_options(spec: &Spec, args: &[String]) -> Option<usize> {
    let mut i = 0;
    while let Some(w) = args.get(i) {
        if w == "--" {
            return Some(i + 1);
        }
        if let Some(long) = w.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            if spec.long_no_program.contains(&name) {
                return None;
            }
            if !attached && spec.long_arg.contains(&name) {
                i += 1;
            }
        } else if let Some(cluster) = w.strip_prefix('-').filter(|c| !c.is_empty()) {
            for (k, c) in cluster.char_indices() {
                if spec.short_no_program.contains(c) {
                    return None;
                }
                if spec.short_arg.contains(c) {
                    // The rest of the word is the argument, else the next word.
                    if k + c.len_utf8() == cluster.len() {
                        i += 1;
                    }
                    break;
                }
            }
        } else {
            return Some(i);
        }
        i += 1;
    }
    Some(i)
}

/// `env [OPTION]... [NAME=VALUE]... [PROGRAM [ARG]...]`.
fn env(args: &[String]) -> Unwrapped {
    let mut words: Vec<String> = args.to_vec();
    let mut path = None;
    let mut chdir = None;
    let mut i = 0;
    let mut options = true;
    while i < words.len() {
        let w = words[i].clone();
        if options && w == "--" {
            options = false;
        } else if options && w.starts_with("--") {
            let (name, value) = match w[2..].split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (w[2..].to_string(), None),
            };
            let takes = ["unset", "chdir", "split-string"].contains(&name.as_str());
            let value = match value {
                Some(v) => Some(v),
                None if takes => {
                    i += 1;
                    words.get(i).cloned()
                }
                None => None,
            };
            match (name.as_str(), value) {
                ("chdir", Some(d)) => chdir = Some(d),
                ("split-string", Some(s)) => {
                    // Its words take its place, options included.
                    words.splice(i + 1..i + 1, split_words(&s));
                }
                _ => {}
            }
        } else if options && w.starts_with('-') && w.len() > 1 {
            let cluster = &w[1..];
            for (k, c) in cluster.char_indices() {
                if "uCS".contains(c) {
                    let rest = &cluster[k + 1..];
                    let value = if rest.is_empty() {
                        i += 1;
                        words.get(i).cloned()
                    } else {
                        Some(rest.to_string())
                    };
                    match (c, value) {
                        ('C', Some(d)) => chdir = Some(d),
                        ('S', Some(s)) => {
                            words.splice(i + 1..i + 1, split_words(&s));
                        }
                        _ => {}
                    }
                    break;
                }
            }
        } else if options && w == "-" {
            // Same as -i.
        } else if let Some((name, value)) = assignment(&w) {
            options = false;
            if name == "PATH" {
                path = Some(value.to_string());
            }
        } else {
            return runs(&words[i..], path, chdir);
        }
        i += 1;
    }
    // `env` alone prints the environment: no program.
    Unwrapped::Unknown
}

/// A shell running the first simple command of its `-c` string.
fn shell(args: &[String]) -> Unwrapped {
    match shell::dash_c(args).and_then(shell::first_command) {
        Some(c) => runs(&c.words, c.path, None),
        None => Unwrapped::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn runs_of(name: &str, args: &[String]) -> Option<(String, Vec<String>)> {
        match unwrap(name, args) {
            Unwrapped::Runs(i) => Some((i.program, i.args)),
            _ => None,
        }
    }

    fn program(name: &str, args: &str) -> Option<String> {
        runs_of(name, &w(args)).map(|(p, _)| p)
    }

    #[test]
    fn env_skips_options_and_assignments() {
        assert_eq!(
            runs_of("env", &w("X=1 Y=2 ./hello a b")),
            Some(("./hello".into(), w("a b")))
        );
        assert_eq!(
            program("env", "-i -u HOME --unset=FOO -- X=1 hello"),
            Some("hello".into())
        );
        assert_eq!(program("env", "-uHOME -0 hello"), Some("hello".into()));
        assert_eq!(program("env", "--unset HOME hello"), Some("hello".into()));
        assert_eq!(program("env", "- hello"), Some("hello".into()));
        assert_eq!(
            unwrap("env", &w("X=1")),
            Unwrapped::Unknown,
            "prints the environment"
        );
        assert_eq!(unwrap("env", &[]), Unwrapped::Unknown);
        let Unwrapped::Runs(i) = unwrap("env", &w("-C /tmp PATH=/opt/bin:/bin X=1 hello")) else {
            panic!()
        };
        assert_eq!(i.path.as_deref(), Some("/opt/bin:/bin"));
        assert_eq!(i.chdir.as_deref(), Some("/tmp"));
        assert_eq!(i.program, "hello");
    }

    #[test]
    fn env_split_string_is_read_as_its_words() {
        // A `#!/usr/bin/env -S python3 -u` line gives env one argument.
        let args = vec!["-S python3 -u".to_string(), "script.py".to_string()];
        assert_eq!(
            runs_of("env", &args),
            Some(("python3".into(), w("-u script.py")))
        );
        let args = vec!["--split-string=-i X=1 prog".to_string(), "a".to_string()];
        assert_eq!(runs_of("env", &args), Some(("prog".into(), w("a"))));
    }

    #[test]
    fn shells_run_the_first_word_of_their_command_string() {
        let sh = |s: &[&str]| unwrap("sh", &s.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        let prog = |u: Unwrapped| match u {
            Unwrapped::Runs(i) => Some((i.program, i.args)),
            _ => None,
        };
        assert_eq!(
            prog(sh(&["-c", "./hello 4 'a b'"])),
            Some(("./hello".into(), vec!["4".into(), "a b".into()]))
        );
        assert_eq!(prog(sh(&["-ec", "exec ./hello"])).unwrap().0, "./hello");
        assert_eq!(
            prog(sh(&["-e", "-c", "X=1 ./hello; echo done"])).unwrap().0,
            "./hello"
        );
        assert_eq!(
            prog(sh(&["-o", "pipefail", "-c", "./hello|cat"]))
                .unwrap()
                .0,
            "./hello"
        );
        assert_eq!(
            prog(unwrap("bash", &w("--norc -c hello"))).unwrap().0,
            "hello"
        );
        let Unwrapped::Runs(i) = sh(&["-c", "PATH=/opt/x:$PATH exec env X=1 hello"]) else {
            panic!()
        };
        assert_eq!(i.program, "env");
        assert_eq!(i.path, None, "an expanded PATH is not known");
        assert_eq!(i.args, w("X=1 hello"));
        // What cannot be told.
        assert_eq!(sh(&["script.sh"]), Unwrapped::Unknown);
        assert_eq!(sh(&["-c", "$PROG"]), Unwrapped::Unknown);
        assert_eq!(sh(&["-c", "if true; then ./hello; fi"]), Unwrapped::Unknown);
        assert_eq!(sh(&["-c", "(./hello)"]), Unwrapped::Unknown);
        assert_eq!(sh(&["-c", "~/hello"]), Unwrapped::Unknown);
        assert_eq!(sh(&["-c", ""]), Unwrapped::Unknown);
        assert_eq!(sh(&["-c"]), Unwrapped::Unknown);
        assert_eq!(sh(&["-x"]), Unwrapped::Unknown);
        assert_eq!(prog(sh(&["-c", "\"./my prog\" x"])).unwrap().0, "./my prog");
    }

    #[test]
    fn option_taking_wrappers_are_looked_through() {
        assert_eq!(program("nice", "-n 5 hello"), Some("hello".into()));
        assert_eq!(program("nice", "-n5 hello"), Some("hello".into()));
        assert_eq!(
            program("nice", "--adjustment=5 hello"),
            Some("hello".into())
        );
        assert_eq!(program("nice", "-5 hello"), Some("hello".into()));
        assert_eq!(program("nohup", "hello x"), Some("hello".into()));
        assert_eq!(program("setsid", "-w -f hello"), Some("hello".into()));
        assert_eq!(program("stdbuf", "-oL -e 0 hello"), Some("hello".into()));
        assert_eq!(
            program("stdbuf", "--output=L --error 0 hello"),
            Some("hello".into())
        );
        assert_eq!(program("time", "-v -o out.txt hello"), Some("hello".into()));
        assert_eq!(program("time", "-f %e hello"), Some("hello".into()));
        assert_eq!(program("taskset", "0x3 hello"), Some("hello".into()));
        assert_eq!(program("taskset", "-c 0-3 hello"), Some("hello".into()));
        assert_eq!(program("taskset", "-ac 0,2 hello"), Some("hello".into()));
        assert_eq!(unwrap("taskset", &w("-p 0x3 1234")), Unwrapped::Unknown);
        assert_eq!(
            program("numactl", "--interleave=all hello"),
            Some("hello".into())
        );
        assert_eq!(
            program("numactl", "-N 0 -m 0 --localalloc hello"),
            Some("hello".into())
        );
        assert_eq!(
            program("numactl", "--membind 0 hello"),
            Some("hello".into())
        );
        assert_eq!(unwrap("numactl", &w("--hardware")), Unwrapped::Unknown);
        assert_eq!(program("chrt", "-b 0 hello"), Some("hello".into()));
        assert_eq!(program("chrt", "-f 10 hello"), Some("hello".into()));
        assert_eq!(program("chrt", "--idle hello"), Some("hello".into()));
        assert_eq!(unwrap("chrt", &w("-p 1234")), Unwrapped::Unknown);
        assert_eq!(program("ionice", "-c 3 hello"), Some("hello".into()));
        assert_eq!(program("ionice", "-c2 -n7 -t hello"), Some("hello".into()));
        assert_eq!(unwrap("ionice", &w("-p 1234")), Unwrapped::Unknown);
        assert_eq!(program("timeout", "10 hello"), Some("hello".into()));
        assert_eq!(
            program("timeout", "-k 5 -s KILL 1.5m hello"),
            Some("hello".into())
        );
        assert_eq!(
            program("timeout", "--signal=TERM --preserve-status 60 hello"),
            Some("hello".into())
        );
        assert_eq!(unwrap("timeout", &w("10")), Unwrapped::Unknown);
        assert_eq!(
            program("prlimit", "--nofile=1024 hello"),
            Some("hello".into())
        );
        assert_eq!(program("nice", "-- hello"), Some("hello".into()));
        assert_eq!(unwrap("hello", &w("-n 5 x")), Unwrapped::No);
        assert_eq!(unwrap("python3", &w("-m x")), Unwrapped::No);
    }
}
