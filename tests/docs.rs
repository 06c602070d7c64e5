//! The prose kept true by tests, as the state machine's table already is (`tests/store.rs`):
//! every path the README and `docs/*.md` name exists; every module under `src/` has a row in
//! `docs/architecture.md`'s layout table; the routes of `docs/design.md`'s API table are
//! those `/openapi.json` describes, no more and no fewer; the counts the prose states (the
//! engine's concerns, the invariants cited and the tests each names) are the code's; no
//! word of how the project was made (issue numbers, a work diary) stands outside the
//! benchmark history; every cargo feature the prose names exists.
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

/// Number words the prose counts with.
const COUNTS: &[&str] = &[
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
];

/// The traits `Engine` is made of, as `src/store/engine.rs` declares it.
fn engine_traits(code: &str) -> Vec<String> {
    let decl = code
        .split("pub(crate) trait Engine:")
        .nth(1)
        .expect("src/store/engine.rs declares `trait Engine:`");
    let supers = decl.split('{').next().unwrap_or_default();
    supers
        .split('+')
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Each count word a text puts before `noun` ("six concerns"), lower case.
fn counted<'a>(text: &'a str, noun: &str) -> Vec<&'a str> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[1].trim_end_matches([',', '.', ')', ':', ';']) == noun)
        .map(|w| w[0].trim_start_matches('('))
        .filter(|w| COUNTS.contains(&w.to_ascii_lowercase().as_str()))
        .collect()
}

/// Where the prose counts the engine's concerns or traits and says otherwise than the code.
fn miscounted_engine(engine: &str, texts: &[(&str, String)]) -> Vec<String> {
    let n = engine_traits(engine).len();
    let word = COUNTS.get(n).copied().unwrap_or("many");
    let mut wrong = Vec::new();
    for (file, text) in texts {
        for noun in ["concerns", "traits"] {
            for said in counted(text, noun) {
                if !said.eq_ignore_ascii_case(word) {
                    wrong.push(format!(
                        "{file}: \"{said} {noun}\", but the engine has {word}"
                    ));
                }
            }
        }
    }
    wrong
}

#[test]
fn the_engines_concerns_are_counted_as_the_code_has_them() {
    let engine = read("src/store/engine.rs");
    assert_eq!(
        engine_traits(&engine).len(),
        6,
        "{:?}",
        engine_traits(&engine)
    );
    let texts = [
        ("docs/architecture.md", read("docs/architecture.md")),
        ("src/store/engine.rs", engine.clone()),
    ];
    let said: usize = texts
        .iter()
        .map(|(_, t)| counted(t, "concerns").len())
        .sum();
    assert!(said >= 2, "the count is no longer found in the prose");
    let wrong = miscounted_engine(&engine, &texts);
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn a_miscounted_engine_is_caught() {
    let engine = "pub(crate) trait Engine:\n    A + B + C\n{";
    let texts = [(
        "x.md",
        "The engine is four concerns (four traits).".to_string(),
    )];
    assert_eq!(miscounted_engine(engine, &texts).len(), 2);
    let texts = [("x.md", "The engine is three concerns.".to_string())];
    assert!(miscounted_engine(engine, &texts).is_empty());
}

/// The invariants of `docs/design.md`: each one's number and text.
fn invariants(design: &str) -> Vec<(usize, String)> {
    let section = design
        .split("## Invariants")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/design.md has an Invariants section");
    let mut out: Vec<(usize, String)> = Vec::new();
    for line in section.lines() {
        let head = line
            .split_once(". **")
            .and_then(|(n, _)| n.parse::<usize>().ok());
        match head {
            Some(n) => out.push((n, line.to_string())),
            None => {
                if let Some((_, text)) = out.last_mut() {
                    text.push('\n');
                    text.push_str(line);
                }
            }
        }
    }
    out
}

/// Each "invariant N" a text cites.
fn cited_invariants(text: &str) -> Vec<usize> {
    text.split("invariant ")
        .skip(1)
        .filter_map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect()
}

/// The files under `dir` (recursively) whose names end with one of `exts`.
fn files_under(dir: &str, exts: &[&str], out: &mut Vec<String>) {
    for entry in std::fs::read_dir(root().join(dir)).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().to_string();
        let path = format!("{dir}/{name}");
        if entry.file_type().unwrap().is_dir() {
            files_under(&path, exts, out);
        } else if exts.iter().any(|e| name.ends_with(e)) {
            out.push(path);
        }
    }
}

#[test]
fn every_invariant_is_numbered_in_order_cited_as_it_is_and_names_its_tests() {
    let list = invariants(&read("docs/design.md"));
    let numbers: Vec<usize> = list.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        numbers,
        (1..=list.len()).collect::<Vec<_>>(),
        "numbered 1..n"
    );
    assert!(list.len() >= 16, "the invariants are no longer found");
    for (n, text) in &list {
        assert!(
            named_paths(text)
                .iter()
                .any(|p| p.starts_with("tests/") || p.starts_with("crates/toc-testkit/")),
            "invariant {n} names no test that holds it:\n{text}"
        );
    }
    let mut files = prose();
    files_under("src", &[".rs"], &mut files);
    for file in files {
        for cited in cited_invariants(&read(&file)) {
            assert!(
                (1..=list.len()).contains(&cited),
                "{file} cites invariant {cited}; docs/design.md has {}",
                list.len()
            );
        }
    }
}

/// Words of how the project was made, which belong in the benchmark history only: an issue
/// by number, a work session, a diary's "the eighth …'s commit".
fn history_words(text: &str) -> Vec<String> {
    let lower = text.to_ascii_lowercase();
    let mut found = Vec::new();
    for (i, _) in lower.match_indices("issue") {
        let rest = lower[i + 5..].trim_start_matches([' ', '#']);
        if lower[i + 5..].starts_with([' ', '#']) && rest.starts_with(|c: char| c.is_ascii_digit())
        {
            found.push(lower[i..(i + 12).min(lower.len())].to_string());
        }
    }
    for phrase in [
        "this session",
        "session's",
        "'s commit",
        "last review",
        "previous session",
    ] {
        if lower.contains(phrase) {
            found.push(phrase.to_string());
        }
    }
    found
}

#[test]
fn no_word_of_how_the_project_was_made_outside_its_history() {
    let mut files: Vec<String> = prose();
    files.push("BENCHMARKS.md".into());
    files_under("src", &[".rs", ".js", ".html", ".css"], &mut files);
    files_under("lua", &[".lua"], &mut files);
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            history_words(&read(f))
                .into_iter()
                .map(move |w| format!("{f}: {w}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "history outside docs/bench/history.md: {found:#?}"
    );
}

#[test]
fn a_word_of_history_is_caught() {
    assert_eq!(history_words("fixed (issue 48) and issue #3").len(), 2);
    assert_eq!(history_words("at the eighth session's commit").len(), 2);
    assert!(history_words("an issue with the design; issues open").is_empty());
}

/// The cargo features a text names (`--features a,b`).
fn named_features(text: &str) -> Vec<String> {
    text.split("--features")
        .skip(1)
        .filter_map(|rest| rest.split_whitespace().next())
        .flat_map(|list| {
            list.trim_matches(['`', '=', '"', '\''])
                .split(',')
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|f| !f.is_empty())
        .collect()
}

#[test]
fn every_cargo_feature_the_prose_names_exists() {
    let mut manifests = vec![read("Cargo.toml")];
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let path = entry.unwrap().path().join("Cargo.toml");
        manifests.push(std::fs::read_to_string(path).unwrap_or_default());
    }
    let declared: BTreeSet<String> = manifests
        .iter()
        .filter_map(|m| m.split("[features]").nth(1))
        .flat_map(|f| {
            f.split("\n[")
                .next()
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim().to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    let mut files = prose();
    files.push("BENCHMARKS.md".into());
    for file in files {
        for feature in named_features(&read(&file)) {
            assert!(
                declared.contains(&feature),
                "{file} names --features {feature}, which no Cargo.toml declares"
            );
        }
    }
    assert_eq!(
        named_features("cargo build --release --features bench,x"),
        ["bench", "x"]
    );
}

/// The generator settings docs/operations.md's "Clients" gives are those scripts/client.sh
/// generates the tested client with.
#[test]
fn the_clients_settings_are_the_ones_the_tested_client_is_made_with() {
    let ops = read("docs/operations.md");
    let section = ops
        .split("### Clients")
        .nth(1)
        .and_then(|s| s.split("```yaml").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("docs/operations.md's Clients section gives a yaml block");
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        lines(section),
        lines(&read("scripts/openapi_client.yml")),
        "the documented settings drifted from scripts/openapi_client.yml"
    );
}

/// The rows of the settings table: each setting of config/default.toml, its variable, its
/// default and the first sentence of the comment above it.
fn settings_table(defaults: &str) -> String {
    let mut out =
        String::from("| setting | variable | default | what it is |\n| --- | --- | --- | --- |\n");
    let (mut section, mut comment) = (String::new(), Vec::<String>::new());
    // A setting right under another with no comment of its own shares that one's.
    let mut grouped = false;
    for line in defaults.lines() {
        let line = line.trim();
        if line.is_empty() {
            grouped = false;
        }
        if let Some(rest) = line.strip_prefix('#') {
            comment.push(rest.trim().to_string());
            continue;
        }
        if line.starts_with('[') && line.ends_with(']') {
            // A comment above a section speaks for its first setting.
            section = line.trim_matches(['[', ']']).to_string();
            grouped = false;
            continue;
        }
        let Some((key, value)) = line.split_once(" = ") else {
            comment.clear();
            grouped = false;
            continue;
        };
        let path = if section.is_empty() {
            key.to_string()
        } else {
            format!("{section}.{key}")
        };
        let variable = format!("TOC_{}", path.replace('.', "_").to_ascii_uppercase());
        let text = match (comment.is_empty(), grouped) {
            (true, true) => "(with the setting above)".to_string(),
            _ => comment.join(" "),
        };
        grouped = true;
        let first = text
            .split_inclusive(". ")
            .next()
            .unwrap_or_default()
            .trim()
            .replace('|', "\\|");
        out.push_str(&format!(
            "| `{path}` | `{variable}` | `{}` | {first} |\n",
            value.replace('|', "\\|")
        ));
        comment.clear();
    }
    out
}

/// docs/operations.md's table of every setting is the one config/default.toml makes: a
/// setting added, renamed or given another default changes it. `TOC_WRITE_DOCS=1 cargo
/// test --test docs` writes it anew.
#[test]
fn the_settings_table_is_config_default_toml() {
    const START: &str = "<!-- every setting: made from config/default.toml by tests/docs.rs -->\n";
    const END: &str = "<!-- end of every setting -->";
    let table = settings_table(&read("config/default.toml"));
    assert!(
        table.contains("| `listen` | `TOC_LISTEN` | `\"127.0.0.1:8080\"` |"),
        "{table}"
    );
    assert!(
        table.lines().count() > 80,
        "the settings are no longer read"
    );
    let path = root().join("docs/operations.md");
    let ops = read("docs/operations.md");
    let (before, rest) = ops
        .split_once(START)
        .expect("docs/operations.md has the table's start mark");
    let (shown, after) = rest.split_once(END).expect("and its end mark");
    if shown != table {
        if std::env::var_os("TOC_WRITE_DOCS").is_some() {
            std::fs::write(&path, format!("{before}{START}{table}{END}{after}")).unwrap();
        } else {
            panic!(
                "docs/operations.md's settings table is not config/default.toml's: run TOC_WRITE_DOCS=1 cargo test --test docs"
            );
        }
    }
}
