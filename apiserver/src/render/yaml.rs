//! YAML output (`Accept: application/yaml`): a response's JSON rendered as YAML the way
//! upstream's YAML serializer does it (sigs.k8s.io/yaml `JSONToYAML` over go-yaml: keys in
//! sorted order, sequences not indented under their key, strings that would read as
//! another type quoted, multi-line strings as literal blocks). serde-saphyr writes the same
//! style; this module only fixes the key order and maps a failure to a Status.
//!
//! Where it sits: applied to a handler's JSON answer (objects, lists, Tables, Status errors)
//! once negotiation picked YAML; watches are not served as YAML (upstream's YAML serializer
//! has no stream form).

use crdplane_core::ApiError;
use serde_json::Value;

/// The YAML form of a JSON document.
pub fn json_to_yaml(json: &[u8]) -> Result<Vec<u8>, ApiError> {
    // Parsed into serde_json's map, whose keys iterate in sorted order (Go's map order
    // when it encodes an unstructured object).
    let v: Value = serde_json::from_slice(json).map_err(ApiError::internal)?;
    serde_saphyr::to_string(&v)
        .map(String::into_bytes)
        .map_err(|e| ApiError::internal(format!("encoding the response as YAML: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_yaml_style() {
        let json = br#"{"kind":"CronTab","apiVersion":"stable.example.com/v1",
            "metadata":{"name":"a","resourceVersion":"12","labels":{"n":"y"}},
            "spec":{"image":"i","replicas":3,"ratio":1.5,"on":true,"empty":"","none":null,
                "list":[1,"2",{"k":"v"}],"nothing":[],"obj":{},"text":"two\nlines",
                "when":"2026-01-01T00:00:00Z","yes":"yes"}}"#;
        let y = String::from_utf8(json_to_yaml(json).unwrap()).unwrap();
        assert_eq!(
            y,
            r#"apiVersion: stable.example.com/v1
kind: CronTab
metadata:
  labels:
    "n": "y"
  name: a
  resourceVersion: "12"
spec:
  empty: ""
  image: i
  list:
  - 1
  - "2"
  - k: v
  none: null
  nothing: []
  obj: {}
  "on": true
  ratio: 1.5
  replicas: 3
  text: |-
    two
    lines
  when: "2026-01-01T00:00:00Z"
  "yes": "yes"
"#
        );
        // And it reads back as the same document.
        let back: Value = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(back, serde_json::from_slice::<Value>(json).unwrap());
        assert_eq!(json_to_yaml(b"{").unwrap_err().code, 500);
    }
}
