//! The HTML report and the `report` subcommand on synthetic reports: table values, one SVG
//! per plot, escaping, and JSON files of an older crdplane-load (without `timeline` and
//! `latency_histogram`).

use std::time::Duration;

use crdplane_load::config::Op;
use crdplane_load::html::{self, Run};
use crdplane_load::report::parse_reports;
use crdplane_load::stats::{Recorder, Report, RunInfo};

const NASTY: &str = "<script>alert('x')</script> & co";
const NASTY_ESCAPED: &str = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co";

/// `n` successes of `latency_us` each, spread evenly over `secs` seconds, and `errors`
/// failures in the last second.
fn report(scenario: &str, n: u64, latency_us: u64, secs: u64, errors: u64) -> Report {
    let mut rec = Recorder::default();
    for i in 0..n {
        let at = Duration::from_millis(i * secs * 1000 / n);
        rec.success(Op::Get, Duration::from_micros(latency_us), at);
    }
    for _ in 0..errors {
        rec.error(
            Op::Get,
            "http 503 ServiceUnavailable".into(),
            b"busy",
            Duration::from_secs(secs - 1),
        );
    }
    let info = RunInfo {
        target: "http".into(),
        endpoint: "http://127.0.0.1:6443".into(),
        scenario: scenario.into(),
        mix: "get=1".into(),
        concurrency: 8,
        rate: None,
        object_size: 0,
        working_set: 100,
    };
    Report::build(info, &rec, Duration::from_secs(secs))
}

fn run(label: &str, reports: Vec<Report>) -> Run {
    Run {
        label: label.into(),
        reports,
    }
}

/// What `--json-out` of crdplane-load wrote before the timeline and histogram existed.
const OLD_JSON: &str = r#"{
  "tool": "crdplane-load",
  "target": "http",
  "endpoint": "http://127.0.0.1:6443",
  "scenario": "get",
  "mix": "get=1",
  "concurrency": 64,
  "rate": null,
  "object_size": 0,
  "working_set": 1000,
  "elapsed_sec": 10.002,
  "requests": 250000,
  "ok": 250000,
  "errors": 0,
  "ok_per_sec": 24995.0,
  "requests_per_sec": 24995.0,
  "latency_us": {"count": 250000, "min": 310, "mean": 2540.2, "p50": 2401, "p90": 3203,
                 "p99": 5807, "p999": 9103, "max": 20511},
  "ops": [{"op": "get", "requests": 250000, "ok": 250000, "errors": 0, "ok_per_sec": 24995.0,
           "latency_us": {"count": 250000, "min": 310, "mean": 2540.2, "p50": 2401,
                          "p90": 3203, "p99": 5807, "p999": 9103, "max": 20511}}],
  "error_counts": [],
  "error_samples": []
}"#;

#[test]
fn single_run_page_has_table_plots_and_escapes() {
    let rep = report(NASTY, 1000, 1500, 2, 3);
    assert_eq!(rep.timeline.len(), 2);
    assert!(!rep.latency_histogram.is_empty());
    let page = html::render(&[run("this run", vec![rep])]);
    assert!(page.starts_with("<!DOCTYPE html>"));
    // the scenario table: requests, ok/s, errors, p50 .. max in ms
    assert!(
        page.contains(&format!(
            "<tr><td>{NASTY_ESCAPED}</td><td>1003</td><td>500.0</td><td>3</td><td>1.500</td>"
        )),
        "{page}"
    );
    assert!(page.contains("http 503 ServiceUnavailable"));
    // throughput, latency over time, histogram
    assert_eq!(page.matches("<svg").count(), 3, "{page}");
    assert!(page.contains("Throughput over time"));
    assert!(page.contains("Latency percentiles over time"));
    assert!(page.contains("Latency histogram"));
    assert!(page.contains(">errors/s</text>"));
    // nothing from the scenario name gets through unescaped; no scripts, no external assets
    assert!(page.contains(NASTY_ESCAPED));
    assert!(!page.contains("<script"));
    assert!(!page.contains("src=") && !page.contains("href="));
}

#[test]
fn comparison_page_has_ratios_and_overlaid_plots() {
    let before = run(
        "before",
        vec![
            report("get", 1000, 1500, 2, 0),
            report(NASTY, 10, 100, 1, 0),
        ],
    );
    let after = run("after", vec![report("get", 2000, 2000, 2, 0)]);
    let page = html::render(&[before, after]);
    assert!(page.contains("<h1>crdplane-load: before vs after</h1>"));
    assert!(page.contains("<h2>get (http)</h2>"));
    assert!(page.contains(&format!("<h2>{NASTY_ESCAPED} (http)</h2>")));
    // ok/s 500 → 1000: 2× and better; p50 1.5 ms → 2 ms: 1.33× and worse
    assert!(
        page.contains(
            "<tr><td>ok/s</td><td>500.0</td><td>1000.0</td><td class=\"better\">2.00×</td></tr>"
        ),
        "{page}"
    );
    assert!(page.contains(
        "<tr><td>p50 ms</td><td>1.500</td><td>2.000</td><td class=\"worse\">1.33×</td></tr>"
    ));
    assert!(page.contains("<tr><td>p99 ms</td><td>1.500</td><td>2.000</td>"));
    // the scenario only the first run has: a dash, no ratio
    assert!(page.contains("<tr><td>requests</td><td>10</td><td>—</td><td></td></tr>"));
    // 3 plots for each scenario, both runs in the shared ones, in distinct colours
    assert_eq!(page.matches("<svg").count(), 6);
    assert!(page.contains(">before ok/s</text>") && page.contains(">after ok/s</text>"));
    assert!(page.contains(">before p99</text>") && page.contains(">after p99</text>"));
    assert!(page.contains("stroke=\"#1f77b4\"") && page.contains("stroke=\"#d62728\""));
    assert!(!page.contains("<script"));
}

#[test]
fn old_format_json_is_accepted_by_the_comparison() {
    let old = parse_reports(OLD_JSON).unwrap();
    assert_eq!(old.len(), 1);
    assert!(old[0].timeline.is_empty() && old[0].latency_histogram.is_empty());
    assert_eq!(old[0].latency_us.p99, 5807);
    // the new format, as --json-out writes it, reads back the same
    let new = report("get", 1000, 2000, 2, 0);
    let text = serde_json::to_string_pretty(&new).unwrap();
    assert_eq!(parse_reports(&text).unwrap()[0], new);
    // old vs new: tables for both, plots of the new one only, and a note about the old one
    let page = html::render(&[run("old", old.clone()), run("new", vec![new])]);
    assert!(page.contains("<tr><td>ok/s</td><td>24995.0</td><td>500.0</td>"));
    assert!(page.contains("<tr><td>p99 ms</td><td>5.807</td><td>2.000</td>"));
    assert!(page.contains("No timeline in the report of old"));
    assert!(page.contains("No latency histogram in the report of old"));
    assert_eq!(page.matches("<svg").count(), 3);
    // old vs old: tables only
    let page = html::render(&[run("a", old.clone()), run("b", old)]);
    assert_eq!(page.matches("<svg").count(), 0);
    assert!(page.contains("<tr><td>p50 ms</td><td>2.401</td><td>2.401</td><td>1.00×</td></tr>"));
    assert!(page.contains("No timeline in the report of a, b"));
}

#[test]
fn several_reports_per_file() {
    let (a, b) = (
        report("create", 10, 100, 1, 0),
        report("get", 10, 100, 1, 0),
    );
    let array = serde_json::to_string(&[&a, &b]).unwrap();
    let lines = format!(
        "{}\n{}\n",
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    for text in [array, lines] {
        let got = parse_reports(&text).unwrap();
        assert_eq!(got, [a.clone(), b.clone()]);
    }
}

#[test]
fn report_subcommand_writes_the_comparison() {
    let dir = std::env::temp_dir().join(format!("crdplane-load-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (old, new, out) = (
        dir.join("old.json"),
        dir.join("new.json"),
        dir.join("cmp.html"),
    );
    std::fs::write(&old, OLD_JSON).unwrap();
    let rep = report("get", 1000, 2000, 2, 0);
    std::fs::write(&new, serde_json::to_vec_pretty(&rep).unwrap()).unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_crdplane-load"))
        .arg("report")
        .arg("--html-out")
        .arg(&out)
        .args([&old, &new])
        .args(["--label", "before"])
        .status()
        .unwrap();
    assert!(status.success());
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.contains("crdplane-load: before vs new"));
    assert!(page.contains("<tr><td>ok/s</td><td>24995.0</td><td>500.0</td>"));
    // a file that is not a report: exit 1, no page
    std::fs::write(&old, "{\"watchers\": 3}").unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_crdplane-load"))
        .args(["report", "--html-out"])
        .arg(dir.join("bad.html"))
        .arg(&old)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));
    assert!(!dir.join("bad.html").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
