//! The workspace's layers (docs/architecture.md, "Layers, one direction"):
//! the C libraries link the client and nothing of the launcher, nothing
//! below the server imports it, no crate's top-level modules import each
//! other in a circle, no file imports another in a circle, and the
//! launcher's parts reach each other only through their own methods.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The packages `cargo tree -e normal` lists for `pkg`, itself included.
fn normal_deps(pkg: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .current_dir(root())
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-p",
            pkg,
        ])
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {pkg}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some(format!("{} {}", w.next()?, w.next()?))
        })
        .collect()
}

/// Crates only the launcher may link.
const LAUNCHER_ONLY: &[&str] = &[
    "fastpmi",
    "fastpmi-server",
    "mio",
    "signal-hook",
    "serde_json",
    "libloading",
    "netlink-sys",
    "fastpmi-mpir",
    "fastpmi-entry",
];

/// `pkg` links the client and nothing of `LAUNCHER_ONLY`; its crate names.
fn links_the_client_only(pkg: &str) -> BTreeSet<String> {
    let deps = normal_deps(pkg);
    let names: BTreeSet<String> = deps
        .iter()
        .filter_map(|d| d.split(' ').next())
        .map(String::from)
        .collect();
    for launcher_only in LAUNCHER_ONLY {
        assert!(
            !names.contains(*launcher_only),
            "{pkg} links {launcher_only}: {deps:?}"
        );
    }
    assert!(names.contains("fastpmi-client"), "{deps:?}");
    deps
}

#[test]
fn libpmi2_links_at_most_35_crates_and_nothing_of_the_launcher() {
    let deps = links_the_client_only("fastpmi-pmi2");
    assert!(deps.len() <= 35, "{} crates: {deps:?}", deps.len());
}

#[test]
fn the_python_module_links_the_client_and_nothing_of_the_launcher() {
    links_the_client_only("fastpmi-python");
}

#[test]
fn nothing_below_the_server_depends_on_it_or_the_launcher() {
    for (pkg, forbidden) in [
        (
            "fastpmi-codec",
            &[
                "fastpmi-segment",
                "fastpmi-client",
                "fastpmi-server",
                "fastpmi",
            ][..],
        ),
        (
            "fastpmi-segment",
            &["fastpmi-client", "fastpmi-server", "fastpmi"],
        ),
        ("fastpmi-client", &["fastpmi-server", "fastpmi"]),
        ("fastpmi-server", &["fastpmi-client", "fastpmi"]),
        ("fastpmi-capi", &["fastpmi-server", "fastpmi"]),
        // OpenPMIx's server behind a safe API: nothing of fastpmi at all.
        (
            "fastpmi-pmix-host",
            &[
                "fastpmi",
                "fastpmi-server",
                "fastpmi-client",
                "fastpmi-codec",
                "fastpmi-segment",
                "shm-layout",
                "mio",
            ],
        ),
        (
            "shm-layout",
            &[
                "fastpmi-codec",
                "fastpmi-segment",
                "fastpmi-client",
                "fastpmi",
            ],
        ),
    ] {
        let deps = normal_deps(pkg);
        for f in forbidden {
            assert!(
                !deps.iter().any(|d| d.split(' ').next() == Some(f)),
                "{pkg} depends on {f}: {deps:?}"
            );
        }
    }
}

/// Source with `//` comments removed (doc comments name modules freely).
fn code_of(path: &Path) -> String {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first identifier of each item of a `{a, b::c, d as e}` group that
/// starts at `s` (just after the `{`).
fn group_heads(s: &str) -> Vec<&str> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                heads.push(ident_at(s[start..i].trim_start()));
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                heads.push(ident_at(s[start..i].trim_start()));
                start = i + 1;
            }
            _ => {}
        }
    }
    heads
}

/// Names of crate-root modules that `code` refers to through `prefix`
/// (`crate::` anywhere; `super::` repeated to the root from a file).
fn root_refs<'a>(code: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut refs = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            refs.extend(group_heads(group));
        } else {
            refs.push(ident_at(rest));
        }
    }
    refs
}

/// Top-level module -> the top-level modules it imports, for the crate
/// whose sources are under `src`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rs_files(src, &mut files);
    let top: BTreeSet<String> = files
        .iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(src).unwrap();
            let first = rel.components().next()?.as_os_str().to_str()?;
            let name = first.strip_suffix(".rs").unwrap_or(first);
            (!matches!(name, "lib" | "main")).then(|| name.to_string())
        })
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(src).unwrap();
        let parts: Vec<&str> = rel.iter().map(|c| c.to_str().unwrap()).collect();
        let module = parts[0].strip_suffix(".rs").unwrap_or(parts[0]);
        if !top.contains(module) {
            continue;
        }
        let code = code_of(f);
        // How many `super::` from this file reach the crate root: a module
        // file `m.rs` or `m/mod.rs` is one level down; `m/a.rs` two.
        let depth = parts.len() - usize::from(parts.last() == Some(&"mod.rs"));
        let mut refs = root_refs(&code, "crate::");
        refs.extend(root_refs(&code, &"super::".repeat(depth)));
        let out = graph.entry(module.to_string()).or_default();
        for r in refs {
            if r != module && top.contains(r) {
                out.insert(r.to_string());
            }
        }
    }
    graph
}

/// A circle in `graph`, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            match state.get(m.as_str()) {
                Some(1) => {
                    let at = stack.iter().position(|s| s == m).unwrap();
                    let mut c = stack[at..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(m, graph, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if !state.contains_key(n) {
            if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

const CRATE_SOURCES: &[&str] = &[
    "src",
    "shm-layout/src",
    "codec/src",
    "segment/src",
    "client/src",
    "server/src",
    "capi/core/src",
    "capi/pmi2/src",
    "capi/pmi1/src",
    "mpir/src",
    "entry/src",
    "pmix-host/src",
    "bench/src",
    "python/src",
];

#[test]
fn no_crate_has_a_circle_of_imports_between_its_top_level_modules() {
    for dir in CRATE_SOURCES {
        let graph = module_graph(&root().join(dir));
        if let Some(cycle) = find_cycle(&graph) {
            panic!("{dir}: {}\ngraph: {graph:#?}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_circle_finder_finds_a_circle() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("cli", &["config"][..]),
        ("config", &[]),
        ("launcher", &["config", "tools"]),
        ("tools", &["launcher"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.iter().map(|s| s.to_string()).collect()))
    .collect();
    assert_eq!(
        find_cycle(&g).unwrap(),
        ["launcher", "tools", "launcher"].map(String::from)
    );
    let refs = root_refs(
        "use crate::{config::{A, B}, tools};\nlet x = crate::launcher::f();",
        "crate::",
    );
    assert_eq!(refs, ["config", "tools", "launcher"]);
}

#[test]
fn client_and_codec_sources_name_nothing_of_the_server_or_launcher() {
    // And the binary's two C-ABI crates: the launcher links them, so they
    // name none of it.
    for dir in [
        "codec/src",
        "segment/src",
        "client/src",
        "capi",
        "mpir/src",
        "entry/src",
        "python/src",
    ] {
        let mut files = Vec::new();
        rs_files(&root().join(dir), &mut files);
        for f in files {
            let code = code_of(&f);
            for name in ["fastpmi_server", "fastpmi::"] {
                assert!(
                    !code.contains(name),
                    "{} names {name}",
                    f.strip_prefix(root()).unwrap().display()
                );
            }
        }
    }
}

/// The module path of each `.rs` file under `dir`, whose own module is
/// `base` (its `mod.rs` or `lib.rs` is `base` itself).
fn module_paths(dir: &Path, base: &[&str]) -> BTreeMap<Vec<String>, PathBuf> {
    let mut files = Vec::new();
    rs_files(dir, &mut files);
    files
        .into_iter()
        .map(|f| {
            let mut m: Vec<String> = base.iter().map(|s| s.to_string()).collect();
            for c in f.strip_prefix(dir).unwrap().iter() {
                let c = c.to_str().unwrap();
                match c.strip_suffix(".rs") {
                    Some("mod" | "lib" | "main") => {}
                    Some(name) => m.push(name.to_string()),
                    None => m.push(c.to_string()),
                }
            }
            (m, f)
        })
        .collect()
}

/// The paths `code` (of module `me`) names: `crate::`, `super::` and
/// `self::` paths, made absolute, each item of a `{...}` group apart, and
/// paths that start with a child module of `me`.
fn paths_named(code: &str, me: &[String], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    fn ident(s: &str) -> &str {
        ident_at(s)
    }
    // Read `a::b::{c, d::e}` at `s` onto `base`.
    fn read(s: &str, base: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut path = base;
        let mut rest = s;
        loop {
            let id = ident(rest);
            if id.is_empty() {
                if let Some(group) = rest.strip_prefix('{') {
                    let mut depth = 0;
                    let mut start = 0;
                    for (i, c) in group.char_indices() {
                        match c {
                            '{' => depth += 1,
                            '}' if depth == 0 => {
                                read(group[start..i].trim_start(), path.clone(), out);
                                return;
                            }
                            '}' => depth -= 1,
                            ',' if depth == 0 => {
                                read(group[start..i].trim_start(), path.clone(), out);
                                start = i + 1;
                            }
                            _ => {}
                        }
                    }
                }
                break;
            }
            path.push(id.to_string());
            rest = &rest[id.len()..];
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        out.push(path);
    }
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let before = code[..i].chars().next_back();
        let at_start = !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        let rest = &code[i..];
        if at_start {
            if let Some(r) = rest.strip_prefix("crate::") {
                read(r, Vec::new(), &mut out);
            } else if rest.starts_with("super::") {
                let mut base = me.to_vec();
                let mut r = rest;
                while let Some(x) = r.strip_prefix("super::") {
                    base.pop();
                    r = x;
                }
                read(r, base, &mut out);
            } else if let Some(r) = rest.strip_prefix("self::") {
                read(r, me.to_vec(), &mut out);
            } else {
                let id = ident(rest);
                if !id.is_empty()
                    && children.contains(id)
                    && rest[id.len()..].starts_with("::")
                    && !code[..i].trim_end().ends_with("mod")
                {
                    read(rest, me.to_vec(), &mut out);
                }
            }
        }
        i += code[i..].chars().next().map_or(1, char::len_utf8);
        let _ = bytes;
    }
    out
}

/// File -> the files of the same set it names (by module path), for the
/// sources under `dir` whose own module is `base`.
fn file_graph(dir: &Path, base: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let modules = module_paths(dir, base);
    let name = |f: &Path| f.strip_prefix(root()).unwrap().display().to_string();
    let mut graph = BTreeMap::new();
    for (me, file) in &modules {
        let children: BTreeSet<String> = modules
            .keys()
            .filter(|m| m.len() == me.len() + 1 && m.starts_with(me))
            .map(|m| m.last().unwrap().clone())
            .collect();
        // A `pub(in crate::a)` visibility names a module but imports nothing.
        let mut code = without_visibility_paths(&code_of(file));
        // An inline test module's `super` is the file's own module.
        if let Some(i) = code.find("#[cfg(test)]\nmod ") {
            code.truncate(i);
        }
        let mut refs = BTreeSet::new();
        for path in paths_named(&code, me, &children) {
            // The longest prefix of the path that is a file of the set.
            let target = (1..=path.len())
                .rev()
                .find_map(|n| modules.get(&path[..n]))
                .filter(|t| *t != file);
            if let Some(t) = target {
                refs.insert(name(t));
            }
        }
        graph.insert(name(file), refs);
    }
    graph
}

/// `code` with every `pub(in PATH)` made `pub`.
fn without_visibility_paths(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(i) = rest.find("pub(in ") {
        out.push_str(&rest[..i]);
        out.push_str("pub");
        rest = &rest[i..];
        rest = rest.find(')').map_or("", |j| &rest[j + 1..]);
    }
    out.push_str(rest);
    out
}

/// The two files with methods of `Launcher`: its set-up and event loop
/// (`mod.rs`), and the reactions that span its parts (`events.rs`).
const LAUNCHER_FILES: [&str; 2] = ["src/launcher/mod.rs", "src/launcher/events.rs"];

#[test]
fn no_file_of_the_workspace_imports_another_in_a_circle() {
    for dir in CRATE_SOURCES {
        let graph = file_graph(&root().join(dir), &[]);
        assert!(!graph.is_empty(), "{dir}: no source read");
        if let Some(cycle) = find_cycle(&graph) {
            panic!("{dir}: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_launchers_parts_have_doors_of_their_own() {
    // Methods of `Launcher` in two files only.
    let mut files = Vec::new();
    rs_files(&root().join("src/launcher"), &mut files);
    assert!(files.len() > 20, "launcher sources not found");
    for f in &files {
        let name = f.strip_prefix(root()).unwrap().display().to_string();
        let code = code_of(f);
        let has_methods = [
            "impl Launcher",
            "impl super::Launcher",
            "impl crate::launcher::Launcher",
        ]
        .iter()
        .any(|i| code.contains(i))
            || code.contains("impl super::super::Launcher");
        assert!(
            !has_methods || LAUNCHER_FILES.contains(&name.as_str()),
            "{name} has methods of Launcher: a part's logic is a method of the part"
        );
    }
    // No part names what the launcher's own module defines (`Launcher`,
    // the loop's constants and hooks).
    let graph = file_graph(&root().join("src"), &[]);
    // The check sees such an import where there is one.
    assert!(graph["src/launcher/events.rs"].contains("src/launcher/mod.rs"));
    for (file, refs) in &graph {
        if file.starts_with("src/launcher/") && !LAUNCHER_FILES.contains(&file.as_str()) {
            assert!(
                !refs.contains("src/launcher/mod.rs"),
                "{file} imports src/launcher/mod.rs: a part reaches the others through their own methods"
            );
        }
    }
}

#[test]
fn the_pmix_host_and_the_launchers_pmix_policy_have_no_file_import_circle() {
    for (dir, base) in [
        ("pmix-host/src", &[][..]),
        ("src/launcher/pmix", &["launcher", "pmix"][..]),
    ] {
        let graph = file_graph(&root().join(dir), base);
        assert!(graph.len() > 5, "{dir}: {graph:#?}");
        if let Some(cycle) = find_cycle(&graph) {
            panic!("{dir}: {}\ngraph: {graph:#?}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_file_graph_sees_use_groups_super_paths_and_child_modules() {
    let me: Vec<String> = ["launcher", "pmix", "host"].map(String::from).to_vec();
    let children = BTreeSet::new();
    let named = paths_named(
        "use super::names::NameOps;\nuse crate::launcher::pmix::{leftovers::Recorder, system};\nlet x = self::y::z();",
        &me,
        &children,
    );
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert!(named.contains(&s(&["launcher", "pmix", "names", "NameOps"])));
    assert!(named.contains(&s(&["launcher", "pmix", "leftovers", "Recorder"])));
    assert!(named.contains(&s(&["launcher", "pmix", "system"])));
    assert!(named.contains(&s(&["launcher", "pmix", "host", "y", "z"])));
    let me: Vec<String> = vec!["launcher".into(), "pmix".into()];
    let children: BTreeSet<String> = ["names".to_string()].into();
    let named = paths_named("mod names;\nlet p = names::encode(v);", &me, &children);
    assert_eq!(named, [s(&["launcher", "pmix", "names", "encode"])]);
    // A circle of two files is found.
    let g: BTreeMap<String, BTreeSet<String>> = [("a.rs", "b.rs"), ("b.rs", "a.rs")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), [v.to_string()].into()))
        .collect();
    assert!(find_cycle(&g).is_some());
}

/// The error type of each `Result<T, E>` written in `code`.
fn result_errors(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("Result<") {
        rest = &rest[i + "Result<".len()..];
        let (mut depth, mut comma) = (0i32, None);
        for (j, c) in rest.char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '>' if depth == 0 => {
                    if let Some(k) = comma {
                        out.push(rest[k + 1..j].trim().to_string());
                    }
                    break;
                }
                '>' => depth -= 1,
                ',' if depth == 0 => comma = Some(j),
                _ => {}
            }
        }
    }
    out
}

#[test]
fn library_code_has_typed_errors_not_strings() {
    assert_eq!(
        result_errors("fn f() -> Result<Vec<(u8, u8)>, String> {} fn g() -> io::Result<()>"),
        ["String"]
    );
    for dir in CRATE_SOURCES {
        let mut files = Vec::new();
        rs_files(&root().join(dir), &mut files);
        for f in files {
            let mut code = code_of(&f);
            // Tests may use strings.
            if let Some(i) = code.find("#[cfg(test)]\nmod ") {
                code.truncate(i);
            }
            let name = f.strip_prefix(root()).unwrap().display().to_string();
            if name.starts_with("bench/") || name.contains("/tests") {
                continue;
            }
            for e in result_errors(&code) {
                assert!(
                    e != "String" && e != "&str" && e != "&'static str",
                    "{name}: Result<_, {e}>: library code returns typed errors"
                );
            }
        }
    }
}
