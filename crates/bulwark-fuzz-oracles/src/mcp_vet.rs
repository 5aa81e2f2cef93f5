//! The oracle for MCP tool vetting (`bulwark_mcp::vet`): it reads what a
//! third-party server says about its tools (name, description, schema), so
//! on any input it must not panic, must answer the same twice, must keep
//! each problem's detail bounded, and naming siblings may only take away
//! tool-call findings that point to one of them, never any other problem.

use bulwark_mcp::vet::{Problem, vet_tool, vet_tool_among};

/// Longest detail a problem may carry (an excerpt plus its framing).
const MAX_DETAIL_BYTES: usize = 1024;

/// The bytes, as UTF-8 with invalid sequences replaced, split at NUL into
/// a tool name, a description and sibling names (comma-separated); the
/// description also stands as a property's description in the schema.
pub fn vet_description(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\0');
    let name = parts.next().unwrap_or_default();
    let description = parts.next().unwrap_or_default();
    let siblings: Vec<&str> = parts
        .next()
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .take(16)
        .collect();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"input": {"type": "string", "description": description}},
    });
    let alone = vet_tool(name, description, &schema);
    let among = vet_tool_among(name, description, &schema, &siblings);
    assert_eq!(
        alone,
        vet_tool(name, description, &schema),
        "not deterministic"
    );
    for p in alone.iter().chain(&among) {
        assert!(!p.kind.is_empty(), "a problem without a kind");
        assert!(
            p.detail.len() <= MAX_DETAIL_BYTES,
            "a {}-byte detail: {p:?}",
            p.detail.len()
        );
    }
    let other = |ps: &[Problem]| -> Vec<Problem> {
        ps.iter()
            .filter(|p| p.kind != "injection:tool_call_lookalike")
            .cloned()
            .collect()
    };
    assert_eq!(
        other(&alone),
        other(&among),
        "siblings changed a problem that is not a tool-call finding"
    );
    assert!(
        among.len() <= alone.len(),
        "siblings added problems: {alone:?} -> {among:?}"
    );
}
