//! Compiles `crdplane/v1/*.proto` with protox (pure Rust), so building needs no system `protoc`.
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
}
