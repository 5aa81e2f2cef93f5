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
        let expected = !matches!(first, '<' | '{' | '[' | ' ' | '\t' | '\n' | '\r') && !text.contains('\0');
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
