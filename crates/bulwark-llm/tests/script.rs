//! The scripted driver: format, ids, exhaustion, errors with origin:line.

use std::io::Write;

use bulwark_llm::{
    Block, ChatRequest, LlmDriver, LlmError, Message, ScriptDriver, StopReason, StreamEvent,
};
use serde_json::json;

fn request() -> ChatRequest {
    ChatRequest {
        model: "script".into(),
        system: String::new(),
        messages: vec![Message::user_text("hi")],
        tools: vec![],
        max_tokens: 16,
        paths: Default::default(),
    }
}

const SCRIPT: &str = r#"
# a comment, then a blank line

{"text": "Let me look.", "tool_calls": [{"name": "read_file", "input": {"path": "a.txt"}}, {"name": "shell", "input": {"cmd": "ls"}, "id": "mine"}], "usage": {"input_tokens": 10, "output_tokens": 5}}
{"tool_calls": [{"name": "list"}]}
{"error": "HTTP 529 overloaded (simulated)"}
{"text": "All done here."}
"#;

#[tokio::test]
async fn plays_turns_in_order_then_stops() {
    let driver = ScriptDriver::from_jsonl(SCRIPT, "demo.jsonl").unwrap();
    assert_eq!(driver.provider(), "script");
    assert_eq!(driver.len(), 4);

    let mut events = Vec::new();
    let first = driver
        .chat(&request(), &mut |e| events.push(e))
        .await
        .unwrap();
    assert_eq!(first.stop, StopReason::ToolUse);
    assert_eq!(
        (first.usage.input_tokens, first.usage.output_tokens),
        (10, 5)
    );
    assert_eq!(
        first.message.blocks,
        vec![
            Block::Text {
                text: "Let me look.".into()
            },
            Block::ToolUse {
                id: "call_1".into(),
                name: "read_file".into(),
                input: json!({"path": "a.txt"})
            },
            Block::ToolUse {
                id: "mine".into(),
                name: "shell".into(),
                input: json!({"cmd": "ls"})
            },
        ]
    );
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta("Let ".into()),
            StreamEvent::TextDelta("me ".into()),
            StreamEvent::TextDelta("look.".into()),
            StreamEvent::ToolUseStart {
                id: "call_1".into(),
                name: "read_file".into()
            },
            StreamEvent::ToolUseStart {
                id: "mine".into(),
                name: "shell".into()
            },
        ]
    );

    let second = driver.chat(&request(), &mut |_| {}).await.unwrap();
    assert_eq!(second.stop, StopReason::ToolUse);
    assert_eq!(
        second.message.blocks,
        vec![Block::ToolUse {
            id: "call_2".into(),
            name: "list".into(),
            input: json!({})
        }]
    );

    let third = driver.chat(&request(), &mut |_| {}).await.unwrap_err();
    assert!(
        matches!(&third, LlmError::Transport { provider, detail, .. } if provider == "script" && detail == "HTTP 529 overloaded (simulated)"),
        "{third}"
    );

    let fourth = driver.chat(&request(), &mut |_| {}).await.unwrap();
    assert_eq!(fourth.stop, StopReason::EndTurn);
    assert_eq!(fourth.message, Message::assistant_text("All done here."));

    for _ in 0..2 {
        let err = driver.chat(&request(), &mut |_| {}).await.unwrap_err();
        assert!(
            matches!(&err, LlmError::Script(m) if m.contains("script exhausted after 4 turns")),
            "{err}"
        );
    }
    assert_eq!(driver.played(), 4);
}

#[test]
fn bad_lines_name_origin_and_line() {
    let cases = [
        ("{\"text\": \"a\", \"txet\": 1}", "unknown field"),
        ("{\"text\": \"a\"}\nnot json", "x.jsonl:2:"),
        ("{}", "a turn needs"),
        ("{\"text\": \"   \"}", "a turn needs"),
        ("{\"error\": \"e\", \"text\": \"a\"}", "stands alone"),
        (
            "{\"tool_calls\": [{\"name\": \"t\", \"input\": [1]}]}",
            "not a JSON object",
        ),
        ("{\"tool_calls\": [{\"name\": \"\"}]}", "without a name"),
        (
            "{\"tool_calls\": [{\"name\": \"t\", \"id\": \"d\"}]}\n{\"tool_calls\": [{\"name\": \"t\", \"id\": \"d\"}]}",
            "x.jsonl:2: tool call id \"d\"",
        ),
        (
            "{\"tool_calls\": [{\"name\": \"t\", \"args\": {}}]}",
            "unknown field `args`",
        ),
    ];
    for (src, expected) in cases {
        let err = ScriptDriver::from_jsonl(src, "x.jsonl").unwrap_err();
        let shown = err.to_string();
        assert!(shown.contains(expected), "{src:?}: {shown}");
        assert!(shown.contains("x.jsonl:"), "{shown}");
    }
}

#[tokio::test]
async fn generated_ids_skip_explicit_ones() {
    let src = r#"{"tool_calls": [{"name": "a"}, {"name": "b", "id": "call_2"}, {"name": "c"}]}"#;
    let driver = ScriptDriver::from_jsonl(src, "inline").unwrap();
    let response = driver.chat(&request(), &mut |_| {}).await.unwrap();
    let ids: Vec<&str> = response.message.tool_uses().map(|(id, _, _)| id).collect();
    assert_eq!(ids, ["call_1", "call_2", "call_3"]);
}

#[tokio::test]
async fn from_file_reads_and_names_the_path() {
    let dir = std::env::temp_dir().join(format!("bulwark-llm-script-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("turns.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    writeln!(file, "{{\"text\": \"from a file\"}}").unwrap();
    writeln!(file, "{{\"bogus\": 1}}").unwrap();
    drop(file);
    let err = ScriptDriver::from_file(&path).unwrap_err();
    assert!(
        err.to_string().contains(&format!("{}:2:", path.display())),
        "{err}"
    );

    std::fs::write(&path, "{\"text\": \"from a file\"}\n").unwrap();
    let driver = ScriptDriver::from_file(&path).unwrap();
    let response = driver.chat(&request(), &mut |_| {}).await.unwrap();
    assert_eq!(response.message.text(), "from a file");

    let missing = ScriptDriver::from_file(&dir.join("missing.jsonl")).unwrap_err();
    assert!(missing.to_string().contains("cannot read"), "{missing}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn shared_driver_hands_each_turn_out_once() {
    let src = (0..50)
        .map(|i| format!("{{\"text\": \"turn {i}\"}}"))
        .collect::<Vec<_>>()
        .join("\n");
    let driver = std::sync::Arc::new(ScriptDriver::from_jsonl(&src, "inline").unwrap());
    let mut tasks = Vec::new();
    for _ in 0..60 {
        let driver = std::sync::Arc::clone(&driver);
        tasks.push(tokio::spawn(async move {
            driver
                .chat(&request(), &mut |_| {})
                .await
                .ok()
                .map(|r| r.message.text())
        }));
    }
    let mut texts = Vec::new();
    for task in tasks {
        if let Some(text) = task.await.unwrap() {
            texts.push(text);
        }
    }
    texts.sort();
    texts.dedup();
    assert_eq!(texts.len(), 50, "every turn exactly once, then exhaustion");
}

#[tokio::test]
async fn a_resumed_script_continues_after_the_played_turns() {
    let driver =
        ScriptDriver::from_jsonl("{\"text\": \"one\"}\n{\"text\": \"two\"}\n", "inline").unwrap();
    driver.resume_after(1);
    let request = bulwark_llm::ChatRequest {
        model: "m".into(),
        system: String::new(),
        messages: vec![bulwark_llm::Message::user_text("hi")],
        tools: Vec::new(),
        max_tokens: 10,
        paths: Default::default(),
    };
    let reply = driver.chat(&request, &mut |_| {}).await.unwrap();
    assert_eq!(reply.message.text(), "two");
    driver.resume_after(99);
    assert!(
        driver.chat(&request, &mut |_| {}).await.is_err(),
        "past the end is exhausted, not wrapped"
    );
}
