//! `[taint]`: safe defaults, manifest overrides that take effect exactly
//! where they say, located refusals, `policy explain`'s table, and spawn
//! narrowing of the rules.

use std::collections::BTreeSet;

use bulwark_policy::{
    ConfigError, DEFAULT_SINKS, GlobalConfig, MCP_SINK_ROW, Manifest, PolicyInputs, SinkRule,
    TaintLabel, TaintMode, TaintPolicy, TaintSection, ToolCatalog, WorkspaceTrust,
    compute_effective, parse_manifest,
};

const HEAD: &str = "[agent]\nname = \"a\"\n";

fn manifest(taint: &str) -> Manifest {
    parse_manifest(&format!("{HEAD}{taint}"), "agents/a/agent.toml").unwrap()
}

fn policy(taint: &str) -> TaintPolicy {
    TaintPolicy::from_section(&manifest(taint).taint).unwrap()
}

fn err(taint: &str) -> ConfigError {
    match parse_manifest(&format!("{HEAD}{taint}"), "agents/a/agent.toml") {
        Ok(m) => panic!("accepted: {:?}", m.taint),
        Err(e) => e,
    }
}

fn labels(ls: &[TaintLabel]) -> BTreeSet<TaintLabel> {
    ls.iter().copied().collect()
}

use TaintLabel::{External, Memory, Peer, Process, Unknown, Workspace};

/// Operations of the built-in tools with no side effect untrusted text
/// could steer (the kernel's `tools/`): never sinks by default.
const NOT_SINKS: [(&str, &str); 11] = [
    ("files", "read"),
    ("files", "list"),
    ("files", "search"),
    ("memory", "read"),
    ("memory", "list"),
    ("agents", "recall"),
    ("agents", "list"),
    ("credits", "balance"),
    ("time", "now"),
    // Near misses are not sinks: names match exactly.
    ("credit", "transfer"),
    ("agent", "fund"),
];

/// The side-effecting operations of the built-in tools.
const SINK_CALLS: [(&str, &str); 9] = [
    ("shell", "exec"),
    ("files", "write"),
    ("files", "edit"),
    ("memory", "write"),
    ("web", "fetch"),
    ("agents", "message"),
    ("agents", "spawn"),
    ("agents", "fund"),
    ("credits", "transfer"),
];

#[test]
fn defaults_ask_for_every_untrusted_label_at_every_side_effect() {
    let p = TaintPolicy::default();
    assert_eq!(p.mode, TaintMode::Session);
    assert_eq!(p.workspace, WorkspaceTrust::Trusted);
    assert!(p.scanner_raises);
    assert_eq!(
        p.rules.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        DEFAULT_SINKS.into_iter().collect()
    );
    for (domain, op) in SINK_CALLS {
        for label in [External, Peer, Unknown] {
            let d = p.decide_call(domain, op, &labels(&[label])).unwrap();
            assert_eq!(
                (d.label, d.rule),
                (label, SinkRule::Approve),
                "{domain}:{op}"
            );
        }
        // Trusted provenance flows freely; so does a clean session.
        assert_eq!(
            p.decide_call(domain, op, &labels(&[Workspace, Memory, Process])),
            None,
            "{domain}:{op}"
        );
        assert_eq!(p.decide_call(domain, op, &labels(&[])), None);
    }
    for (domain, op) in NOT_SINKS {
        assert_eq!(p.sink(domain, op), None, "{domain}:{op}");
    }
    // A manifest without [taint] gets exactly the defaults.
    assert_eq!(policy(""), p);
    assert_eq!(manifest("").taint, TaintSection::default());
}

#[test]
fn a_manifest_loosens_and_tightens_label_by_label() {
    let p = policy(
        r#"
[taint]
mode = "value"
workspace = "untrusted"
scanner_raises = false
[taint.sinks]
shell = { external = "allow" }          # the operator's explicit choice
"web:fetch" = { peer = "deny" }
"memory:write" = { memory = "approve" } # a trusted label may be named too
"#,
    );
    assert_eq!(p.mode, TaintMode::Value);
    assert_eq!(p.workspace, WorkspaceTrust::Untrusted);
    assert!(!p.scanner_raises);
    let decide =
        |d: &str, o: &str, l: TaintLabel| p.decide_call(d, o, &labels(&[l])).map(|d| d.rule);
    assert_eq!(decide("shell", "exec", External), None);
    // Only the label named changed.
    assert_eq!(decide("shell", "exec", Peer), Some(SinkRule::Approve));
    assert_eq!(decide("shell", "exec", Unknown), Some(SinkRule::Approve));
    assert_eq!(decide("web", "fetch", Peer), Some(SinkRule::Deny));
    assert_eq!(decide("web", "fetch", External), Some(SinkRule::Approve));
    assert_eq!(decide("memory", "write", Memory), Some(SinkRule::Approve));
    assert_eq!(decide("files", "write", Memory), None);
    // The strictest label decides, and is named.
    let d = p
        .decide_call("web", "fetch", &labels(&[External, Peer, Workspace]))
        .unwrap();
    assert_eq!(
        (d.sink.as_str(), d.label, d.rule),
        ("web:fetch", Peer, SinkRule::Deny)
    );
}

#[test]
fn a_domain_rule_tightens_every_operation_and_custom_domains_are_sinks() {
    let p = policy(
        r#"
[taint.sinks]
files = { external = "deny" }
"dojo:send_money" = { external = "deny", peer = "approve" }
mcp = { unknown = "approve" }
"#,
    );
    let rule = |d: &str, o: &str| {
        p.decide_call(d, o, &labels(&[External]))
            .map(|d| (d.sink, d.rule))
    };
    // The operation's own entry (approve) and the domain's (deny) both
    // apply: the stricter wins.
    assert_eq!(
        rule("files", "write"),
        Some(("files:write".into(), SinkRule::Deny))
    );
    assert_eq!(
        rule("files", "edit"),
        Some(("files:edit".into(), SinkRule::Deny))
    );
    assert_eq!(
        rule("files", "read"),
        Some(("files".into(), SinkRule::Deny))
    );
    assert_eq!(
        rule("dojo", "send_money"),
        Some(("dojo:send_money".into(), SinkRule::Deny))
    );
    assert_eq!(rule("dojo", "get_balance"), None);
    assert_eq!(p.sink("mcp", "anything").as_deref(), Some("mcp"));
    assert_eq!(
        p.decide_call("mcp", "x", &labels(&[Unknown]))
            .map(|d| d.rule),
        Some(SinkRule::Approve)
    );
}

#[test]
fn a_deliberate_exception_under_a_domain_rule_is_accepted() {
    // Files may be read from a tainted session, but writing still asks.
    let p = policy(
        r#"
[taint.sinks]
files = { external = "allow" }
"files:write" = { external = "approve" }
"files:edit" = { external = "deny" }
"#,
    );
    assert_eq!(p.rule("files:edit", External), SinkRule::Deny);
    assert_eq!(p.rule("files:write", External), SinkRule::Approve);
    assert_eq!(p.rule("files", External), SinkRule::Allow);
}

/// Each refusal is located at its line, names the field, and says what
/// would be accepted.
#[test]
fn bad_taint_sections_are_refused_at_their_line() {
    let cases: &[(&str, usize, &str, &[&str])] = &[
        (
            "[taint.sinks]\nshell = { externl = \"allow\" }\n",
            4,
            "taint.sinks.shell.externl",
            &[
                "unknown taint label \"externl\"",
                "external, peer, unknown and mcp",
            ],
        ),
        (
            "[taint.sinks]\nshell = { external = \"ask\" }\n",
            4,
            "taint.sinks.shell.external",
            &["unknown sink rule \"ask\"", "\"approve\""],
        ),
        (
            "[taint]\nmode = \"strict\"\n",
            4,
            "taint.mode",
            &["`session` or `value`"],
        ),
        (
            "[taint]\nworkspace = \"yes\"\n",
            4,
            "taint.workspace",
            &["`trusted` or `untrusted`"],
        ),
        (
            "[taint]\nscanner_raises = \"on\"\n",
            4,
            "taint.scanner_raises",
            &["bool"],
        ),
        (
            "[taint]\nmod = \"value\"\n",
            4,
            "taint.mod",
            &["unknown field `mod`"],
        ),
        (
            "[taint.sinks]\n\"files:*\" = { external = \"deny\" }\n",
            4,
            "taint.sinks.files:*",
            &["not a sink name", "write the domain alone"],
        ),
        (
            "\n[taint.sinks.Shell]\nexternal = \"deny\"\n",
            4,
            "taint.sinks.Shell",
            &["not a sink name", "lowercase"],
        ),
        (
            "[taint.sinks]\n\"shell:exec\" = { external = \"allow\" }\n",
            4,
            "taint.sinks.shell:exec.external",
            &[
                "has no effect",
                "domain-wide rule \"shell\"",
                "change [taint.sinks] \"shell\"",
            ],
        ),
        (
            "[taint.sinks]\nfiles = { external = \"allow\" }\n",
            4,
            "taint.sinks.files.external",
            &["does not reach files:", "add \"files:"],
        ),
    ];
    for (src, line, field, says) in cases {
        let e = err(src);
        assert_eq!(e.line, *line, "{src}: {e}");
        assert_eq!(e.field.as_deref(), Some(*field), "{src}: {e}");
        assert_eq!(e.origin, "agents/a/agent.toml");
        for s in *says {
            assert!(e.message.contains(s), "{src}: {e} lacks {s:?}");
        }
    }
    for bad in [
        "",
        ":",
        "files:",
        ":write",
        "a:b:c",
        "files write",
        "fi/les",
        "shell\n",
        "ш",
    ] {
        let section = TaintSection {
            sinks: [(bad.to_string(), Default::default())].into(),
            ..TaintSection::default()
        };
        let e = TaintPolicy::from_section(&section).unwrap_err();
        assert!(e.to_string().contains("is not a sink name"), "{bad:?}: {e}");
        // The infallible path used after validation keeps the defaults.
        assert_eq!(TaintPolicy::compile(&section), TaintPolicy::default());
    }
}

#[test]
fn explain_prints_mode_trust_and_the_rules_marking_what_the_manifest_changed() {
    let m = manifest(
        r#"
[taint]
workspace = "untrusted"
[taint.sinks]
shell = { external = "allow" }
"dojo:send_money" = { external = "deny" }
"#,
    );
    let global = GlobalConfig::default();
    let catalog = ToolCatalog::new([("time".to_string(), vec!["now".to_string()])]);
    let eff = compute_effective(
        &PolicyInputs {
            global: &global,
            manifest: &m,
            remote: false,
            user: None,
        },
        &catalog,
    );
    let report = eff.explain();
    let lines: Vec<&str> = report.lines().collect();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.trim_start().starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in\n{report}"))
    };
    assert!(at("taint: session mode") < at("tools:"), "{report}");
    assert!(
        report.contains("workspace files without provenance: untrusted"),
        "{report}"
    );
    let row = |sink: &str| {
        lines[at(&format!("{sink} "))]
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(row("sink"), ["sink", "external", "peer", "unknown", "mcp"]);
    assert_eq!(
        row("shell"),
        [
            "shell",
            "allow",
            "approve",
            "approve",
            "approve",
            "(changed",
            "by",
            "the",
            "manifest)"
        ]
    );
    assert_eq!(
        row("web:fetch"),
        ["web:fetch", "approve", "approve", "approve", "approve"]
    );
    assert_eq!(
        row("dojo:send_money"),
        [
            "dojo:send_money",
            "deny",
            "allow",
            "allow",
            "allow",
            "(added",
            "by",
            "the",
            "manifest)"
        ]
    );
}

/// `explain` and the README's table both show exactly the defaults.
#[test]
fn the_default_table_is_what_explain_prints_and_the_readme_shows() {
    let text = TaintPolicy::default().explain();
    assert!(!text.contains("manifest"), "{text}");
    for sink in DEFAULT_SINKS {
        assert!(text.contains(&format!("  {sink} ")), "{sink}: {text}");
    }
    let readme = include_str!("../../../README.md");
    let section = readme
        .split("### Taint: labels, sinks and rules")
        .nth(1)
        .and_then(|s| s.split("\n#").next())
        .unwrap();
    // One column per untrusted label, in the order explain prints them.
    let header: Vec<String> = TaintLabel::ALL
        .into_iter()
        .filter(|l| l.is_untrusted())
        .map(|l| format!("`{}`", l.name()))
        .collect();
    assert!(
        section.contains(&format!("| sink | reaching it | {} |", header.join(" | "))),
        "{section}"
    );
    let approves = format!("|{}", " approve |".repeat(header.len()));
    let mut listed = BTreeSet::new();
    for row in section.lines().filter(|l| l.ends_with(&approves)) {
        let first = row.split('|').nth(1).unwrap();
        listed.extend(
            first
                .split(',')
                .map(|s| s.trim().trim_matches('`').to_string()),
        );
    }
    assert_eq!(
        listed,
        DEFAULT_SINKS
            .iter()
            .chain([&MCP_SINK_ROW])
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>()
    );
    assert!(
        text.lines().any(|l| l.split_whitespace().eq([
            MCP_SINK_ROW,
            "approve",
            "approve",
            "approve",
            "approve"
        ])),
        "{text}"
    );
}

mod props {
    use super::*;
    use bulwark_policy::SinkRules;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn label() -> impl Strategy<Value = TaintLabel> {
        prop::sample::select(TaintLabel::ALL.to_vec())
    }

    fn rule() -> impl Strategy<Value = SinkRule> {
        prop::sample::select(vec![SinkRule::Allow, SinkRule::Approve, SinkRule::Deny])
    }

    /// Mostly names that overlap the defaults (so overrides interact with
    /// them), sometimes anything at all.
    fn sink_name() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => prop::sample::select(vec![
                "shell", "shell:exec", "files", "files:write", "files:edit", "files:read",
                "web:fetch", "agents", "agents:message", "dojo", "dojo:send_money",
            ])
            .prop_map(str::to_string),
            1 => "[a-z0-9_:*A-Z -]{0,12}",
            1 => "\\PC{0,8}",
        ]
    }

    fn rules() -> impl Strategy<Value = SinkRules> {
        prop::collection::btree_map(
            sink_name(),
            prop::collection::btree_map(label(), rule(), 0..4),
            0..6,
        )
    }

    fn section() -> impl Strategy<Value = TaintSection> {
        (
            prop::sample::select(vec![TaintMode::Session, TaintMode::Value]),
            prop::sample::select(vec![WorkspaceTrust::Trusted, WorkspaceTrust::Untrusted]),
            rules(),
            prop::option::of(any::<bool>()),
        )
            .prop_map(|(mode, workspace, sinks, scanner_raises)| TaintSection {
                mode,
                workspace,
                sinks,
                scanner_raises,
            })
    }

    fn label_set() -> impl Strategy<Value = BTreeSet<TaintLabel>> {
        prop::collection::btree_set(label(), 0..7)
    }

    #[derive(serde::Serialize)]
    struct Doc<'a> {
        taint: &'a TaintSection,
    }

    proptest! {
        /// Adding labels never lowers the rule a call meets.
        #[test]
        fn decide_is_monotone(s in section(), sink in sink_name(), a in label_set(), b in label_set()) {
            let p = TaintPolicy::compile(&s);
            let rule = |ls: &BTreeSet<TaintLabel>| p.decide(&sink, ls).map_or(SinkRule::Allow, |d| d.rule);
            let both: BTreeSet<TaintLabel> = a.union(&b).copied().collect();
            prop_assert!(rule(&both) >= rule(&a));
            prop_assert!(rule(&both) >= rule(&b));
            // And the decision is exactly the strictest single label's rule.
            let single = a.iter().map(|l| p.rule(&sink, *l)).max().unwrap_or(SinkRule::Allow);
            prop_assert_eq!(rule(&a), single);
        }

        /// Never panics; what it accepts takes effect exactly as written,
        /// and the infallible path compiles it the same.
        #[test]
        fn from_section_accepts_only_rules_that_take_effect(s in section()) {
            let Ok(p) = TaintPolicy::from_section(&s) else { return Ok(()); };
            prop_assert_eq!(&p, &TaintPolicy::compile(&s));
            prop_assert_eq!(p.scanner_raises, s.scanner_raises.unwrap_or(true));
            for (sink, labels) in &s.sinks {
                for (&l, &r) in labels {
                    prop_assert_eq!(p.rule(sink, l), r, "{} {:?}", sink, l);
                    if sink.contains(':') { continue; }
                    for op_sink in p.rules.keys().filter(|k| k.starts_with(&format!("{sink}:"))) {
                        let written = s.sinks.get(op_sink).and_then(|m| m.get(&l));
                        if written.is_none() {
                            prop_assert_eq!(p.rule(op_sink, l), r, "{} reaches {}", sink, op_sink);
                        }
                    }
                }
            }
            // A policy is never looser than itself.
            prop_assert!(p.wider_than(&p).is_empty());
        }

        /// A rule map round-trips through TOML, and a manifest carrying it
        /// is accepted exactly when `from_section` accepts it.
        #[test]
        fn sections_round_trip_through_toml(s in section()) {
            let text = toml::to_string(&Doc { taint: &s }).unwrap();
            let parsed = parse_manifest(&format!("{HEAD}{text}"), "agent.toml");
            match TaintPolicy::from_section(&s) {
                Ok(_) => prop_assert_eq!(&parsed.unwrap().taint, &s, "{}", text),
                Err(_) => {
                    let e = parsed.unwrap_err();
                    prop_assert!(e.field.as_deref().is_some_and(|f| f.starts_with("taint.sinks.")), "{}", e);
                }
            }
            let back: BTreeMap<String, TaintSection> =
                toml::from_str(&text).unwrap();
            prop_assert_eq!(back.get("taint"), Some(&s));
        }

        /// Raising any rule of a child never makes a spawn violation.
        #[test]
        fn a_stricter_child_is_never_wider(s in section(), extra in rules()) {
            let parent = TaintPolicy::compile(&s);
            let mut child = parent.clone();
            for (sink, labels) in extra {
                let entry = child.rules.entry(sink).or_default();
                for (l, r) in labels {
                    let old = entry.get(&l).copied().unwrap_or_default();
                    entry.insert(l, old.max(r));
                }
            }
            prop_assert!(child.wider_than(&parent).is_empty());
        }
    }
}
