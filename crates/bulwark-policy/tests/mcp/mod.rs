//! MCP servers and shell egress in policy: parse-time validation with
//! located errors, resolution and host narrowing, `mcp:<server>` domains
//! through every layer, approvals, child narrowing, and property tests of
//! the `domain:operation` split and of narrowing.

mod layering;
mod props;
mod spawn;
mod taint;
mod validation;

use bulwark_policy::{
    AccessFile, ConfigError, EffectivePolicy, GlobalConfig, Manifest, PolicyInputs, ToolCatalog,
    compute_effective, parse_access, parse_global_config, parse_manifest,
};

/// The built-ins as the kernel's registry knows them when policy is
/// computed: no MCP domain among them.
pub(super) fn catalog() -> ToolCatalog {
    let e = |d: &str, ops: &[&str]| (d.to_string(), ops.iter().map(|s| s.to_string()).collect());
    ToolCatalog::new([
        e("files", &["read", "write", "list"]),
        e("shell", &["exec"]),
        e("web", &["fetch"]),
        e("agents", &["spawn"]),
    ])
}

pub(super) fn manifest(src: &str) -> Manifest {
    parse_manifest(src, "agent.toml").unwrap_or_else(|e| panic!("{e}"))
}

pub(super) fn manifest_err(src: &str) -> ConfigError {
    match parse_manifest(src, "agents/x/agent.toml") {
        Ok(m) => panic!("accepted: {m:?}"),
        Err(e) => e,
    }
}

pub(super) fn config(src: &str) -> GlobalConfig {
    parse_global_config(src, "config.toml").unwrap_or_else(|e| panic!("{e}"))
}

pub(super) fn config_err(src: &str) -> ConfigError {
    match parse_global_config(src, "config.toml") {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(e) => e,
    }
}

pub(super) fn access(src: &str) -> AccessFile {
    parse_access(src, "access.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// The 1-based line of the first line of `src` containing `needle`.
pub(super) fn line_of(src: &str, needle: &str) -> usize {
    src.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in the source"))
        + 1
}

/// A local session's policy.
pub(super) fn effective(g: &GlobalConfig, m: &Manifest) -> EffectivePolicy {
    compute_effective(
        &PolicyInputs {
            global: g,
            manifest: m,
            remote: false,
            user: None,
        },
        &catalog(),
    )
}

pub(super) fn items(eff: &EffectivePolicy) -> Vec<String> {
    eff.removed
        .iter()
        .map(|r| format!("{}: {} ({})", r.item, r.layer, r.rule))
        .collect()
}
