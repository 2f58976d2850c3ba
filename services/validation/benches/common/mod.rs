//! The benchmark documents and schemas, shared by `benches/pipeline.rs` and
//! `examples/profile_pipeline.rs`.
use serde_json::{Value, json};

pub(crate) fn crontab() -> (Value, Value) {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
        "image": {"type": "string"},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10}}}}});
    let obj = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "my-new-cron-object", "namespace": "default"},
        "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": 5}});
    (schema, obj)
}

pub(crate) fn big() -> (Value, Value) {
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
