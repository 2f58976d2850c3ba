//! Profiling harness for the admission pipeline (not a benchmark): runs prune+default+validate
//! on a fresh copy of a benchmark document N times, for `perf`/`callgrind`.
//! `cargo run --release -p crdplane-validation --example profile_pipeline -- <crontab|big> <n> [pipeline|validate|clone|jsonschema]`
//!
//! The measured calls are `#[inline(never)]` functions (`run_pipeline`, `is_valid`,
//! `validate_only`), so `callgrind_annotate --inclusive=yes` gives their exact per-call cost
//! without the copy and drop of the document. The allocator is mimalloc, as in the service.
#[path = "../benches/common/mod.rs"]
mod common;

use crdplane_validation::structural::Schema;
use crdplane_validation::{pipeline, structural, validate};
use serde_json::Value;
use std::hint::black_box;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map(String::as_str).unwrap_or("big");
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let mode = args.get(3).map(String::as_str).unwrap_or("pipeline");
    let (schema, obj) = if which == "crontab" {
        common::crontab()
    } else {
        common::big()
    };
    let s = structural::compile(&schema).unwrap();
    let js = jsonschema::validator_for(&schema).unwrap();
    let t = Instant::now();
    let mut total = 0usize;
    for _ in 0..n {
        let mut o = obj.clone();
        match mode {
            "clone" => {}
            "jsonschema" => total += usize::from(!is_valid(&js, black_box(&o))),
            "validate" => total += validate_only(&s, black_box(&o)),
            _ => total += run_pipeline(&s, black_box(&mut o)),
        }
        black_box(o);
    }
    let el = t.elapsed();
    println!(
        "{which} {mode}: {:?}/iter (incl. clone+drop), {total} errors",
        el / n as u32
    );
}

#[inline(never)]
fn run_pipeline(s: &Schema, o: &mut Value) -> usize {
    let out = pipeline::prune_default_validate(o, s);
    out.errors.len() + out.pruned.len()
}

#[inline(never)]
fn validate_only(s: &Schema, o: &Value) -> usize {
    validate::validate(s, o, "").len()
}

#[inline(never)]
fn is_valid(js: &jsonschema::Validator, o: &Value) -> bool {
    js.is_valid(o)
}
