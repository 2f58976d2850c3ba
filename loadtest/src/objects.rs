//! What the load tool writes: the CronTab CRD of the Kubernetes CRD walkthrough (with its
//! structural schema) and CronTab objects padded to a requested serialized size.
//!
//! The CRD follows `/work/shared/spec/extend-the-api-with-crds.txt` and
//! `validation-for-custom-resources.txt` (cronSpec pattern, replicas 1..10, image string), plus
//! one declared string field, `spec.padding`, which `--object-size` fills so the bytes survive
//! pruning and really reach storage. Everything here is pure.

use serde_json::{Value, json};

/// API group of the CronTab CRD (`spec.group`).
pub const GROUP: &str = "stable.example.com";
/// The CRD's one served and storage version.
pub const VERSION: &str = "v1";
/// Plural resource name, the last segment of the collection path (`spec.names.plural`).
pub const RESOURCE: &str = "crontabs";
/// Kind of the objects (`spec.names.kind`).
pub const KIND: &str = "CronTab";
/// The CRD's `metadata.name`: `<plural>.<group>`, as upstream requires.
pub const CRD_NAME: &str = "crontabs.stable.example.com";
/// The cronSpec pattern of the upstream CronTab example.
pub const CRON_PATTERN: &str = r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$";
/// uid/generation the tool uses for the CRD it hands to the validation service directly.
pub const LOADTEST_CRD_UID: &str = "6c6f6164-7465-7374-2d63-72646c6f6164";
/// `metadata.generation` of that CRD (part of the validation service's schema key).
pub const LOADTEST_CRD_GENERATION: i64 = 1;

/// The CronTab CRD (apiextensions.k8s.io/v1) with its schema.
pub fn crontab_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": RESOURCE,
                "singular": "crontab",
                "kind": KIND,
                "listKind": "CronTabList",
                "shortNames": ["ct"]
            },
            "versions": [{
                "name": VERSION,
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "properties": {
                                "cronSpec": {"type": "string", "pattern": CRON_PATTERN},
                                "image": {"type": "string"},
                                "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                                "padding": {"type": "string"}
                            }
                        }
                    }
                }}
            }]
        }
    })
}

/// Plural of the CronTab CRD variant with defaults (`watch-fanout --defaults`).
pub const DEFAULTED_RESOURCE: &str = "defaultedcrontabs";

/// The CronTab CRD with schema defaults (`spec.replicas` 1, `spec.suspend` false) under its
/// own names (`defaultedcrontabs.stable.example.com`, kind `DefaultedCronTab`): every read of
/// its objects, watch events included, is read-defaulted by the validation service.
pub fn defaulted_crontab_crd() -> Value {
    let mut crd = crontab_crd();
    crd["metadata"]["name"] = json!(format!("{DEFAULTED_RESOURCE}.{GROUP}"));
    crd["spec"]["names"] = json!({
        "plural": DEFAULTED_RESOURCE,
        "singular": "defaultedcrontab",
        "kind": "DefaultedCronTab",
        "listKind": "DefaultedCronTabList"
    });
    let spec = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec["properties"]["replicas"]["default"] = json!(1);
    spec["properties"]["suspend"] = json!({"type": "boolean", "default": false});
    spec["default"] = json!({});
    crd
}

/// The CRD as the registry would hold it (uid, generation, creationTimestamp set): what the
/// tool sends in `LoadSchema` when it drives the validation service directly.
pub fn crontab_crd_stored() -> Value {
    let mut crd = crontab_crd();
    if let Some(meta) = crd["metadata"].as_object_mut() {
        meta.insert("uid".into(), json!(LOADTEST_CRD_UID));
        meta.insert("generation".into(), json!(LOADTEST_CRD_GENERATION));
        meta.insert("resourceVersion".into(), json!("1"));
        meta.insert("creationTimestamp".into(), json!("2026-01-01T00:00:00Z"));
    }
    crd
}

/// Cron expressions the generator cycles through; all match [`CRON_PATTERN`].
const CRON_SPECS: [&str; 4] = ["* * * * */5", "*/5 * * * *", "0 3 * * 1", "15/30 0 1 */2 *"];

/// One CronTab's content. `seq` varies the spec (so updates really change it).
#[derive(Clone, Debug)]
pub struct CronTabSpec<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.namespace`.
    pub namespace: &'a str,
    /// Sequence number the spec is derived from (cronSpec, replicas).
    pub seq: u64,
    /// Target serialized size in bytes; 0 = no padding.
    pub size: usize,
    /// Add the server-set metadata (uid, creationTimestamp, generation) — for objects written
    /// straight into storage, which stores what the gateway would have produced.
    pub server_fields: bool,
    /// metadata.resourceVersion to send (the precondition of an update).
    pub resource_version: Option<&'a str>,
}

fn base_object(s: &CronTabSpec<'_>, padding: Option<&str>) -> Value {
    let mut spec = json!({
        "cronSpec": CRON_SPECS[(s.seq % CRON_SPECS.len() as u64) as usize],
        "image": "my-awesome-cron-image",
        "replicas": 1 + (s.seq % 10),
    });
    if let Some(p) = padding {
        spec["padding"] = json!(p);
    }
    let mut meta = json!({"name": s.name, "namespace": s.namespace});
    if let Some(rv) = s.resource_version {
        meta["resourceVersion"] = json!(rv);
    }
    if s.server_fields {
        meta["uid"] = json!(format!(
            "00000000-0000-4000-8000-{:012x}",
            s.seq & 0xffff_ffff_ffff
        ));
        meta["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        meta["generation"] = json!(1);
    }
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": KIND,
        "metadata": meta,
        "spec": spec,
    })
}

/// Builds the CronTab. When `size` is larger than the object without padding, `spec.padding`
/// gets exactly enough ASCII bytes for `serde_json::to_vec` of the result to be `size` bytes
/// long; otherwise there is no padding field.
pub fn crontab(s: &CronTabSpec<'_>) -> Value {
    if s.size == 0 {
        return base_object(s, None);
    }
    let empty = base_object(s, Some(""));
    let base_len = serde_json::to_vec(&empty).map(|v| v.len()).unwrap_or(0);
    if s.size <= base_len {
        return base_object(s, None);
    }
    let pad = "x".repeat(s.size - base_len);
    base_object(s, Some(&pad))
}

/// Checks an object against the CronTab CRD's schema as this tool declares it: apiVersion and
/// kind, every spec field declared (so nothing is pruned), string/integer types, the
/// `pattern` (with the `regex` crate), `minimum`/`maximum`. It reads the constraints from the
/// CRD JSON itself, so the generator and the CRD cannot drift apart unnoticed.
pub fn check_against_crd(obj: &Value, crd: &Value) -> Result<(), String> {
    let group = crd["spec"]["group"].as_str().ok_or("crd has no group")?;
    let kind = crd["spec"]["names"]["kind"]
        .as_str()
        .ok_or("crd has no kind")?;
    let version = &crd["spec"]["versions"][0];
    let vname = version["name"].as_str().ok_or("crd has no version")?;
    if obj["apiVersion"] != json!(format!("{group}/{vname}")) {
        return Err(format!(
            "apiVersion {} is not {group}/{vname}",
            obj["apiVersion"]
        ));
    }
    if obj["kind"] != json!(kind) {
        return Err(format!("kind {} is not {kind}", obj["kind"]));
    }
    if !obj["metadata"]["name"].is_string() {
        return Err("metadata.name missing".into());
    }
    let props = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        .as_object()
        .ok_or("crd has no spec properties")?;
    let spec = obj["spec"].as_object().ok_or("spec is not an object")?;
    for (field, value) in spec {
        let schema = props
            .get(field)
            .ok_or_else(|| format!("spec.{field} is not declared (would be pruned)"))?;
        match schema["type"].as_str() {
            Some("string") => {
                let s = value
                    .as_str()
                    .ok_or_else(|| format!("spec.{field} is not a string"))?;
                if let Some(p) = schema["pattern"].as_str() {
                    let re = regex::Regex::new(p).map_err(|e| format!("bad pattern: {e}"))?;
                    if !re.is_match(s) {
                        return Err(format!("spec.{field} {s:?} does not match {p}"));
                    }
                }
            }
            Some("integer") => {
                let n = value
                    .as_i64()
                    .ok_or_else(|| format!("spec.{field} is not an integer"))?;
                if let Some(min) = schema["minimum"].as_i64()
                    && n < min
                {
                    return Err(format!("spec.{field} {n} < minimum {min}"));
                }
                if let Some(max) = schema["maximum"].as_i64()
                    && n > max
                {
                    return Err(format!("spec.{field} {n} > maximum {max}"));
                }
            }
            other => return Err(format!("spec.{field}: unexpected schema type {other:?}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, seq: u64, size: usize) -> CronTabSpec<'_> {
        CronTabSpec {
            name,
            namespace: "default",
            seq,
            size,
            server_fields: false,
            resource_version: None,
        }
    }

    #[test]
    fn padded_objects_hit_the_requested_size_exactly() {
        for size in [300usize, 512, 1024, 4096, 65_536, 1_000_000] {
            for seq in 0..12 {
                let name = format!("lt-{seq}-{}", seq * 7919);
                let obj = crontab(&spec(&name, seq, size));
                let bytes = serde_json::to_vec(&obj).unwrap();
                assert_eq!(bytes.len(), size, "size {size} seq {seq}");
                assert!(obj["spec"]["padding"].is_string());
            }
        }
    }

    #[test]
    fn small_or_zero_size_means_no_padding() {
        let obj = crontab(&spec("a", 0, 0));
        assert!(obj["spec"].get("padding").is_none());
        let obj = crontab(&spec("a", 0, 10));
        assert!(obj["spec"].get("padding").is_none());
        // server fields grow the object but padding still lands exactly
        let mut s = spec("b", 3, 2000);
        s.server_fields = true;
        let obj = crontab(&s);
        assert_eq!(serde_json::to_vec(&obj).unwrap().len(), 2000);
        assert!(obj["metadata"]["uid"].is_string());
        // an update's precondition is carried and still lands on the exact size
        let mut s = spec("c", 4, 1500);
        s.resource_version = Some("12345");
        let obj = crontab(&s);
        assert_eq!(obj["metadata"]["resourceVersion"], "12345");
        assert_eq!(serde_json::to_vec(&obj).unwrap().len(), 1500);
    }

    #[test]
    fn generated_objects_satisfy_the_crd_schema() {
        let crd = crontab_crd();
        for seq in 0..40 {
            for size in [0, 700] {
                let obj = crontab(&spec("lt-0-1", seq, size));
                check_against_crd(&obj, &crd).unwrap_or_else(|e| panic!("seq {seq}: {e}"));
            }
        }
        // replicas cycle through the whole allowed range 1..=10
        let reps: std::collections::BTreeSet<i64> = (0..10)
            .map(|s| {
                crontab(&spec("x", s, 0))["spec"]["replicas"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(reps, (1..=10).collect());
    }

    #[test]
    fn the_checker_rejects_what_the_server_would() {
        let crd = crontab_crd();
        let good = crontab(&spec("x", 1, 0));
        let mut bad = good.clone();
        bad["spec"]["replicas"] = json!(11);
        assert!(
            check_against_crd(&bad, &crd)
                .unwrap_err()
                .contains("maximum")
        );
        let mut bad = good.clone();
        bad["spec"]["replicas"] = json!(0);
        assert!(
            check_against_crd(&bad, &crd)
                .unwrap_err()
                .contains("minimum")
        );
        let mut bad = good.clone();
        bad["spec"]["cronSpec"] = json!("* * * *");
        assert!(
            check_against_crd(&bad, &crd)
                .unwrap_err()
                .contains("does not match")
        );
        let mut bad = good.clone();
        bad["spec"]["extra"] = json!("y");
        assert!(
            check_against_crd(&bad, &crd)
                .unwrap_err()
                .contains("pruned")
        );
        let mut bad = good.clone();
        bad["kind"] = json!("CronJob");
        assert!(check_against_crd(&bad, &crd).is_err());
        let mut bad = good;
        bad["spec"]["image"] = json!(5);
        assert!(
            check_against_crd(&bad, &crd)
                .unwrap_err()
                .contains("string")
        );
    }

    #[test]
    fn crd_carries_the_upstream_constraints() {
        let crd = crontab_crd();
        let p = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(
            p["cronSpec"]["pattern"],
            r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$"
        );
        assert_eq!(p["replicas"]["minimum"], 1);
        assert_eq!(p["replicas"]["maximum"], 10);
        assert_eq!(p["image"]["type"], "string");
        let stored = crontab_crd_stored();
        assert_eq!(stored["metadata"]["uid"], LOADTEST_CRD_UID);
        assert_eq!(stored["metadata"]["generation"], 1);
    }
}
