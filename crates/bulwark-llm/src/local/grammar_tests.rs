use super::*;
use serde_json::json;

fn tool(name: &str, schema: Value) -> ToolDef {
    ToolDef {
        name: name.into(),
        description: String::new(),
        input_schema: schema,
    }
}

#[test]
fn text_grammar_is_one_rule() {
    assert_eq!(
        text_grammar(),
        "root ::= text\ntext ::= [^<{\\[`\\x00\\t\\n\\r ] [^\\x00]*\n"
    );
}

#[test]
fn one_tool_with_a_required_string() {
    let grammar = tool_grammar(
        &[tool(
            "file_read",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        )],
        1,
    )
    .unwrap();
    let expected = concat!(
        "root ::= text | calls\n",
        "text ::= [^<{\\[`\\x00\\t\\n\\r ] [^\\x00]*\n",
        "calls ::= call\n",
        "call ::= \"<tool_call>\\n\" call-body \"\\n</tool_call>\" | call-body\n",
        "call-body ::= \"{\\\"name\\\": \" ( tool0 ) \"}\"\n",
        "t0-path-kv ::= \"\\\"path\\\": \" json-string\n",
        "t0-from0 ::= t0-path-kv\n",
        "t0-object ::= \"{\" t0-from0 \"}\"\n",
        "tool0 ::= \"\\\"file_read\\\", \\\"arguments\\\": \" t0-object\n",
    );
    assert!(grammar.starts_with(expected), "{grammar}");
    assert!(grammar.ends_with(JSON_RULES));
}

#[test]
fn a_required_call_leaves_no_text() {
    let tools = [tool(
        "file_read",
        json!({"properties": {"path": {"type": "string"}}}),
    )];
    let grammar = call_grammar(&tools, 1).unwrap();
    assert!(
        grammar.starts_with("root ::= calls\ncalls ::= call\n"),
        "{grammar}"
    );
    assert!(!grammar.contains("text"), "{grammar}");
    assert_eq!(call_grammar(&[], 1), Err(GrammarError::NoTools));
}

#[test]
fn optional_properties_and_call_limit() {
    let grammar = tool_grammar(
        &[tool(
            "list",
            json!({"properties": {"a": {"type": "integer"}, "b": {"enum": ["x", 2]}}}),
        )],
        3,
    )
    .unwrap();
    assert!(
        grammar.contains("calls ::= call ( \"\\n\" call ( \"\\n\" call )? )?\n"),
        "{grammar}"
    );
    assert!(
        grammar.contains("t0-a-kv ::= \"\\\"a\\\": \" json-integer\n"),
        "{grammar}"
    );
    assert!(
        grammar.contains("t0-b-kv ::= \"\\\"b\\\": \" ( \"\\\"x\\\"\" | \"2\" )\n"),
        "{grammar}"
    );
    assert!(grammar.contains("t0-from1 ::= t0-b-kv\n"), "{grammar}");
    assert!(
        grammar.contains("t0-from0 ::= t0-a-kv ( \", \" t0-b-kv )? | t0-from1\n"),
        "{grammar}"
    );
    assert!(
        grammar.contains("t0-object ::= \"{\" ( t0-from0 )? \"}\"\n"),
        "{grammar}"
    );
}

#[test]
fn odd_schemas_fall_back_to_generic_values() {
    for schema in [
        json!(true),
        json!("nonsense"),
        json!({"type": "string"}),
        json!({"$ref": "#/defs/x"}),
        json!({"type": "object"}),
    ] {
        let grammar = tool_grammar(&[tool("x", schema.clone())], 1).unwrap();
        assert!(
            grammar.contains("tool0 ::= \"\\\"x\\\", \\\"arguments\\\": \" json-object\n"),
            "{schema}: {grammar}"
        );
    }
    let grammar = tool_grammar(
        &[tool(
            "x",
            json!({"properties": {"r": {"$ref": "#/x"}, "t": {"type": ["string", "null"]}, "u": {"type": "uuid"}}}),
        )],
        1,
    )
    .unwrap();
    assert!(
        grammar.contains("t0-r-kv ::= \"\\\"r\\\": \" json-value\n"),
        "{grammar}"
    );
    assert!(
        grammar.contains("t0-t-kv ::= \"\\\"t\\\": \" ( json-string | \"null\" )\n"),
        "{grammar}"
    );
    assert!(
        grammar.contains("t0-u-kv ::= \"\\\"u\\\": \" json-value\n"),
        "{grammar}"
    );
}

#[test]
fn names_and_keys_are_escaped_and_rule_names_sanitised() {
    let grammar = tool_grammar(
        &[tool(
            "we\"ird\\name\n",
            json!({"properties": {"ke\"y ü": {"type": "boolean"}}, "required": ["ke\"y ü", "undeclared"]}),
        )],
        1,
    )
    .unwrap();
    assert!(
        grammar.contains(r#"tool0 ::= "\"we\\\"ird\\\\name\\n\", \"arguments\": " t0-object"#),
        "{grammar}"
    );
    assert!(
        grammar.contains(r#"t0-ke-y---kv ::= "\"ke\\\"y ü\": " json-boolean"#),
        "{grammar}"
    );
    assert!(
        grammar.contains(r#"t0-undeclared-kv ::= "\"undeclared\": " json-value"#),
        "{grammar}"
    );
    for line in grammar.lines() {
        let name = line.split(" ::= ").next().unwrap();
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "{name}"
        );
    }
}

#[test]
fn deep_nesting_is_cut() {
    let mut schema = json!({"type": "string"});
    for _ in 0..40 {
        schema = json!({"type": "object", "properties": {"n": schema}, "required": ["n"]});
    }
    let grammar = tool_grammar(&[tool("deep", schema)], 1).unwrap();
    assert!(grammar.contains("json-value\n"), "{grammar}");
    assert!(grammar.len() < 10_000);
}

#[test]
fn refusals() {
    assert_eq!(tool_grammar(&[], 1), Err(GrammarError::NoTools));
    let t = tool("a", json!({}));
    assert_eq!(
        tool_grammar(std::slice::from_ref(&t), 0),
        Err(GrammarError::CallLimit(0))
    );
    assert_eq!(
        tool_grammar(std::slice::from_ref(&t), MAX_CALLS_PER_TURN + 1),
        Err(GrammarError::CallLimit(MAX_CALLS_PER_TURN + 1))
    );
    assert_eq!(
        tool_grammar(&[t.clone(), t], 1),
        Err(GrammarError::DuplicateTool("a".into()))
    );
    let huge: Vec<ToolDef> = (0..4000)
        .map(|i| {
            tool(
                &format!("tool_with_a_long_name_{i}"),
                json!({"properties": {"x": {"type": "string"}}}),
            )
        })
        .collect();
    assert!(matches!(
        tool_grammar(&huge, 1),
        Err(GrammarError::TooLarge(_))
    ));
}

#[test]
fn spaced_json_matches_python() {
    let value = json!({"a": [1, 2.5, "x\"\n"], "b": {"c": null, "d": true}, "é": {}});
    assert_eq!(
        to_spaced_json(&value),
        r#"{"a": [1, 2.5, "x\"\n"], "b": {"c": null, "d": true}, "é": {}}"#
    );
}
#[test]
fn a_list_shared_by_two_arguments_is_written_once() {
    use crate::{PathArgumentChoices, PathKind};
    let schema =
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    let tools = [tool("file_read", schema.clone()), tool("file_edit", schema)];
    let files: Vec<String> = vec!["a.txt".into(), "ab.txt".into(), "b/c.md".into()];
    let choice = |name: &str| PathArgumentChoices {
        tool: name.into(),
        argument: "path".into(),
        kind: PathKind::File,
        reads_only: true,
        allowed: AllowedPaths::Listed(files.clone()),
    };
    let paths = PathChoices {
        arguments: vec![choice("file_read"), choice("file_edit")],
    };
    let grammar = tool_grammar_with_paths(&tools, &paths, 1).unwrap();
    // One prefix tree: `"a` then `.txt"` or `b.txt"`, and `"b/c.md"`.
    assert!(
        grammar.contains("t0-path-paths ::= \".txt\\\"\" | \"b.txt\\\"\"\n"),
        "{grammar}"
    );
    assert_eq!(
        grammar.matches(" ::= \"\\\"\" t0-path-paths-2").count(),
        1,
        "{grammar}"
    );
    assert!(
        grammar.contains("t0-path-kv ::= \"\\\"path\\\": \" t0-path-paths-3\n"),
        "{grammar}"
    );
    assert!(
        grammar.contains("t1-path-kv ::= \"\\\"path\\\": \" t0-path-paths-3\n"),
        "{grammar}"
    );
    assert!(!grammar.contains("path-rel"), "{grammar}");
}
