//! Workspace paths come straight from model-chosen tool arguments. A parsed
//! path must never escape the workspace, and parsing must be idempotent.
#![no_main]

use bulwark_policy::WorkspacePath;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(p) = WorkspacePath::parse(s) else {
        return;
    };
    let text = p.as_str();
    assert!(
        !text.starts_with('/'),
        "absolute result {text:?} from {s:?}"
    );
    assert!(
        text.split('/').all(|c| c != ".."),
        "'..' component in {text:?} from {s:?}"
    );
    assert!(
        p.components().all(|c| !c.is_empty() && c != "."),
        "unnormalized {text:?} from {s:?}"
    );
    assert!(!text.contains('\\') && !text.chars().any(char::is_control));
    let again = WorkspacePath::parse(text).expect("a parsed path parses again");
    assert_eq!(again, p, "not idempotent for {s:?}");
});
