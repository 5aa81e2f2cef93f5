//! Every untrusted tool output passes the advisory injection scanner: fetched
//! pages, child replies, labelled memory and files. The oracle (in
//! `bulwark-fuzz-oracles`, also run as a seeded test in CI): never panic;
//! offsets are char boundaries inside the text; at most one finding per kind
//! per region and no more than the cap; deterministic; appending benign text
//! loses no finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bulwark_fuzz_oracles::injection::scan_text(data);
});
