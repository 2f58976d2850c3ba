//! Profiling harness for the admission pipeline (not a benchmark): runs prune+default+validate
//! on a fresh copy of a benchmark document N times, for `perf`/`callgrind`.
//! `cargo run --release -p crdplane-validation --example profile_pipeline -- <crontab|big> <n> [pipeline|validate|clone|jsonschema]`
#[path = "../benches/common/mod.rs"]
mod common;

use crdplane_validation::{pipeline, structural, validate};
use std::hint::black_box;
use std::time::Instant;

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
            "validate" => total += validate::validate(&s, black_box(&o), "").len(),
            _ => {
                total += pipeline::prune_default_validate(&mut o, &s).errors.len();
            }
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
fn is_valid(js: &jsonschema::Validator, o: &serde_json::Value) -> bool {
    js.is_valid(o)
}
