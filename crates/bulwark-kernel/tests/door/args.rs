//! Typed tool arguments: each tool's schema is derived from its argument
//! struct, is in the subset the providers and the local grammar take, and
//! its example parses; malformed arguments are refused once, before any
//! approval, naming the field, and audited as `invalid_args`.

use super::call;
use crate::common::*;
use bulwark_audit::{Action, Decision, MemorySink, Reason};
use bulwark_kernel::{ApprovalAnswer, ApprovalRequest, Approver, ToolRegistry};
use bulwark_llm::ToolDef;
use bulwark_llm::local::grammar::tool_grammar;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Keywords the local grammar understands or may ignore (annotations and
/// limits the tool itself enforces). `$ref`, `$defs`, `allOf`, `not` and
/// the like would make it fall back to a generic value.
const KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "description",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "maxProperties",
];

/// Every key of every (sub)schema is in [`KEYWORDS`]; returns the path of
/// the first one that is not.
fn unsupported(schema: &Value, at: &str) -> Option<String> {
    let Value::Object(map) = schema else {
        return None;
    };
    for (key, value) in map {
        if !KEYWORDS.contains(&key.as_str()) {
            return Some(format!("{at}/{key}"));
        }
        let nested = match key.as_str() {
            "properties" => value
                .as_object()
                .into_iter()
                .flatten()
                .find_map(|(name, sub)| unsupported(sub, &format!("{at}/properties/{name}"))),
            "items" | "additionalProperties" => unsupported(value, &format!("{at}/{key}")),
            "anyOf" | "oneOf" => value
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .find_map(|(i, sub)| unsupported(sub, &format!("{at}/{key}/{i}"))),
            _ => None,
        };
        if nested.is_some() {
            return nested;
        }
    }
    None
}

fn definitions(registry: &ToolRegistry) -> Vec<ToolDef> {
    let all = policy(
        registry,
        "[agent]\nname = \"tester\"\n[tools]\nallow = [\"*\"]\n[sandbox]\nshell = true\n",
    );
    registry.definitions_for(&all)
}

#[test]
fn every_schema_is_a_closed_object_in_the_supported_subset() {
    let registry = ToolRegistry::builtin();
    let defs = definitions(&registry);
    assert_eq!(defs.len(), registry.iter().count(), "every tool is offered");
    for def in &defs {
        let schema = &def.input_schema;
        assert_eq!(schema["type"], "object", "{}: {schema}", def.name);
        assert_eq!(
            schema["additionalProperties"],
            json!(false),
            "{}: unknown keys must be refused by the schema too: {schema}",
            def.name
        );
        assert!(
            schema.get("properties").is_some_and(Value::is_object),
            "{}: {schema}",
            def.name
        );
        if let Some(at) = unsupported(schema, "") {
            panic!(
                "{}: `{at}` is outside the supported subset: {schema}",
                def.name
            );
        }
        // Every required property is declared.
        for name in schema["required"].as_array().into_iter().flatten() {
            let name = name.as_str().unwrap();
            assert!(
                schema["properties"].get(name).is_some(),
                "{}: required `{name}` is not declared",
                def.name
            );
        }
    }
}

#[test]
fn the_local_grammar_understands_every_schema() {
    let registry = ToolRegistry::builtin();
    let defs = definitions(&registry);
    tool_grammar(&defs, 4).expect("one grammar for all the tools");
    for def in &defs {
        let grammar = tool_grammar(std::slice::from_ref(def), 1).expect("grammar");
        // `json-value` is the fallback for a schema the generator did not
        // understand: no generated rule may need it.
        let generated: Vec<&str> = grammar
            .lines()
            .filter(|l| !l.starts_with("json-") && !l.starts_with("text ::="))
            .collect();
        assert!(
            generated.iter().all(|l| !l.contains("json-value")),
            "{}: part of the schema fell back to a generic value:\n{}",
            def.name,
            generated.join("\n")
        );
    }
}

#[test]
fn every_example_parses_against_its_struct() {
    let registry = ToolRegistry::builtin();
    for tool in registry.iter() {
        let parsed = tool.parse(&tool.example_args());
        assert!(parsed.is_ok(), "{}: {:?}", tool.spec().name, parsed.err());
        // And every property the schema declares is a key the struct takes.
        let schema = tool.input_schema();
        for key in schema["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            let mut args = tool.example_args();
            args[key.as_str()] = json!(12345);
            let err = tool.parse(&args).err().map(|e| e.to_string());
            assert!(
                !err.as_deref().unwrap_or("").contains("unknown field"),
                "{}: `{key}` is in the schema but not taken: {err:?}",
                tool.spec().name
            );
        }
    }
}

#[test]
fn malformed_arguments_name_the_field_and_what_was_expected() {
    let registry = ToolRegistry::builtin();
    let tool = |name: &str| registry.get(name).expect(name).clone();
    let message = |name: &str, args: Value| match tool(name).parse(&args) {
        Ok(_) => panic!("{name} accepted {args}"),
        Err(err) => {
            assert_eq!(err.reason(), "invalid_args", "{name} {args}: {err}");
            err.to_string()
        }
    };
    let cases: &[(&str, Value, &[&str])] = &[
        (
            "file_read",
            json!({"path": 5}),
            &["`path`", "expected a string"],
        ),
        ("file_read", json!({}), &["missing field `path`"]),
        (
            "file_write",
            json!({"path": "a", "content": "x", "mode": "0777"}),
            &["unknown field `mode`", "`path`", "`content`"],
        ),
        (
            "file_read",
            json!(["notes.txt"]),
            &["must be a JSON object"],
        ),
        (
            "shell_exec",
            json!({"argv": ["ls", 7]}),
            &["`argv[1]`", "expected a string"],
        ),
        ("shell_exec", json!({"argv": []}), &["`argv`", "1 to 256"]),
        (
            "file_edit",
            json!({"path": "a", "old": "", "new": "b"}),
            &["`old`", "must not be empty"],
        ),
        (
            "file_search",
            json!({"query": "x", "max_results": 501}),
            &["`max_results`", "1..=500"],
        ),
        (
            "memory_read",
            json!({"scope": "team", "key": "k"}),
            &["`scope`", "`agent`", "`user`"],
        ),
        (
            "memory_write",
            json!({"scope": "agent", "key": "../x", "content": ""}),
            &["`key`", "1-64"],
        ),
        (
            "transfer_credits",
            json!({"to": "agent:x", "amount": 0}),
            &["`amount`", "positive integer"],
        ),
        (
            "transfer_credits",
            json!({"to": "agent:x", "amount": "10"}),
            &["`amount`", "positive integer"],
        ),
        (
            "fund_child",
            json!({"child": "nobody", "amount": 1}),
            &["`child`", "not a child id"],
        ),
        (
            "web_fetch",
            json!({"url": "https://a/", "headers": {"x": 1}}),
            &["`headers.x`", "expected a string"],
        ),
        (
            "time_now",
            json!({"zone": "UTC"}),
            &["unknown field `zone`"],
        ),
    ];
    for (name, args, wanted) in cases {
        let text = message(name, args.clone());
        for w in *wanted {
            assert!(text.contains(w), "{name} {args}: {text:?} lacks {w:?}");
        }
    }
}

/// Counts the approvals it is asked for and allows them.
#[derive(Default)]
struct Counting(AtomicUsize);

#[async_trait::async_trait]
impl Approver for Counting {
    async fn ask(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
        self.0.fetch_add(1, Ordering::SeqCst);
        ApprovalAnswer::AllowOnce
    }
}

/// Arguments are checked completely before anyone is asked to approve the
/// call: a human is never asked about a call that cannot run. (An empty
/// `old` was refused only by `call`, after the approval.)
#[tokio::test]
async fn arguments_are_refused_before_approval_and_audited_as_invalid_args() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let manifest = r#"
[agent]
name = "tester"
[tools]
allow = ["files"]
[approval]
tools = ["files"]
[[capabilities]]
kind = "file_read"
path = "**"
[[capabilities]]
kind = "file_write"
path = "**"
"#;
    let sink = Arc::new(MemorySink::new());
    let approver = Arc::new(Counting::default());
    let door = door(registry.clone(), sink.clone(), approver.clone());
    let mut s = session(dir.path(), policy(&registry, manifest));
    for args in [
        json!({"path": "notes.txt", "old": "", "new": "b"}),
        json!({"path": "notes.txt", "old": "a", "new": "b", "replace_all": "yes"}),
    ] {
        let r = call(&door, &mut s, "file_edit", args.clone()).await;
        assert_eq!(
            (r.decision, r.reason.as_str()),
            (Decision::Failed, "invalid_args"),
            "{args}: {}",
            r.content
        );
    }
    assert_eq!(approver.0.load(Ordering::SeqCst), 0, "nobody was asked");
    let records = sink.records();
    assert_eq!(records.len(), 2);
    assert!(
        records
            .iter()
            .all(|r| r.action == Action::ToolCall && r.reason == Reason::InvalidArgs),
        "{records:?}"
    );
    // Well-formed arguments still reach the approver.
    std::fs::write(s.resources().workspace.root().join("notes.txt"), "a").unwrap();
    let r = call(
        &door,
        &mut s,
        "file_edit",
        json!({"path": "notes.txt", "old": "a", "new": "b"}),
    )
    .await;
    assert_eq!(r.decision, Decision::Allowed, "{}", r.content);
    assert_eq!(approver.0.load(Ordering::SeqCst), 1);
}

/// A refused path is still a `path` denial, not malformed arguments.
#[tokio::test]
async fn a_refused_path_keeps_its_own_class() {
    let registry = ToolRegistry::builtin();
    for (name, args) in [
        ("file_read", json!({"path": "../etc/passwd"})),
        ("file_read", json!({"path": "."})),
        ("file_list", json!({"path": "/etc"})),
        ("file_search", json!({"query": "x", "path": "a/../../b"})),
    ] {
        let err = registry.get(name).unwrap().parse(&args).err();
        assert_eq!(
            err.as_ref().map(|e| e.reason()),
            Some("path"),
            "{name} {args}: {err:?}"
        );
    }
}
