//! Capability matching and subsumption: examples of what each kind must
//! allow and refuse, and property tests of the algebra.

use bulwark_policy::{Capability as C, CapabilitySet, Demand as D, WorkspacePath};
use proptest::prelude::*;

fn wp(s: &str) -> WorkspacePath {
    WorkspacePath::parse(s).unwrap()
}

fn fr(p: &str) -> C {
    C::FileRead { path: p.into() }
}

fn net(h: &str) -> C {
    C::NetConnect { host: h.into() }
}

fn sh(v: &[&str]) -> C {
    C::ShellExec {
        argv: v.iter().map(|s| s.to_string()).collect(),
    }
}

fn conn(h: &str, port: u16) -> D {
    D::NetConnect {
        host: h.into(),
        port,
    }
}

fn argv(v: &[&str]) -> D {
    D::ShellExec(v.iter().map(|s| s.to_string()).collect())
}

#[test]
fn file_globs_are_component_aware() {
    assert!(fr("/data/*").covers(&D::FileRead(wp("data/x"))));
    assert!(!fr("/data/*").covers(&D::FileRead(wp("database"))));
    assert!(!fr("/data/*").covers(&D::FileRead(wp("data/x/y"))));
    assert!(fr("data/**").covers(&D::FileRead(wp("data"))));
    assert!(fr("data/**").covers(&D::FileRead(wp("data/x/y"))));
    assert!(!fr("data/**").covers(&D::FileRead(wp("database/x"))));
    // read does not imply write
    assert!(!fr("**").covers(&D::FileWrite(wp("a"))));
    assert!(
        C::FileWrite {
            path: "out/*".into()
        }
        .covers(&D::FileWrite(wp("out/a")))
    );
}

#[test]
fn net_connect_patterns() {
    assert!(net("api.github.com:443").covers(&conn("api.github.com", 443)));
    assert!(!net("api.github.com:443").covers(&conn("api.github.com", 80)));
    assert!(net("API.GitHub.com").covers(&conn("api.github.com", 8443)));
    assert!(net("*.example.com").covers(&conn("example.com", 443)));
    assert!(net("*.example.com").covers(&conn("a.b.example.com", 443)));
    assert!(!net("*.example.com").covers(&conn("evilexample.com", 443)));
    assert!(!net("*.example.com").covers(&conn("example.com.evil.net", 443)));
    assert!(net("*").covers(&conn("10.0.0.1", 1)));
    assert!(net("*:443").covers(&conn("x.y", 443)));
    assert!(!net("*:443").covers(&conn("x.y", 80)));
    assert!(net("[::1]:8080").covers(&conn("::1", 8080)));
    assert!(net("::1").covers(&conn("::1", 1)));
    // One spelling per IPv6 address, whatever the grant or URL wrote.
    assert!(net("[0:0::1]:8080").covers(&conn("::1", 8080)));
    assert!(net("[2001:DB8::1]").covers(&conn("2001:db8:0::1", 443)));
    assert!(net("[::1]:8080").covers(&conn("[::1]", 8080)));
    assert!(!net("[::1]:8080").covers(&conn("::2", 8080)));
    assert!(!net("[::1]:8080").covers(&conn("::1", 8081)));
    for bad in [
        "",
        "http://x.com",
        "a.*.com",
        "x.com:0",
        "x.com:99999",
        "*.",
        "a..b",
        "u@x.com",
        "x.com/path",
    ] {
        assert!(net(bad).validate().is_err(), "{bad:?} accepted");
        assert!(!net(bad).covers(&conn("x.com", 443)));
    }
}

#[test]
fn shell_argv_patterns() {
    assert!(sh(&["git", "status"]).covers(&argv(&["git", "status"])));
    assert!(!sh(&["git", "status"]).covers(&argv(&["git", "status", "-s"])));
    assert!(!sh(&["git", "status"]).covers(&argv(&["git"])));
    assert!(sh(&["git", "*"]).covers(&argv(&["git", "log"])));
    assert!(!sh(&["git", "*"]).covers(&argv(&["git", "log", "-p"])));
    assert!(sh(&["git", "**"]).covers(&argv(&["git"])));
    assert!(sh(&["git", "**"]).covers(&argv(&["git", "log", "-p"])));
    assert!(!sh(&["git", "**"]).covers(&argv(&["gitx"])));
    assert!(sh(&["ls", "-*"]).covers(&argv(&["ls", "-la"])));
    assert!(sh(&["git", "**", "x"]).validate().is_err());
    assert!(sh(&[]).validate().is_err());
    assert!(sh(&["**"]).validate().is_err());
}

#[test]
fn tools_memory_agents_models_numbers() {
    let tool = |d: &str| D::Tool {
        domain: d.into(),
        operation: "op".into(),
    };
    assert!(C::ToolAll.covers(&tool("files")));
    assert!(C::ToolInvoke { tool: "*".into() }.covers(&tool("web")));
    assert!(
        C::ToolInvoke {
            tool: "files".into()
        }
        .covers(&tool("files"))
    );
    assert!(
        !C::ToolInvoke {
            tool: "files".into()
        }
        .covers(&tool("filesx"))
    );
    assert!(C::MemoryRead { scope: "*".into() }.covers(&D::MemoryRead("user".into())));
    assert!(
        !C::MemoryRead {
            scope: "agent".into()
        }
        .covers(&D::MemoryRead("user".into()))
    );
    assert!(!C::MemoryRead { scope: "*".into() }.covers(&D::MemoryWrite("user".into())));
    assert!(
        C::MemoryRead {
            scope: "global".into()
        }
        .validate()
        .is_err()
    );
    assert!(
        C::AgentSpawn {
            agent: "helper-*".into()
        }
        .covers(&D::AgentSpawn("helper-1".into()))
    );
    assert!(
        !C::AgentSpawn {
            agent: "helper-*".into()
        }
        .covers(&D::AgentMessage("helper-1".into()))
    );
    assert!(
        C::LlmQuery {
            model: "anthropic:*".into()
        }
        .covers(&D::LlmQuery("anthropic:claude-x".into()))
    );
    assert!(
        !C::LlmQuery {
            model: "anthropic:*".into()
        }
        .covers(&D::LlmQuery("openai:gpt".into()))
    );
    assert!(C::LlmMaxTokens { max: 100 }.covers(&D::LlmTokens(100)));
    assert!(!C::LlmMaxTokens { max: 100 }.covers(&D::LlmTokens(101)));
    assert!(C::EconSpend { max: 5 }.covers(&D::EconSpend(5)));
    assert!(!C::EconSpend { max: 5 }.covers(&D::EconTransfer(1)));
    assert!(C::EconSpend { max: 5 }.is_subset_of(&C::EconSpend { max: 6 }));
    assert!(!C::EconSpend { max: 7 }.is_subset_of(&C::EconSpend { max: 6 }));
}

#[test]
fn subset_examples() {
    assert!(fr("notes/a.md").is_subset_of(&fr("notes/**")));
    assert!(!fr("notes/**").is_subset_of(&fr("notes/*")));
    assert!(!fr("notes/**").is_subset_of(&C::FileWrite { path: "**".into() }));
    assert!(net("a.example.com:443").is_subset_of(&net("*.example.com")));
    assert!(net("*.a.example.com").is_subset_of(&net("*.example.com")));
    assert!(!net("*.example.com").is_subset_of(&net("example.com")));
    assert!(!net("example.com").is_subset_of(&net("example.com:443")));
    assert!(sh(&["git", "status"]).is_subset_of(&sh(&["git", "**"])));
    assert!(!sh(&["git", "**"]).is_subset_of(&sh(&["git", "*"])));
    assert!(
        C::ToolInvoke {
            tool: "files".into()
        }
        .is_subset_of(&C::ToolAll)
    );
    assert!(C::ToolAll.is_subset_of(&C::ToolInvoke { tool: "*".into() }));
    assert!(!C::ToolAll.is_subset_of(&C::ToolInvoke {
        tool: "files".into()
    }));
    // invalid caps are a subset of nothing
    assert!(!fr("../x").is_subset_of(&fr("**")));
}

#[test]
fn display_forms() {
    assert_eq!(fr("notes/**").to_string(), "file_read notes/**");
    assert_eq!(
        net("api.github.com:443").to_string(),
        "net_connect api.github.com:443"
    );
    assert_eq!(sh(&["echo", "a b"]).to_string(), "shell_exec echo \"a b\"");
    assert_eq!(C::ToolAll.to_string(), "tool_all");
    assert_eq!(
        D::FileRead(WorkspacePath::root()).to_string(),
        "file_read ."
    );
    assert_eq!(conn("::1", 80).to_string(), "net_connect [::1]:80");
}

#[test]
fn serde_shape() {
    let caps: Vec<C> = serde_json::from_str(
        r#"[{"kind":"file_read","path":"a/**"},{"kind":"tool_all"},{"kind":"llm_max_tokens","max":5}]"#,
    )
    .unwrap();
    assert_eq!(caps[0], fr("a/**"));
    assert!(serde_json::from_str::<C>(r#"{"kind":"file_read","path":"a","extra":1}"#).is_err());
    assert!(serde_json::from_str::<C>(r#"{"kind":"file_delete","path":"a"}"#).is_err());
    let set = CapabilitySet::new(caps);
    assert_eq!(set.len(), 3);
    let back: CapabilitySet = serde_json::from_str(&serde_json::to_string(&set).unwrap()).unwrap();
    assert_eq!(back, set);
}

// ---- property tests ----

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("ab".to_string())
    ]
}

fn glob_word() -> impl Strategy<Value = String> {
    prop_oneof![
        word(),
        Just("*".to_string()),
        Just("a*".to_string()),
        Just("?".to_string())
    ]
}

fn file_pattern() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![3 => glob_word(), 1 => Just("**".to_string())],
        1..4,
    )
    .prop_map(|v| v.join("/"))
}

fn host_pattern() -> impl Strategy<Value = String> {
    let host = prop_oneof![
        Just("*".to_string()),
        Just("*.x.com".to_string()),
        Just("*.a.x.com".to_string()),
        Just("x.com".to_string()),
        Just("a.x.com".to_string()),
    ];
    let port = prop_oneof![
        Just(String::new()),
        Just(":443".to_string()),
        Just(":*".to_string()),
        Just(":80".to_string())
    ];
    (host, port).prop_map(|(h, p)| format!("{h}{p}"))
}

fn argv_pattern() -> impl Strategy<Value = Vec<String>> {
    (
        word(),
        prop::collection::vec(glob_word(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(c, mut rest, tail)| {
            rest.insert(0, c);
            if tail {
                rest.push("**".into());
            }
            rest
        })
}

fn cap() -> impl Strategy<Value = C> {
    prop_oneof![
        file_pattern().prop_map(|path| C::FileRead { path }),
        file_pattern().prop_map(|path| C::FileWrite { path }),
        host_pattern().prop_map(|host| C::NetConnect { host }),
        prop_oneof![Just("*"), Just("files"), Just("web")]
            .prop_map(|t| C::ToolInvoke { tool: t.into() }),
        Just(C::ToolAll),
        argv_pattern().prop_map(|argv| C::ShellExec { argv }),
        prop_oneof![Just("agent"), Just("user"), Just("*")]
            .prop_map(|s| C::MemoryRead { scope: s.into() }),
        glob_word().prop_map(|agent| C::AgentSpawn { agent }),
        glob_word().prop_map(|model| C::LlmQuery { model }),
        (1u32..10).prop_map(|max| C::LlmMaxTokens { max }),
        (0u64..10).prop_map(|max| C::EconSpend { max }),
    ]
}

fn demand() -> impl Strategy<Value = D> {
    prop_oneof![
        prop::collection::vec(word(), 0..4).prop_map(|v| D::FileRead(wp(&v.join("/")))),
        prop::collection::vec(word(), 0..4).prop_map(|v| D::FileWrite(wp(&v.join("/")))),
        (
            prop_oneof![
                Just("x.com"),
                Just("a.x.com"),
                Just("b.a.x.com"),
                Just("y.com")
            ],
            prop_oneof![Just(443u16), Just(80u16)]
        )
            .prop_map(|(h, port)| conn(h, port)),
        (prop_oneof![Just("files"), Just("web")], word()).prop_map(|(d, o)| D::Tool {
            domain: d.into(),
            operation: o
        }),
        prop::collection::vec(word(), 1..5).prop_map(D::ShellExec),
        prop_oneof![Just("agent"), Just("user")].prop_map(|s| D::MemoryRead(s.into())),
        word().prop_map(D::AgentSpawn),
        word().prop_map(D::LlmQuery),
        (0u32..12).prop_map(D::LlmTokens),
        (0u64..12).prop_map(D::EconSpend),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// (b) soundness: a ⊆ b and a covers d ⇒ b covers d.
    #[test]
    fn subset_is_sound(a in cap(), b in cap(), d in demand()) {
        if a.is_subset_of(&b) && a.covers(&d) {
            prop_assert!(b.covers(&d), "{} ⊆ {} but only a covers {}", a, b, d);
        }
    }

    /// (c) reflexivity for every valid capability.
    #[test]
    fn subset_is_reflexive(a in cap()) {
        prop_assert!(a.validate().is_ok(), "generator made an invalid cap {}", a);
        prop_assert!(a.is_subset_of(&a));
        let s = CapabilitySet::new(vec![a]);
        prop_assert!(s.is_subset_of(&s));
    }

    /// (d) set subsumption is monotone: shrinking the child or growing the
    /// parent keeps a subset a subset; and a set subsumed by its parent
    /// never permits more.
    #[test]
    fn set_subset_is_monotone(child in prop::collection::vec(cap(), 0..4),
                              parent in prop::collection::vec(cap(), 0..4),
                              extra in cap(), drop in 0usize..4, d in demand()) {
        let c = CapabilitySet::new(child.clone());
        let p = CapabilitySet::new(parent.clone());
        if c.is_subset_of(&p) {
            let mut bigger = parent.clone();
            bigger.push(extra);
            prop_assert!(c.is_subset_of(&CapabilitySet::new(bigger)));
            let mut smaller = child.clone();
            if drop < smaller.len() { smaller.remove(drop); }
            prop_assert!(CapabilitySet::new(smaller).is_subset_of(&p));
            if c.permits(&d) { prop_assert!(p.permits(&d)); }
        }
        prop_assert!(CapabilitySet::default().is_subset_of(&p));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// `llm_query` as a session limit: a model is allowed exactly when
    /// every declaring layer has a pattern that covers it, and another
    /// layer never widens what is allowed.
    #[test]
    fn model_limits_match_every_layer_and_only_narrow(
        layers in prop::collection::vec(prop::collection::vec(glob_word(), 0..3), 0..3),
        extra in prop::collection::vec(glob_word(), 0..3),
        model in word(),
        tokens in 1u32..20,
    ) {
        let caps = |pats: &[String]| -> Vec<C> {
            pats.iter().map(|m| C::LlmQuery { model: m.clone() }).collect()
        };
        let layer_caps: Vec<Vec<C>> = layers.iter().map(|l| caps(l)).collect();
        let limits = bulwark_policy::CallLimits::from_layers(layer_caps.iter().map(Vec::as_slice));
        let expected = layer_caps
            .iter()
            .filter(|l| !l.is_empty())
            .all(|l| l.iter().any(|c| c.covers(&D::LlmQuery(model.clone()))));
        prop_assert_eq!(limits.model_allowed(&model), expected);
        let mut more = layer_caps.clone();
        more.push(caps(&extra));
        let narrower = bulwark_policy::CallLimits::from_layers(more.iter().map(Vec::as_slice));
        prop_assert!(!narrower.model_allowed(&model) || limits.model_allowed(&model));
        prop_assert!(narrower.tokens_for(tokens) <= tokens);
    }
}

/// `kind` names what the door audits in place of a demand's value: it must
/// be the first word of the demand's display form, for every variant.
#[test]
fn demand_kind_is_the_first_word_of_its_display() {
    let path = wp("notes/a.txt");
    let all = [
        D::FileRead(path.clone()),
        D::FileWrite(path),
        D::NetConnect {
            host: "::1".into(),
            port: 443,
        },
        D::Tool {
            domain: "fs".into(),
            operation: "read".into(),
        },
        D::ShellExec(vec!["ls".into(), "-l".into()]),
        D::MemoryRead("agent".into()),
        D::MemoryWrite("user".into()),
        D::AgentSpawn("child".into()),
        D::AgentMessage("child".into()),
        D::AgentKill("child".into()),
        D::LlmQuery("anthropic:claude".into()),
        D::LlmTokens(10),
        D::EconSpend(5),
        D::EconTransfer(5),
    ];
    for demand in all {
        let shown = demand.to_string();
        assert_eq!(
            Some(demand.kind()),
            shown.split_whitespace().next(),
            "{shown}"
        );
    }
}
