#![no_main]
//! `llm_doctor::fuzzing::payload`: must never panic or hang.
libfuzzer_sys::fuzz_target!(|data: &[u8]| llm_doctor::fuzzing::payload(data));
