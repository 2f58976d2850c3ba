//! The resourceVersion slot: how a writer hands an object to the storage service.
//!
//! The storage service assigns an object's resourceVersion inside the atomic Redis script
//! that bumps the (tenant, resource) revision counter, so the writer cannot know it in
//! advance. Instead of making Redis (Lua) parse and re-encode JSON, the writer serializes the
//! object once and cuts it where the contents of `metadata.resourceVersion` go:
//! `head` ends with `"resourceVersion":"`, `tail` starts with `"`. The script stores
//! `head .. revision .. tail` and remembers the offset, so later writes (e.g. the DELETED
//! event) can put a new revision into the stored bytes without parsing them either.

use serde_json::{Map, Value};

/// Why an object cannot be split at its resourceVersion slot.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SlotError {
    /// The object is not a JSON object.
    #[error("object is not a JSON object")]
    NotAnObject,
    /// `metadata` is present but not a JSON object.
    #[error("metadata is not a JSON object")]
    MetadataNotAnObject,
}

/// Splits `obj` at the resourceVersion slot. `metadata` is created if missing; any existing
/// `metadata.resourceVersion` value is replaced by the slot.
pub fn split(obj: &Value) -> Result<(Vec<u8>, Vec<u8>), SlotError> {
    let map = obj.as_object().ok_or(SlotError::NotAnObject)?;
    let empty = Map::new();
    let meta = match map.get("metadata") {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => &empty,
        Some(_) => return Err(SlotError::MetadataNotAnObject),
    };
    let mut head = Vec::with_capacity(256);
    let mut tail = Vec::with_capacity(256);
    head.push(b'{');
    let mut wrote_meta = false;
    let mut first = true;
    // Writes into head until the slot is passed, then into tail.
    let mut in_tail = false;
    let emit_meta = |head: &mut Vec<u8>, tail: &mut Vec<u8>, in_tail: &mut bool| {
        head.extend_from_slice(b"\"metadata\":{");
        let mut mfirst = true;
        let mut wrote_rv = false;
        let write_rv = |head: &mut Vec<u8>, mfirst: &mut bool| {
            if !*mfirst {
                head.push(b',');
            }
            *mfirst = false;
            head.extend_from_slice(b"\"resourceVersion\":\"");
        };
        for (k, v) in meta {
            if k == "resourceVersion" {
                write_rv(head, &mut mfirst);
                wrote_rv = true;
                *in_tail = true;
                tail.push(b'"');
                continue;
            }
            let out = if *in_tail { &mut *tail } else { &mut *head };
            if !mfirst {
                out.push(b',');
            }
            mfirst = false;
            serde_json::to_writer(&mut *out, k).expect("string serializes");
            out.push(b':');
            serde_json::to_writer(&mut *out, v).expect("value serializes");
        }
        if !wrote_rv {
            write_rv(head, &mut mfirst);
            *in_tail = true;
            tail.push(b'"');
        }
        tail.push(b'}');
    };
    for (k, v) in map {
        if k == "metadata" {
            let out = if in_tail { &mut tail } else { &mut head };
            if !first {
                out.push(b',');
            }
            first = false;
            emit_meta(&mut head, &mut tail, &mut in_tail);
            wrote_meta = true;
            continue;
        }
        let out = if in_tail { &mut tail } else { &mut head };
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut *out, k).expect("string serializes");
        out.push(b':');
        serde_json::to_writer(&mut *out, v).expect("value serializes");
    }
    if !wrote_meta {
        if !first {
            head.push(b',');
        }
        emit_meta(&mut head, &mut tail, &mut in_tail);
    }
    tail.push(b'}');
    Ok((head, tail))
}

/// `head + rv + tail`: what storage writes.
pub fn join(head: &[u8], rv: u64, tail: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(head.len() + tail.len() + 20);
    v.extend_from_slice(head);
    v.extend_from_slice(rv.to_string().as_bytes());
    v.extend_from_slice(tail);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn slot_lands_in_metadata() {
        let obj = json!({"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"7","uid":"u"},"spec":{"resourceVersion":"zzz"}});
        let (h, t) = split(&obj).unwrap();
        assert!(h.ends_with(b"\"resourceVersion\":\""));
        assert!(t.starts_with(b"\""));
        let joined: Value = serde_json::from_slice(&join(&h, 42, &t)).unwrap();
        assert_eq!(joined["metadata"]["resourceVersion"], "42");
        assert_eq!(joined["spec"]["resourceVersion"], "zzz");
        assert_eq!(joined["metadata"]["uid"], "u");
        assert_eq!(joined["apiVersion"], "v1");
    }

    #[test]
    fn metadata_created_when_missing() {
        let (h, t) = split(&json!({"kind":"X"})).unwrap();
        let joined: Value = serde_json::from_slice(&join(&h, 1, &t)).unwrap();
        assert_eq!(
            joined,
            json!({"kind":"X","metadata":{"resourceVersion":"1"}})
        );
        let (h, t) = split(&json!({})).unwrap();
        let joined: Value = serde_json::from_slice(&join(&h, 1, &t)).unwrap();
        assert_eq!(joined, json!({"metadata":{"resourceVersion":"1"}}));
    }

    #[test]
    fn hostile_strings_do_not_move_the_slot() {
        let obj = json!({"metadata":{"annotations":{"resourceVersion":"\"resourceVersion\":\""},"name":"n"}});
        let (h, t) = split(&obj).unwrap();
        let joined: Value = serde_json::from_slice(&join(&h, 9, &t)).unwrap();
        assert_eq!(joined["metadata"]["resourceVersion"], "9");
        assert_eq!(
            joined["metadata"]["annotations"]["resourceVersion"],
            "\"resourceVersion\":\""
        );
        assert_eq!(split(&json!([])), Err(SlotError::NotAnObject));
        assert_eq!(
            split(&json!({"metadata": 1})),
            Err(SlotError::MetadataNotAnObject)
        );
    }
}
