//! The spawn check: a child may hold at most its parent's authority. Each
//! way a child could exceed a narrow parent is refused and named; exact
//! copies and strictly narrower children are allowed.

use bulwark_policy::{
    Capability as C, CapabilitySet, CredentialsSection, Demand, EffectivePolicy, GlobalConfig,
    Manifest, ModelRef, PolicyInputs, SpawnGrant, SpawnViolation, ToolCatalog, WorkspacePath,
    compute_effective, parse_manifest, parse_model_ref, spawn_violations,
};
use proptest::prelude::*;

fn catalog() -> ToolCatalog {
    let e = |d: &str, ops: &[&str]| (d.to_string(), ops.iter().map(|s| s.to_string()).collect());
    ToolCatalog::new([
        e("files", &["read", "write", "list"]),
        e("shell", &["exec"]),
        e("web", &["fetch", "search"]),
        e("agents", &["spawn"]),
    ])
}

/// Files read-only, web behind approval, model `script:a`, no shell, one
/// credential grant for api.example.com, may spawn `helper*`.
const PARENT: &str = r#"
[agent]
name = "parent"
model = "script:a"
[tools]
allow = ["files", "web", "agents"]
[tools.operations.files]
allow = ["read", "list"]
[sandbox]
allowed_domains = ["api.example.com:443"]
[[capabilities]]
kind = "file_read"
path = "**"
[[capabilities]]
kind = "agent_spawn"
agent = "helper*"
[credentials.grants.api]
keys = ["API_TOKEN"]
tools = ["web"]
hosts = ["api.example.com"]
inject = [{ header = "Authorization", value = "Bearer ${API_TOKEN}" }]
[approval]
operations = ["web:fetch"]
"#;

/// An agent of its own: the parent's manifest under another name, with
/// `edit` applied to the text.
struct Agent {
    policy: EffectivePolicy,
    model: ModelRef,
    credentials: CredentialsSection,
}

impl Agent {
    fn from_manifest(m: &Manifest) -> Agent {
        let global = GlobalConfig::default();
        let policy = compute_effective(
            &PolicyInputs {
                global: &global,
                manifest: m,
                remote: false,
                user: None,
            },
            &catalog(),
        );
        let model = parse_model_ref(m.agent.model.as_deref().unwrap_or("script:a")).unwrap();
        Agent {
            policy,
            model,
            credentials: m.credentials.clone(),
        }
    }

    fn parse(src: &str) -> Agent {
        Agent::from_manifest(&parse_manifest(src, "agent.toml").unwrap())
    }

    fn grant(&self) -> SpawnGrant<'_> {
        SpawnGrant {
            policy: &self.policy,
            model: &self.model,
            credentials: &self.credentials,
        }
    }
}

fn parent() -> Agent {
    Agent::parse(PARENT)
}

/// The parent's manifest renamed to `name`, then each (from, to) replaced.
fn child(name: &str, edits: &[(&str, &str)]) -> Agent {
    let mut src = PARENT.replace("name = \"parent\"", &format!("name = \"{name}\""));
    for (from, to) in edits {
        assert!(src.contains(from), "edit {from:?} does not apply");
        src = src.replacen(from, to, 1);
    }
    Agent::parse(&src)
}

fn violations(child_name: &str, c: &Agent) -> Vec<SpawnViolation> {
    spawn_violations(&parent().grant(), child_name, &c.grant())
}

fn items(v: &[SpawnViolation]) -> Vec<&str> {
    v.iter().map(|v| v.item.as_str()).collect()
}

#[test]
fn the_narrow_parent_is_what_the_tests_assume() {
    let p = parent();
    assert!(p.policy.check_tool("files", "read").is_ok());
    assert!(p.policy.check_tool("files", "write").is_err());
    assert!(p.policy.check_tool("shell", "exec").is_err());
    assert!(!p.policy.sandbox.shell);
    assert!(p.policy.needs_approval("web", "fetch"));
}

#[test]
fn an_exact_copy_is_allowed() {
    let c = child("helper", &[]);
    assert_eq!(violations("helper", &c), []);
    // And any name the glob covers.
    let c = child("helper-2", &[]);
    assert_eq!(violations("helper-2", &c), []);
}

#[test]
fn a_strictly_narrower_child_is_allowed() {
    let c = child(
        "helper",
        &[
            // Fewer tools: no agents, files list-only.
            (
                "allow = [\"files\", \"web\", \"agents\"]",
                "allow = [\"files\", \"web\"]",
            ),
            ("allow = [\"read\", \"list\"]", "allow = [\"list\"]"),
            // A narrower capability, and no agent_spawn at all.
            ("path = \"**\"", "path = \"docs/**\""),
            (
                "[[capabilities]]\nkind = \"agent_spawn\"\nagent = \"helper*\"\n",
                "",
            ),
            // More approvals: the whole web domain.
            (
                "operations = [\"web:fetch\"]",
                "tools = [\"web\"]\noperations = [\"web:fetch\"]",
            ),
            // The same grant, now behind approval.
            (
                "hosts = [\"api.example.com\"]\n",
                "hosts = [\"api.example.com:443\"]\napproval = \"required\"\n",
            ),
        ],
    );
    assert!(c.policy.check_tool("files", "read").is_err());
    assert!(c.policy.check_tool("agents", "spawn").is_err());
    assert_eq!(violations("helper", &c), []);
}

#[test]
fn a_shell_is_refused() {
    let c = child(
        "helper",
        &[
            (
                "allow = [\"files\", \"web\", \"agents\"]",
                "allow = [\"files\", \"web\", \"agents\", \"shell\"]",
            ),
            ("[sandbox]\n", "[sandbox]\nshell = true\n"),
        ],
    );
    let v = violations("helper", &c);
    assert_eq!(items(&v), ["tool shell:exec", "sandbox.shell"], "{v:?}");
    assert!(v[1].to_string().starts_with("sandbox.shell: "), "{}", v[1]);
    assert!(v[1].why.contains("sandbox.shell = false"), "{}", v[1]);
}

#[test]
fn wider_files_access_is_refused() {
    let c = child(
        "helper",
        &[
            (
                "allow = [\"read\", \"list\"]",
                "allow = [\"read\", \"write\"]",
            ),
            (
                "[[capabilities]]\n",
                "[[capabilities]]\nkind = \"file_write\"\npath = \"**\"\n[[capabilities]]\n",
            ),
        ],
    );
    let v = violations("helper", &c);
    assert_eq!(
        items(&v),
        ["tool files:write", "capability file_write **"],
        "{v:?}"
    );
}

#[test]
fn a_different_model_endpoint_is_refused() {
    let c = child(
        "helper",
        &[("model = \"script:a\"", "model = \"openai:gpt-4o\"")],
    );
    let v = violations("helper", &c);
    assert_eq!(items(&v), ["model openai:gpt-4o"], "{v:?}");
    assert!(
        v[0].why
            .starts_with("a model endpoint the parent was not granted"),
        "{}",
        v[0]
    );
}

#[test]
fn a_model_the_parent_may_query_is_allowed() {
    let with_query = PARENT.replace(
        "[[capabilities]]\n",
        "[[capabilities]]\nkind = \"llm_query\"\nmodel = \"script:*\"\n[[capabilities]]\n",
    );
    let p = Agent::parse(&with_query);
    let src = with_query
        .replace("name = \"parent\"", "name = \"helper\"")
        .replace("model = \"script:a\"", "model = \"script:b\"");
    let c = Agent::parse(&src);
    assert_eq!(spawn_violations(&p.grant(), "helper", &c.grant()), []);
    let other = Agent::parse(&src.replace("script:b", "openai:gpt-4o"));
    let v = spawn_violations(&p.grant(), "helper", &other.grant());
    assert_eq!(items(&v), ["model openai:gpt-4o"], "{v:?}");
}

#[test]
fn a_credential_grant_the_parent_lacks_is_refused() {
    let c = child(
        "helper",
        &[(
            "[approval]",
            "[credentials.grants.github]\nkeys = [\"GITHUB_TOKEN\"]\ntools = [\"web\"]\nhosts = [\"api.github.com\"]\n[approval]",
        )],
    );
    let v = violations("helper", &c);
    assert_eq!(items(&v), ["credential grant github"], "{v:?}");
    assert!(v[0].why.contains("GITHUB_TOKEN"), "{}", v[0]);
}

#[test]
fn a_wider_host_on_an_existing_grant_is_refused() {
    let c = child(
        "helper",
        &[(
            "hosts = [\"api.example.com\"]",
            "hosts = [\"*.example.com\"]",
        )],
    );
    let v = violations("helper", &c);
    assert_eq!(items(&v), ["credential grant api"], "{v:?}");
    assert!(
        v[0].why.contains("host \"*.example.com\" is not within"),
        "{}",
        v[0]
    );
}

#[test]
fn each_other_widening_of_a_grant_is_refused() {
    for (from, to, says) in [
        (
            "keys = [\"API_TOKEN\"]",
            "keys = [\"API_TOKEN\", \"OTHER\"]",
            "keys [\"OTHER\"]",
        ),
        (
            "tools = [\"web\"]",
            "tools = [\"web\", \"files\"]",
            "tools [\"files\"]",
        ),
        (
            "header = \"Authorization\"",
            "header = \"X-Api-Key\"",
            "inject list differs",
        ),
    ] {
        let c = child("helper", &[(from, to)]);
        let v = violations("helper", &c);
        assert_eq!(items(&v), ["credential grant api"], "{to}: {v:?}");
        assert!(v[0].why.contains(says), "{to}: {}", v[0]);
    }
    // A grant behind approval may not be handed on without it.
    let src = PARENT.replace(
        "hosts = [\"api.example.com\"]\n",
        "hosts = [\"api.example.com\"]\napproval = \"required\"\n",
    );
    let p = Agent::parse(&src);
    let c = child("helper", &[]);
    let v = spawn_violations(&p.grant(), "helper", &c.grant());
    assert_eq!(items(&v), ["credential grant api"], "{v:?}");
    assert!(v[0].why.contains("requires approval"), "{}", v[0]);
}

#[test]
fn a_child_without_grants_under_a_strict_parent_is_refused() {
    // No grants = legacy mode, where any secret may go anywhere reachable.
    let c = child(
        "helper",
        &[(
            "[credentials.grants.api]\nkeys = [\"API_TOKEN\"]\ntools = [\"web\"]\nhosts = [\"api.example.com\"]\ninject = [{ header = \"Authorization\", value = \"Bearer ${API_TOKEN}\" }]\n",
            "",
        )],
    );
    let v = violations("helper", &c);
    assert_eq!(items(&v), ["credentials (legacy mode)"], "{v:?}");
}

#[test]
fn a_dropped_approval_is_refused() {
    let c = child(
        "helper",
        &[("operations = [\"web:fetch\"]", "operations = []")],
    );
    let v = violations("helper", &c);
    assert_eq!(items(&v), ["approval web:fetch"], "{v:?}");
    // Moving it to a whole-domain approval keeps it.
    let c = child(
        "helper",
        &[("operations = [\"web:fetch\"]", "tools = [\"web\"]")],
    );
    assert_eq!(violations("helper", &c), []);
}

#[test]
fn a_name_outside_agent_spawn_is_refused() {
    let c = child("other", &[]);
    let v = violations("other", &c);
    assert_eq!(items(&v), ["agent_spawn other"], "{v:?}");
    assert!(v[0].why.contains("agent = \"other\""), "{}", v[0]);
}

#[test]
fn the_spawned_name_must_be_the_agent_that_runs() {
    let c = child("other", &[]);
    let v = violations("helper", &c);
    assert_eq!(items(&v), ["agent other"], "{v:?}");
    // A name no manifest could have is quoted, not echoed raw.
    let v = violations("helper\nforged", &c);
    assert_eq!(
        items(&v),
        ["agent_spawn \"helper\\nforged\"", "agent other"],
        "{v:?}"
    );
}

#[test]
fn all_violations_are_reported_in_a_stable_order() {
    let c = child(
        "other",
        &[
            ("model = \"script:a\"", "model = \"openai:gpt-4o\""),
            (
                "allow = [\"files\", \"web\", \"agents\"]",
                "allow = [\"files\", \"web\", \"agents\", \"shell\"]",
            ),
            ("[sandbox]\n", "[sandbox]\nshell = true\nallow_all = true\n"),
            (
                "hosts = [\"api.example.com\"]",
                "hosts = [\"evil.example.net\"]",
            ),
            ("operations = [\"web:fetch\"]", "operations = []"),
        ],
    );
    let v = violations("other", &c);
    assert_eq!(
        items(&v),
        [
            "agent_spawn other",
            "tool shell:exec",
            "capability net_connect *",
            "sandbox.shell",
            "sandbox.allow_all",
            "model openai:gpt-4o",
            "credential grant api",
            "approval web:fetch",
        ],
        "{v:#?}"
    );
    assert_eq!(violations("other", &c), v);
}

// ---- property: no capability violation => the child permits nothing the
// parent does not ----

fn path_glob() -> impl Strategy<Value = String> {
    let comp = prop::sample::select(vec!["a", "b", "*", "**", "a*", "?", "ab"]);
    (prop::collection::vec(comp, 1..4), any::<bool>()).prop_map(|(comps, rooted)| {
        let p = comps.join("/");
        if rooted { format!("/{p}") } else { p }
    })
}

fn host_glob() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "*",
        "*.example.com",
        "example.com",
        "api.example.com",
        "api.example.com:443",
        "*.api.example.com",
        "*.com",
        "evil.com:80",
        "*:443",
    ])
    .prop_map(str::to_string)
}

fn cap() -> impl Strategy<Value = C> {
    prop_oneof![
        path_glob().prop_map(|path| C::FileRead { path }),
        path_glob().prop_map(|path| C::FileWrite { path }),
        host_glob().prop_map(|host| C::NetConnect { host }),
    ]
}

fn demands() -> Vec<Demand> {
    let mut out = Vec::new();
    for p in [
        "a", "b", "ab", "a/b", "a/a", "b/a", "a/b/c", "ab/b", "c", "x/y/z",
    ] {
        let w = WorkspacePath::parse(p).unwrap();
        out.push(Demand::FileRead(w.clone()));
        out.push(Demand::FileWrite(w));
    }
    for host in [
        "api.example.com",
        "example.com",
        "x.api.example.com",
        "evil.com",
        "com",
    ] {
        for port in [443, 80] {
            out.push(Demand::NetConnect {
                host: host.into(),
                port,
            });
        }
    }
    out
}

fn agent_with(name: &str, caps: Vec<C>) -> Agent {
    let mut m = parse_manifest(&format!("[agent]\nname = \"{name}\"\n"), "agent.toml").unwrap();
    m.capabilities = caps;
    m.capabilities.push(C::AgentSpawn {
        agent: "child".into(),
    });
    Agent::from_manifest(&m)
}

/// A variation of a parent capability: the same, or a near miss that may
/// or may not lie within it. Children built from these exercise the subset
/// logic where it matters (independent random sets rarely nest).
fn vary(c: &C, how: u8) -> C {
    let path = |p: &str| match how % 4 {
        0 => p.to_string(),
        1 => format!("{p}/a"),
        2 => p.replacen("**", "a", 1),
        _ => p.replacen('*', "b", 1),
    };
    match c {
        C::FileRead { path: p } => C::FileRead { path: path(p) },
        C::FileWrite { path: p } => C::FileWrite { path: path(p) },
        C::NetConnect { host } => C::NetConnect {
            host: match how % 4 {
                0 => host.clone(),
                1 => format!("x.{}", host.trim_start_matches("*.")),
                2 => host.replacen('*', "api", 1),
                _ => format!("{}:443", host.split(':').next().unwrap_or(host)),
            },
        },
        other => other.clone(),
    }
}

fn parent_and_child() -> impl Strategy<Value = (Vec<C>, Vec<C>)> {
    prop::collection::vec(cap(), 0..4).prop_flat_map(|parent| {
        let n = parent.len();
        (
            Just(parent),
            prop::collection::vec((any::<bool>(), any::<u8>()), n),
            prop::collection::vec(cap(), 0..2),
        )
            .prop_map(|(parent, picks, extra)| {
                let mut child: Vec<C> = parent
                    .iter()
                    .zip(&picks)
                    .filter(|(_, (keep, _))| *keep)
                    .map(|(c, (_, how))| vary(c, *how))
                    .collect();
                child.extend(extra);
                (parent, child)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn no_capability_violation_means_nothing_more_is_permitted(
        (parent_caps, child_caps) in parent_and_child(),
    ) {
        let p = agent_with("parent", parent_caps);
        let c = agent_with("child", child_caps);
        let v = spawn_violations(&p.grant(), "child", &c.grant());
        let cap_violation = v.iter().any(|v| v.item.starts_with("capability "));
        prop_assert_eq!(
            cap_violation,
            !c.policy.capabilities.is_subset_of(&p.policy.capabilities)
        );
        if !cap_violation {
            for d in demands() {
                if c.policy.capabilities.permits(&d) {
                    prop_assert!(
                        p.policy.capabilities.permits(&d),
                        "child permits {} but parent does not; parent {:?}, child {:?}",
                        d, p.policy.capabilities, c.policy.capabilities
                    );
                }
            }
        }
        // A child identical to its parent (but for its name) always passes.
        let twin = agent_with("child", p.policy.capabilities.iter().cloned().collect());
        let twin_caps: CapabilitySet = twin.policy.capabilities.clone();
        prop_assert!(twin_caps.is_subset_of(&p.policy.capabilities));
        prop_assert_eq!(spawn_violations(&p.grant(), "child", &twin.grant()), vec![]);
    }
}

#[test]
fn a_child_without_the_parents_per_call_limits_is_refused() {
    let limited = PARENT.replace(
        "[[capabilities]]\n",
        "[[capabilities]]\nkind = \"llm_max_tokens\"\nmax = 500\n[[capabilities]]\nkind = \"econ_spend\"\nmax = 9\n[[capabilities]]\n",
    );
    let p = Agent::parse(&limited);
    let renamed = |src: &str| src.replace("name = \"parent\"", "name = \"helper\"");
    // The attack: a child that simply leaves the limits out.
    let c = Agent::parse(&renamed(PARENT));
    let v = spawn_violations(&p.grant(), "helper", &c.grant());
    assert_eq!(
        items(&v),
        ["limit llm_max_tokens", "limit econ_spend"],
        "{v:?}"
    );
    // A wider one.
    let wider = Agent::parse(&renamed(&limited.replace("max = 500", "max = 501")));
    let v = spawn_violations(&p.grant(), "helper", &wider.grant());
    assert!(items(&v).contains(&"limit llm_max_tokens"), "{v:?}");
    // The work: the same limits or tighter ones.
    let same = Agent::parse(&renamed(&limited));
    assert_eq!(spawn_violations(&p.grant(), "helper", &same.grant()), []);
    let tighter = Agent::parse(&renamed(&limited.replace("max = 9", "max = 2")));
    assert_eq!(spawn_violations(&p.grant(), "helper", &tighter.grant()), []);
}
