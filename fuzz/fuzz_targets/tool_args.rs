//! Tool arguments are JSON chosen by the model. Every built-in tool parses
//! them once and derives its demands from the parsed value; that must never
//! panic, and no file demand may name a path outside the workspace.
#![no_main]

use bulwark_kernel::ToolRegistry;
use bulwark_policy::Demand;
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

static REGISTRY: LazyLock<ToolRegistry> = LazyLock::new(ToolRegistry::builtin);

fuzz_target!(|data: &[u8]| {
    let Ok(args) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    for tool in REGISTRY.iter() {
        let Ok(parsed) = tool.parse(&args) else {
            continue;
        };
        for demand in parsed.demands() {
            if let Demand::FileRead(p) | Demand::FileWrite(p) = demand {
                let path = p.as_str();
                assert!(
                    !path.starts_with('/') && path.split('/').all(|c| c != ".."),
                    "{}: demand {demand} escapes the workspace for {args}",
                    tool.spec().name
                );
            }
        }
    }
});
