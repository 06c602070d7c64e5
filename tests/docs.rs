//! The prose kept true by tests, as the state machine's table already is (`tests/store.rs`):
//! every path the README and `docs/*.md` name exists; every module under `src/` has a row in
//! `docs/architecture.md`'s layout table; the routes of `docs/design.md`'s API table are
//! those `/openapi.json` describes, no more and no fewer.
//!
//! What it cannot check: that the prose says what the code does. It checks what a reader
//! follows: a path to open, a row to find, a route to call.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::{Fleet, Kind};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The folders of the repository a path the prose names starts with.
const TOP: &[&str] = &[
    "src/",
    "lua/",
    "tests/",
    "scripts/",
    "crates/",
    "docs/",
    "config/",
    "benches/",
    "examples/",
    ".ci/",
];

/// `a/{b,c}/d` as `a/b/d` and `a/c/d`.
fn expand(path: &str) -> Vec<String> {
    match (path.find('{'), path.find('}')) {
        (Some(open), Some(close)) if open < close => path[open + 1..close]
            .split(',')
            .flat_map(|part| expand(&format!("{}{part}{}", &path[..open], &path[close + 1..])))
            .collect(),
        _ => vec![path.to_string()],
    }
}

/// The repository paths a text names: in backticks or as a link's target, starting with one
/// of [`TOP`], cut at an anchor, a line number, a test's `::` or a glob, braces expanded.
fn named_paths(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let pieces = text
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .chain(
            text.split("](")
                .skip(1)
                .filter_map(|rest| rest.split(')').next().map(str::to_string)),
        );
    for piece in pieces {
        for word in piece.split_whitespace() {
            let word = word.trim_start_matches("./");
            if !TOP.iter().any(|t| word.starts_with(t)) {
                continue;
            }
            let cut = word
                .split(['#', '*'])
                .next()
                .unwrap_or(word)
                .split("::")
                .next()
                .unwrap_or(word);
            // `file.rs:120` names a line; a trailing comma or colon is prose.
            let cut = match cut.rsplit_once(':') {
                Some((file, line)) if line.chars().all(|c| c.is_ascii_digit()) => file,
                _ => cut,
            };
            let cut = cut.trim_end_matches([',', '.', ';', ':', ')', '\'', '"']);
            // A placeholder (`lua/NAME.lua`) names no one file.
            if cut.contains("NAME") || cut.contains("...") || cut.contains('…') {
                continue;
            }
            out.extend(expand(cut));
        }
    }
    out
}

/// The Markdown files whose paths are checked: the README and `docs/*.md`.
fn prose() -> Vec<String> {
    let mut files = vec!["README.md".to_string()];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if name.ends_with(".md") {
            files.push(format!("docs/{name}"));
        }
    }
    files
}

fn missing_paths(files: &[String]) -> Vec<String> {
    let mut missing = Vec::new();
    for file in files {
        for path in named_paths(&read(file)) {
            if !root().join(&path).exists() {
                missing.push(format!("{file}: {path}"));
            }
        }
    }
    missing
}

#[test]
fn every_path_the_docs_name_exists() {
    let files = prose();
    let named: usize = files.iter().map(|f| named_paths(&read(f)).len()).sum();
    assert!(
        named > 100,
        "only {named} paths found: the reading is broken"
    );
    let missing = missing_paths(&files);
    assert!(missing.is_empty(), "paths that do not exist: {missing:#?}");
}

#[test]
fn a_path_that_does_not_exist_is_caught() {
    let paths = named_paths("see `src/nowhere.rs` and [x](docs/none.md#a), `lua/{a,b}.lua`");
    assert_eq!(
        paths.into_iter().collect::<Vec<_>>(),
        ["docs/none.md", "lua/a.lua", "lua/b.lua", "src/nowhere.rs"]
    );
}

/// The text of `docs/architecture.md`'s layout table.
fn layout_table() -> String {
    let doc = read("docs/architecture.md");
    let start = doc.find("## Layout").expect("a Layout section");
    doc[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `.rs` file under `src/`, relative to the repository.
fn modules(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            modules(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root()).unwrap();
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The modules the table has no row for: a module is in a row when the row names its
/// file, or a folder it is in (`src/http/`).
fn rowless(table: &str, modules: &[String]) -> Vec<String> {
    let named = named_paths(table);
    modules
        .iter()
        .filter(|m| {
            !named
                .iter()
                .any(|n| *m == n || (n.ends_with('/') && n != "src/" && m.starts_with(n.as_str())))
        })
        .cloned()
        .collect()
}

#[test]
fn every_module_has_a_row_in_the_layout_table() {
    let mut all = Vec::new();
    modules(&root().join("src"), &mut all);
    assert!(all.len() > 100, "{} modules", all.len());
    let table = layout_table();
    let missing = rowless(&table, &all);
    assert!(
        missing.is_empty(),
        "modules with no row in docs/architecture.md's layout table: {missing:#?}"
    );
    // And the check fails when a row goes: the table without its flow control row.
    let without: String = table
        .lines()
        .filter(|l| !l.starts_with("| flow control"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        rowless(&without, &all).contains(&"src/flow.rs".to_string()),
        "removing the flow control row went unseen"
    );
}

/// `METHOD /path` pairs of a text, without their query strings.
fn routes_in(text: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for piece in text.split('`').skip(1).step_by(2) {
        let mut words = piece.split_whitespace();
        if let (Some(method), Some(path)) = (words.next(), words.next())
            && ["GET", "PUT", "POST", "DELETE", "PATCH"].contains(&method)
            && path.starts_with('/')
        {
            let path = path.split('?').next().unwrap_or(path);
            out.insert((method.to_string(), path.to_string()));
        }
    }
    out
}

/// The API's description is the same on both engines: the memory engine's is read.
#[tokio::test]
async fn the_designs_routes_are_the_apis() {
    let fleet = Fleet::start(Kind::Memory, 1, false).await;
    let http = reqwest::Client::new();
    let api = fleet.tocs[0].get_json(&http, "/openapi.json").await;
    let mut served = BTreeSet::new();
    for (path, ops) in api["paths"].as_object().expect("paths") {
        for method in ops.as_object().expect("operations").keys() {
            if ["get", "put", "post", "delete", "patch"].contains(&method.as_str()) {
                served.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let design = read("docs/design.md");
    let start = design.find("| route | promise |").expect("the API table");
    let table: String = design[start..]
        .lines()
        .take_while(|l| l.starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n");
    let named = routes_in(&table);
    // And the check fails when a route goes from the table.
    let without: String = table
        .lines()
        .filter(|l| !l.contains("/trigger`"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        served
            .difference(&routes_in(&without))
            .any(|(_, p)| p.ends_with("/trigger")),
        "removing the trigger route went unseen"
    );
    let unserved: Vec<_> = named.difference(&served).collect();
    let untold: Vec<_> = served.difference(&named).collect();
    assert!(
        unserved.is_empty() && untold.is_empty(),
        "docs/design.md's API table names routes the service does not serve: {unserved:#?}\n\
         and leaves out routes it serves: {untold:#?}"
    );
}

/// The ```rust blocks of `text`, each as its lines trimmed (blank lines left out).
fn rust_blocks(text: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in text.lines() {
        match (&mut current, line.trim()) {
            (None, "```rust") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), l) if !l.is_empty() => block.push(l.to_string()),
            _ => {}
        }
    }
    blocks
}

/// Whether `block` stands, line after line, in `code` (lines trimmed, blank ones left out).
fn stands_in(block: &[String], code: &str) -> bool {
    let lines: Vec<&str> = code
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .windows(block.len())
        .any(|w| w.iter().zip(block).all(|(a, b)| a == b))
}

/// The Rust of `examples/`, each file whole.
fn examples() -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            out.push(std::fs::read_to_string(path).unwrap());
        }
    }
    out
}

/// docs/library.md's code compiles and runs: each of its Rust blocks stands word for word in
/// an example, which `cargo test` builds (and `tests/custom_service.rs` runs).
#[test]
fn the_library_guides_code_is_the_examples() {
    let blocks = rust_blocks(&read("docs/library.md"));
    assert!(blocks.len() >= 4, "only {} Rust blocks found", blocks.len());
    let code = examples();
    let loose: Vec<&Vec<String>> = blocks
        .iter()
        .filter(|b| !code.iter().any(|c| stands_in(b, c)))
        .collect();
    assert!(loose.is_empty(), "blocks in no example: {loose:#?}");
}

/// The crate doc's example (src/lib.rs) is an example's code too.
#[test]
fn the_crate_docs_code_is_the_examples() {
    let doc: String = read("src/lib.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect();
    let blocks = rust_blocks(&doc);
    assert!(!blocks.is_empty(), "the crate doc opens with no example");
    let code = examples();
    for b in &blocks {
        assert!(
            code.iter().any(|c| stands_in(b, c)),
            "in no example: {b:#?}"
        );
    }
}

#[test]
fn a_block_that_drifted_from_its_example_is_caught() {
    let code = "fn main() {\n    let a = 1;\n\n    let b = 2;\n}\n";
    let block = rust_blocks("```rust\nlet a = 1;\nlet b = 2;\n```\n").remove(0);
    assert!(stands_in(&block, code));
    let drifted = rust_blocks("```rust\nlet a = 1;\nlet b = 3;\n```\n").remove(0);
    assert!(!stands_in(&drifted, code));
}

/// The targets of the Markdown links in `text` (`[x](target)`), without their `#anchor`;
/// addresses and anchors alone left out.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split('#').next().unwrap_or_default().trim();
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            out.push(target.to_string());
        }
        rest = &rest[end..];
    }
    out
}

/// Every link of the README and `docs/*.md` leads to a file, read from the folder of the
/// file that holds it, as a reader's viewer reads it (a path test that read them from the
/// top missed `docs/operations.md`'s links written as if it were there).
#[test]
fn every_link_leads_where_it_says_from_its_own_folder() {
    let mut broken = Vec::new();
    let mut seen = 0;
    for file in prose() {
        let dir = root().join(&file).parent().unwrap().to_path_buf();
        for target in link_targets(&read(&file)) {
            seen += 1;
            if !dir.join(&target).exists() {
                broken.push(format!("{file}: {target}"));
            }
        }
    }
    assert!(seen > 20, "only {seen} links found: the reading is broken");
    assert!(broken.is_empty(), "links that lead nowhere: {broken:#?}");
}

#[test]
fn a_link_written_from_the_wrong_folder_is_caught() {
    let targets = link_targets("see [a](../config/default.toml#x) and [b](https://x.y) [c](#only)");
    assert_eq!(targets, ["../config/default.toml"]);
    let dir = root().join("docs");
    assert!(dir.join(&targets[0]).exists());
    assert!(
        !dir.join("config/default.toml").exists(),
        "the old spelling leads nowhere"
    );
}
