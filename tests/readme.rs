//! The README starts with two commands that must stay true: the demo runs,
//! and `.ci/run` runs exactly the test command.

use std::path::Path;
use std::process::Command;

fn readme_commands() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let block = readme
        .split("```sh")
        .nth(1)
        .expect("a ```sh block")
        .split("```")
        .next()
        .unwrap();
    block
        .lines()
        .map(|l| l.split('#').next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_readme_demo_command_runs() {
    let cmds = readme_commands();
    assert_eq!(cmds.len(), 2, "{cmds:?}");
    let words: Vec<&str> = cmds[0].split_whitespace().collect();
    assert_eq!(&words[..2], ["cargo", "run"], "{}", cmds[0]);
    let out = Command::new(env!("CARGO"))
        .args(&words[1..])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{}",
        cmds[0],
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("ranks exchanged business cards") && stdout.contains("all verified"),
        "{stdout}"
    );
}

#[test]
fn ci_runs_the_readme_test_command() {
    let cmds = readme_commands();
    let ci =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run")).unwrap();
    let exec = ci
        .lines()
        .find(|l| l.trim_start().starts_with("exec "))
        .expect(".ci/run execs the test command");
    assert_eq!(
        exec.trim_start().trim_start_matches("exec ").trim(),
        cmds[1]
    );
}
