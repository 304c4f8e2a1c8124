#![no_main]
//! `llm_doctor::fuzzing::engine_args`: must never panic or hang.
libfuzzer_sys::fuzz_target!(|data: &[u8]| llm_doctor::fuzzing::engine_args(data));
