#![no_main]
//! `llm_doctor::fuzzing::playbook`: must never panic or hang.
libfuzzer_sys::fuzz_target!(|data: &[u8]| llm_doctor::fuzzing::playbook(data));
