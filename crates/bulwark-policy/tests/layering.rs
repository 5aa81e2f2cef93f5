//! Policy layering: only the manifest grants, every other layer narrows, and
//! every removal is attributed to its layer and rule.

use bulwark_policy::{
    Capability as C, Demand, DenyReason, GlobalConfig, Layer, Manifest, OpFilter, PolicyInputs,
    ToolCatalog, ToolFilter, UserEntry, WorkspacePath, compute_effective, parse_access,
    parse_global_config, parse_manifest,
};
use proptest::prelude::*;

fn catalog() -> ToolCatalog {
    let e = |d: &str, ops: &[&str]| (d.to_string(), ops.iter().map(|s| s.to_string()).collect());
    ToolCatalog::new([
        e("files", &["read", "write", "list"]),
        e("shell", &["exec"]),
        e("web", &["fetch", "search"]),
        e("memory", &["read", "write"]),
    ])
}

const MANIFEST: &str = r#"
[agent]
name = "worker"
[tools]
allow = ["files", "shell", "web"]
[sandbox]
shell = true
allowed_domains = ["api.github.com:443"]
[[capabilities]]
kind = "file_read"
path = "**"
[[capabilities]]
kind = "file_write"
path = "out/**"
[[capabilities]]
kind = "shell_exec"
argv = ["git", "**"]
"#;

#[test]
fn example_global_denies_web_user_denies_files_write() {
    let m = parse_manifest(MANIFEST, "agent.toml").unwrap();
    let g = parse_global_config("[tools]\ndeny = [\"web\"]\n", "config.toml").unwrap();
    let a = parse_access(
        "[users.alice]\n[users.alice.tools.operations.files]\ndeny = [\"write\"]\n",
        "access.toml",
    )
    .unwrap();
    let mut m = m;
    m.access.mode = bulwark_policy::AccessMode::Public;
    let user = &a.users["alice"];
    let eff = compute_effective(
        &PolicyInputs {
            global: &g,
            manifest: &m,
            remote: false,
            user: Some(("alice", user)),
        },
        &catalog(),
    );
    let report = eff.explain();
    assert!(
        report.contains("- tool web: removed by global config (tools.deny contains \"web\")"),
        "{report}"
    );
    assert!(
        report.contains(
            "- operation files:write: removed by user restrictions (users.alice.tools.operations.files.deny contains \"write\")"
        ),
        "{report}"
    );
    assert_eq!(eff.removed.len(), 2, "{report}");
    assert!(eff.check_tool("files", "read").is_ok());
    assert!(eff.check_tool("shell", "exec").is_ok());
    let d = eff.check_tool("web", "fetch").unwrap_err();
    assert_eq!(d.reason, DenyReason::Tool);
    assert!(d.message.contains("global config"), "{}", d.message);
    let d = eff.check_tool("files", "write").unwrap_err();
    assert_eq!(d.reason, DenyReason::Operation);
    assert_eq!(d.reason.as_str(), "operation");
    assert!(d.message.contains("user restrictions"), "{}", d.message);
    let d = eff.check_tool("memory", "read").unwrap_err();
    assert!(d.message.contains("tools.allow"), "{}", d.message);

    // remote session: shell goes too, attributed to the remote sandbox
    let eff = compute_effective(
        &PolicyInputs {
            global: &g,
            manifest: &m,
            remote: true,
            user: Some(("alice", user)),
        },
        &catalog(),
    );
    let report = eff.explain();
    assert!(
        report.contains("- tool shell: removed by remote sandbox policy (remote.shell = false)"),
        "{report}"
    );
    assert!(
        report.contains("- capability shell_exec git **: removed by remote sandbox policy"),
        "{report}"
    );
    assert!(!eff.sandbox.shell);
    let d = eff
        .check_demand(&Demand::ShellExec(vec!["git".into(), "status".into()]))
        .unwrap_err();
    assert_eq!(d.reason, DenyReason::Capability);
    assert!(d.message.contains("remote sandbox policy"), "{}", d.message);
}

#[test]
fn manifest_allow_absent_or_empty_means_no_tools() {
    let g = GlobalConfig::default();
    for src in [
        "[agent]\nname = \"a\"\n",
        "[agent]\nname = \"a\"\n[tools]\nallow = []\n",
    ] {
        let m = parse_manifest(src, "m").unwrap();
        let eff = compute_effective(
            &PolicyInputs {
                global: &g,
                manifest: &m,
                remote: false,
                user: None,
            },
            &catalog(),
        );
        assert!(eff.tools.is_empty(), "{src}");
        assert!(eff.capabilities.is_empty());
    }
    let m = parse_manifest("[agent]\nname = \"a\"\n[tools]\nallow = [\"*\"]\n", "m").unwrap();
    let eff = compute_effective(
        &PolicyInputs {
            global: &g,
            manifest: &m,
            remote: false,
            user: None,
        },
        &catalog(),
    );
    // "*" is every domain, but the shell still needs sandbox.shell = true
    assert_eq!(
        eff.tools.keys().collect::<Vec<_>>(),
        ["files", "memory", "web"]
    );
    assert!(
        eff.explain()
            .contains("- tool shell: removed by agent manifest (sandbox.shell = false)")
    );
}

#[test]
fn unknown_domains_and_tool_capabilities() {
    let g = GlobalConfig::default();
    let src = "[agent]\nname = \"a\"\n[tools]\nallow = [\"nope\"]\n[[capabilities]]\nkind = \"tool_invoke\"\ntool = \"memory\"\n";
    let m = parse_manifest(src, "m").unwrap();
    let eff = compute_effective(
        &PolicyInputs {
            global: &g,
            manifest: &m,
            remote: false,
            user: None,
        },
        &catalog(),
    );
    assert!(
        eff.explain()
            .contains("- tool nope: removed by agent manifest (unknown tool domain"),
        "{}",
        eff.explain()
    );
    assert!(eff.check_tool("memory", "write").is_ok());
    assert!(
        eff.check_demand(&Demand::Tool {
            domain: "memory".into(),
            operation: "read".into()
        })
        .is_ok()
    );
}

#[test]
fn ceilings_remove_capabilities_and_demands_explain() {
    let m = parse_manifest(MANIFEST, "m").unwrap();
    let g = parse_global_config(
        "capabilities = [{ kind = \"file_read\", path = \"**\" }, { kind = \"net_connect\", host = \"*.github.com\" }, { kind = \"shell_exec\", argv = [\"git\", \"**\"] }]\n",
        "c",
    )
    .unwrap();
    let eff = compute_effective(
        &PolicyInputs {
            global: &g,
            manifest: &m,
            remote: false,
            user: None,
        },
        &catalog(),
    );
    let report = eff.explain();
    assert!(
        report.contains("- capability file_write out/**: removed by global config (not within the global capabilities ceiling)"),
        "{report}"
    );
    let w = Demand::FileWrite(WorkspacePath::parse("out/a").unwrap());
    let d = eff.check_demand(&w).unwrap_err();
    assert!(
        d.message.contains("file_write out/a") && d.message.contains("global config"),
        "{}",
        d.message
    );
    assert!(
        eff.check_demand(&Demand::FileRead(WorkspacePath::parse("x/y").unwrap()))
            .is_ok()
    );
    assert!(
        eff.check_demand(&Demand::NetConnect {
            host: "api.github.com".into(),
            port: 443
        })
        .is_ok()
    );
    assert!(
        eff.check_demand(&Demand::NetConnect {
            host: "api.github.com".into(),
            port: 80
        })
        .is_err()
    );
    assert_eq!(eff.sandbox.allowed_domains, ["api.github.com:443"]);

    // user ceiling narrows further
    let user = UserEntry {
        capabilities: Some(vec![C::FileRead {
            path: "docs/**".into(),
        }]),
        ..Default::default()
    };
    let mut m2 = m.clone();
    m2.access.mode = bulwark_policy::AccessMode::Public;
    let eff = compute_effective(
        &PolicyInputs {
            global: &g,
            manifest: &m2,
            remote: false,
            user: Some(("bob", &user)),
        },
        &catalog(),
    );
    assert!(
        eff.explain()
            .contains("- capability file_read **: removed by user restrictions"),
        "{}",
        eff.explain()
    );
    assert!(eff.sandbox.allowed_domains.is_empty());
}

#[test]
fn private_agent_gives_a_plain_user_nothing() {
    let m = parse_manifest(MANIFEST, "m").unwrap();
    let g = GlobalConfig::default();
    let user = UserEntry::default();
    let eff = compute_effective(
        &PolicyInputs {
            global: &g,
            manifest: &m,
            remote: true,
            user: Some(("eve", &user)),
        },
        &catalog(),
    );
    assert!(eff.tools.is_empty());
    assert!(eff.capabilities.is_empty());
    assert!(
        eff.removed
            .iter()
            .all(|r| r.layer == Layer::User || r.layer == Layer::RemoteSandbox)
    );
    let admin = UserEntry {
        role: bulwark_policy::UserRole::Admin,
        ..Default::default()
    };
    let eff = compute_effective(
        &PolicyInputs {
            global: &g,
            manifest: &m,
            remote: false,
            user: Some(("root", &admin)),
        },
        &catalog(),
    );
    assert!(eff.check_tool("files", "write").is_ok());
}

#[test]
fn operation_allowlists_and_approval() {
    let src = format!(
        "{MANIFEST}\n[tools.operations.files]\nallow = [\"read\", \"list\"]\n[approval]\ntools = [\"shell\"]\noperations = [\"web:fetch\"]\n"
    );
    let m = parse_manifest(&src, "m").unwrap();
    let g = GlobalConfig::default();
    let eff = compute_effective(
        &PolicyInputs {
            global: &g,
            manifest: &m,
            remote: false,
            user: None,
        },
        &catalog(),
    );
    assert!(
        eff.explain().contains("- operation files:write: removed by operation allowlist (tools.operations.files.allow does not list \"write\")"),
        "{}",
        eff.explain()
    );
    assert!(eff.needs_approval("shell", "exec"));
    assert!(eff.needs_approval("web", "fetch"));
    assert!(!eff.needs_approval("web", "search"));
    assert!(!eff.needs_approval("files", "read"));
    assert_eq!(eff.loop_guard, g.loop_guard);
}

// ---- monotonicity: adding a restriction never grows the effective set ----

const DOMAINS: &[&str] = &["files", "shell", "web", "memory", "nope"];
const OPS: &[&str] = &["read", "write", "list", "exec", "fetch", "search"];

fn domain() -> impl Strategy<Value = String> {
    prop::sample::select(DOMAINS).prop_map(str::to_string)
}

fn deny_entry() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => domain(),
        2 => (domain(), prop::sample::select(OPS)).prop_map(|(d, o)| format!("{d}:{o}")),
        1 => Just("*".to_string()),
    ]
}

fn filter() -> impl Strategy<Value = ToolFilter> {
    (
        prop::option::of(prop::collection::vec(
            prop_oneof![5 => domain(), 1 => Just("*".to_string())],
            0..4,
        )),
        prop::collection::vec(deny_entry(), 0..2),
        prop::collection::btree_map(
            domain(),
            (
                prop::option::of(prop::collection::vec(
                    prop::sample::select(OPS).prop_map(str::to_string),
                    0..3,
                )),
                prop::collection::vec(prop::sample::select(OPS).prop_map(str::to_string), 0..2),
            )
                .prop_map(|(allow, deny)| OpFilter { allow, deny }),
            0..2,
        ),
    )
        .prop_map(|(allow, deny, operations)| ToolFilter {
            allow,
            deny,
            operations,
        })
}

fn cap() -> impl Strategy<Value = C> {
    prop_oneof![
        prop::sample::select(&["**", "a/**", "a/*", "b"][..])
            .prop_map(|p| C::FileRead { path: p.into() }),
        prop::sample::select(&["**", "a/**"][..]).prop_map(|p| C::FileWrite { path: p.into() }),
        prop::sample::select(&["*", "*.x.com", "a.x.com:443"][..])
            .prop_map(|h| C::NetConnect { host: h.into() }),
        prop::sample::select(&["*", "files", "memory"][..])
            .prop_map(|t| C::ToolInvoke { tool: t.into() }),
        Just(C::ToolAll),
        Just(C::ShellExec {
            argv: vec!["git".into(), "**".into()]
        }),
        (1u32..5).prop_map(|max| C::LlmMaxTokens { max }),
        (0u64..5).prop_map(|max| C::EconSpend { max }),
        prop::sample::select(&["script:*", "script:a", "openai:*"][..])
            .prop_map(|m| C::LlmQuery { model: m.into() }),
    ]
}

#[derive(Debug, Clone)]
struct World {
    manifest: Manifest,
    global: GlobalConfig,
    user: Option<UserEntry>,
    remote: bool,
}

fn world() -> impl Strategy<Value = World> {
    (
        filter(),
        prop::collection::vec(cap(), 0..4),
        any::<bool>(),
        filter(),
        prop::option::of(prop::collection::vec(cap(), 0..3)),
        filter(),
        any::<bool>(),
        prop::option::of((
            filter(),
            prop::option::of(prop::collection::vec(cap(), 0..3)),
        )),
        any::<bool>(),
    )
        .prop_map(|(mt, mcaps, shell, gt, gcaps, rt, rshell, user, remote)| {
            let mut manifest =
                parse_manifest("[agent]\nname = \"w\"\n[access]\nmode = \"public\"\n", "m")
                    .unwrap();
            manifest.tools = mt;
            manifest.capabilities = mcaps;
            manifest.sandbox.shell = shell;
            let mut global = GlobalConfig {
                tools: gt,
                capabilities: gcaps,
                ..Default::default()
            };
            global.remote.tools = rt;
            global.remote.shell = rshell;
            let user = user.map(|(tools, capabilities)| UserEntry {
                tools,
                capabilities,
                ..Default::default()
            });
            World {
                manifest,
                global,
                user,
                remote,
            }
        })
}

#[derive(Debug, Clone)]
enum Restrict {
    GlobalDeny(String),
    RemoteDeny(String),
    UserDeny(String),
    GlobalAllowDrop(usize),
    GlobalCeiling(Vec<C>),
    UserCeiling(Vec<C>),
    ManifestOpDeny(String, String),
    UserOpDeny(String, String),
    GoRemote,
    RemoteNoShell,
}

fn restrict() -> impl Strategy<Value = Restrict> {
    prop_oneof![
        deny_entry().prop_map(Restrict::GlobalDeny),
        deny_entry().prop_map(Restrict::RemoteDeny),
        deny_entry().prop_map(Restrict::UserDeny),
        (0usize..4).prop_map(Restrict::GlobalAllowDrop),
        prop::collection::vec(cap(), 0..3).prop_map(Restrict::GlobalCeiling),
        prop::collection::vec(cap(), 0..3).prop_map(Restrict::UserCeiling),
        (domain(), prop::sample::select(OPS).prop_map(str::to_string))
            .prop_map(|(d, o)| Restrict::ManifestOpDeny(d, o)),
        (domain(), prop::sample::select(OPS).prop_map(str::to_string))
            .prop_map(|(d, o)| Restrict::UserOpDeny(d, o)),
        Just(Restrict::GoRemote),
        Just(Restrict::RemoteNoShell),
    ]
}

/// Intersect a ceiling: `None` becomes the new list, `Some(old)` keeps only
/// entries also in the new list (so it can only shrink).
/// A narrower ceiling: grants are intersected; per-call limits (which a
/// ceiling imposes rather than grants) are kept and the new ones added;
/// the ceiling's `llm_query` list shrinks but never to nothing (a layer
/// without `llm_query` does not restrict models at all).
fn narrow_ceiling(old: &mut Option<Vec<C>>, new: Vec<C>) {
    let is_limit = |c: &C| matches!(c, C::LlmMaxTokens { .. } | C::EconSpend { .. });
    let is_model = |c: &C| matches!(c, C::LlmQuery { .. });
    *old = Some(match old.take() {
        None => new,
        Some(o) => {
            let limits: Vec<C> = new.iter().filter(|c| is_limit(c)).cloned().collect();
            let old_models: Vec<C> = o.iter().filter(|c| is_model(c)).cloned().collect();
            let mut models: Vec<C> = old_models
                .iter()
                .filter(|c| new.contains(c))
                .cloned()
                .collect();
            if models.is_empty() {
                models = old_models;
            }
            o.into_iter()
                .filter(|c| is_limit(c) || (!is_model(c) && new.contains(c)))
                .chain(limits)
                .chain(models)
                .collect()
        }
    });
}

fn apply(mut w: World, r: Restrict) -> World {
    match r {
        Restrict::GlobalDeny(d) => w.global.tools.deny.push(d),
        Restrict::RemoteDeny(d) => w.global.remote.tools.deny.push(d),
        Restrict::UserDeny(d) => w
            .user
            .get_or_insert_with(UserEntry::default)
            .tools
            .deny
            .push(d),
        Restrict::GlobalAllowDrop(i) => match &mut w.global.tools.allow {
            Some(list) if i < list.len() => {
                list.remove(i);
            }
            Some(_) => {}
            None => {
                w.global.tools.allow = Some(DOMAINS.iter().take(i).map(|s| s.to_string()).collect())
            }
        },
        Restrict::GlobalCeiling(c) => narrow_ceiling(&mut w.global.capabilities, c),
        Restrict::UserCeiling(c) => narrow_ceiling(
            &mut w.user.get_or_insert_with(UserEntry::default).capabilities,
            c,
        ),
        Restrict::ManifestOpDeny(d, o) => w
            .manifest
            .tools
            .operations
            .entry(d)
            .or_default()
            .deny
            .push(o),
        Restrict::UserOpDeny(d, o) => w
            .user
            .get_or_insert_with(UserEntry::default)
            .tools
            .operations
            .entry(d)
            .or_default()
            .deny
            .push(o),
        Restrict::GoRemote => w.remote = true,
        Restrict::RemoteNoShell => w.global.remote.shell = false,
    }
    w
}

fn eff(w: &World) -> bulwark_policy::EffectivePolicy {
    compute_effective(
        &PolicyInputs {
            global: &w.global,
            manifest: &w.manifest,
            remote: w.remote,
            user: w.user.as_ref().map(|u| ("u", u)),
        },
        &catalog(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn restrictions_never_grow_the_effective_set(w in world(), r in restrict()) {
        let before = eff(&w);
        let after = eff(&apply(w.clone(), r.clone()));
        for (d, ops) in &after.tools {
            let old = before.tools.get(d);
            prop_assert!(old.is_some_and(|o| ops.is_subset(o)), "{:?} grew tool {}: {:?} -> {:?}", r, d, old, ops);
        }
        for c in after.capabilities.iter() {
            // A per-call limit a layer adds or lowers is a narrowing.
            let limit_ok = match c {
                C::LlmMaxTokens { max } => before.call_limits.max_tokens.is_none_or(|b| *max <= b),
                C::EconSpend { max } => before.call_limits.max_spend.is_none_or(|b| *max <= b),
                _ => false,
            };
            prop_assert!(limit_ok || before.capabilities.iter().any(|b| b == c), "{:?} grew capability {}", r, c);
        }
        prop_assert!(after.call_limits.wider_than(&before.call_limits).is_empty(), "{:?} lifted a limit", r);
        for model in ["script:a", "script:b", "openai:gpt"] {
            prop_assert!(!after.call_limits.model_allowed(model) || before.call_limits.model_allowed(model), "{:?} allowed {}", r, model);
        }
        prop_assert!(!after.sandbox.shell || before.sandbox.shell);
        prop_assert!(!after.sandbox.allow_all || before.sandbox.allow_all);
        // every allowed (domain, op) passes check_tool; tools never has empty sets
        for (d, ops) in &after.tools {
            prop_assert!(!ops.is_empty());
            for op in ops { prop_assert!(after.check_tool(d, op).is_ok()); }
        }
    }
}

/// The agent manifest with `caps` appended as `[[capabilities]]` tables.
fn with_caps(caps: &str) -> Manifest {
    parse_manifest(&format!("{MANIFEST}{caps}"), "agent.toml").unwrap()
}

fn limits_of(m: &Manifest, global: &str, user: Option<&str>) -> bulwark_policy::EffectivePolicy {
    let g = parse_global_config(global, "config.toml").unwrap();
    let a = user.map(|u| parse_access(&format!("[users.alice]\n{u}"), "access.toml").unwrap());
    let mut m = m.clone();
    m.access.mode = bulwark_policy::AccessMode::Public;
    compute_effective(
        &PolicyInputs {
            global: &g,
            manifest: &m,
            remote: false,
            user: a.as_ref().map(|a| ("alice", &a.users["alice"])),
        },
        &catalog(),
    )
}

#[test]
fn per_call_limits_are_narrowed_by_every_layer_and_never_lifted() {
    let m = with_caps(
        "[[capabilities]]\nkind = \"llm_max_tokens\"\nmax = 5000\n\
         [[capabilities]]\nkind = \"econ_spend\"\nmax = 40\n\
         [[capabilities]]\nkind = \"llm_query\"\nmodel = \"anthropic:*\"\n",
    );
    // The manifest alone.
    let e = limits_of(&m, "", None);
    assert_eq!(e.call_limits.max_tokens, Some(5000));
    assert_eq!(e.call_limits.max_spend, Some(40));
    assert!(e.call_limits.model_allowed("anthropic:claude-x"));
    assert!(!e.call_limits.model_allowed("openai:gpt-4o"));
    assert_eq!(e.call_limits.tokens_for(8000), 5000);
    assert_eq!(e.call_limits.tokens_for(100), 100);

    // A global ceiling that does not mention the limits leaves them: it
    // cannot lift a limit by leaving it out.
    let e = limits_of(
        &m,
        "[[capabilities]]\nkind = \"file_read\"\npath = \"**\"\n",
        None,
    );
    assert_eq!(e.call_limits.max_tokens, Some(5000));
    assert_eq!(e.call_limits.max_spend, Some(40));
    assert!(!e.call_limits.model_allowed("openai:gpt-4o"));
    assert!(e.capabilities.permits(&Demand::LlmTokens(5000)));

    // A tighter global ceiling and a tighter user ceiling lower them.
    let e = limits_of(
        &m,
        "[[capabilities]]\nkind = \"llm_max_tokens\"\nmax = 1000\n\
         [[capabilities]]\nkind = \"llm_query\"\nmodel = \"*:claude-*\"\n",
        Some("[[users.alice.capabilities]]\nkind = \"econ_spend\"\nmax = 7\n"),
    );
    assert_eq!(e.call_limits.max_tokens, Some(1000));
    assert_eq!(e.call_limits.max_spend, Some(7));
    assert!(e.call_limits.model_allowed("anthropic:claude-x"));
    assert!(!e.call_limits.model_allowed("anthropic:haiku"));
    assert!(!e.capabilities.permits(&Demand::LlmTokens(1001)));
    assert!(e.capabilities.permits(&Demand::LlmTokens(1000)));
    assert!(
        e.explain().contains("max_tokens per model call: 1000"),
        "{}",
        e.explain()
    );

    // A manifest without limits gets the ceiling's.
    let plain = with_caps("");
    let e = limits_of(
        &plain,
        "[[capabilities]]\nkind = \"llm_max_tokens\"\nmax = 300\n",
        None,
    );
    assert_eq!(e.call_limits.max_tokens, Some(300));
    // And none at all: no limit, any configured model.
    let e = limits_of(&plain, "", None);
    assert_eq!(e.call_limits, bulwark_policy::CallLimits::default());
    assert!(e.call_limits.model_allowed("openai:gpt-4o"));
    assert!(e.call_limits.spend_allowed(u64::MAX));
}
