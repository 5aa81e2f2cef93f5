//! Semantic checks shared by the manifest, config and access parsers, run
//! after deserialization and reported at the offending field.

use crate::capability::{Capability, HostPattern};
use crate::error::{ConfigError, Located, Seg};
use crate::manifest::ToolFilter;
use crate::mcp::{is_domain_operation, is_operation_of, is_tool_domain};

fn with<'a>(base: &[Seg<'a>], more: &[Seg<'a>]) -> Vec<Seg<'a>> {
    base.iter().chain(more).copied().collect()
}

/// Domain names (or `"*"` when `star` is allowed).
pub(crate) fn domains(
    loc: &Located<'_>,
    base: &[Seg<'_>],
    list: &[String],
    star: bool,
) -> Result<(), ConfigError> {
    for (i, d) in list.iter().enumerate() {
        if !(is_tool_domain(d) || (star && d == "*")) {
            return Err(loc.at(
                &with(base, &[Seg::Idx(i)]),
                format_args!(
                    "{d:?} is not a tool domain name (lowercase [a-z0-9_-], or \"mcp:<server>\"{})",
                    if star { " or \"*\"" } else { "" }
                ),
            ));
        }
    }
    Ok(())
}

/// `"domain:operation"`, where the domain may be `mcp:<server>`.
pub(crate) fn domain_op(s: &str) -> Result<(), String> {
    if is_domain_operation(s) {
        Ok(())
    } else {
        Err(format!(
            "{s:?} must be \"domain:operation\", e.g. \"files:write\" or \"mcp:fs:write_file\""
        ))
    }
}

pub(crate) fn tool_filter(
    loc: &Located<'_>,
    base: &[Seg<'_>],
    f: &ToolFilter,
) -> Result<(), ConfigError> {
    if let Some(allow) = &f.allow {
        domains(loc, &with(base, &[Seg::Key("allow")]), allow, true)?;
    }
    for (i, d) in f.deny.iter().enumerate() {
        if !(d == "*" || is_tool_domain(d) || domain_op(d).is_ok()) {
            return Err(loc.at(
                &with(base, &[Seg::Key("deny"), Seg::Idx(i)]),
                format_args!("{d:?} must be a tool domain, \"*\", or \"domain:operation\""),
            ));
        }
    }
    for (domain, ops) in &f.operations {
        let at = with(base, &[Seg::Key("operations"), Seg::Key(domain)]);
        if !is_tool_domain(domain) {
            return Err(loc.at(&at, format_args!("{domain:?} is not a tool domain name")));
        }
        let lists = ops
            .allow
            .iter()
            .map(|a| ("allow", a))
            .chain([("deny", &ops.deny)]);
        for (which, list) in lists {
            for (i, op) in list.iter().enumerate() {
                if !is_operation_of(domain, op) {
                    return Err(loc.at(
                        &with(&at, &[Seg::Key(which), Seg::Idx(i)]),
                        format_args!(
                            "{op:?} is not an operation name (lowercase [a-z0-9_-], an MCP tool name [A-Za-z0-9_.-] for an mcp:<server> domain, or \"*\")"
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn capabilities(
    loc: &Located<'_>,
    base: &[Seg<'_>],
    caps: &[Capability],
) -> Result<(), ConfigError> {
    for (i, cap) in caps.iter().enumerate() {
        if let Err(e) = cap.validate() {
            let mut at = with(base, &[Seg::Idx(i)]);
            if let Some(field) = cap.pattern_field() {
                at.push(Seg::Key(field));
            }
            return Err(loc.at(&at, format_args!("invalid {} capability: {e}", cap.kind())));
        }
    }
    Ok(())
}

pub(crate) fn host_patterns(
    loc: &Located<'_>,
    base: &[Seg<'_>],
    hosts: &[String],
) -> Result<(), ConfigError> {
    for (i, h) in hosts.iter().enumerate() {
        HostPattern::parse(h).map_err(|e| loc.at(&with(base, &[Seg::Idx(i)]), e))?;
    }
    Ok(())
}
