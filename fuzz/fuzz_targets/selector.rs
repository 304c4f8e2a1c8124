#![no_main]
//! `llm_doctor::fuzzing::selector`: must never panic or hang.
libfuzzer_sys::fuzz_target!(|data: &[u8]| llm_doctor::fuzzing::selector(data));
