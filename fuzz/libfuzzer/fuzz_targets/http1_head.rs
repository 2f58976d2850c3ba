#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| crdplane_fuzz::http1_head(data));
