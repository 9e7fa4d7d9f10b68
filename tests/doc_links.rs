//! Every relative link of the repository's Markdown resolves to a file or
//! folder of the repository, and every page under docs/ that a Rust comment
//! names exists: a clone must hold what its pages point to.
//!
//! The repository's files are what git tracks or would track (untracked
//! files that no ignore rule covers), so a link to a build output or to a
//! file outside the clone fails even where that file exists here.

use std::collections::BTreeSet;
use std::path::{Component, Path};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The repository's files, `/`-separated and relative to its root, that
/// exist in the work tree, and every folder that holds one.
struct Repo {
    files: BTreeSet<String>,
    dirs: BTreeSet<String>,
}

impl Repo {
    fn from_git() -> Repo {
        let out = Command::new("git")
            .current_dir(root())
            .args([
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ])
            .output()
            .expect("git runs (the test reads the repository's file list)");
        assert!(
            out.status.success(),
            "git ls-files: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let names = String::from_utf8(out.stdout).expect("UTF-8 file names");
        // A tracked file deleted from the work tree is not there to link to.
        Repo::new(
            names
                .split('\0')
                .filter(|n| !n.is_empty() && root().join(n).is_file()),
        )
    }

    fn new<'a>(files: impl IntoIterator<Item = &'a str>) -> Repo {
        let files: BTreeSet<String> = files.into_iter().map(str::to_string).collect();
        let mut dirs = BTreeSet::from([String::new()]);
        for f in &files {
            let mut d = f.as_str();
            while let Some(i) = d.rfind('/') {
                d = &d[..i];
                dirs.insert(d.to_string());
            }
        }
        Repo { files, dirs }
    }

    fn has(&self, path: &str) -> bool {
        self.files.contains(path) || self.dirs.contains(path)
    }

    fn with_ext<'a>(&'a self, ext: &'a str) -> impl Iterator<Item = &'a String> + 'a {
        self.files.iter().filter(move |f| f.ends_with(ext))
    }
}

/// `target` taken relative to the folder `base` (both `/`-separated,
/// relative to the root; a leading `/` means the root), normalised; `None`
/// when `..` leaves the repository.
fn resolve(base: &str, target: &str) -> Option<String> {
    let joined = match target.strip_prefix('/') {
        Some(t) => t.to_string(),
        None if base.is_empty() => target.to_string(),
        None => format!("{base}/{target}"),
    };
    let mut parts: Vec<&str> = Vec::new();
    for c in Path::new(&joined).components() {
        match c {
            Component::Normal(p) => parts.push(p.to_str()?),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

/// `line` with its code spans blanked out (a backtick run up to the next
/// run of the same length), so that a link shown as code is not followed.
fn without_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&c| c == '`').count();
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            let r = chars[j..].iter().take_while(|&&c| c == '`').count();
            if r == run {
                close = Some(j + r);
                break;
            }
            j += r.max(1);
        }
        match close {
            Some(end) => {
                out.extend(std::iter::repeat_n(' ', end - i));
                i = end;
            }
            // An unmatched run is literal text.
            None => {
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// The destination of an inline link whose `(` is at `rest[0]`.
fn destination(rest: &str) -> Option<&str> {
    let rest = rest.strip_prefix('(')?.trim_start();
    if let Some(r) = rest.strip_prefix('<') {
        return r.find('>').map(|end| &r[..end]);
    }
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(&rest[..i]),
            ')' => depth -= 1,
            c if c.is_whitespace() => return Some(&rest[..i]),
            _ => {}
        }
    }
    None
}

/// The link destinations of Markdown `text`, with their line numbers:
/// inline links and images `[text](dest)` and reference definitions
/// `[label]: dest`, outside fenced code blocks and code spans.
fn markdown_links(text: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    let mut fence: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        if let Some(open) = &fence {
            if marker.len() >= open.len() && marker.starts_with(&open[..1]) {
                fence = None;
            }
            continue;
        }
        if marker.len() >= 3 && marker.chars().all(|c| c == marker.as_bytes()[0] as char) {
            fence = Some(marker);
            continue;
        }
        let line = without_code_spans(line);
        if let Some(def) = line.trim_start().strip_prefix('[') {
            if let Some(i) = def.find("]:") {
                if let Some(dest) = def[i + 2..].split_whitespace().next() {
                    let dest = dest.trim_start_matches('<').trim_end_matches('>');
                    links.push((n + 1, dest.to_string()));
                }
            }
        }
        let mut from = 0;
        while let Some(i) = line[from..].find("](") {
            let at = from + i + 1;
            if let Some(dest) = destination(&line[at..]) {
                links.push((n + 1, dest.to_string()));
            }
            from = at;
        }
    }
    links
}

/// Whether `dest` names something outside the repository's files: a URL
/// (any scheme: http, https, mailto, ...), or only an anchor of this page.
fn is_external_or_anchor(dest: &str) -> bool {
    if dest.is_empty() || dest.starts_with('#') {
        return true;
    }
    match dest.find(':') {
        Some(i) => {
            let scheme = &dest[..i];
            scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line per broken link of the Markdown file `md` (its text `text`):
/// `FILE:LINE: LINK: why`.
fn broken_markdown_links(repo: &Repo, md: &str, text: &str) -> Vec<String> {
    let mut broken = Vec::new();
    for (line, dest) in markdown_links(text) {
        if is_external_or_anchor(&dest) {
            continue;
        }
        let path = dest.split(['#', '?']).next().unwrap_or_default();
        match resolve(parent(md), &percent_decoded(path)) {
            None => broken.push(format!("{md}:{line}: {dest}: leaves the repository")),
            Some(p) if !repo.has(&p) => broken.push(format!(
                "{md}:{line}: {dest}: no file or folder {p} in the repository"
            )),
            Some(_) => {}
        }
    }
    broken
}

/// The comments of Rust source `code`, as (line number, text) pieces:
/// line and block comments (doc comments included), not string or
/// character literals.
fn rust_comments(code: &str) -> Vec<(usize, String)> {
    let c: Vec<char> = code.chars().collect();
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    // Appends `ch` to the comment piece of the current line.
    let note = |out: &mut Vec<(usize, String)>, line: usize, ch: char| match out.last_mut() {
        Some((l, text)) if *l == line => text.push(ch),
        _ => out.push((line, ch.to_string())),
    };
    while i < c.len() {
        let next = c.get(i + 1).copied();
        match c[i] {
            '\n' => {
                line += 1;
                i += 1;
            }
            '/' if next == Some('/') => {
                while i < c.len() && c[i] != '\n' {
                    note(&mut out, line, c[i]);
                    i += 1;
                }
            }
            '/' if next == Some('*') => {
                let mut depth = 0;
                while i < c.len() {
                    if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        if c[i] == '\n' {
                            line += 1;
                        } else {
                            note(&mut out, line, c[i]);
                        }
                        i += 1;
                    }
                }
            }
            'r' | 'b' if i == 0 || !ident(c[i - 1]) => {
                // A raw string (`r"..."`, `r#"..."#`, `br"..."`), a byte
                // string, or an identifier.
                let mut j = i + 1;
                if c[i] == 'b' && c.get(j) == Some(&'r') {
                    j += 1;
                }
                let raw = c[i] == 'r' || j == i + 2;
                let hashes = c[j..].iter().take_while(|&&ch| ch == '#').count();
                if c.get(j + hashes) != Some(&'"') || (!raw && hashes > 0) {
                    i += 1;
                    continue;
                }
                i = j + hashes + 1;
                while i < c.len() {
                    if !raw && c[i] == '\\' {
                        // An escaped line end still ends a line.
                        line += usize::from(c.get(i + 1) == Some(&'\n'));
                        i += 2;
                        continue;
                    }
                    if c[i] == '\n' {
                        line += 1;
                    }
                    if c[i] == '"' && c[i + 1..].iter().take(hashes).all(|&ch| ch == '#') {
                        i += 1 + hashes;
                        break;
                    }
                    i += 1;
                }
            }
            '"' => {
                i += 1;
                while i < c.len() && c[i] != '"' {
                    if c[i] == '\\' {
                        line += usize::from(c.get(i + 1) == Some(&'\n'));
                        i += 2;
                        continue;
                    }
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            '\'' => {
                // A character literal ('x', '\n', '\u{..}'), or a lifetime.
                if next == Some('\\') {
                    // Past the quote, the backslash and the escaped character.
                    i += 3;
                    while i < c.len() && c[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                } else if c.get(i + 2) == Some(&'\'') {
                    i += 3;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// The pages under docs/ that `comment` names: path words containing
/// `docs/` and ending in `.md`.
fn docs_pages_named(comment: &str) -> Vec<&str> {
    let path_char = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut pages = Vec::new();
    let mut from = 0;
    while let Some(i) = comment[from..].find("docs/") {
        let at = from + i;
        let start = comment[..at]
            .rfind(|c: char| !path_char(c))
            .map_or(0, |j| j + 1);
        let end = comment[at..]
            .find(|c: char| !path_char(c))
            .map_or(comment.len(), |j| at + j);
        let word = comment[start..end].trim_end_matches('.');
        if word.ends_with(".md") {
            pages.push(word);
        }
        from = end.max(at + 1);
    }
    pages
}

/// One line per page named in a comment of the Rust file `rs` (its text
/// `code`) that is not in the repository: `FILE:LINE: PAGE: why`.
fn missing_pages_named(repo: &Repo, rs: &str, code: &str) -> Vec<String> {
    let mut missing = Vec::new();
    for (line, comment) in rust_comments(code) {
        for page in docs_pages_named(&comment) {
            let resolved = if page.starts_with('/') {
                None
            } else if page.starts_with("./") || page.starts_with("../") {
                resolve(parent(rs), page)
            } else {
                resolve("", page)
            };
            match resolved {
                Some(p) if repo.has(&p) => {}
                _ => missing.push(format!(
                    "{rs}:{line}: {page}: no such page in the repository"
                )),
            }
        }
    }
    missing
}

#[test]
fn every_relative_markdown_link_resolves_inside_the_repository() {
    let repo = Repo::from_git();
    let mut broken = Vec::new();
    let mut pages = 0;
    for md in repo.with_ext(".md") {
        let text = std::fs::read_to_string(root().join(md)).unwrap();
        broken.extend(broken_markdown_links(&repo, md, &text));
        pages += 1;
    }
    assert!(pages > 10, "only {pages} Markdown files found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_docs_page_a_rust_comment_names_exists() {
    let repo = Repo::from_git();
    let mut missing = Vec::new();
    for rs in repo.with_ext(".rs") {
        let code = std::fs::read_to_string(root().join(rs)).unwrap();
        missing.extend(missing_pages_named(&repo, rs, &code));
    }
    assert!(missing.is_empty(), "missing pages:\n{}", missing.join("\n"));
}

#[test]
fn a_broken_link_is_named_with_its_file_and_line() {
    let repo = Repo::new(["README.md", "docs/a.md", "docs/img/x.svg", "src/lib.rs"]);
    let text = "\
# Page
[fine](a.md) and [dir](img/) and ![plot](img/x.svg \"title\")
[anchored](a.md#section) [here](#top) [web](https://example.org/x.md)
[mail](mailto:someone@example.org) [root](/src/lib.rs) [up](../README.md)
[gone](missing.md#part) `[code](nope.md)` ``a `[x](no.md)` b``
```sh
[fenced](nope.md)
```
[out](../../etc/passwd)
[ref]: other.md
[spaced](<a%2Emd>)
";
    let broken = broken_markdown_links(&repo, "docs/page.md", text);
    assert_eq!(
        broken,
        [
            "docs/page.md:5: missing.md#part: no file or folder docs/missing.md in the repository",
            "docs/page.md:9: ../../etc/passwd: leaves the repository",
            "docs/page.md:10: other.md: no file or folder docs/other.md in the repository",
        ]
    );
}

#[test]
fn a_page_named_in_a_comment_but_not_in_a_string_is_checked() {
    let repo = Repo::new(["docs/a.md", "docs/sub/b.md", "src/x.rs"]);
    let code = r####"
//! See docs/a.md, and docs/gone.md.
fn f<'a>(s: &'a str) -> char {
    let _ = "docs/in-a-string.md"; // docs/sub/b.md
    let _ = r#"docs/raw.md "quoted""#;
    /* docs/block.md
       docs/a.md */
    let _ = b'"'; // ../docs/a.md, /tmp/docs/abs.md
    '\''
}
"####;
    let missing = missing_pages_named(&repo, "src/x.rs", code);
    assert_eq!(
        missing,
        [
            "src/x.rs:2: docs/gone.md: no such page in the repository",
            "src/x.rs:6: docs/block.md: no such page in the repository",
            "src/x.rs:8: /tmp/docs/abs.md: no such page in the repository",
        ]
    );
}
