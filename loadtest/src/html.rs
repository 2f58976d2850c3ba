//! The HTML report: one self-contained page with a run's tables and plots, or several runs
//! side by side.
//!
//! This is the end of the tool's pipeline: it reads only [`Report`]s — the one a run has just
//! produced (`--html-out`) or reports loaded back from `--json-out` files by
//! [`crate::report`] (the `report` subcommand) — and returns the page as a string. The plots
//! are SVG drawn here by hand rather than by a charting library or a JavaScript bundle: the
//! page is a single file that opens anywhere offline (a CI artifact, an attachment to an
//! issue) without fetching scripts, fonts or stylesheets from the network, and the two kinds
//! of plot it needs (lines over time, a histogram on a log axis) take little code.

use std::fmt::Write as _;

use crate::stats::{LatencySummary, Report};

/// One run: its reports (one per scenario) under a label.
#[derive(Clone, Debug)]
pub struct Run {
    /// Name of the run in the page (`before`, the file name, ...).
    pub label: String,
    /// Its reports, one per scenario.
    pub reports: Vec<Report>,
}

/// Line colours: one per run (comparisons) or per series (a single run).
const COLOURS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
];
/// Dash patterns of the p50, p90 and p99 lines when colours stand for runs.
const DASHES: [&str; 3] = ["", "6 3", "2 2"];

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:820px}\
table{border-collapse:collapse;margin:.6em 0}\
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}\
th:first-child,td:first-child{text-align:left}th{background:#f3f3f3}\
.better{color:#1a7f37}.worse{color:#c62828}.note{color:#666;font-style:italic}\
.params{color:#444;font-size:.9em}svg{display:block;margin:.8em 0}\
.swatch{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:middle}";

/// `s` with the HTML special characters replaced by entities (safe in text and attributes).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// A scenario across runs: reports are matched by scenario and target, the n-th such
/// report of one run with the n-th of another.
#[derive(Clone, Debug, PartialEq)]
struct Key {
    scenario: String,
    target: String,
    nth: usize,
}

impl Key {
    fn title(&self) -> String {
        let n = if self.nth > 0 {
            format!(" #{}", self.nth + 1)
        } else {
            String::new()
        };
        format!("{} ({}){n}", self.scenario, self.target)
    }

    fn find<'a>(&self, run: &'a Run) -> Option<&'a Report> {
        run.reports
            .iter()
            .filter(|r| r.scenario == self.scenario && r.target == self.target)
            .nth(self.nth)
    }
}

/// The scenarios of all runs, in order of first appearance.
fn keys(runs: &[Run]) -> Vec<Key> {
    let mut keys: Vec<Key> = Vec::new();
    for run in runs {
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for r in &run.reports {
            let key = Key {
                scenario: r.scenario.clone(),
                target: r.target.clone(),
                nth: seen
                    .iter()
                    .filter(|k| **k == (r.scenario.as_str(), r.target.as_str()))
                    .count(),
            };
            seen.push((&r.scenario, &r.target));
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys
}

/// The page for one run (its scenarios one after the other) or for several runs (each
/// scenario's runs side by side, ratios against the first run).
pub fn render(runs: &[Run]) -> String {
    let labels: Vec<&str> = runs.iter().map(|r| r.label.as_str()).collect();
    let compare = runs.len() > 1;
    let title = if compare {
        format!("crdplane-load: {}", labels.join(" vs "))
    } else {
        format!("crdplane-load report: {}", labels.join(""))
    };
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    let keys = keys(runs);
    if compare {
        out.push_str("<p>Runs (ratios are against the first):</p><ul>\n");
        for (i, run) in runs.iter().enumerate() {
            let _ = writeln!(
                out,
                "<li><span class=\"swatch\" style=\"background:{}\"></span>{}: {} scenario(s)</li>",
                COLOURS[i % COLOURS.len()],
                escape(&run.label),
                run.reports.len()
            );
        }
        out.push_str("</ul>\n");
    } else {
        summary_table(
            &mut out,
            runs.first()
                .map(|r| r.reports.as_slice())
                .unwrap_or_default(),
        );
    }
    for key in &keys {
        let reports: Vec<Option<&Report>> = runs.iter().map(|r| key.find(r)).collect();
        let _ = writeln!(out, "<section>\n<h2>{}</h2>", escape(&key.title()));
        for (run, r) in runs.iter().zip(&reports) {
            if let Some(r) = r {
                params(&mut out, compare.then_some(run.label.as_str()), r);
            }
        }
        if compare {
            comparison_table(&mut out, runs, &reports);
        } else if let Some(Some(r)) = reports.first() {
            op_tables(&mut out, r);
        }
        plots(&mut out, runs, &reports);
        out.push_str("</section>\n");
    }
    out.push_str("</body></html>\n");
    out
}

fn params(out: &mut String, label: Option<&str>, r: &Report) {
    let mode = match r.rate {
        Some(rate) => format!("open loop at {rate}/s"),
        None => "closed loop".into(),
    };
    let label = label
        .map(|l| format!("{}: ", escape(l)))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "<p class=\"params\">{label}{} at {} · mix {} · concurrency {} · {mode} · object size {} · {:.2} s</p>",
        escape(&r.target),
        escape(&r.endpoint),
        escape(&r.mix),
        r.concurrency,
        if r.object_size == 0 {
            "natural".to_string()
        } else {
            format!("{} B", r.object_size)
        },
        r.elapsed_sec
    );
}

fn latency_cells(out: &mut String, l: &LatencySummary) {
    for v in [l.p50, l.p90, l.p99, l.p999, l.max] {
        let _ = write!(out, "<td>{}</td>", ms(v));
    }
}

const LATENCY_HEADS: &str = "<th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>p99.9 ms</th>\
<th>max ms</th>";

/// One row per scenario of a single run.
fn summary_table(out: &mut String, reports: &[Report]) {
    let _ = writeln!(
        out,
        "<table><tr><th>scenario</th><th>requests</th><th>ok/s</th><th>errors</th>{LATENCY_HEADS}</tr>"
    );
    for r in reports {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td>",
            escape(&r.scenario),
            r.requests,
            r.ok_per_sec,
            r.errors
        );
        latency_cells(out, &r.latency_us);
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// A single run's scenario: per operation (when it mixes several) and its errors.
fn op_tables(out: &mut String, r: &Report) {
    if r.ops.len() > 1 {
        let _ = writeln!(
            out,
            "<table><tr><th>op</th><th>requests</th><th>ok</th><th>errors</th><th>ok/s</th>{LATENCY_HEADS}</tr>"
        );
        for o in &r.ops {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td>",
                escape(&o.op),
                o.requests,
                o.ok,
                o.errors,
                o.ok_per_sec
            );
            latency_cells(out, &o.latency_us);
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
    }
    if !r.error_counts.is_empty() {
        out.push_str("<table><tr><th>op</th><th>error</th><th>count</th></tr>\n");
        for e in &r.error_counts {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&e.op),
                escape(&e.error),
                e.count
            );
        }
        out.push_str("</table>\n");
    }
}

/// Metrics down, runs across, each later run followed by its ratio to the first.
fn comparison_table(out: &mut String, runs: &[Run], reports: &[Option<&Report>]) {
    out.push_str("<table><tr><th></th>");
    let first = escape(&runs[0].label);
    for (i, run) in runs.iter().enumerate() {
        let _ = write!(out, "<th>{}</th>", escape(&run.label));
        if i > 0 {
            let _ = write!(out, "<th>{} / {first}</th>", escape(&run.label));
        }
    }
    out.push_str("</tr>\n");
    // (name, value, ratio shown, higher is better)
    type Metric = (&'static str, fn(&Report) -> f64, bool, bool);
    let metrics: [Metric; 8] = [
        ("requests", |r| r.requests as f64, false, true),
        ("ok/s", |r| r.ok_per_sec, true, true),
        ("errors", |r| r.errors as f64, false, false),
        ("p50 ms", |r| r.latency_us.p50 as f64, true, false),
        ("p90 ms", |r| r.latency_us.p90 as f64, true, false),
        ("p99 ms", |r| r.latency_us.p99 as f64, true, false),
        ("p99.9 ms", |r| r.latency_us.p999 as f64, true, false),
        ("max ms", |r| r.latency_us.max as f64, true, false),
    ];
    for (name, value, ratio, higher_better) in metrics {
        let _ = write!(out, "<tr><td>{name}</td>");
        let base = reports[0].map(value);
        for (i, r) in reports.iter().enumerate() {
            let v = r.map(value);
            let cell = match v {
                None => "—".to_string(),
                Some(v) if name.ends_with(" ms") => ms(v as u64),
                Some(v) if name == "ok/s" => format!("{v:.1}"),
                Some(v) => format!("{v:.0}"),
            };
            let _ = write!(out, "<td>{cell}</td>");
            if i == 0 {
                continue;
            }
            match (ratio, base, v) {
                (true, Some(b), Some(v)) if b > 0.0 => {
                    let q = v / b;
                    let class = match (q > 1.05, q < 0.95) {
                        (true, _) if higher_better => " class=\"better\"",
                        (_, true) if !higher_better => " class=\"better\"",
                        (true, _) | (_, true) => " class=\"worse\"",
                        _ => "",
                    };
                    let _ = write!(out, "<td{class}>{q:.2}×</td>");
                }
                _ => out.push_str("<td></td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// A line (or filled step outline) of a plot.
struct Series {
    name: String,
    colour: &'static str,
    dash: &'static str,
    fill: bool,
    points: Vec<(f64, f64)>,
}

/// The three plots of a scenario, each run that has the data overlaid; a note names the
/// runs without it (reports of an older crdplane-load).
fn plots(out: &mut String, runs: &[Run], reports: &[Option<&Report>]) {
    let compare = runs.len() > 1;
    let (mut throughput, mut latency, mut hist) = (Vec::new(), Vec::new(), Vec::new());
    let (mut no_timeline, mut no_hist) = (Vec::new(), Vec::new());
    for (i, (run, r)) in runs.iter().zip(reports).enumerate() {
        let Some(r) = r else { continue };
        let colour = COLOURS[i % COLOURS.len()];
        let name = |what: &str| {
            if compare {
                format!("{} {what}", run.label)
            } else {
                what.to_string()
            }
        };
        if r.timeline.is_empty() {
            no_timeline.push(run.label.as_str());
        } else {
            // A last slot much shorter than the others would show a noisy rate: leave it out.
            let widest = r.timeline.iter().map(|p| p.dt_s).fold(0.0, f64::max);
            let full = || r.timeline.iter().filter(move |p| p.dt_s >= widest / 2.0);
            let rate = |n: u64, dt: f64| n as f64 / dt;
            throughput.push(Series {
                name: name("ok/s"),
                colour,
                dash: "",
                fill: false,
                points: full()
                    .map(|p| (p.t_s + p.dt_s / 2.0, rate(p.ok, p.dt_s)))
                    .collect(),
            });
            if r.errors > 0 {
                throughput.push(Series {
                    name: name("errors/s"),
                    colour: if compare { colour } else { COLOURS[1] },
                    dash: if compare { DASHES[2] } else { "" },
                    fill: false,
                    points: full()
                        .map(|p| (p.t_s + p.dt_s / 2.0, rate(p.errors, p.dt_s)))
                        .collect(),
                });
            }
            for (j, pname) in ["p50", "p90", "p99"].into_iter().enumerate() {
                latency.push(Series {
                    name: name(pname),
                    colour: if compare {
                        colour
                    } else {
                        COLOURS[[0, 2, 1][j]]
                    },
                    dash: if compare { DASHES[j] } else { "" },
                    fill: false,
                    points: r
                        .timeline
                        .iter()
                        .filter(|p| p.ok > 0)
                        .map(|p| {
                            let us = [p.p50_us, p.p90_us, p.p99_us][j];
                            (p.t_s + p.dt_s / 2.0, us as f64 / 1000.0)
                        })
                        .collect(),
                });
            }
        }
        if r.latency_histogram.is_empty() {
            no_hist.push(run.label.as_str());
        } else {
            let total: u64 = r.latency_histogram.iter().map(|b| b.count).sum();
            let mut points = Vec::new();
            for b in &r.latency_histogram {
                let (lo, hi) = (b.lo_us as f64 / 1000.0, b.hi_us as f64 / 1000.0);
                let y = 100.0 * b.count as f64 / total.max(1) as f64;
                points.extend([(lo, 0.0), (lo, y), (hi, y), (hi, 0.0)]);
            }
            hist.push(Series {
                name: if compare {
                    run.label.clone()
                } else {
                    "successful requests".into()
                },
                colour,
                dash: "",
                fill: true,
                points,
            });
        }
    }
    // "No timeline in the report of a, b (...): not in the plots over time."
    let note = |out: &mut String, missing: &[&str], what: &str, plots: &str| {
        if missing.is_empty() {
            return;
        }
        let (who, effect) = if compare {
            let names: Vec<String> = missing.iter().map(|l| escape(l)).collect();
            (format!("the report of {}", names.join(", ")), "not in the")
        } else {
            ("this report".into(), "no")
        };
        let _ = writeln!(
            out,
            "<p class=\"note\">No {what} in {who} (written by an older crdplane-load, or no \
             request completed): {effect} {plots}.</p>"
        );
    };
    note(out, &no_timeline, "timeline", "plots over time");
    if !throughput.is_empty() {
        out.push_str(&svg_chart(
            "Throughput over time",
            "seconds since start",
            "requests/s",
            false,
            &throughput,
        ));
        out.push_str(&svg_chart(
            "Latency percentiles over time",
            "seconds since start",
            "ms",
            false,
            &latency,
        ));
    }
    note(out, &no_hist, "latency histogram", "histogram plot");
    if !hist.is_empty() {
        out.push_str(&svg_chart(
            "Latency histogram",
            "latency, ms (log scale)",
            "% of successful requests",
            true,
            &hist,
        ));
    }
}

/// 1, 2 or 5 × a power of ten, close to `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw > 0.0 && raw.is_finite()) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    mag * if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    }
}

/// A tick label: at most three decimals, trailing zeros dropped.
fn tick_label(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

const W: f64 = 760.0;
const H: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const BOTTOM: f64 = 44.0;

/// A line plot (x linear from 0, or log with whole decades; y linear from 0) with a
/// title and a legend.
fn svg_chart(title: &str, x_label: &str, y_label: &str, log_x: bool, series: &[Series]) -> String {
    let mut out = String::new();
    // legend, wrapped under the title; the plot area starts below it
    let (mut lx, mut ly) = (LEFT, 38.0);
    let mut legend = String::new();
    for s in series {
        let w = 36.0 + 6.5 * s.name.chars().count() as f64;
        if lx + w > W - RIGHT && lx > LEFT {
            (lx, ly) = (LEFT, ly + 16.0);
        }
        let _ = write!(
            legend,
            "<line x1=\"{lx}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\" \
             stroke-dasharray=\"{}\"/><text x=\"{}\" y=\"{ly}\">{}</text>",
            ly - 4.0,
            lx + 22.0,
            ly - 4.0,
            s.colour,
            s.dash,
            lx + 27.0,
            escape(&s.name)
        );
        lx += w;
    }
    let (x0, x1, y0, y1) = (LEFT, W - RIGHT, H - BOTTOM, ly + 14.0);
    let fx = |x: f64| if log_x { x.log10() } else { x };
    let xs = series
        .iter()
        .flat_map(|s| &s.points)
        .filter(|p| !log_x || p.0 > 0.0)
        .map(|p| fx(p.0));
    let (mut xmin, mut xmax) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if !xmin.is_finite() {
        (xmin, xmax) = (0.0, 1.0);
    }
    if log_x {
        (xmin, xmax) = (xmin.floor(), xmax.ceil());
    } else {
        xmin = xmin.min(0.0);
    }
    if xmax <= xmin {
        xmax = xmin + 1.0;
    }
    let ymax_data = series
        .iter()
        .flat_map(|s| &s.points)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    let ystep = nice_step(ymax_data / 5.0);
    let ymax = ((ymax_data / ystep).ceil() * ystep).max(ystep);
    let px = |x: f64| x0 + (fx(x) - xmin) / (xmax - xmin) * (x1 - x0);
    let py = |y: f64| y0 - y / ymax * (y0 - y1);
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\" \
         aria-label=\"{t}\">\n<text x=\"{LEFT}\" y=\"18\" font-size=\"14\" \
         font-weight=\"bold\">{t}</text>{legend}\n",
        t = escape(title)
    );
    // grid and ticks
    let mut y = 0.0;
    while y <= ymax + ystep / 2.0 {
        let _ = write!(
            out,
            "<line x1=\"{x0}\" y1=\"{p:.1}\" x2=\"{x1}\" y2=\"{p:.1}\" stroke=\"#e5e5e5\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            x0 - 4.0,
            py(y) + 4.0,
            tick_label(y),
            p = py(y)
        );
        y += ystep;
    }
    let xticks: Vec<f64> = if log_x {
        // decades, and 2 and 5 times them when there are few decades
        let between: &[f64] = if xmax - xmin <= 3.0 { &[2.0, 5.0] } else { &[] };
        (xmin as i32..=xmax as i32)
            .flat_map(|k| {
                let d = 10f64.powi(k);
                std::iter::once(d).chain(between.iter().map(move |m| m * d))
            })
            .filter(|x| x.log10() <= xmax + 1e-9)
            .collect()
    } else {
        let step = nice_step((xmax - xmin) / 8.0);
        (0..)
            .map(|i| xmin + i as f64 * step)
            .take_while(|x| *x <= xmax + step * 1e-6)
            .collect()
    };
    for x in xticks {
        let _ = write!(
            out,
            "<line x1=\"{p:.1}\" y1=\"{y1:.1}\" x2=\"{p:.1}\" y2=\"{y0}\" stroke=\"#e5e5e5\"/>\
             <text x=\"{p:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            y0 + 14.0,
            tick_label(x),
            p = px(x)
        );
    }
    let _ = write!(
        out,
        "\n<rect x=\"{x0}\" y=\"{y1:.1}\" width=\"{}\" height=\"{:.1}\" fill=\"none\" \
         stroke=\"#888\"/>\n<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>\
         <text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        x1 - x0,
        y0 - y1,
        (x0 + x1) / 2.0,
        H - 8.0,
        escape(x_label),
        (y0 + y1) / 2.0,
        escape(y_label)
    );
    for s in series {
        let pts: String = s
            .points
            .iter()
            .filter(|p| !log_x || p.0 > 0.0)
            .map(|&(x, y)| format!("{:.1},{:.1} ", px(x), py(y)))
            .collect();
        if s.fill {
            let _ = writeln!(
                out,
                "<polygon points=\"{pts}\" fill=\"{}\" fill-opacity=\"0.15\" stroke=\"none\"/>",
                s.colour
            );
        }
        let _ = writeln!(
            out,
            "<polyline points=\"{pts}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" \
             stroke-dasharray=\"{}\"/>",
            s.colour, s.dash
        );
        // a line of one or two points is hard to see (a run shorter than a few seconds)
        if !s.fill && s.points.len() < 3 {
            for &(x, y) in &s.points {
                let _ = write!(
                    out,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{}\"/>",
                    px(x),
                    py(y),
                    s.colour
                );
            }
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_html_specials() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("µs ok"), "µs ok");
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(1234.0), 2000.0);
        assert_eq!(nice_step(0.07), 0.1);
        assert_eq!(tick_label(2.50), "2.5");
        assert_eq!(tick_label(1000.0), "1000");
        assert_eq!(tick_label(0.001), "0.001");
        assert_eq!(tick_label(0.0), "0");
    }

    #[test]
    fn chart_maps_points_into_the_plot_area() {
        let s = Series {
            name: "a<b".into(),
            colour: COLOURS[0],
            dash: "",
            fill: false,
            points: vec![(0.0, 0.0), (10.0, 50.0)],
        };
        let svg = svg_chart("t", "x", "y", false, &[s]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("a&lt;b"));
        // (0, 0) at the bottom left corner, (10, 50) at the top right
        assert!(svg.contains(&format!("points=\"{LEFT:.1},{:.1} ", H - BOTTOM)));
        assert!(svg.contains(&format!("{:.1},", W - RIGHT)));
    }
}
