//! The published headline: the median of several `toc-bench all` runs, each ratio taken
//! within one run, with the lowest and highest beside it. `toc-bench median --out DIR RUN…`
//! reads each run's `docs/bench/benchmarks.json`, and writes into DIR the median run's data
//! with the medians beside it (`docs/bench/benchmarks.json`, key `median`) and its plots,
//! and the one table made from them into BENCHMARKS.md and README.md between their marks. No figure of
//! the table is typed by hand, and a test (`tests/published.rs`) holds the three together.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The marks the headline table stands between, in BENCHMARKS.md and README.md.
pub const TABLE_START: &str =
    "<!-- The headline table: written by `toc-bench median` from docs/bench/benchmarks.json. -->";
/// Where the table ends.
pub const TABLE_END: &str = "<!-- End of the headline table. -->";

/// One comparison over the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: String,
    pub median: Option<f64>,
    pub lowest: Option<f64>,
    pub highest: Option<f64>,
    pub target: String,
    /// Runs in which it met its target, of `runs` that measured it.
    pub met_in: usize,
    pub runs: usize,
}

/// The median of `values` (the mean of the middle two for an even count).
fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        f64::midpoint(values[mid - 1], values[mid])
    })
}

/// The headline rows of several runs' `benchmarks.json`, in the first run's order. A ratio
/// missing from a run (a peer left out, a scenario that failed) is left out of its median.
pub fn rows(runs: &[Value]) -> Vec<Row> {
    let Some(first) = runs.first().and_then(|r| r["headline"].as_array()) else {
        return Vec::new();
    };
    first
        .iter()
        .filter_map(|row| row["name"].as_str())
        .map(|name| {
            let of: Vec<&Value> = runs
                .iter()
                .filter_map(|r| r["headline"].as_array())
                .filter_map(|h| h.iter().find(|row| row["name"] == name))
                .collect();
            let mut values: Vec<f64> = of.iter().filter_map(|r| r["value"].as_f64()).collect();
            let (lowest, highest) = (
                values.iter().copied().reduce(f64::min),
                values.iter().copied().reduce(f64::max),
            );
            Row {
                name: name.to_string(),
                runs: values.len(),
                median: median(&mut values),
                lowest,
                highest,
                target: of[0]["target"].as_str().unwrap_or("").to_string(),
                met_in: of.iter().filter(|r| r["met"] == true).count(),
            }
        })
        .collect()
}

/// The headline table of `rows`, between its marks.
pub fn table(rows: &[Row]) -> String {
    let mut t = format!(
        "{TABLE_START}\n| comparison | median | lowest – highest | target | met in |\n|---|---|---|---|---|\n"
    );
    for r in rows {
        let _ = match (r.median, r.lowest, r.highest) {
            (Some(m), Some(lo), Some(hi)) => writeln!(
                t,
                "| {} | {} | {} – {} | {} | {} |",
                r.name,
                super::report::figure(m),
                super::report::figure(lo),
                super::report::figure(hi),
                r.target,
                // A ratio shown for reading, with no target: nothing to meet.
                if r.target == "-" {
                    String::new()
                } else {
                    format!("{} of {} runs", r.met_in, r.runs)
                }
            ),
            _ => writeln!(t, "| {} | not measured | | {} | |", r.name, r.target),
        };
    }
    t.push_str(TABLE_END);
    t
}

/// The rows a published `benchmarks.json` holds under `median`.
pub fn published_rows(data: &Value) -> Result<Vec<Row>, String> {
    let rows = data["median"]["rows"]
        .as_array()
        .ok_or("benchmarks.json has no median rows (written by `toc-bench median`)")?;
    Ok(rows
        .iter()
        .map(|r| Row {
            name: r["name"].as_str().unwrap_or("").to_string(),
            median: r["median"].as_f64(),
            lowest: r["lowest"].as_f64(),
            highest: r["highest"].as_f64(),
            target: r["target"].as_str().unwrap_or("").to_string(),
            met_in: usize::try_from(r["met_in"].as_u64().unwrap_or(0)).unwrap_or(0),
            runs: usize::try_from(r["runs"].as_u64().unwrap_or(0)).unwrap_or(0),
        })
        .collect())
}

/// The table `text` holds between the marks, if it has them.
pub fn shown_table(text: &str) -> Option<&str> {
    let start = text.find(TABLE_START)?;
    let end = text[start..].find(TABLE_END)? + start + TABLE_END.len();
    Some(&text[start..end])
}

/// `text` with the table between its marks replaced by `table`.
fn with_table(text: &str, table: &str, file: &Path) -> Result<String, String> {
    let shown = shown_table(text).ok_or_else(|| {
        format!(
            "{} has no headline table marks ({TABLE_START} … {TABLE_END})",
            file.display()
        )
    })?;
    Ok(text.replacen(shown, table, 1))
}

/// The run whose ratios are nearest the medians (the most rows at the median, then the
/// smallest distance), whose figures the tables below the headline show.
fn median_run(runs: &[Value], rows: &[Row]) -> usize {
    let score = |run: &Value| {
        let mut at = 0usize;
        let mut off = 0.0f64;
        for r in rows {
            let v = run["headline"]
                .as_array()
                .and_then(|h| h.iter().find(|x| x["name"] == r.name.as_str()))
                .and_then(|x| x["value"].as_f64());
            if let (Some(v), Some(m)) = (v, r.median) {
                if v == m {
                    at += 1;
                }
                off += ((v - m) / m.abs().max(1e-9)).abs();
            }
        }
        (at, off)
    };
    (0..runs.len())
        .max_by(|&a, &b| {
            let (sa, sb) = (score(&runs[a]), score(&runs[b]));
            sa.0.cmp(&sb.0).then(sb.1.total_cmp(&sa.1))
        })
        .unwrap_or(0)
}

/// `toc-bench median --out DIR RUN…`: publishes the median of the runs into DIR (its
/// BENCHMARKS.md and README.md must have the table's marks; `--out .` is the repository).
pub fn publish(out: &Path, run_dirs: &[PathBuf]) -> Result<String, String> {
    if run_dirs.is_empty() {
        return Err(
            "median: name the runs' --out directories (toc-bench median --out . DIR1 DIR2 DIR3)"
                .into(),
        );
    }
    let mut runs = Vec::new();
    for dir in run_dirs {
        let path = dir.join(super::report::DATA_DIR).join("benchmarks.json");
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "{}: {e} (a `toc-bench all --out {}` run)",
                path.display(),
                dir.display()
            )
        })?;
        let data: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if data["headline"].as_array().is_none() {
            return Err(format!(
                "{}: no headline (written by an older toc-bench)",
                path.display()
            ));
        }
        runs.push(data);
    }
    let rows = rows(&runs);
    let pick = median_run(&runs, &rows);
    let mut data = runs[pick].clone();
    data["median"] = json!({
        "runs": run_dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>(),
        "data_of": run_dirs[pick].display().to_string(),
        "rows": rows.iter().map(|r| json!({
            "name": r.name, "median": r.median, "lowest": r.lowest, "highest": r.highest,
            "target": r.target, "met_in": r.met_in, "runs": r.runs,
        })).collect::<Vec<_>>(),
    });
    let table = table(&rows);
    let json_path = out.join(super::report::DATA_DIR).join("benchmarks.json");
    let mut wrote = Vec::new();
    for (name, from_run) in [("BENCHMARKS.md", true), ("README.md", false)] {
        let path = out.join(name);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut text = with_table(&text, &table, &path)?;
        if from_run {
            // The median run's own tables below the headline.
            let run_md = run_dirs[pick].join("BENCHMARKS.md");
            if let Ok(run) = std::fs::read_to_string(&run_md) {
                text = super::report::with_run(&text, &run);
            }
        }
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        wrote.push(path.display().to_string());
    }
    let data_dir = json_path.parent().expect("a folder");
    std::fs::create_dir_all(data_dir).map_err(|e| e.to_string())?;
    // The median run's plots, which its tables link.
    for plot in ["lateness.svg", "scale.svg"] {
        let from = run_dirs[pick].join(super::report::DATA_DIR).join(plot);
        if from.exists() {
            std::fs::copy(&from, data_dir.join(plot))
                .map_err(|e| format!("{}: {e}", from.display()))?;
            wrote.push(data_dir.join(plot).display().to_string());
        }
    }
    std::fs::write(
        &json_path,
        serde_json::to_string_pretty(&data).expect("json"),
    )
    .map_err(|e| format!("{}: {e}", json_path.display()))?;
    wrote.push(json_path.display().to_string());
    Ok(wrote.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(values: &[(&str, Option<f64>, bool)]) -> Value {
        json!({"headline": values.iter().map(|(n, v, met)| json!({
            "name": n, "value": v, "target": ">= 1", "met": met,
        })).collect::<Vec<_>>()})
    }

    #[test]
    fn each_ratio_is_the_median_of_the_runs_that_measured_it() {
        let runs = [
            run(&[("a", Some(1.0), true), ("b", Some(5.0), false)]),
            run(&[("a", Some(3.0), true), ("b", None, false)]),
            run(&[("a", Some(2.0), false), ("b", Some(7.0), true)]),
        ];
        let rows = rows(&runs);
        assert_eq!(rows[0].median, Some(2.0));
        assert_eq!((rows[0].lowest, rows[0].highest), (Some(1.0), Some(3.0)));
        assert_eq!((rows[0].met_in, rows[0].runs), (2, 3));
        assert_eq!(
            rows[1].median,
            Some(6.0),
            "the run that did not measure b is left out"
        );
        assert_eq!(rows[1].runs, 2);
        assert_eq!(median_run(&runs, &rows), 2, "run 3 holds a's median");
    }

    #[test]
    fn figures_are_rounded_as_a_reader_reads_them() {
        use super::super::report::figure;
        assert_eq!(figure(0.956), "0.96");
        assert_eq!(figure(7_761_357.12), "7,761,357");
        assert_eq!(figure(16_094.4), "16,094");
        assert_eq!(figure(327.0), "327");
    }

    #[test]
    fn the_table_replaces_only_what_stands_between_its_marks() {
        let text = format!("before\n{TABLE_START}\nold\n{TABLE_END}\nafter\n");
        let rows = rows(&[run(&[("a", Some(2.0), true)])]);
        let new = with_table(&text, &table(&rows), Path::new("x")).unwrap();
        assert!(
            new.starts_with("before\n") && new.ends_with("\nafter\n"),
            "{new}"
        );
        assert_eq!(shown_table(&new), Some(table(&rows).as_str()));
        assert!(with_table("no marks", "t", Path::new("x")).is_err());
    }
}
