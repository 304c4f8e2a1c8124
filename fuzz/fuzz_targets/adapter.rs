#![no_main]
//! `llm_doctor::fuzzing::adapter`: must never panic or hang.
libfuzzer_sys::fuzz_target!(|data: &[u8]| llm_doctor::fuzzing::adapter(data));
