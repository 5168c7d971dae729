//! `pylog_core::harness::batch` under libFuzzer: see the harness for the invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    pylog_core::harness::batch(data);
});
