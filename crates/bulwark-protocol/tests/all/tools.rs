//! The tools-only frames (`StartTools`, `ListTools`, `CallTool`, `Tools`,
//! `ToolCallDone`): their bounds hold on receipt, and ordinary values pass.

use bulwark_protocol::protocol::{
    Command, Event, MAX_ID_CHARS, MAX_JSON_BYTES, MAX_JSON_DEPTH, MAX_TOOLS, ToolInfo,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn call(arguments: Value) -> Command {
    Command::CallTool {
        call_id: "m1".into(),
        tool: "file_read".into(),
        arguments,
    }
}

fn tool(name: &str) -> ToolInfo {
    ToolInfo {
        name: name.into(),
        description: "Reads a file in the workspace".into(),
        input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }
}

#[test]
fn ordinary_tool_frames_pass_and_round_trip() {
    let frames = [
        serde_json::to_string(&Command::StartTools {
            user: "alice".into(),
            agent: "demo".into(),
        })
        .unwrap(),
        serde_json::to_string(&Command::ListTools).unwrap(),
        serde_json::to_string(&call(json!({"path": "notes.txt"}))).unwrap(),
    ];
    for text in frames {
        let command: Command = serde_json::from_str(&text).unwrap();
        command.validate().unwrap();
    }
    let events = [
        Event::Tools {
            tools: vec![tool("file_read"), tool("file_write")],
        },
        Event::ToolCallDone {
            call_id: "m1".into(),
            content: "hello".into(),
            is_error: false,
        },
    ];
    for event in events {
        event.validate().unwrap();
        let text = serde_json::to_string(&event).unwrap();
        assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), event);
    }
}

#[test]
fn oversized_names_arguments_and_lists_are_refused() {
    let long = "x".repeat(MAX_ID_CHARS + 1);
    let named = Command::CallTool {
        call_id: "m1".into(),
        tool: long.clone(),
        arguments: json!({}),
    };
    assert_eq!(named.validate().unwrap_err().field, "tool");
    let big = call(json!({"content": "y".repeat(MAX_JSON_BYTES)}));
    assert_eq!(big.validate().unwrap_err().field, "arguments");
    let start = Command::StartTools {
        user: "alice".into(),
        agent: long,
    };
    assert_eq!(start.validate().unwrap_err().field, "agent");
    let many = Event::Tools {
        tools: (0..=MAX_TOOLS).map(|i| tool(&format!("t{i}"))).collect(),
    };
    assert_eq!(many.validate().unwrap_err().field, "tools");
}

#[test]
fn deep_arguments_are_refused() {
    let mut deep = json!(1);
    for _ in 0..MAX_JSON_DEPTH {
        deep = json!([deep]);
    }
    assert_eq!(call(deep).validate().unwrap_err().field, "arguments");
}

#[test]
fn unknown_fields_in_tool_frames_are_refused() {
    let extra = r#"{"type":"call_tool","call_id":"m1","tool":"t","arguments":{},"sudo":true}"#;
    assert!(serde_json::from_str::<Command>(extra).is_err());
    let extra =
        r#"{"type":"tools","tools":[{"name":"t","description":"","input_schema":{},"hidden":1}]}"#;
    assert!(serde_json::from_str::<Event>(extra).is_err());
}

proptest! {
    /// Whatever arguments arrive, `validate` decides without panicking,
    /// and accepts exactly those within the byte and depth bounds.
    #[test]
    fn validate_matches_the_bounds(text in "[a-z]{0,64}", depth in 0usize..80, repeat in 0usize..5000) {
        let mut value = json!(text.repeat(repeat));
        for _ in 0..depth {
            value = Value::Array(vec![value]);
        }
        let size = serde_json::to_vec(&value).unwrap().len();
        let ok = depth < MAX_JSON_DEPTH && size <= MAX_JSON_BYTES;
        prop_assert_eq!(call(value).validate().is_ok(), ok);
    }
}
