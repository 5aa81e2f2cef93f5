//! MCP servers as taint sinks: results are untrusted (`mcp`), every
//! `mcp:<server>` domain asks a person for untrusted labels unless the
//! manifest loosens that server, and `[taint.sinks]` names MCP tools.

use std::collections::BTreeSet;

use bulwark_policy::{GlobalConfig, SinkRule, TaintLabel, TaintPolicy};

use super::{effective, line_of, manifest, manifest_err};

const HEAD: &str = "[agent]\nname = \"a\"\n[tools]\nallow = [\"mcp:fs\"]\n[mcp.servers.fs]\ncommand = [\"mcp-fs\"]\n";

fn labels(l: &[TaintLabel]) -> BTreeSet<TaintLabel> {
    l.iter().copied().collect()
}

#[test]
fn every_mcp_tool_asks_for_untrusted_labels_by_default() {
    let p = TaintPolicy::default();
    for label in TaintLabel::ALL {
        let d = p.decide_call("mcp:fs", "write_file", &labels(&[label]));
        if label.is_untrusted() {
            let d = d.expect("a decision");
            assert_eq!((d.sink.as_str(), d.rule), ("mcp:fs", SinkRule::Approve));
        } else {
            assert_eq!(d, None, "{label:?}");
        }
    }
    // The label of another server's result counts the same (tool poisoning
    // across servers).
    assert!(
        p.decide_call("mcp:github", "create_issue", &labels(&[TaintLabel::Mcp]))
            .is_some()
    );
    // Built-in read operations stay no sinks.
    assert_eq!(p.sink("files", "read"), None);
}

#[test]
fn a_manifest_loosens_or_tightens_one_server_and_its_tools() {
    let m = manifest(&format!(
        "{HEAD}[taint.sinks]\n\"mcp:fs\" = {{ mcp = \"allow\" }}\n\"mcp:fs:write_file\" = {{ mcp = \"approve\", external = \"deny\" }}\n"
    ));
    let eff = effective(&GlobalConfig::default(), &m);
    let t = &eff.taint;
    let mcp = labels(&[TaintLabel::Mcp]);
    assert_eq!(t.decide_call("mcp:fs", "read_file", &mcp), None);
    assert_eq!(
        t.decide_call("mcp:fs", "write_file", &mcp).unwrap().rule,
        SinkRule::Approve
    );
    let ext = labels(&[TaintLabel::External]);
    assert_eq!(
        t.decide_call("mcp:fs", "read_file", &ext).unwrap().rule,
        SinkRule::Approve
    );
    assert_eq!(
        t.decide_call("mcp:fs", "write_file", &ext).unwrap().rule,
        SinkRule::Deny
    );
    // Other servers keep the default.
    assert_eq!(
        t.decide_call("mcp:web", "get", &mcp).unwrap().rule,
        SinkRule::Approve
    );
}

#[test]
fn loosening_one_tool_under_the_server_default_is_refused_at_its_line() {
    let src = format!("{HEAD}[taint.sinks]\n\"mcp:fs:read_file\" = {{ mcp = \"allow\" }}\n");
    let e = manifest_err(&src);
    assert_eq!(e.line, line_of(&src, "read_file"), "{e}");
    assert!(
        e.message
            .contains("change [taint.sinks] \"mcp:fs\" instead"),
        "{e}"
    );
    let src = format!("{HEAD}[taint.sinks]\n\"mcp:fs:read file\" = {{ mcp = \"deny\" }}\n");
    assert!(manifest_err(&src).message.contains("is not a sink name"));
}

#[test]
fn a_child_may_not_loosen_a_servers_rule() {
    let parent = effective(&GlobalConfig::default(), &manifest(HEAD));
    let child = effective(
        &GlobalConfig::default(),
        &manifest(&format!(
            "{HEAD}[taint.sinks]\n\"mcp:fs\" = {{ external = \"allow\" }}\n"
        )),
    );
    let wider = child.taint.wider_than(&parent.taint);
    assert_eq!(wider.len(), 1, "{wider:?}");
    assert_eq!(wider[0].0, "taint mcp:fs external");
    assert!(parent.taint.wider_than(&child.taint).is_empty());
}
