//! `agent.sig` is whatever is in an agent directory: a signed listing of
//! its files. The oracles (in `bulwark-fuzz-oracles`, also run as seeded
//! tests in CI): never panic; a listing parses only in its canonical form;
//! nothing verifies under a key that signed nothing; a signature damaged
//! anywhere opens, if at all, only to the listing that was signed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bulwark_fuzz_oracles::trust::signature_file(data);
    bulwark_fuzz_oracles::trust::signature_edits(data);
});
