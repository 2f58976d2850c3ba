//! The list document (`<Kind>List`: apiVersion, items, kind, metadata) of one page, with the
//! objects' JSON spliced in as bytes: a list of stored objects that need no rewrite is sent
//! without parsing or re-encoding them (hand-written for that reason; the keys come out in
//! the order encoding/json gives a Go struct's unstructured list: alphabetical).
//!
//! Where it sits: the JSON rendering of every LIST and deletecollection answer. Follows
//! apimachinery `UnstructuredList` encoding (metadata: `continue`, `remainingItemCount`
//! only with a continue token, `resourceVersion`).

use bytes::Bytes;
use serde_json::Value;

/// The list document of `items` (each one object's JSON).
pub fn list_json(
    api_version: &str,
    list_kind: &str,
    items: &[Bytes],
    rv: u64,
    cont: &str,
    remaining: Option<u64>,
) -> Vec<u8> {
    let total: usize = items.iter().map(|i| i.len() + 1).sum();
    let mut out = Vec::with_capacity(total + 200);
    out.extend_from_slice(b"{\"apiVersion\":");
    out.extend_from_slice(&serde_json::to_vec(api_version).expect("string"));
    out.extend_from_slice(b",\"items\":[");
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(it);
    }
    out.extend_from_slice(b"],\"kind\":");
    out.extend_from_slice(&serde_json::to_vec(list_kind).expect("string"));
    out.extend_from_slice(b",\"metadata\":{");
    if !cont.is_empty() {
        out.extend_from_slice(b"\"continue\":");
        out.extend_from_slice(&serde_json::to_vec(cont).expect("string"));
        out.push(b',');
        if let Some(r) = remaining {
            out.extend_from_slice(format!("\"remainingItemCount\":{r},").as_bytes());
        }
    }
    out.extend_from_slice(format!("\"resourceVersion\":\"{rv}\"}}}}").as_bytes());
    out
}

/// [`list_json`] of objects held as JSON values (each encoded once).
pub fn list_json_of_values(
    api_version: &str,
    list_kind: &str,
    items: &[Value],
    rv: u64,
    cont: &str,
    remaining: Option<u64>,
) -> Vec<u8> {
    let items: Vec<Bytes> = items
        .iter()
        .map(|v| serde_json::to_vec(v).expect("json").into())
        .collect();
    list_json(api_version, list_kind, &items, rv, cont, remaining)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn splices_items_and_list_metadata() {
        let items = vec![
            Bytes::from_static(b"{\"a\":1}"),
            Bytes::from_static(b"{\"b\":2}"),
        ];
        let raw = list_json("g/v1", "KList", &items, 7, "tok", Some(3));
        assert_eq!(
            String::from_utf8(raw).unwrap(),
            r#"{"apiVersion":"g/v1","items":[{"a":1},{"b":2}],"kind":"KList","metadata":{"continue":"tok","remainingItemCount":3,"resourceVersion":"7"}}"#
        );
        // No token: no remainingItemCount either (upstream sets it only with a token).
        let l: Value = serde_json::from_slice(&list_json("v1", "L", &[], 0, "", Some(9))).unwrap();
        assert_eq!(l["metadata"], json!({"resourceVersion":"0"}));
        assert_eq!(l["items"], json!([]));
        // Values encode to the same document.
        let v = list_json_of_values(
            "g/v1",
            "KList",
            &[json!({"a":1}), json!({"b":2})],
            7,
            "tok",
            Some(3),
        );
        assert_eq!(v, list_json("g/v1", "KList", &items, 7, "tok", Some(3)));
        // Names that need escaping are escaped.
        let l: Value =
            serde_json::from_slice(&list_json("g/v1", "K\"List", &[], 1, "a\"b", None)).unwrap();
        assert_eq!(l["kind"], "K\"List");
        assert_eq!(l["metadata"]["continue"], "a\"b");
    }
}
