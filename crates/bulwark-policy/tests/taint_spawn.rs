//! Spawn narrowing of `[taint]`: a child's rules must be at least as strict
//! as its parent's, per sink and label, and in mode, workspace trust and
//! the scanner's effect; each excess is named.

use bulwark_policy::{
    CredentialsSection, EffectivePolicy, GlobalConfig, ModelRef, PolicyInputs, SpawnGrant,
    ToolCatalog, compute_effective, parse_manifest, parse_model_ref, spawn_violations,
};

fn effective(name: &str, taint: &str) -> EffectivePolicy {
    let src = format!(
        "[agent]\nname = \"{name}\"\nmodel = \"script:a\"\n[tools]\nallow = [\"time\"]\n[[capabilities]]\nkind = \"agent_spawn\"\nagent = \"child\"\n{taint}"
    );
    let m = parse_manifest(&src, "agent.toml").unwrap();
    let global = GlobalConfig::default();
    compute_effective(
        &PolicyInputs {
            global: &global,
            manifest: &m,
            remote: false,
            user: None,
        },
        &ToolCatalog::new([("time".to_string(), vec!["now".to_string()])]),
    )
}

/// The violations of spawning a child with `child` under a parent with
/// `parent` (both `[taint]` text; otherwise the same agent).
fn violations(parent: &str, child: &str) -> Vec<(String, String)> {
    let model: ModelRef = parse_model_ref("script:a").unwrap();
    let creds = CredentialsSection::default();
    let (p, c) = (effective("parent", parent), effective("child", child));
    let grant = |policy| SpawnGrant {
        policy,
        model: &model,
        credentials: &creds,
    };
    spawn_violations(&grant(&p), "child", &grant(&c))
        .into_iter()
        .map(|v| (v.item, v.why))
        .collect()
}

fn items(parent: &str, child: &str) -> Vec<String> {
    violations(parent, child)
        .into_iter()
        .map(|(i, _)| i)
        .collect()
}

const STRICT: &str = r#"
[taint]
workspace = "untrusted"
[taint.sinks]
shell = { external = "deny" }
files = { peer = "deny" }
"dojo:send_money" = { external = "approve" }
"#;

#[test]
fn equal_or_stricter_children_are_allowed() {
    assert_eq!(items("", ""), Vec::<String>::new());
    assert_eq!(items(STRICT, STRICT), Vec::<String>::new());
    // Stricter everywhere: deny over approve, a trusted label named, a
    // domain rule covering an operation rule, session over value mode.
    let stricter = r#"
[taint]
workspace = "untrusted"
[taint.sinks]
shell = { external = "deny", peer = "deny", memory = "approve" }
files = { peer = "deny", external = "deny" }
dojo = { external = "deny" }
"#;
    assert_eq!(items(STRICT, stricter), Vec::<String>::new());
    assert_eq!(
        items("[taint]\nmode = \"value\"\n", ""),
        Vec::<String>::new()
    );
    assert_eq!(
        items("[taint]\nscanner_raises = false\n", ""),
        Vec::<String>::new()
    );
}

#[test]
fn a_looser_rule_is_refused_naming_sink_and_label() {
    let v = violations("", "[taint.sinks]\nshell = { external = \"allow\" }\n");
    assert_eq!(v.len(), 1, "{v:?}");
    let (item, why) = &v[0];
    assert_eq!(item, "taint shell external");
    assert!(why.contains("agent parent"), "{why}");
    assert!(
        why.contains("\"approve\"") && why.contains("\"allow\""),
        "{why}"
    );
    assert!(
        why.contains("\"shell\" = { external = \"approve\" }"),
        "{why}"
    );

    // A sink only the parent has, and a trusted label only it names.
    assert_eq!(
        items(
            "[taint.sinks]\n\"dojo:send_money\" = { external = \"deny\", memory = \"approve\" }\n",
            ""
        ),
        [
            "taint dojo:send_money external",
            "taint dojo:send_money memory"
        ]
    );
    // The parent's domain rule reaches every operation; the child's lower
    // operation rules do not make up for a missing domain rule.
    assert_eq!(
        items(
            "[taint.sinks]\nfiles = { peer = \"deny\" }\n",
            "[taint.sinks]\n\"files:write\" = { peer = \"deny\" }\n\"files:edit\" = { peer = \"deny\" }\n"
        ),
        ["taint files peer"]
    );
    // The child loosened what the parent tightened.
    assert_eq!(
        items(
            STRICT,
            "[taint]\nworkspace = \"untrusted\"\n[taint.sinks]\nfiles = { peer = \"deny\" }\n\"dojo:send_money\" = { external = \"approve\" }\n"
        ),
        ["taint shell external"]
    );
}

#[test]
fn looser_mode_workspace_and_scanner_are_refused() {
    assert_eq!(items("", "[taint]\nmode = \"value\"\n"), ["taint.mode"]);
    assert_eq!(
        items("[taint]\nworkspace = \"untrusted\"\n", ""),
        ["taint.workspace"]
    );
    assert_eq!(
        items("", "[taint]\nscanner_raises = false\n"),
        ["taint.scanner_raises"]
    );
    let all = violations(
        "[taint]\nworkspace = \"untrusted\"\n",
        "[taint]\nmode = \"value\"\nscanner_raises = false\n[taint.sinks]\n\"agents:message\" = { peer = \"allow\", unknown = \"allow\" }\n",
    );
    let names: Vec<&str> = all.iter().map(|(i, _)| i.as_str()).collect();
    assert_eq!(
        names,
        [
            "taint.mode",
            "taint.workspace",
            "taint.scanner_raises",
            "taint agents:message peer",
            "taint agents:message unknown"
        ]
    );
    for (item, why) in &all {
        assert!(why.contains("child's manifest"), "{item}: {why}");
    }
}
