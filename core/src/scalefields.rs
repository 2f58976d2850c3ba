//! managedFields across the `/scale` subresource: which managers of an object own the
//! `autoscaling/v1` Scale's `spec.replicas`, and what an apply to the Scale makes of the
//! object's entries. Pure; the gateway's `/scale` endpoint (`scale_rest.rs`) converts the
//! object's entries to the Scale's before the field manager applies to the Scale, and back
//! after.
//!
//! Follows upstream's `ScaleHandler` (k8s.io/apiserver pkg/util/managedfields/internal
//! `scalehandler.go`, used by apiextensions-apiserver's `ScaleREST`):
//! - to the Scale ([`to_scale`]): each entry of the object that owns the replicas path of
//!   its API version becomes an entry of the same manager owning `.spec.replicas`, with API
//!   version `autoscaling/v1`; the others are left out.
//! - back to the object ([`to_parent`]): an entry of an API version the resource does not
//!   serve is dropped; one that does not own the replicas path is kept; one that did and
//!   whose manager no longer has a Scale entry (a forced apply took the field) loses the
//!   path, and goes when nothing is left; one whose manager still has its Scale entry stays
//!   as it was. Each Scale entry of a manager the object had no entry for, owning
//!   `.spec.replicas`, becomes an entry of the object's API version owning its replicas path.

use crate::fieldpath::{PathElement, Set};
use crate::managedfields::Entry;

/// The API version of a Scale.
pub const SCALE_API_VERSION: &str = "autoscaling/v1";

/// `.spec.replicas` of a Scale.
pub fn scale_replicas() -> Vec<PathElement> {
    vec![
        PathElement::Field("spec".into()),
        PathElement::Field("replicas".into()),
    ]
}

/// The replicas path of each API version the resource serves (`None`: a version without a
/// scale subresource), upstream's `ResourcePathMappings`.
pub type Mappings = [(String, Option<Vec<PathElement>>)];

fn path_of<'a>(m: &'a Mappings, api_version: &str) -> Option<&'a Option<Vec<PathElement>>> {
    m.iter().find(|(v, _)| v == api_version).map(|(_, p)| p)
}

/// A dotted JSON path (`.spec.replicas`, as a CRD's `specReplicasPath`) as field elements.
pub fn field_path(dotted: &str) -> Vec<PathElement> {
    dotted
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .map(|s| PathElement::Field(s.to_string()))
        .collect()
}

/// The Scale's entries of an object whose entries are `parent`, and for each the index of
/// the object's entry it came from (upstream `ToSubresource`).
pub fn to_scale(parent: &[Entry], mappings: &Mappings) -> (Vec<Entry>, Vec<usize>) {
    let mut out = Vec::new();
    let mut origin = Vec::new();
    for (i, e) in parent.iter().enumerate() {
        let Some(Some(path)) = path_of(mappings, &e.api_version) else {
            continue;
        };
        if !e.fields.has(path) {
            continue;
        }
        let mut fields = Set::new();
        fields.insert(&scale_replicas());
        out.push(Entry {
            api_version: SCALE_API_VERSION.into(),
            fields,
            ..e.clone()
        });
        origin.push(i);
    }
    (out, origin)
}

/// The object's entries after a write of its Scale (upstream `ToParent`): `parent` and
/// `converted`/`origin` as [`to_scale`] had them, `scale` the Scale's entries after the
/// write, `api_version` the object's (its replicas path is written with it).
pub fn to_parent(
    parent: &[Entry],
    converted: &[Entry],
    origin: &[usize],
    scale: &[Entry],
    mappings: &Mappings,
    api_version: &str,
) -> Vec<Entry> {
    let mut kept_scale = vec![false; scale.len()];
    let mut out = Vec::new();
    for (i, e) in parent.iter().enumerate() {
        let path = match path_of(mappings, &e.api_version) {
            None => continue,
            Some(None) => None,
            Some(Some(p)) => Some(p),
        };
        let Some(path) = path.filter(|p| e.fields.has(p)) else {
            out.push(e.clone());
            continue;
        };
        let still = origin
            .iter()
            .position(|&o| o == i)
            .and_then(|k| scale.iter().position(|s| s.same_manager(&converted[k])));
        match still {
            Some(j) => {
                kept_scale[j] = true;
                out.push(e.clone());
            }
            None => {
                let mut gone = Set::new();
                gone.insert(path);
                let fields = e.fields.difference(&gone);
                if !fields.is_empty() {
                    out.push(Entry {
                        fields,
                        ..e.clone()
                    });
                }
            }
        }
    }
    let Some(Some(path)) = path_of(mappings, api_version) else {
        return out;
    };
    for (s, kept) in scale.iter().zip(kept_scale) {
        if kept || !s.fields.has(&scale_replicas()) {
            continue;
        }
        let mut fields = Set::new();
        fields.insert(path);
        out.push(Entry {
            api_version: api_version.into(),
            fields,
            ..s.clone()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::managedfields::Operation;

    fn entry(manager: &str, op: Operation, v: &str, sub: &str, paths: &[&str]) -> Entry {
        let mut fields = Set::new();
        for p in paths {
            fields.insert(&field_path(p));
        }
        Entry {
            manager: manager.into(),
            operation: op,
            api_version: v.into(),
            time: Some("2026-01-01T00:00:00Z".into()),
            subresource: sub.into(),
            fields,
        }
    }

    fn mappings() -> Vec<(String, Option<Vec<PathElement>>)> {
        vec![
            ("g/v1".into(), Some(field_path(".spec.replicas"))),
            ("g/v2".into(), Some(field_path(".spec.size"))),
            ("g/v0".into(), None),
        ]
    }

    fn show(entries: &[Entry]) -> Vec<String> {
        entries
            .iter()
            .map(|e| {
                format!(
                    "{} {:?} {} {} {}",
                    e.manager,
                    e.operation,
                    e.api_version,
                    e.subresource,
                    e.fields.to_json()
                )
            })
            .collect()
    }

    #[test]
    fn owners_of_the_replicas_path_own_the_scales_replicas() {
        use Operation::*;
        let parent = vec![
            entry(
                "kubectl",
                Apply,
                "g/v1",
                "",
                &[".spec.replicas", ".spec.image"],
            ),
            entry("editor", Update, "g/v2", "", &[".spec.size"]),
            entry("other", Update, "g/v1", "", &[".spec.image"]),
            entry("old", Update, "g/v0", "", &[".spec.replicas"]),
            entry("gone", Update, "g/v9", "", &[".spec.replicas"]),
        ];
        let (scale, origin) = to_scale(&parent, &mappings());
        assert_eq!(
            show(&scale),
            [
                r#"kubectl Apply autoscaling/v1  {"f:spec":{"f:replicas":{}}}"#,
                r#"editor Update autoscaling/v1  {"f:spec":{"f:replicas":{}}}"#,
            ]
        );
        assert_eq!(origin, [0, 1]);
    }

    #[test]
    fn back_to_the_object() {
        use Operation::*;
        let parent = vec![
            entry(
                "kubectl",
                Apply,
                "g/v1",
                "",
                &[".spec.replicas", ".spec.image"],
            ),
            entry("editor", Update, "g/v2", "", &[".spec.size"]),
            entry("other", Update, "g/v1", "", &[".spec.image"]),
            entry("old", Update, "g/v0", "", &[".spec.replicas"]),
            entry("gone", Update, "g/v9", "", &[".spec.replicas"]),
        ];
        let m = mappings();
        let (converted, origin) = to_scale(&parent, &m);
        // A forced apply by "hpa" took .spec.replicas: kubectl and editor have no Scale
        // entry any more.
        let after = vec![entry(
            "hpa",
            Apply,
            SCALE_API_VERSION,
            "scale",
            &[".spec.replicas"],
        )];
        assert_eq!(
            show(&to_parent(&parent, &converted, &origin, &after, &m, "g/v1")),
            [
                r#"kubectl Apply g/v1  {"f:spec":{"f:image":{}}}"#,
                r#"other Update g/v1  {"f:spec":{"f:image":{}}}"#,
                r#"old Update g/v0  {"f:spec":{"f:replicas":{}}}"#,
                r#"hpa Apply g/v1 scale {"f:spec":{"f:replicas":{}}}"#,
            ]
        );
        // Shared: kubectl keeps its Scale entry, so its object entry stays whole.
        let mut shared = converted.clone();
        shared.remove(1);
        shared.extend(after.clone());
        assert_eq!(
            show(&to_parent(
                &parent, &converted, &origin, &shared, &m, "g/v1"
            )),
            [
                r#"kubectl Apply g/v1  {"f:spec":{"f:image":{},"f:replicas":{}}}"#,
                r#"other Update g/v1  {"f:spec":{"f:image":{}}}"#,
                r#"old Update g/v0  {"f:spec":{"f:replicas":{}}}"#,
                r#"hpa Apply g/v1 scale {"f:spec":{"f:replicas":{}}}"#,
            ]
        );
        // Written through v2: the new owner gets v2's path.
        assert_eq!(
            show(&to_parent(&[], &[], &[], &after, &m, "g/v2"))[0],
            r#"hpa Apply g/v2 scale {"f:spec":{"f:size":{}}}"#
        );
    }
}
