//! The code's shape, as a reader meets it: no function of the product (`src/`, outside its
//! test modules) runs over 100 lines, so that no list that grows with every feature (a
//! route table, a command's `match`, a settings check) grows unseen into one function.
//! What it proves: every `fn` with a body, found by its indentation, ends within 100
//! lines. What it cannot: it reads text, not Rust; a function whose closing brace is not at
//! its own indentation (none is, under `cargo fmt`) is measured to the next one that is.

use std::path::{Path, PathBuf};

const MOST_LINES: usize = 100;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Each function of `text` longer than `most` lines (before its test module, if any), as
/// its name and length.
fn long_functions(text: &str, most: usize) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let body = line.trim_start();
        let indent = line.len() - body.len();
        let Some(name) = [
            "fn ",
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "async fn ",
            "pub async fn ",
            "pub(crate) async fn ",
            "pub(super) async fn ",
        ]
        .iter()
        .find_map(|p| body.strip_prefix(p))
        .map(|rest| rest.split(['(', '<']).next().unwrap_or("").to_string()) else {
            continue;
        };
        // A declaration without a body (a trait's) ends with `;` before any `{`.
        let Some(open) = lines[i..]
            .iter()
            .position(|l| l.trim_end().ends_with('{') || l.trim_end().ends_with(';'))
        else {
            continue;
        };
        if lines[i + open].trim_end().ends_with(';') || line.trim_end().ends_with('}') {
            continue;
        }
        let close = format!("{}}}", " ".repeat(indent));
        let end = lines[i + 1..]
            .iter()
            .position(|l| l.starts_with(&close) && l.len() - l.trim_start().len() == indent)
            .map_or(lines.len(), |p| i + 1 + p);
        let n = end - i + 1;
        if n > most {
            long.push((name, n));
        }
    }
    long
}

#[test]
fn no_function_of_the_product_runs_over_100_lines() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 100, "the product's files are no longer found");
    let long: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            long_functions(&text, MOST_LINES)
                .into_iter()
                .map(move |(name, n)| format!("{}: {name} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these: {long:#?}");
}

#[test]
fn a_long_function_is_caught_and_a_trait_declaration_is_not() {
    let body: String = (0..101).map(|i| format!("    let x{i} = {i};\n")).collect();
    let text = format!(
        "trait T {{\n    fn declared(\n        &self,\n    ) -> u8;\n}}\n\nfn long() {{\n{body}}}\n\nfn short() {{\n    1;\n}}\n"
    );
    assert_eq!(
        long_functions(&text, MOST_LINES),
        vec![("long".to_string(), 103)]
    );
}
