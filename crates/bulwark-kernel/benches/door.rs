//! Per-call overhead of the door on a no-op tool: lookup, loop guard, policy
//! checks, context scoping, audit record and result shaping. Measured with the
//! SQLite audit sink (what `run` uses: records are queued and committed in
//! batches by a writer thread), with a flush after every call (the
//! synchronous worst case), and with an in-memory sink (the door alone).

// A benchmark or diagnostic is a test: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bulwark_audit::{AuditSink, MemorySink};
use bulwark_kernel::{
    AgentSetup, Door, Home, PreApproved, Session, SessionIdentity, ToolCall, ToolContext,
    ToolError, ToolLimits, ToolOutput, ToolRegistry, ToolSpec, TypedTool, build_session,
};
use bulwark_policy::{Demand, GlobalConfig, PolicyInputs, compute_effective, parse_manifest};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::sync::Arc;

struct Noop {
    spec: ToolSpec,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[async_trait::async_trait]
impl TypedTool for Noop {
    type Args = NoArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, _args: &NoArgs) -> Result<Vec<Demand>, ToolError> {
        Ok(Vec::new())
    }
    async fn call(&self, _ctx: &ToolContext, _args: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
    fn example_args(&self) -> Value {
        json!({})
    }
}

const MANIFEST: &str = r#"
[agent]
name = "bench"
[tools]
allow = ["noop"]
[loop_guard]
warn_threshold = 4000000000
block_threshold = 4000000000
outcome_repeat_block = 4000000000
ping_pong_cycles = 4000000000
max_tool_calls = 4000000000
"#;

/// The effective policy of a manifest, as a session would get it.
fn effective(manifest: &str, registry: &ToolRegistry) -> bulwark_policy::EffectivePolicy {
    let manifest = parse_manifest(manifest, "bench.toml").expect("manifest");
    let global = GlobalConfig::default();
    compute_effective(
        &PolicyInputs {
            global: &global,
            manifest: &manifest,
            remote: false,
            user: None,
        },
        &registry.catalog(),
    )
}

fn bench_session(home: &std::path::Path, policy: &bulwark_policy::EffectivePolicy) -> Session {
    let identity = SessionIdentity {
        id: "bench".into(),
        agent: "bench".into(),
        user: "local".into(),
    };
    build_session(
        &Home::new(home),
        identity,
        Arc::new(policy.clone()),
        ToolLimits::default(),
        None,
        &AgentSetup::default(),
    )
    .expect("session")
}

fn bench_door(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = ToolRegistry::builtin();
    registry.register(Arc::new(Noop {
        spec: ToolSpec::fixed("noop", "noop", "call", "does nothing"),
    }));
    let policy = effective(MANIFEST, &registry);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let store = bulwark_store::Store::open(&dir.path().join("bench.db")).expect("store");
    let sinks: [(&str, Arc<dyn AuditSink>); 2] = [
        ("sqlite_audit", Arc::new(store.audit_sink())),
        ("memory_audit", Arc::new(MemorySink::new())),
    ];
    for (label, sink) in sinks {
        let door = Door::new(registry.clone(), sink, Arc::new(PreApproved::default()));
        let mut session = bench_session(dir.path(), &policy);
        let input = json!({"n": 1});
        c.bench_function(&format!("door/noop/{label}"), |b| {
            b.iter(|| {
                runtime.block_on(door.dispatch(
                    &mut session,
                    ToolCall {
                        id: "c",
                        name: "noop",
                        input: &input,
                    },
                ))
            })
        });
        // Drain the backlog outside any measurement.
        let _ = door.audit().flush();
        // The worst case: a durability barrier after every single call (the
        // agent loop flushes once per model step, not per call).
        c.bench_function(&format!("door/noop/{label}_flush_each"), |b| {
            b.iter(|| {
                let result = runtime.block_on(door.dispatch(
                    &mut session,
                    ToolCall {
                        id: "c",
                        name: "noop",
                        input: &input,
                    },
                ));
                let _ = door.audit().flush();
                result
            })
        });
    }
}

const FILES_MANIFEST: &str = r#"
[agent]
name = "bench"
[tools]
allow = ["files"]
[[capabilities]]
kind = "file_read"
path = "docs/**"
[[capabilities]]
kind = "file_write"
path = "out/**"
[loop_guard]
warn_threshold = 4000000000
block_threshold = 4000000000
outcome_repeat_block = 4000000000
ping_pong_cycles = 4000000000
max_tool_calls = 4000000000
"#;

/// A whole `file_read`/`file_write` through the door: the capability check,
/// the resolution of the path one component at a time and the grant check
/// on the path reached, the read or write itself, and the audit record.
fn bench_file_tools(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = ToolRegistry::builtin();
    let policy = effective(FILES_MANIFEST, &registry);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let door = Door::new(
        registry,
        Arc::new(MemorySink::new()),
        Arc::new(PreApproved::default()),
    );
    let mut session = bench_session(dir.path(), &policy);
    let root = session.resources().workspace.root().to_path_buf();
    std::fs::create_dir_all(root.join("docs/a/b/c")).expect("mkdir");
    std::fs::write(root.join("docs/a/b/c/notes.txt"), "x".repeat(1024)).expect("write");
    std::os::unix::fs::symlink("a/b", root.join("docs/link")).expect("symlink");
    let cases = [
        (
            "file_read/4_components",
            "file_read",
            json!({"path": "docs/a/b/c/notes.txt"}),
        ),
        (
            "file_read/through_symlink",
            "file_read",
            json!({"path": "docs/link/c/notes.txt"}),
        ),
        (
            "file_write/3_components",
            "file_write",
            json!({"path": "out/a/new.txt", "content": "y"}),
        ),
    ];
    for (label, tool, input) in cases {
        c.bench_function(&format!("door/{label}"), |b| {
            b.iter(|| {
                runtime.block_on(door.dispatch(
                    &mut session,
                    ToolCall {
                        id: "c",
                        name: tool,
                        input: &input,
                    },
                ))
            })
        });
    }
}

/// A sink that does nothing: the door's work around a `shell` call.
struct SinkNoop {
    spec: ToolSpec,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct SinkArgs {
    #[allow(dead_code)]
    text: String,
}

#[async_trait::async_trait]
impl TypedTool for SinkNoop {
    type Args = SinkArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn demands(&self, _args: &SinkArgs) -> Result<Vec<Demand>, ToolError> {
        Ok(Vec::new())
    }
    async fn call(&self, _ctx: &ToolContext, _args: SinkArgs) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
    fn example_args(&self) -> Value {
        json!({"text": ""})
    }
}

const TAINT_MANIFEST: &str = r#"
[agent]
name = "bench"
[tools]
allow = ["shell"]
[sandbox]
shell = true
[taint]
mode = "MODE"
[loop_guard]
warn_threshold = 4000000000
block_threshold = 4000000000
outcome_repeat_block = 4000000000
ping_pong_cycles = 4000000000
max_tool_calls = 4000000000
"#;

/// Words of the untrusted text.
const PAGE_WORDS: [&str; 16] = [
    "alpha", "bravo", "curl", "delta", "https://", "echo", "foxtrot", "golf", "|", "sh", "hotel",
    "india", "--yes", "juliet", "kilo", "lima",
];
/// Words of the arguments a user typed: none is in the page.
const USER_WORDS: [&str; 16] = [
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
    "./build",
    "--release",
];

/// Deterministic word salad: text a search cannot shortcut.
fn salad(words: &[&str; 16], bytes: usize, seed: u64) -> String {
    let mut state = seed;
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        out.push_str(words[(state >> 60) as usize]);
        out.push(' ');
    }
    out.truncate(bytes);
    out
}

/// Taint checks on a `shell` sink with 64 KiB of untrusted text in the
/// session: value mode with arguments that copy none of it (clean: no
/// question) or a run of it (tainted: asked, approved once), against
/// session mode (every call asked). The approver answers at once, so the
/// numbers are the door's work: the value search, the taint and approval
/// records, the result.
fn bench_taint(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = ToolRegistry::builtin();
    registry.register(Arc::new(SinkNoop {
        spec: ToolSpec::fixed("shell_noop", "shell", "exec", "a sink that does nothing"),
    }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let approver = Arc::new(PreApproved::parse(&["shell".to_string()]).expect("rule"));
    let untrusted = salad(&PAGE_WORDS, 64 * 1024, 7);
    let labels = std::collections::BTreeSet::from([bulwark_policy::TaintLabel::External]);
    let mut group = c.benchmark_group("taint");
    for mode in ["value", "session"] {
        let policy = effective(&TAINT_MANIFEST.replace("MODE", mode), &registry);
        let door = Door::new(
            registry.clone(),
            Arc::new(MemorySink::new()),
            approver.clone(),
        );
        let mut session = bench_session(dir.path(), &policy);
        session.add_untrusted_text(&untrusted, &labels, "seed");
        for size in [256usize, 4096] {
            let start = untrusted.len() / 3;
            let copied = untrusted[start..start + size].to_string();
            let cases = [("clean", salad(&USER_WORDS, size, 99)), ("tainted", copied)];
            for (kind, text) in cases {
                let input = json!({ "text": text });
                if mode == "value" {
                    // The value search alone: the door's own overhead is
                    // the dispatch above minus this.
                    let untrusted = &session.state().untrusted;
                    group.bench_function(format!("find_only/{kind}/{size}B"), |b| {
                        b.iter(|| untrusted.find(&input))
                    });
                }
                let name = format!("{mode}/{kind}/{size}B");
                group.bench_function(&name, |b| {
                    b.iter(|| {
                        runtime.block_on(door.dispatch(
                            &mut session,
                            ToolCall {
                                id: "c",
                                name: "shell_noop",
                                input: &input,
                            },
                        ))
                    })
                });
            }
        }
    }
    group.finish();
}

/// What the kernel does before every model call for a constraining driver
/// (`path_choices`): walk the workspace and check each entry against the
/// grants, for 10 and 1,000 files (in 10 and 50 directories).
fn bench_path_choices(c: &mut Criterion) {
    let registry = ToolRegistry::builtin();
    let policy = effective(FILES_MANIFEST, &registry);
    let offered = registry.definitions_for(&policy);
    for (files, dirs) in [(10usize, 2usize), (1_000, 50)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let session = bench_session(dir.path(), &policy);
        let root = session.resources().workspace.root().to_path_buf();
        for i in 0..files {
            let sub = root.join(format!("docs/d{}", i % dirs));
            std::fs::create_dir_all(&sub).expect("mkdir");
            std::fs::write(sub.join(format!("file-{i}.txt")), "x").expect("write");
        }
        c.bench_function(&format!("path_choices/{files}_files"), |b| {
            b.iter(|| {
                bulwark_kernel::path_choices_with(
                    &registry,
                    &offered,
                    &policy,
                    &session.resources().workspace,
                    &bulwark_kernel::WalkBounds::default(),
                )
            })
        });
    }
}

criterion_group!(
    benches,
    bench_door,
    bench_file_tools,
    bench_taint,
    bench_path_choices
);
criterion_main!(benches);
