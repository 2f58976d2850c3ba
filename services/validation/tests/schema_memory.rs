//! What a compiled schema costs on the heap, measured with a counting global allocator, and
//! how [`SchemaCache`] keeps the sum of its entries' estimated sizes under its byte budget.
//!
//! The allocator counts the bytes of the whole test process, so the tests of this binary
//! take turns (a lock) rather than run at once.

use crdplane_proto::v1 as pb;
use crdplane_validation::server::SchemaCache;
use crdplane_validation::structural;
use serde_json::{Value, json};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;
use std::sync::Mutex;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

static SERIAL: Mutex<()> = Mutex::new(());

/// An object schema with `n` properties: strings with a pattern and length bounds,
/// integers with bounds, enums, nested objects — the shapes generated CRDs have.
fn wide_schema(n: usize, salt: &str) -> Value {
    let mut props = serde_json::Map::new();
    for i in 0..n {
        let p = match i % 4 {
            0 => json!({"type": "string", "maxLength": 253,
                        "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                        "description": format!("field {i} {salt}")}),
            1 => json!({"type": "integer", "minimum": 0, "maximum": 65535, "format": "int32"}),
            2 => {
                json!({"type": "string", "enum": ["Always", "Never", "IfNotPresent"], "default": "Always"})
            }
            _ => json!({"type": "object", "properties": {
                    "name": {"type": "string"}, "value": {"type": "string"}},
                    "required": ["name"]}),
        };
        props.insert(format!("field{i:05}{salt}"), p);
    }
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}})
}

/// Bytes still allocated of those allocated since `r` began.
fn net(r: &Region<System>) -> isize {
    let c = r.change();
    c.bytes_allocated as isize - c.bytes_deallocated as isize + c.bytes_reallocated
}

fn sref(i: usize) -> pb::SchemaRef {
    pb::SchemaRef {
        tenant: "t".into(),
        crd_uid: format!("uid-{i}"),
        generation: 1,
        version: "v1".into(),
    }
}

#[test]
fn a_compiled_10k_property_schema_and_its_estimate() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let v = wide_schema(10_000, "");
    let r = Region::new(GLOBAL);
    let s = structural::compile(&v).expect("compiles");
    let measured = net(&r) as usize;
    let estimate = s.heap_size();
    eprintln!(
        "compiled 10,000-property schema: {:.1} MiB measured, {:.1} MiB estimated",
        measured as f64 / (1 << 20) as f64,
        estimate as f64 / (1 << 20) as f64
    );
    assert!(
        estimate * 2 >= measured && estimate <= measured * 2,
        "estimate {estimate} within a factor of 2 of measured {measured}"
    );
    // What such a schema may cost: 48.6 MiB before identical patterns were shared and the
    // regex engine left unbuilt for patterns with a DFA, 9.1 MiB after.
    assert!(measured < 16 << 20, "{measured} bytes");
    drop(s);
}

#[test]
fn the_cache_stays_within_its_byte_budget() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let one = structural::compile(&wide_schema(1_000, "x"))
        .unwrap()
        .heap_size();
    // Room for about three such schemas.
    let budget = one * 3 + one / 2;
    let cache = SchemaCache::new(budget);
    for i in 0..12 {
        // Distinct schemas (no sharing by hash).
        let v = wide_schema(1_000, &format!("s{i}"));
        let s = cache.load(&sref(i), &v).expect("loads");
        assert!(cache.bytes() <= budget, "{} > {budget}", cache.bytes());
        assert!(cache.get(&sref(i)).is_some(), "the newest entry is cached");
        drop(s);
    }
    assert!(cache.len() <= 3, "{}", cache.len());
    // The least recently used go first: touch 10, load 12; 11 goes, 10 stays.
    assert!(cache.get(&sref(10)).is_some());
    cache.load(&sref(12), &wide_schema(1_000, "s12")).unwrap();
    assert!(cache.get(&sref(10)).is_some());
    assert!(cache.get(&sref(9)).is_none());
    // A schema larger than the whole budget is still served (kept aside, alone), without
    // evicting the others or counting against the budget.
    let before = cache.len();
    let big = wide_schema(10_000, "big");
    let s = cache.load(&sref(99), &big).expect("served");
    assert!(!s.properties.is_empty());
    assert!(
        cache.get(&sref(99)).is_some(),
        "LoadSchema then Admit works"
    );
    assert_eq!(cache.len(), before);
    assert!(cache.bytes() <= budget);
    // The next oversize schema takes its place.
    cache.load(&sref(98), &wide_schema(10_000, "big2")).unwrap();
    assert!(cache.get(&sref(99)).is_none());
    assert!(cache.get(&sref(98)).is_some());
}

/// [`structural::REGEX_HEAP_ESTIMATE`] is what a regex engine for a typical CRD pattern costs.
#[test]
fn the_regex_estimate_matches_a_compiled_regex() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let r = Region::new(GLOBAL);
    let p = structural::compile_pattern("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").unwrap();
    let measured = net(&r) as usize;
    drop(p);
    let est = structural::REGEX_HEAP_ESTIMATE;
    assert!(
        est * 2 >= measured && est <= measured * 2,
        "{est} vs {measured}"
    );
}
