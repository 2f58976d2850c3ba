//! gRPC round trip: `serve` on 127.0.0.1:0, then ValidateCrd / LoadSchema / Admit / Normalize
//! with the CronTab CRD of the spec (extend-the-api-with-crds.txt).

use crdplane_core::field::aggregate_message;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::validation_client::ValidationClient;
use crdplane_validation::convert::from_proto_list;
use serde_json::{Value, json};

const CRD: &str = include_str!("fixtures/crontab-crd.json");

async fn start() -> ValidationClient<tonic::transport::Channel> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(crdplane_validation::serve(
        crdplane_validation::Config::default(),
        listener,
        Default::default(),
    ));
    let mut last = None;
    for _ in 0..50 {
        match ValidationClient::connect(format!("http://{addr}")).await {
            Ok(c) => return c,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("cannot connect: {last:?}");
}

fn schema_ref(tenant: &str) -> pb::SchemaRef {
    pb::SchemaRef {
        tenant: tenant.into(),
        crd_uid: "4a1f6c0e-0000-4000-8000-000000000001".into(),
        generation: 1,
        version: "v1".into(),
    }
}

fn admit_req(obj: Value, fv: pb::admit_request::FieldValidation) -> pb::AdmitRequest {
    pb::AdmitRequest {
        schema: Some(schema_ref("acme")),
        operation: pb::admit_request::Operation::Create as i32,
        object: serde_json::to_vec(&obj).unwrap().into(),
        old_object: Default::default(),
        field_validation: fv as i32,
        subresource: String::new(),
        api_version: "stable.example.com/v1".into(),
        kind: "CronTab".into(),
        namespaced: true,
        crd_json: Default::default(),
    }
}

#[tokio::test]
async fn round_trip() {
    let mut c = start().await;

    // CRD check: the spec's CronTab CRD is valid.
    let r = c
        .validate_crd(pb::ValidateCrdRequest {
            crd_json: CRD.as_bytes().to_vec().into(),
            old_crd_json: Default::default(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.errors.is_empty(), "{:?}", r.errors);

    // A non-structural CRD is rejected with upstream paths.
    let mut bad: Value = serde_json::from_str(CRD).unwrap();
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["x"] =
        json!({});
    let r = c
        .validate_crd(pb::ValidateCrdRequest {
            crd_json: serde_json::to_vec(&bad).unwrap().into(),
            old_crd_json: Default::default(),
        })
        .await
        .unwrap()
        .into_inner();
    let errs = from_proto_list(&r.errors);
    assert_eq!(
        aggregate_message(&errs),
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[x].type: Required value: must not be empty for specified object fields"
    );

    // Admit before LoadSchema: NOT_FOUND.
    let invalid = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "my-new-cron-object", "namespace": "default"},
        "spec": {"cronSpec": "* * * *", "image": "my-awesome-cron-image", "replicas": 15}});
    let err = c
        .admit(admit_req(
            invalid.clone(),
            pb::admit_request::FieldValidation::Unspecified,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);

    for tenant in ["acme", "other"] {
        c.load_schema(pb::LoadSchemaRequest {
            schema: Some(schema_ref(tenant)),
            crd_json: CRD.as_bytes().to_vec().into(),
        })
        .await
        .unwrap();
    }

    // The spec's invalid CronTab: both messages, collected.
    let r = c
        .admit(admit_req(
            invalid,
            pb::admit_request::FieldValidation::Unspecified,
        ))
        .await
        .unwrap()
        .into_inner();
    let errs = from_proto_list(&r.errors);
    assert_eq!(
        aggregate_message(&errs),
        r#"[spec.cronSpec: Invalid value: "* * * *": spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$', spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10]"#
    );
    assert!(r.object.is_empty());

    // The valid one is accepted; an unknown field is pruned and warned about.
    let valid = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "my-new-cron-object", "namespace": "default"},
        "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": 5, "foo": 1}});
    let r = c
        .admit(admit_req(valid, pb::admit_request::FieldValidation::Warn))
        .await
        .unwrap()
        .into_inner();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.warnings, vec![r#"unknown field "spec.foo""#]);
    assert_eq!(r.unknown_fields, vec!["spec.foo"]);
    let obj: Value = serde_json::from_slice(&r.object).unwrap();
    assert_eq!(
        obj["spec"],
        json!({"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": 5})
    );

    // Normalize (read path) prunes stored objects.
    let stored = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "a"}, "spec": {"replicas": 2, "gone": true}});
    let mut req = pb::NormalizeRequest {
        schema: Some(schema_ref("other")),
        objects: vec![serde_json::to_vec(&stored).unwrap().into()],
        crd_json: Default::default(),
    };
    let r = c.normalize(req.clone()).await.unwrap().into_inner();
    let got: Value = serde_json::from_slice(&r.objects[0]).unwrap();
    assert_eq!(got["spec"], json!({"replicas": 2}));

    req.schema = Some(pb::SchemaRef {
        generation: 2,
        ..schema_ref("other")
    });
    assert_eq!(
        c.normalize(req).await.unwrap_err().code(),
        tonic::Code::NotFound
    );
}

/// AdmitMany answers each request as Admit would, in request order: a loaded schema's valid
/// and invalid objects, and an item whose schema is not loaded (that item alone NOT_FOUND).
#[tokio::test]
async fn admit_many_answers_each_item_as_admit_would() {
    let mut c = start().await;
    c.load_schema(pb::LoadSchemaRequest {
        schema: Some(schema_ref("acme")),
        crd_json: CRD.as_bytes().to_vec().into(),
    })
    .await
    .unwrap();
    let obj = |name: &str, replicas: u32| {
        json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"cronSpec": "* * * * */5", "image": "img", "replicas": replicas, "foo": 1}})
    };
    let warn = pb::admit_request::FieldValidation::Warn;
    let mut unloaded = admit_req(obj("c", 1), warn);
    unloaded.schema = Some(schema_ref("not-loaded"));
    let requests = vec![
        admit_req(obj("a", 2), warn),
        admit_req(obj("b", 15), warn),
        unloaded,
        admit_req(obj("d", 3), pb::admit_request::FieldValidation::Ignore),
    ];
    let singles: Vec<_> = {
        let mut out = Vec::new();
        for r in &requests {
            out.push(c.admit(r.clone()).await.map(|r| r.into_inner()));
        }
        out
    };
    let many = c
        .admit_many(pb::AdmitManyRequest {
            requests: requests.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .results;
    assert_eq!(many.len(), 4);
    for (single, item) in singles.iter().zip(&many) {
        match (single, item) {
            (
                Ok(s),
                pb::AdmitResult {
                    response: Some(m),
                    error: None,
                },
            ) => assert_eq!(s, m),
            (
                Err(s),
                pb::AdmitResult {
                    response: None,
                    error: Some(e),
                },
            ) => {
                let e = e.to_status();
                assert_eq!(
                    (e.code(), e.message(), e.details()),
                    (s.code(), s.message(), s.details())
                );
            }
            other => panic!("mismatch: {other:?}"),
        }
    }
    // And the answers are the expected ones, not just equal to each other.
    let a: Value = serde_json::from_slice(&many[0].response.as_ref().unwrap().object).unwrap();
    assert_eq!(a["metadata"]["name"], "a");
    assert_eq!(a["spec"].get("foo"), None);
    assert_eq!(
        many[0].response.as_ref().unwrap().warnings,
        vec![r#"unknown field "spec.foo""#]
    );
    let b = many[1].response.as_ref().unwrap();
    assert_eq!(
        aggregate_message(&from_proto_list(&b.errors)),
        "spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10"
    );
    assert_eq!(
        many[2].error.as_ref().unwrap().to_status().code(),
        tonic::Code::NotFound
    );
    assert!(many[3].response.as_ref().unwrap().warnings.is_empty());
}

/// A replica that has not loaded a schema answers NOT_FOUND; the retry carrying the CRD
/// (what the gateway sends, since the retry may reach any replica) is compiled and answered
/// in the same call, for Admit, AdmitMany and Normalize alike.
#[tokio::test]
async fn a_retry_carrying_the_crd_loads_the_schema_on_any_replica() {
    let obj = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "a", "namespace": "d"}, "spec": {"replicas": 2, "gone": true}});
    let crd = bytes::Bytes::from(CRD.as_bytes().to_vec());

    let mut c = start().await;
    let plain = admit_req(obj.clone(), pb::admit_request::FieldValidation::Ignore);
    assert_eq!(
        c.admit(plain.clone()).await.unwrap_err().code(),
        tonic::Code::NotFound
    );
    let r = c
        .admit(pb::AdmitRequest {
            crd_json: crd.clone(),
            ..plain.clone()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let got: Value = serde_json::from_slice(&r.object).unwrap();
    assert_eq!(got["spec"], json!({"replicas": 2}));
    // Loaded now: the plain request is answered too.
    c.admit(plain.clone()).await.unwrap();

    // AdmitMany on another fresh replica: the item carrying the CRD loads it for both.
    let mut c = start().await;
    let r = c
        .admit_many(pb::AdmitManyRequest {
            requests: vec![
                plain.clone(),
                pb::AdmitRequest {
                    crd_json: crd.clone(),
                    ..plain.clone()
                },
            ],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        r.results
            .iter()
            .all(|x| x.response.is_some() && x.error.is_none()),
        "{r:?}"
    );

    // Normalize on a third.
    let mut c = start().await;
    let req = pb::NormalizeRequest {
        schema: Some(schema_ref("acme")),
        objects: vec![serde_json::to_vec(&obj).unwrap().into()],
        crd_json: Default::default(),
    };
    assert_eq!(
        c.normalize(req.clone()).await.unwrap_err().code(),
        tonic::Code::NotFound
    );
    let r = c
        .normalize(pb::NormalizeRequest {
            crd_json: crd,
            ..req
        })
        .await
        .unwrap()
        .into_inner();
    let got: Value = serde_json::from_slice(&r.objects[0]).unwrap();
    assert_eq!(got["spec"], json!({"replicas": 2}));
}
