//! Scripted-model JSONL files (test fixtures, incident replays): a broken
//! script must be an error, never a panic.
#![no_main]

use bulwark_llm::ScriptDriver;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    match ScriptDriver::from_jsonl(src, "fuzz") {
        Ok(driver) => {
            // One turn per non-blank, non-comment line at most.
            assert!(driver.len() <= src.lines().count());
            assert_eq!(driver.played(), 0);
        }
        Err(e) => {
            let message = e.to_string();
            assert!(message.starts_with("script: fuzz:"), "{message}");
        }
    }
});
