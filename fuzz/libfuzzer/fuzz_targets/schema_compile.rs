//! libFuzzer binary over [`crdplane_fuzz::schema_compile`] (built by `cargo fuzz`, see scripts/fuzz.sh).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| crdplane_fuzz::schema_compile(data));
