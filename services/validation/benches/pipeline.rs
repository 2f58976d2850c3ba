//! prune + default + validate of the spec's CronTab and of a ~10 kB object with nested
//! arrays/maps, against the compiled schema, side by side with the `jsonschema` crate
//! validating the same document against the same schema.
use crdplane_validation::admit::{AdmitInput, FieldValidation, Operation, admit};
use crdplane_validation::structural::{self, Schema};
use crdplane_validation::{default, prune, validate};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::hint::black_box;

fn crontab() -> (Value, Value) {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
        "image": {"type": "string"},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10}}}}});
    let obj = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "my-new-cron-object", "namespace": "default"},
        "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": 5}});
    (schema, obj)
}

fn big() -> (Value, Value) {
    let port = json!({"type": "object", "required": ["containerPort"], "properties": {
        "name": {"type": "string", "maxLength": 15, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
        "containerPort": {"type": "integer", "minimum": 1, "maximum": 65535},
        "protocol": {"type": "string", "enum": ["TCP", "UDP", "SCTP"], "default": "TCP"}}});
    let env = json!({"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string", "minLength": 1}, "value": {"type": "string"}}});
    let container = json!({"type": "object", "required": ["name", "image"], "properties": {
        "name": {"type": "string", "maxLength": 63},
        "image": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
        "ports": {"type": "array", "maxItems": 64, "items": port},
        "env": {"type": "array", "items": env},
        "resources": {"type": "object", "properties": {
            "limits": {"type": "object", "additionalProperties": {"type": "string"}},
            "requests": {"type": "object", "additionalProperties": {"type": "string"}}}},
        "weight": {"type": "number", "minimum": 0, "maximum": 100}}});
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "required": ["containers"], "properties": {
            "replicas": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 1},
            "selector": {"type": "object", "additionalProperties": {"type": "string"}},
            "containers": {"type": "array", "maxItems": 100, "items": container},
            "paused": {"type": "boolean"}}},
        "status": {"type": "object", "properties": {
            "phase": {"type": "string", "enum": ["Pending", "Running", "Done"]},
            "conditions": {"type": "array", "items": {"type": "object", "properties": {
                "type": {"type": "string"}, "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "message": {"type": "string", "maxLength": 1024}}}}}}}});
    let containers: Vec<Value> = (0..24)
        .map(|i| {
            json!({"name": format!("c{i}"), "image": format!("registry.example.com/app/c{i}:1.2.{i}"),
                "args": ["--verbose", "--port=8080", format!("--id={i}")],
                "ports": [{"name": "http", "containerPort": 8080}, {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "two"}, {"name": "C"}],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}},
                "weight": 12.5})
        })
        .collect();
    let obj = json!({"apiVersion": "apps.example.com/v1", "kind": "App",
        "metadata": {"name": "big", "namespace": "default", "labels": {"app": "big", "tier": "backend"}},
        "spec": {"replicas": 3, "selector": {"app": "big"}, "containers": containers, "paused": false},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "message": "all good"}]}});
    (schema, obj)
}

/// prune + default (one fused walk) + validate of an owned object (as after decoding).
fn pipeline(s: &Schema, mut o: Value) -> (Value, usize) {
    let pruned = prune::prune_and_default(&mut o, s);
    let errs = validate::validate(s, &o, "");
    (o, pruned.len() + errs.len())
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
    // The object is cloned outside the timed section (it is owned after decoding in the
    // service) and dropped outside it too.
    g.bench_function("crdplane prune+default+validate (fused walk)", |b| {
        b.iter_batched(|| obj.clone(), |o| pipeline(&s, o), BatchSize::SmallInput)
    });
    g.bench_function("crdplane prune+default+validate (separate passes)", |b| {
        b.iter_batched(
            || obj.clone(),
            |o| pipeline_separate(&s, o),
            BatchSize::SmallInput,
        )
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
    g.bench_function("jsonschema is_valid", |b| {
        b.iter(|| js.is_valid(black_box(obj)))
    });
    // Same input handling as the crdplane pipeline above (fresh clone per iteration, untimed).
    g.bench_function(
        "jsonschema is_valid (batched fresh input, like the pipeline)",
        |b| {
            b.iter_batched(
                || obj.clone(),
                |o| (js.is_valid(&o), o),
                BatchSize::SmallInput,
            )
        },
    );
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

fn benches(c: &mut Criterion) {
    let (s, o) = crontab();
    bench_case(c, "crontab", &s, &o, "stable.example.com/v1", "CronTab");
    let (s, o) = big();
    bench_case(c, "object_10kb", &s, &o, "apps.example.com/v1", "App");
    c.bench_function("compile big schema", |b| {
        b.iter(|| structural::compile(black_box(&s)).unwrap())
    });
}

criterion_group!(g, benches);
criterion_main!(g);
