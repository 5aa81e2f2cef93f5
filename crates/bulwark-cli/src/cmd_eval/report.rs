//! The results of an eval: per task, per model (success rate, median and
//! 90th-percentile seconds, counts per category), as a table and as JSON.

use super::outcome::Outcome;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One task's verdict and what its run did.
#[derive(Debug, Clone, Serialize)]
pub struct TaskResult {
    pub id: String,
    pub category: String,
    pub passed: bool,
    /// Every failed check (empty when it passed).
    pub failures: Vec<String>,
    #[serde(flatten)]
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    pub tasks: usize,
    pub passed: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub tasks: usize,
    pub passed: usize,
    pub success_pct: f64,
    pub median_s: f64,
    pub p90_s: f64,
    pub categories: BTreeMap<String, Count>,
}

/// One model's run of the task set.
#[derive(Debug, Clone, Serialize)]
pub struct ModelReport {
    pub model: String,
    /// The eval home, when it was kept (`--keep`).
    pub home: Option<String>,
    pub summary: Summary,
    pub results: Vec<TaskResult>,
}

/// Everything `--json` writes.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub task_file: String,
    pub bulwark: String,
    pub timeout_s: u64,
    pub models: Vec<ModelReport>,
}

pub fn summarize(results: &[TaskResult]) -> Summary {
    let tasks = results.len();
    let passed = results.iter().filter(|r| r.passed).count();
    let mut seconds: Vec<f64> = results.iter().map(|r| r.outcome.seconds).collect();
    seconds.sort_by(f64::total_cmp);
    let mut categories: BTreeMap<String, Count> = BTreeMap::new();
    for r in results {
        let count = categories.entry(r.category.clone()).or_default();
        count.tasks += 1;
        count.passed += usize::from(r.passed);
    }
    Summary {
        tasks,
        passed,
        success_pct: percent(passed, tasks),
        median_s: median(&seconds),
        p90_s: nearest_rank(&seconds, 90),
        categories,
    }
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    // Counts are far below 2^52: the conversions are exact.
    #[allow(clippy::cast_precision_loss)]
    let pct = 100.0 * part as f64 / whole as f64;
    pct
}

/// The median of sorted values (0 when there are none).
pub fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The `pct`th percentile of sorted values by nearest rank (0 when empty).
pub fn nearest_rank(sorted: &[f64], pct: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (pct * sorted.len()).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

/// A Markdown table (readable as is, pasteable into the README): one row
/// per model, then each model's counts per category.
pub fn table(models: &[ModelReport]) -> String {
    let width = models
        .iter()
        .map(|m| m.model.chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| {:<width$} | tasks | passed | success | median s | p90 s |",
        "model"
    );
    let _ = writeln!(
        out,
        "|{}|------:|-------:|--------:|---------:|------:|",
        "-".repeat(width + 2)
    );
    for m in models {
        let s = &m.summary;
        let _ = writeln!(
            out,
            "| {:<width$} | {:>5} | {:>6} | {:>6.1}% | {:>8.1} | {:>5.1} |",
            m.model, s.tasks, s.passed, s.success_pct, s.median_s, s.p90_s
        );
    }
    for m in models {
        let cats: Vec<String> = m
            .summary
            .categories
            .iter()
            .map(|(name, c)| format!("{name} {}/{}", c.passed, c.tasks))
            .collect();
        let _ = writeln!(out, "\n{} by category: {}", m.model, cats.join(" · "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(category: &str, passed: bool, seconds: f64) -> TaskResult {
        TaskResult {
            id: format!("t-{seconds}"),
            category: category.into(),
            passed,
            failures: if passed { vec![] } else { vec!["x".into()] },
            outcome: Outcome {
                seconds,
                ..Outcome::default()
            },
        }
    }

    #[test]
    fn percentiles() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0]), 3.0);
        assert_eq!(median(&[1.0, 3.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 9.0]), 2.0);
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(nearest_rank(&ten, 90), 9.0);
        assert_eq!(nearest_rank(&ten, 100), 10.0);
        assert_eq!(nearest_rank(&[5.0], 90), 5.0);
        assert_eq!(nearest_rank(&[], 90), 0.0);
    }

    #[test]
    fn a_summary_counts_per_category_and_the_table_shows_it() {
        let results = vec![
            result("csv", true, 2.0),
            result("csv", false, 4.0),
            result("list", true, 1.0),
        ];
        let s = summarize(&results);
        assert_eq!((s.tasks, s.passed), (3, 2));
        assert!((s.success_pct - 66.666).abs() < 0.01);
        assert_eq!(s.median_s, 2.0);
        assert_eq!(
            s.categories["csv"],
            Count {
                tasks: 2,
                passed: 1
            }
        );
        let report = ModelReport {
            model: "local:m".into(),
            home: None,
            summary: s,
            results,
        };
        let t = table(&[report]);
        assert!(t.contains("| local:m |     3 |      2 |   66.7% |"), "{t}");
        assert!(t.contains("csv 1/2 · list 1/1"), "{t}");
    }
}
