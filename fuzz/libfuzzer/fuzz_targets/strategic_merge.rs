//! libFuzzer binary over [`crdplane_fuzz::strategic_merge`] (built by `cargo fuzz`, see scripts/fuzz.sh).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| crdplane_fuzz::strategic_merge(data));
