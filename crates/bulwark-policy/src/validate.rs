//! Semantic checks shared by the manifest, config and access parsers, run
//! after deserialization and reported at the offending field.

use crate::capability::{Capability, HostPattern, is_domain_name};
use crate::error::{ConfigError, Located, Seg};
use crate::manifest::ToolFilter;

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
        if !(is_domain_name(d) || (star && d == "*")) {
            return Err(loc.at(
                &with(base, &[Seg::Idx(i)]),
                format_args!(
                    "{d:?} is not a tool domain name (lowercase [a-z0-9_-]{})",
                    if star { " or \"*\"" } else { "" }
                ),
            ));
        }
    }
    Ok(())
}

/// `"domain:operation"`.
pub(crate) fn domain_op(s: &str) -> Result<(), String> {
    match s.split_once(':') {
        Some((d, o)) if is_domain_name(d) && is_op_name(o) => Ok(()),
        _ => Err(format!(
            "{s:?} must be \"domain:operation\", e.g. \"files:write\""
        )),
    }
}

fn is_op_name(s: &str) -> bool {
    s == "*" || is_domain_name(s)
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
        if !(d == "*" || is_domain_name(d) || domain_op(d).is_ok()) {
            return Err(loc.at(
                &with(base, &[Seg::Key("deny"), Seg::Idx(i)]),
                format_args!("{d:?} must be a tool domain, \"*\", or \"domain:operation\""),
            ));
        }
    }
    for (domain, ops) in &f.operations {
        let at = with(base, &[Seg::Key("operations"), Seg::Key(domain)]);
        if !is_domain_name(domain) {
            return Err(loc.at(&at, format_args!("{domain:?} is not a tool domain name")));
        }
        let lists = ops
            .allow
            .iter()
            .map(|a| ("allow", a))
            .chain([("deny", &ops.deny)]);
        for (which, list) in lists {
            for (i, op) in list.iter().enumerate() {
                if !is_op_name(op) {
                    return Err(loc.at(
                        &with(&at, &[Seg::Key(which), Seg::Idx(i)]),
                        format_args!(
                            "{op:?} is not an operation name (lowercase [a-z0-9_-] or \"*\")"
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
