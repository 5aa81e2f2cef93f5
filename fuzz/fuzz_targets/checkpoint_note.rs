//! Signed notes (checkpoints, key introductions, handovers, cosignatures)
//! are read from the checkpoint file, from witnesses and from evidence
//! bundles. The oracles (in `bulwark-fuzz-oracles`, also run as seeded
//! tests in CI): never panic; nothing verifies under a key that signed
//! nothing; what opens is the note's own text; what parses re-encodes to
//! the same bytes; a signed note damaged anywhere opens, if at all, only
//! to the text that was signed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bulwark_fuzz_oracles::audit::checkpoint_note(data);
    bulwark_fuzz_oracles::audit::signed_note_edits(data);
});
