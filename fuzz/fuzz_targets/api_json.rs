#![no_main]
//! `llm_doctor::fuzzing::api_json`: must never panic or hang.
libfuzzer_sys::fuzz_target!(|data: &[u8]| llm_doctor::fuzzing::api_json(data));
