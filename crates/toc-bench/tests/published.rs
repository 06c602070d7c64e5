//! The published headline is one table made from one file: BENCHMARKS.md and README.md
//! show the medians that `docs/bench/benchmarks.json` holds (written by `toc-bench median`),
//! made by the same code. What it proves: no figure of the headline is typed into either
//! file by hand, and the two files cannot disagree with each other or with the data. What
//! it cannot: that the data came from runs of today's build (`median.runs` names them).
//! `TOC_WRITE_DOCS=1 cargo test -p toc-bench --test published` writes the tables anew.

use std::path::PathBuf;

use toc_bench::median::{published_rows, shown_table, table};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn benchmarks_md_and_readme_show_the_medians_of_benchmarks_json() {
    let data: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("docs/bench/benchmarks.json")).unwrap(),
    )
    .unwrap();
    let rows = published_rows(&data).unwrap();
    assert!(rows.len() >= 10, "the headline's rows are no longer read");
    let want = table(&rows);
    for file in ["BENCHMARKS.md", "README.md"] {
        let path = root().join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let shown = shown_table(&text)
            .unwrap_or_else(|| panic!("{file} has no headline table marks"))
            .to_string();
        if shown == want {
            continue;
        }
        if std::env::var_os("TOC_WRITE_DOCS").is_some() {
            std::fs::write(&path, text.replacen(&shown, &want, 1)).unwrap();
        } else {
            panic!(
                "{file}'s headline table is not docs/bench/benchmarks.json's medians: run `toc-bench median`, or TOC_WRITE_DOCS=1 cargo test -p toc-bench --test published\n{file}:\n{shown}\nbenchmarks.json:\n{want}"
            );
        }
    }
}

#[test]
fn a_figure_typed_into_the_table_is_caught() {
    let data = serde_json::json!({"median": {"rows": [
        {"name": "a", "median": 2.0, "lowest": 1.0, "highest": 3.0, "target": ">= 1", "met_in": 3, "runs": 3}
    ]}});
    let want = table(&published_rows(&data).unwrap());
    let typed = want.replace("| 2.00 |", "| 2.50 |");
    assert_ne!(typed, want);
    assert!(
        want.contains("| a | 2.00 | 1.00 – 3.00 | >= 1 | 3 of 3 runs |"),
        "{want}"
    );
}
