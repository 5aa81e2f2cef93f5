//! Agent manifests, the global config and the access file: TOML from the
//! operator (or from whoever can write those files). Any input either
//! parses or yields an error located inside the input.
#![no_main]

use bulwark_policy::{ConfigError, parse_access, parse_global_config, parse_manifest};
use libfuzzer_sys::fuzz_target;

fn check_located(src: &str, result: Result<(), ConfigError>) {
    let Err(e) = result else { return };
    let lines = src.lines().count();
    assert!(
        e.line >= 1 && e.line <= lines + 1,
        "line {} outside 1..={} for {src:?}: {e}",
        e.line,
        lines + 1
    );
    assert!(e.col >= 1, "col {} for {src:?}: {e}", e.col);
    // The column is in characters and may point just past the line's end.
    let line_chars = src
        .split('\n')
        .nth(e.line - 1)
        .map_or(0, |l| l.chars().count());
    assert!(
        e.col <= line_chars + 1,
        "col {} past the end of line {} ({line_chars} chars) for {src:?}: {e}",
        e.col,
        e.line
    );
    assert_eq!(e.origin, "fuzz");
}

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    check_located(src, parse_manifest(src, "fuzz").map(drop));
    check_located(src, parse_global_config(src, "fuzz").map(drop));
    check_located(src, parse_access(src, "fuzz").map(drop));
});
