//! Verifier and cosigner keys (`<name>+<hex id>+<base64>`) come from trust
//! stores, `bulwark trust` arguments and witness configuration. The oracle
//! (in `bulwark-fuzz-oracles`, also run as a seeded test in CI): never
//! panics; what parses re-encodes to the same text; no text is both kinds.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bulwark_fuzz_oracles::audit::verifier_key(data);
});
