//! Command lines come from the model. Whatever argv arrives, the exec
//! policy must answer without panicking; an allowed argv's checked chain
//! starts with the argv itself, and under an allowlist of `echo` only, no
//! command outside `echo` (other than a transparent wrapper) is approved.
#![no_main]

use bulwark_policy::{ExecMode, ExecPolicy, ExecRule, ExecSection};
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

static ALLOWLIST: LazyLock<Option<ExecPolicy>> = LazyLock::new(|| {
    ExecPolicy::from_section(&ExecSection {
        mode: ExecMode::Allowlist,
        allow: vec![ExecRule { prefix: vec!["echo".into()], examples: vec![], counter_examples: vec![] }],
    })
    .ok()
});
static FULL: LazyLock<Option<ExecPolicy>> = LazyLock::new(|| {
    ExecPolicy::from_section(&ExecSection { mode: ExecMode::Full, allow: vec![] }).ok()
});

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // NUL separates arguments, so any argument content (spaces, quotes,
    // metacharacters, newlines) can be produced.
    let argv: Vec<String> = text.split('\0').map(str::to_string).collect();
    let (Some(allowlist), Some(full)) = (ALLOWLIST.as_ref(), FULL.as_ref()) else {
        panic!("policies failed to build");
    };
    for policy in [allowlist, full] {
        if let Ok(approval) = policy.check(&argv) {
            assert_eq!(approval.commands.first(), Some(&argv), "chain must start with the argv");
        }
    }
    if let Ok(approval) = allowlist.check(&argv) {
        for (cmd, rule) in approval.commands.iter().zip(&approval.rules) {
            if rule.is_some() {
                assert_eq!(cmd.first().map(String::as_str), Some("echo"), "{argv:?} approved {cmd:?}");
            }
        }
        assert!(approval.rules.iter().any(Option::is_some), "{argv:?} approved without a rule");
    }
});
