//! prune + default + validate of the spec's CronTab and of a ~10 kB object with nested
//! arrays/maps, against the compiled schema, side by side with the `jsonschema` crate
//! validating the same document against the same schema (validation only).
//!
//! `cargo bench -p crdplane-validation --bench pipeline` — prints criterion's figures per
//! benchmark, then a summary table of the medians (see BENCHMARKS.md).
//!
//! Our side runs `pipeline::prune_default_validate`, the function `admit::admit` (the gRPC
//! `Admit` handler) runs after decoding, on a fresh copy of the document per iteration: the
//! copy is made right before the timed calls (the request path decodes the bytes into an owned
//! object immediately before pruning, so it is in cache) and dropped after them, outside the
//! timed section. Small documents are copied in batches of 64 (all still in cache), so that a
//! ~200 ns call is not measured together with two timer reads; large ones one per iteration.
//! The "fresh copy" jsonschema line gets exactly the same input handling.
#[path = "common/mod.rs"]
mod common;

use common::{big, crontab};
use crdplane_validation::admit::{AdmitInput, FieldValidation, Operation, admit};
use crdplane_validation::structural::{self, Schema};
use crdplane_validation::{default, pipeline, prune, validate};
use criterion::{BatchSize, Criterion};
use serde_json::{Value, json};
use std::hint::black_box;

/// The allocator of the service binary (`src/main.rs`), so that the defaults our side inserts
/// are allocated as in production (jsonschema's `is_valid` hardly allocates).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const OURS: &str = "crdplane prune+default+validate (fresh copy)";
const OURS_SAME: &str = "crdplane prune+default+validate (same document)";
const JS: &str = "jsonschema is_valid (same document)";
const JS_FRESH: &str = "jsonschema is_valid (fresh copy)";

/// prune + default + validate of an owned object (as after decoding), exactly as `admit`.
fn pipeline(s: &Schema, mut o: Value) -> (Value, usize) {
    let out = pipeline::prune_default_validate(&mut o, s);
    (o, out.pruned.len() + out.errors.len())
}

/// The same with upstream's three separate passes.
fn pipeline_separate(s: &Schema, mut o: Value) -> (Value, usize) {
    let pruned = prune::prune(&mut o, s);
    default::prune_non_nullable_nulls(&mut o, s);
    default::apply_defaults(&mut o, s);
    let errs = validate::validate(s, &o, "");
    (o, pruned.len() + errs.len())
}

fn bench_case(
    c: &mut Criterion,
    name: &str,
    schema: &Value,
    obj: &Value,
    api_version: &str,
    kind: &str,
) {
    let s = structural::compile(schema).unwrap();
    let js = jsonschema::validator_for(schema).unwrap();
    assert_eq!(pipeline(&s, obj.clone()).1, 0);
    assert!(js.is_valid(obj));
    let bytes = serde_json::to_vec(obj).unwrap();
    println!("{name}: object is {} bytes", bytes.len());
    let mut g = c.benchmark_group(name);
    let batch = if bytes.len() < 4096 {
        BatchSize::NumIterations(64)
    } else {
        BatchSize::PerIteration
    };
    g.bench_function(OURS, |b| {
        b.iter_batched(|| obj.clone(), |o| pipeline(&s, o), batch)
    });
    // The same document in place, iteration after iteration, like the "same document"
    // jsonschema line. The first call prunes and defaults it; every later call does the whole
    // walk again (every key matched, every check run, every missing default looked for) and
    // finds the object already pruned and defaulted, so nothing changes and nothing allocates.
    g.bench_function(OURS_SAME, |b| {
        let mut o = obj.clone();
        b.iter(|| {
            pipeline::prune_default_validate(black_box(&mut o), &s)
                .errors
                .len()
        })
    });
    g.bench_function("crdplane, upstream's separate passes (fresh copy)", |b| {
        b.iter_batched(|| obj.clone(), |o| pipeline_separate(&s, o), batch)
    });
    g.bench_function(
        "crdplane full admit (bytes in: decode, metadata, prune, default, validate)",
        |b| {
            b.iter(|| {
                admit(
                    &s,
                    &AdmitInput {
                        operation: Operation::Create,
                        object: black_box(&bytes),
                        old_object: None,
                        field_validation: FieldValidation::Warn,
                        subresource: "",
                        api_version,
                        kind,
                        namespaced: true,
                    },
                )
                .errors
                .len()
            })
        },
    );
    g.bench_function("crdplane validate only", |b| {
        b.iter(|| validate::validate(&s, black_box(obj), "").len())
    });
    g.bench_function(JS, |b| b.iter(|| js.is_valid(black_box(obj))));
    // The same input handling as ours (a fresh copy per iteration, untimed).
    g.bench_function(JS_FRESH, |b| {
        b.iter_batched(|| obj.clone(), |o| (js.is_valid(&o), o), batch)
    });
    g.bench_function("jsonschema iter_errors (all errors)", |b| {
        b.iter(|| js.iter_errors(black_box(obj)).count())
    });
    g.bench_function("jsonschema from bytes (decode + is_valid)", |b| {
        b.iter(|| {
            let v: Value = serde_json::from_slice(black_box(&bytes)).unwrap();
            js.is_valid(&v)
        })
    });
    g.finish();
}

/// Body decoding alone on a typical ~2 KB object: a plain `serde_json` decode against the
/// one-pass decode that also finds duplicate keys (strict field validation), which the
/// gateway and `admit` use.
fn bench_decode(c: &mut Criterion) {
    let (_, mut o) = crontab();
    for i in 0..20 {
        o["metadata"]["labels"][format!("app.kubernetes.io/part-{i}")] =
            json!(format!("value-{i}"));
        o["metadata"]["annotations"][format!("example.com/note-{i}")] =
            json!(format!("an annotation value number {i}"));
    }
    let bytes = serde_json::to_vec(&o).unwrap();
    println!("decode_2kb: object is {} bytes", bytes.len());
    let mut g = c.benchmark_group("decode_2kb");
    g.bench_function("serde_json::from_slice::<Value>", |b| {
        b.iter(|| serde_json::from_slice::<Value>(black_box(&bytes)).unwrap())
    });
    g.bench_function("decode_with_duplicates (one pass)", |b| {
        b.iter(|| crdplane_validation::decode::decode_with_duplicates(black_box(&bytes)).unwrap())
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    bench_decode(c);
    let (s, o) = crontab();
    bench_case(c, "crontab", &s, &o, "stable.example.com/v1", "CronTab");
    let (s, o) = big();
    bench_case(c, "object_10kb", &s, &o, "apps.example.com/v1", "App");
    c.bench_function("compile big schema", |b| {
        b.iter(|| structural::compile(black_box(&s)).unwrap())
    });
}

/// The criterion output directory (criterion's own lookup order).
fn criterion_dir() -> Option<std::path::PathBuf> {
    let mut candidates = Vec::new();
    if let Ok(h) = std::env::var("CRITERION_HOME") {
        candidates.push(std::path::PathBuf::from(h));
    }
    if let Ok(t) = std::env::var("CARGO_TARGET_DIR") {
        candidates.push(std::path::Path::new(&t).join("criterion"));
    }
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for up in manifest.ancestors() {
        candidates.push(up.join("target").join("criterion"));
    }
    candidates.into_iter().find(|p| p.is_dir())
}

/// Median (ns) of benchmark `function` in `group`, from criterion's estimates of this run.
fn median_ns(dir: &std::path::Path, group: &str, function: &str) -> Option<f64> {
    for e in std::fs::read_dir(dir.join(group)).ok()?.flatten() {
        let new = e.path().join("new");
        let Ok(meta) = std::fs::read_to_string(new.join("benchmark.json")) else {
            continue;
        };
        let meta: Value = serde_json::from_str(&meta).ok()?;
        if meta["function_id"].as_str() == Some(function) {
            let est: Value =
                serde_json::from_str(&std::fs::read_to_string(new.join("estimates.json")).ok()?)
                    .ok()?;
            return est["median"]["point_estimate"].as_f64();
        }
    }
    None
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1000.0 {
        format!("{:.2} µs", ns / 1000.0)
    } else {
        format!("{ns:.0} ns")
    }
}

fn summary() {
    let Some(dir) = criterion_dir() else {
        println!("(no criterion output directory found for the summary)");
        return;
    };
    println!();
    println!("Summary (criterion medians of this run)");
    println!(
        "| document | crdplane, same doc | jsonschema, same doc | ratio | crdplane, fresh copy | jsonschema, fresh copy | ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    for group in ["crontab", "object_10kb"] {
        let m = |f: &str| median_ns(&dir, group, f);
        let (ours, ours_same, js, js_fresh) = (m(OURS), m(OURS_SAME), m(JS), m(JS_FRESH));
        let cell = |v: Option<f64>| v.map_or("-".to_string(), fmt_ns);
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
            _ => "-".to_string(),
        };
        println!(
            "| {group} | {} | {} | {} | {} | {} | {} |",
            cell(ours_same),
            cell(js),
            ratio(ours_same, js),
            cell(ours),
            cell(js_fresh),
            ratio(ours, js_fresh)
        );
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    summary();
}
