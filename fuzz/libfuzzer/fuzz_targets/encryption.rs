//! libFuzzer binary over [`crdplane_fuzz::encryption`] (built by `cargo fuzz`, see scripts/fuzz.sh).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| crdplane_fuzz::encryption(data));
