//! Property tests of the tool-call grammar generator against an independent
//! GBNF checker (no llama.cpp needed; `local_model.rs` repeats the core of
//! this against llama.cpp's own grammar engine with the real model).
//!
//! For any tool set from the schema family in `support/schemas.rs`: the
//! grammar parses, every rule it references exists, a call to each offered
//! tool with a schema-valid value is accepted (alone and in runs up to the
//! per-turn limit), a call naming any other tool is rejected, and text is
//! text.

#[path = "support/gbnf.rs"]
mod gbnf;
#[path = "support/schemas.rs"]
pub(crate) mod schemas;

use bulwark_llm::ToolDef;
use bulwark_llm::local::grammar::{call_grammar, text_grammar, tool_grammar};
use gbnf::Grammar;
use proptest::prelude::*;
use schemas::{bare_call_text, call_text};
use serde_json::json;

fn compile(tools: &[ToolDef], max_calls: usize) -> Grammar {
    let text = tool_grammar(tools, max_calls).expect("grammar");
    Grammar::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn valid_calls_are_accepted_and_others_refused(
        tools in schemas::tools(),
        max_calls in 1usize..4,
        stranger in "[a-z_]{1,12}",
    ) {
        let defs: Vec<ToolDef> = tools.iter().map(|(t, _)| t.clone()).collect();
        let grammar = compile(&defs, max_calls);
        for (tool, value) in &tools {
            let call = call_text(&tool.name, value);
            prop_assert!(grammar.accepts(&call), "refused a valid call:\n{call}\nschema: {}", tool.input_schema);
            let bare = bare_call_text(&tool.name, value);
            prop_assert!(grammar.accepts(&bare), "refused a valid bare call:\n{bare}");
        }
        // Several calls in one turn, up to the limit and not beyond.
        let (first, value) = &tools[0];
        let one = call_text(&first.name, value);
        let mixed: Vec<String> = (0..max_calls)
            .map(|i| if i % 2 == 0 { one.clone() } else { bare_call_text(&first.name, value) })
            .collect();
        let run = mixed.join("\n");
        prop_assert!(grammar.accepts(&run));
        let over = vec![one.clone(); max_calls + 1].join("\n");
        prop_assert!(!grammar.accepts(&over));
        // A tool not offered, with arguments that would fit an offered one.
        if !defs.iter().any(|t| t.name == stranger) {
            let forged = call_text(&stranger, value);
            prop_assert!(!grammar.accepts(&forged), "accepted a call to `{stranger}`");
            let forged = bare_call_text(&stranger, value);
            prop_assert!(!grammar.accepts(&forged), "accepted a bare call to `{stranger}`");
        }
        // Calls must be exact: no leading whitespace, no missing tag.
        // With a call required, the same calls and no text.
        let calls_only = Grammar::parse(&call_grammar(&defs, max_calls).expect("grammar"))
            .unwrap_or_else(|e| panic!("{e}"));
        prop_assert!(calls_only.accepts(&one));
        prop_assert!(calls_only.accepts(&run));
        prop_assert!(!calls_only.accepts("I will not call anything."));
        let indented = format!("\n{one}");
        prop_assert!(!grammar.accepts(&indented));
        let unclosed = one.replace("</tool_call>", "");
        prop_assert!(!grammar.accepts(&unclosed));
    }

    #[test]
    fn text_is_accepted_when_it_cannot_pass_for_a_call(text in "\\PC{1,40}") {
        let tools = vec![ToolDef {
            name: "file_read".into(),
            description: String::new(),
            input_schema: json!({"properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }];
        let grammar = compile(&tools, 1);
        let plain = Grammar::parse(&text_grammar()).expect("text grammar");
        let first = text.chars().next().unwrap_or(' ');
        let expected = !matches!(first, '<' | '{' | '[' | '`' | ' ' | '\t' | '\n' | '\r') && !text.contains('\0');
        prop_assert_eq!(grammar.accepts(&text), expected || grammar_call(&text));
        prop_assert_eq!(plain.accepts(&text), expected);
    }
}

/// Whether `text` happens to be a well-formed call (practically never for
/// random text, but the property must be exact).
fn grammar_call(text: &str) -> bool {
    text.starts_with("<tool_call>\n{\"name\": \"file_read\"")
        || text.starts_with("{\"name\": \"file_read\"")
}

fn file_read() -> Vec<ToolDef> {
    vec![ToolDef {
        name: "file_read".into(),
        description: String::new(),
        input_schema: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["path"],
        }),
    }]
}

#[test]
fn arguments_are_typed() {
    let grammar = compile(&file_read(), 1);
    let call = |args: &str| {
        format!("<tool_call>\n{{\"name\": \"file_read\", \"arguments\": {args}}}\n</tool_call>")
    };
    for good in [
        r#"{"path": "notes.txt"}"#,
        r#"{"limit": 3, "path": "a \"b\" \\ \u00e9"}"#,
        r#"{"limit": -10, "path": ""}"#,
    ] {
        assert!(grammar.accepts(&call(good)), "{good}");
    }
    for bad in [
        r#"{}"#,
        r#"{"path": 5}"#,
        r#"{"path": "a", "extra": 1}"#,
        r#"{"limit": 1.5, "path": "a"}"#,
        r#"{"path": "a", "limit": 3}"#,
        r#"{"path":"a"}"#,
        r#"{"path": "line
break"}"#,
        r#"[]"#,
    ] {
        assert!(!grammar.accepts(&call(bad)), "{bad}");
    }
}

#[test]
fn the_text_grammar_refuses_every_call() {
    let plain = Grammar::parse(&text_grammar()).expect("text grammar");
    assert!(plain.accepts("The launch code name is BLUE HERON."));
    assert!(!plain.accepts(
        "<tool_call>\n{\"name\": \"file_read\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>"
    ));
    assert!(!plain.accepts(""));
    assert!(!plain.accepts(" leading space"));
    assert!(!plain.accepts("{\"name\": \"file_read\", \"arguments\": {}}"));
    assert!(!plain.accepts("[1, 2]"));
    assert!(plain.accepts("a {json} [list] <tag>"));
}

// ---- Path arguments: what the kernel lists is all the model can name ----

use bulwark_llm::local::grammar::{
    MAX_GRAMMAR_BYTES, call_grammar_with_paths, tool_grammar_with_paths,
};
use bulwark_llm::{AllowedPaths, PathArgumentChoices, PathChoices, PathKind};

/// The file tools' schemas, as the kernel derives them.
fn file_tools() -> Vec<ToolDef> {
    let tool = |name: &str, schema: serde_json::Value| ToolDef {
        name: name.into(),
        description: String::new(),
        input_schema: schema,
    };
    vec![
        tool(
            "file_read",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        ),
        tool(
            "file_list",
            json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        ),
        tool(
            "file_write",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
        ),
        tool("time_now", json!({"type": "object", "properties": {}})),
    ]
}

fn choice(tool: &str, kind: PathKind, allowed: AllowedPaths) -> PathArgumentChoices {
    PathArgumentChoices {
        tool: tool.into(),
        argument: "path".into(),
        kind,
        reads_only: tool == "file_read" || tool == "file_list",
        allowed,
    }
}

fn listed(paths: &[&str]) -> AllowedPaths {
    AllowedPaths::Listed(paths.iter().map(|p| (*p).to_owned()).collect())
}

fn with_paths(tools: &[ToolDef], paths: &PathChoices) -> Grammar {
    let text = tool_grammar_with_paths(tools, paths, 1).expect("grammar");
    Grammar::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn read(path: &str) -> String {
    call_text("file_read", &json!({"path": path}))
}

fn list(path: &str) -> String {
    call_text("file_list", &json!({"path": path}))
}

fn write(path: &str) -> String {
    call_text("file_write", &json!({"path": path, "content": "x"}))
}

const FILES: &[&str] = &["notes.txt", "data/b.csv", "data/c.csv", "we\"ird \\ ü.txt"];

fn workspace_choices() -> PathChoices {
    PathChoices {
        arguments: vec![
            choice("file_read", PathKind::File, listed(FILES)),
            choice("file_list", PathKind::Directory, listed(&["", "data"])),
            choice("file_write", PathKind::File, AllowedPaths::Relative),
        ],
    }
}

#[test]
fn listed_paths_are_the_only_ones_a_read_can_name() {
    let grammar = with_paths(&file_tools(), &workspace_choices());
    for path in FILES {
        assert!(grammar.accepts(&read(path)), "{path}");
        assert!(grammar.accepts(&bare_call_text("file_read", &json!({"path": path}))));
    }
    for attack in [
        "other.txt",
        "/etc/passwd",
        "../x",
        "../notes.txt",
        "./notes.txt",
        "file:///etc/passwd",
        "workspace:///",
        "workspace:///notes.txt",
        "data",
        "data/",
        "",
        "data/b.cs",
        "data/b.csvx",
        "notes.txt/",
        "Notes.txt",
        "data\\b.csv",
    ] {
        assert!(
            !grammar.accepts(&read(attack)),
            "file_read accepted {attack:?}"
        );
    }
    // Directories: the root (written or left out) and `data`, nothing else.
    assert!(grammar.accepts(&call_text("file_list", &json!({}))));
    assert!(grammar.accepts(&list("")));
    assert!(grammar.accepts(&list("data")));
    for attack in [
        "notes.txt",
        "data/b.csv",
        "workspace:///",
        "/",
        ".",
        "..",
        "/tmp",
    ] {
        assert!(
            !grammar.accepts(&list(attack)),
            "file_list accepted {attack:?}"
        );
    }
    // The other tools keep their shape.
    assert!(grammar.accepts(&call_text("time_now", &json!({}))));
}

#[test]
fn write_targets_are_plain_relative_paths() {
    let grammar = with_paths(&file_tools(), &workspace_choices());
    for good in [
        "out.txt",
        "notes.txt",
        "out/new-file_2.md",
        "a/b/c/d.tar.gz",
        "x+y",
        "report..v2",
    ] {
        assert!(grammar.accepts(&write(good)), "{good}");
    }
    for attack in [
        "",
        "/etc/passwd",
        "../x",
        "a/../../x",
        "./x",
        "a/./b",
        ".",
        "..",
        ".env",
        "a/.git/config",
        "a//b",
        "a/",
        "file:///etc/passwd",
        "c:x",
        "a\\b",
        "-rf",
        "a b",
        "é.txt",
        "a\nb",
    ] {
        assert!(
            !grammar.accepts(&write(attack)),
            "file_write accepted {attack:?}"
        );
    }
}

#[test]
fn nothing_to_offer_takes_the_call_away_but_never_the_answer() {
    let tools = file_tools();
    let empty = PathChoices {
        arguments: vec![
            choice("file_read", PathKind::File, listed(&[])),
            choice("file_list", PathKind::Directory, listed(&[])),
            choice("file_write", PathKind::File, listed(&[])),
        ],
    };
    let grammar = with_paths(&tools, &empty);
    assert!(!grammar.accepts(&read("notes.txt")));
    assert!(!grammar.accepts(&write("notes.txt")));
    assert!(!grammar.accepts(&list("")));
    // Leaving out an optional directory names the root, which is not
    // offered either; other tools unchanged.
    assert!(!grammar.accepts(&call_text("file_list", &json!({}))));
    assert!(grammar.accepts(&call_text("time_now", &json!({}))));
    assert!(grammar.accepts("There are no files."));

    // With no callable tool, even a required call leaves only text.
    let reads_only = &tools[..1];
    let text = call_grammar_with_paths(reads_only, &empty, 2).expect("total");
    assert_eq!(text, text_grammar());
    let grammar = Grammar::parse(&text).unwrap();
    assert!(grammar.accepts("The workspace is empty."));
    assert!(!grammar.accepts(&read("notes.txt")));
}

#[test]
fn an_optional_directory_is_left_out_only_when_the_root_is_offered() {
    let tools = file_tools();
    let without_root = PathChoices {
        arguments: vec![choice("file_list", PathKind::Directory, listed(&["data"]))],
    };
    let grammar = with_paths(&tools, &without_root);
    assert!(grammar.accepts(&list("data")));
    assert!(!grammar.accepts(&list("")));
    assert!(!grammar.accepts(&call_text("file_list", &json!({}))));
    let with_root = PathChoices {
        arguments: vec![choice(
            "file_list",
            PathKind::Directory,
            listed(&["", "data"]),
        )],
    };
    let grammar = with_paths(&tools, &with_root);
    assert!(grammar.accepts(&list("")));
    assert!(grammar.accepts(&call_text("file_list", &json!({}))));
}

#[test]
fn choices_for_unknown_tools_or_arguments_change_nothing() {
    let tools = file_tools();
    let stray = PathChoices {
        arguments: vec![
            choice("nope", PathKind::File, listed(&[])),
            PathArgumentChoices {
                tool: "time_now".into(),
                argument: "zone".into(),
                kind: PathKind::File,
                reads_only: true,
                allowed: listed(&[]),
            },
        ],
    };
    assert_eq!(
        tool_grammar_with_paths(&tools, &stray, 1).unwrap(),
        tool_grammar(&tools, 1).unwrap()
    );
}

#[test]
fn a_listing_too_large_for_the_grammar_becomes_the_relative_pattern() {
    let many: Vec<String> = (0..20_000)
        .map(|i| format!("some/rather/long/directory/name/file-{i:05}.txt"))
        .collect();
    let paths = PathChoices {
        arguments: vec![choice(
            "file_read",
            PathKind::File,
            AllowedPaths::Listed(many.clone()),
        )],
    };
    let text = tool_grammar_with_paths(&file_tools(), &paths, 1).unwrap();
    assert!(text.len() < MAX_GRAMMAR_BYTES, "{}", text.len());
    assert!(text.contains("path-rel"), "fell back");
    let grammar = Grammar::parse(&text).unwrap();
    assert!(grammar.accepts(&read(&many[7])));
    assert!(!grammar.accepts(&read("/etc/passwd")));
    assert!(!grammar.accepts(&read("../x")));

    // A typical workspace stays small: 40 files in a few directories.
    let typical: Vec<String> = (0..40)
        .map(|i| format!("{}/file-{i}.md", ["docs", "data", "src", "notes"][i % 4]))
        .collect();
    let paths = PathChoices {
        arguments: vec![
            choice("file_read", PathKind::File, AllowedPaths::Listed(typical)),
            choice(
                "file_list",
                PathKind::Directory,
                listed(&["", "docs", "data", "src", "notes"]),
            ),
        ],
    };
    let with = tool_grammar_with_paths(&file_tools(), &paths, 1).unwrap();
    let without = tool_grammar(&file_tools(), 1).unwrap();
    println!(
        "grammar for 40 files and 5 directories: {} bytes ({} without paths)",
        with.len(),
        without.len()
    );
    assert!(with.len() < without.len() + 4096);
}

/// A path component: mostly plain, sometimes with what needs escaping or
/// is not ASCII.
fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z]{1,6}(\\.[a-z]{1,3})?",
        1 => "[a-zA-Z0-9 _\"\\\\é✓-]{1,5}",
    ]
}

fn workspace_path() -> impl Strategy<Value = String> {
    proptest::collection::vec(component(), 1..4).prop_map(|c| c.join("/"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// For any listed set, the slot takes exactly the listed strings:
    /// every one of them, and no other path (prefixes, extensions,
    /// siblings, unlisted paths of the same shape).
    #[test]
    fn a_listed_slot_accepts_exactly_its_paths(
        listed in proptest::collection::btree_set(workspace_path(), 0..24),
        others in proptest::collection::vec(workspace_path(), 0..16),
        dirs in proptest::collection::btree_set(workspace_path(), 0..6),
    ) {
        let listed: Vec<String> = listed.into_iter().collect();
        let mut dir_list: Vec<String> = vec![String::new()];
        dir_list.extend(dirs.iter().cloned());
        let paths = PathChoices {
            arguments: vec![
                choice("file_read", PathKind::File, AllowedPaths::Listed(listed.clone())),
                choice("file_list", PathKind::Directory, AllowedPaths::Listed(dir_list.clone())),
            ],
        };
        let grammar = with_paths(&file_tools(), &paths);
        for path in &listed {
            prop_assert!(grammar.accepts(&read(path)), "refused listed {path:?}");
            let longer = format!("{path}x");
            prop_assert_eq!(grammar.accepts(&read(&longer)), listed.contains(&longer));
            let shorter: String = path.chars().take(path.chars().count() - 1).collect();
            prop_assert_eq!(grammar.accepts(&read(&shorter)), listed.contains(&shorter));
        }
        for other in others.iter().chain(dirs.iter()) {
            prop_assert_eq!(grammar.accepts(&read(other)), listed.contains(other), "{:?}", other);
        }
        for dir in &dir_list {
            prop_assert!(grammar.accepts(&list(dir)));
        }
        for path in listed.iter().chain(others.iter()) {
            prop_assert_eq!(grammar.accepts(&list(path)), dir_list.contains(path));
        }
        // Nothing listed: no read call at all; the rest unchanged.
        if listed.is_empty() {
            let other_tool = call_text("time_now", &json!({}));
            prop_assert!(!grammar.accepts(&read("a")));
            prop_assert!(grammar.accepts(&other_tool));
        }
    }
}
