//! Compiles the `.proto` files with protox (pure Rust), so building needs no system `protoc`:
//!
//! - `crdplane/v1/*.proto`: the gRPC contracts between the gateway and the services
//!   (messages, clients and servers; `bytes` fields as `bytes::Bytes`).
//! - `gnostic/openapiv2/OpenAPIv2.proto`: gnostic's `openapi.v2` messages (vendored unchanged,
//!   see `gnostic/README.md`), messages only. Its one import, `google/protobuf/any.proto`,
//!   is supplied by protox, and prost maps `google.protobuf.Any` onto `prost_types::Any`.
fn main() {
    let files = [
        "crdplane/v1/common.proto",
        "crdplane/v1/status.proto",
        "crdplane/v1/storage.proto",
        "crdplane/v1/validation.proto",
        "crdplane/v1/registry.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["."]).expect("compile protos");
    tonic_prost_build::configure()
        .bytes(".")
        .compile_fds(fds)
        .expect("generate gRPC code");

    // A separate configuration, so the `.bytes(".")` above does not reach these messages
    // (they have no `bytes` fields today; their strings are `String` either way).
    let gnostic = "openapiv2/OpenAPIv2.proto";
    println!("cargo:rerun-if-changed=gnostic/{gnostic}");
    let fds = protox::compile([gnostic], ["gnostic"]).expect("compile gnostic OpenAPIv2.proto");
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(false)
        .compile_fds(fds)
        .expect("generate openapi.v2 messages");
}
