//! `crdplane-load report`: the HTML report of saved JSON reports, several runs side by side.
//!
//! It runs no load: it reads files written by `--json-out` (the "before" and "after" of a
//! change, say), matches their scenarios and hands them to [`crate::html`], which writes one
//! self-contained page (tables and hand-drawn SVG plots, nothing fetched from the network).
//! Files from an older crdplane-load, without `timeline` and `latency_histogram`, are
//! accepted: their tables are shown and the page says which plots they lack.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;

use crate::html::{self, Run};
use crate::stats::Report;

/// Command line of `crdplane-load report`.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "crdplane-load report",
    bin_name = "crdplane-load report",
    about = "HTML report of saved --json-out files; several files are compared side by side"
)]
pub struct ReportArgs {
    /// JSON files written by --json-out (a report, an array of reports or one report per
    /// line), one file per run; the first is the baseline of the ratios.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,

    /// Where to write the HTML page.
    #[arg(long)]
    pub html_out: PathBuf,

    /// Name of a run in the page, in the order of the files (repeat it; default: the file
    /// names).
    #[arg(long = "label")]
    pub labels: Vec<String>,
}

/// The reports in `text`: one JSON report, an array of them, or several one after the other
/// (e.g. one per line).
pub fn parse_reports(text: &str) -> Result<Vec<Report>, String> {
    let mut reports = Vec::new();
    for value in serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>() {
        let value = value.map_err(|e| format!("not JSON: {e}"))?;
        let items = match value {
            serde_json::Value::Array(items) => items,
            v => vec![v],
        };
        for item in items {
            let r = serde_json::from_value(item).map_err(|e| {
                format!(
                    "report {} is not a crdplane-load report: {e}",
                    reports.len() + 1
                )
            })?;
            reports.push(r);
        }
    }
    if reports.is_empty() {
        return Err("no report in it".into());
    }
    Ok(reports)
}

/// The run in the file at `path`, under `label`.
pub fn load_run(path: &Path, label: String) -> Result<Run, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let reports = parse_reports(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Run { label, reports })
}

/// Default labels: the file names without extension, or the whole paths if those repeat.
fn default_labels(paths: &[PathBuf]) -> Vec<String> {
    let stems: Vec<String> = paths
        .iter()
        .map(|p| {
            p.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| p.display().to_string())
        })
        .collect();
    let unique = stems
        .iter()
        .enumerate()
        .all(|(i, s)| !stems[..i].contains(s));
    if unique {
        stems
    } else {
        paths.iter().map(|p| p.display().to_string()).collect()
    }
}

/// Entry point of `crdplane-load report` (from `main.rs`). Exit code 0 = page written,
/// 1 = a file could not be read or written.
pub fn main_with_args(a: ReportArgs) -> ExitCode {
    if a.labels.len() > a.inputs.len() {
        eprintln!(
            "crdplane-load report: {} --label for {} files",
            a.labels.len(),
            a.inputs.len()
        );
        return ExitCode::from(1);
    }
    let mut labels = default_labels(&a.inputs);
    for (l, given) in labels.iter_mut().zip(a.labels) {
        *l = given;
    }
    let mut runs = Vec::new();
    for (path, label) in a.inputs.iter().zip(labels) {
        match load_run(path, label) {
            Ok(run) => runs.push(run),
            Err(e) => {
                eprintln!("crdplane-load report: {e}");
                return ExitCode::from(1);
            }
        }
    }
    if let Err(e) = std::fs::write(&a.html_out, html::render(&runs)) {
        eprintln!(
            "crdplane-load report: writing {}: {e}",
            a.html_out.display()
        );
        return ExitCode::from(1);
    }
    eprintln!(
        "crdplane-load report: wrote {} ({} run(s))",
        a.html_out.display(),
        runs.len()
    );
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_default_to_file_names() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(
            default_labels(&[p("/tmp/before.json"), p("after.json")]),
            ["before", "after"]
        );
        assert_eq!(
            default_labels(&[p("a/out.json"), p("b/out.json")]),
            ["a/out.json", "b/out.json"]
        );
    }

    #[test]
    fn args_parse_after_the_subcommand_name() {
        let a = ReportArgs::try_parse_from([
            "report",
            "--html-out",
            "cmp.html",
            "A.json",
            "B.json",
            "--label",
            "before",
        ])
        .unwrap();
        assert_eq!(a.inputs, [PathBuf::from("A.json"), PathBuf::from("B.json")]);
        assert_eq!(a.html_out, PathBuf::from("cmp.html"));
        assert_eq!(a.labels, ["before"]);
        assert!(ReportArgs::try_parse_from(["report", "--html-out", "x.html"]).is_err());
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(parse_reports("").is_err());
        assert!(parse_reports("{").is_err());
        assert!(parse_reports(r#"{"tool":"crdplane-load"}"#).is_err());
        assert!(parse_reports("[]").is_err());
    }
}
