//! Server-side apply through kube-rs (`Patch::Apply`, `PatchParams::apply`) against the real
//! stack: a CRD installed the way kube-rs documents it (`Api::<CustomResourceDefinition>::
//! patch` with `Patch::Apply`), waited for with `await_condition(is_crd_established)`, then
//! a custom resource applied twice by one manager (managedFields: the manager, operation
//! Apply, the applied fields in `fieldsV1`), a second manager's change of the same field
//! answered with upstream's 409 (`conflict.go`: `Apply failed with 1 conflict: conflict with
//! "my-manager": .spec.x`; an applier is printed without API version, an updater with
//! `using <apiVersion>`), and `force` taking the field over. A typed built-in (ConfigMap)
//! goes through the same path.

use crdplane_tests::{Stack, kubeconfig_yaml};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceValidation, JSONSchemaProps,
};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams,
};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

const CRD_NAME: &str = "gizmos.apply.example.com";

async fn client(gateway: &str) -> kube::Client {
    let kc = kube::config::Kubeconfig::from_yaml(&kubeconfig_yaml(gateway, "crdplane"))
        .expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(cfg).expect("client")
}

fn props(entries: &[(&str, JSONSchemaProps)]) -> BTreeMap<String, JSONSchemaProps> {
    entries
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn typed(t: &str) -> JSONSchemaProps {
    JSONSchemaProps {
        type_: Some(t.into()),
        ..Default::default()
    }
}

/// The Gizmo CRD as a typed k8s-openapi value, as a kube-rs program writes it.
fn crd() -> CustomResourceDefinition {
    let spec = JSONSchemaProps {
        type_: Some("object".into()),
        properties: Some(props(&[
            ("x", typed("string")),
            ("y", typed("integer")),
            (
                "tags",
                JSONSchemaProps {
                    type_: Some("array".into()),
                    x_kubernetes_list_type: Some("set".into()),
                    items: Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schema(Box::new(typed("string")))),
                    ..Default::default()
                },
            ),
        ])),
        ..Default::default()
    };
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(CRD_NAME.into()),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: "apply.example.com".into(),
            scope: "Namespaced".into(),
            names: CustomResourceDefinitionNames {
                plural: "gizmos".into(),
                singular: Some("gizmo".into()),
                kind: "Gizmo".into(),
                ..Default::default()
            },
            versions: vec![CustomResourceDefinitionVersion {
                name: "v1".into(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(JSONSchemaProps {
                        type_: Some("object".into()),
                        properties: Some(props(&[("spec", spec)])),
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

fn gizmo(ar: &ApiResource, spec: Value) -> DynamicObject {
    DynamicObject::new("g1", ar).data(json!({ "spec": spec }))
}

/// (manager, operation, fieldsV1) of each managedFields entry.
fn managers(meta: &ObjectMeta) -> Vec<(String, String, Value)> {
    meta.managed_fields
        .iter()
        .flatten()
        .map(|e| {
            (
                e.manager.clone().unwrap_or_default(),
                e.operation.clone().unwrap_or_default(),
                e.fields_v1
                    .as_ref()
                    .map(|f| f.0.clone())
                    .unwrap_or(Value::Null),
            )
        })
        .collect()
}

fn api_error(r: Result<DynamicObject, kube::Error>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_server_side_apply() {
    let stack = Stack::start_with_redis().expect("stack");
    let client = client(&stack.gateway).await;

    // The CRD, applied as kube-rs documents it.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply("my-manager");
    let applied = crds
        .patch(CRD_NAME, &pp, &Patch::Apply(crd()))
        .await
        .expect("apply the CRD");
    let ms = managers(&applied.metadata);
    assert_eq!(ms.len(), 1, "{ms:?}");
    assert_eq!(
        (ms[0].0.as_str(), ms[0].1.as_str()),
        ("my-manager", "Apply")
    );
    // Typed as upstream types a CRD: declared fields without `.`, versions atomic.
    assert_eq!(
        ms[0].2,
        json!({"f:spec": {"f:group": {}, "f:names": {"f:kind": {}, "f:plural": {}, "f:singular": {}},
            "f:scope": {}, "f:versions": {}}}),
        "{ms:?}"
    );
    let established = tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(crds.clone(), CRD_NAME, conditions::is_crd_established()),
    )
    .await
    .expect("the CRD is Established within 30 s")
    .expect("watch the CRD");
    assert!(established.is_some());
    // Applying the same CRD again changes nothing.
    let again = crds
        .patch(CRD_NAME, &pp, &Patch::Apply(crd()))
        .await
        .expect("apply the CRD again");
    assert_eq!(
        again.metadata.resource_version,
        established.unwrap().metadata.resource_version
    );

    // A custom resource, applied twice by my-manager.
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apply.example.com", "v1", "Gizmo"),
        "gizmos",
    );
    let gizmos: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let first = gizmos
        .patch(
            "g1",
            &pp,
            &Patch::Apply(gizmo(&ar, json!({"x": "a", "y": 1, "tags": ["t1"]}))),
        )
        .await
        .expect("first apply creates");
    assert_eq!(
        first.data["spec"],
        json!({"x": "a", "y": 1, "tags": ["t1"]})
    );
    assert_eq!(
        managers(&first.metadata),
        [(
            "my-manager".to_string(),
            "Apply".to_string(),
            json!({"f:spec": {"f:tags": {"v:\"t1\"": {}}, "f:x": {}, "f:y": {}}})
        )]
    );
    let second = gizmos
        .patch(
            "g1",
            &pp,
            &Patch::Apply(gizmo(&ar, json!({"x": "b", "y": 1, "tags": ["t1"]}))),
        )
        .await
        .expect("second apply");
    assert_eq!(second.data["spec"]["x"], "b");
    assert_ne!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    assert_eq!(second.metadata.generation, Some(2));
    let ms = managers(&second.metadata);
    assert_eq!(ms.len(), 1, "{ms:?}");
    assert_eq!(
        (ms[0].0.as_str(), ms[0].1.as_str()),
        ("my-manager", "Apply")
    );
    assert!(ms[0].2["f:spec"]["f:x"].is_object(), "{ms:?}");
    let managed = second.metadata.managed_fields.as_ref().unwrap();
    assert_eq!(
        managed[0].api_version.as_deref(),
        Some("apply.example.com/v1")
    );
    assert_eq!(managed[0].fields_type.as_deref(), Some("FieldsV1"));
    assert!(managed[0].time.is_some());
    assert_eq!(managed[0].subresource, None);

    // Another manager changes .spec.x: upstream's conflict.
    let other = PatchParams::apply("other-manager");
    let st = api_error(
        gizmos
            .patch("g1", &other, &Patch::Apply(gizmo(&ar, json!({"x": "c"}))))
            .await,
    );
    assert_eq!((st.code, st.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        st.message,
        r#"Apply failed with 1 conflict: conflict with "my-manager": .spec.x"#
    );
    assert_eq!(gizmos.get("g1").await.unwrap().data["spec"]["x"], "b");
    // Forced, it takes .spec.x over; my-manager keeps the rest.
    let forced = gizmos
        .patch(
            "g1",
            &other.clone().force(),
            &Patch::Apply(gizmo(&ar, json!({"x": "c"}))),
        )
        .await
        .expect("forced apply");
    assert_eq!(
        forced.data["spec"],
        json!({"x": "c", "y": 1, "tags": ["t1"]})
    );
    let ms = managers(&forced.metadata);
    assert_eq!(
        ms,
        [
            (
                "my-manager".to_string(),
                "Apply".to_string(),
                json!({"f:spec": {"f:tags": {"v:\"t1\"": {}}, "f:y": {}}})
            ),
            (
                "other-manager".to_string(),
                "Apply".to_string(),
                json!({"f:spec": {"f:x": {}}})
            ),
        ]
    );
    // my-manager now conflicts with other-manager on the field it lost.
    let st = api_error(
        gizmos
            .patch(
                "g1",
                &pp,
                &Patch::Apply(gizmo(&ar, json!({"x": "b", "y": 1, "tags": ["t1"]}))),
            )
            .await,
    );
    assert_eq!(
        st.message,
        r#"Apply failed with 1 conflict: conflict with "other-manager": .spec.x"#
    );
    // An Update manager is printed with the API version it wrote.
    let edit = gizmos
        .patch(
            "g1",
            &PatchParams {
                field_manager: Some("editor".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({"spec": {"y": 5}})),
        )
        .await
        .expect("merge patch");
    assert!(
        managers(&edit.metadata)
            .iter()
            .any(|(m, op, f)| m == "editor" && op == "Update" && f["f:spec"]["f:y"].is_object()),
        "{:?}",
        managers(&edit.metadata)
    );
    let st = api_error(
        gizmos
            .patch(
                "g1",
                &pp,
                &Patch::Apply(gizmo(&ar, json!({"y": 1, "tags": ["t1"]}))),
            )
            .await,
    );
    assert_eq!(
        st.message,
        r#"Apply failed with 1 conflict: conflict with "editor" using apply.example.com/v1: .spec.y"#
    );

    // A typed built-in through the same path.
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm = |v: &str| ConfigMap {
        metadata: ObjectMeta {
            name: Some("kube-rs-cm".into()),
            ..Default::default()
        },
        data: Some([("k".to_string(), v.to_string())].into()),
        ..Default::default()
    };
    let made = cms
        .patch("kube-rs-cm", &pp, &Patch::Apply(cm("1")))
        .await
        .expect("apply a ConfigMap");
    assert_eq!(made.data.as_ref().unwrap()["k"], "1");
    let st = match cms
        .patch("kube-rs-cm", &other, &Patch::Apply(cm("2")))
        .await
    {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected a conflict, got {other:?}"),
    };
    assert_eq!(
        st.message,
        r#"Apply failed with 1 conflict: conflict with "my-manager": .data.k"#
    );
    let taken = cms
        .patch("kube-rs-cm", &other.force(), &Patch::Apply(cm("2")))
        .await
        .expect("forced ConfigMap apply");
    assert_eq!(taken.data.as_ref().unwrap()["k"], "2");
}
