//! Session repair runs on every stored history before it is sent, including
//! histories damaged by crashes, replays and edits. Whatever the damage,
//! the repaired history validates, repair is idempotent, a valid history is
//! left alone, and repair invents nothing but "interrupted" tool results.
#![no_main]

use arbitrary::Arbitrary;
use bulwark_llm::{Block, INTERRUPTED_RESULT, Message, Role, repair, validate};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

#[derive(Arbitrary, Debug)]
struct Msg {
    user: bool,
    blocks: Vec<B>,
}

#[derive(Arbitrary, Debug)]
enum Text {
    Empty,
    Blank,
    Word,
}

/// Tool ids come from a small pool so uses and results collide often.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Id {
    A,
    B,
    C,
    D,
}

#[derive(Arbitrary, Debug)]
enum B {
    Text(Text),
    ToolUse { id: Id, object_input: bool },
    ToolResult { id: Id, is_error: bool },
    Thinking { signed: bool },
}

fn id(id: Id) -> String {
    format!("{id:?}").to_lowercase()
}

fn build(desc: &[Msg]) -> Vec<Message> {
    let mut serial = 0;
    desc.iter()
        .map(|m| Message {
            role: if m.user { Role::User } else { Role::Assistant },
            blocks: m
                .blocks
                .iter()
                .map(|b| {
                    serial += 1;
                    match b {
                        B::Text(Text::Empty) => Block::Text {
                            text: String::new(),
                        },
                        B::Text(Text::Blank) => Block::Text { text: " \n".into() },
                        B::Text(Text::Word) => Block::Text {
                            text: format!("t{serial}"),
                        },
                        B::ToolUse {
                            id: i,
                            object_input,
                        } => Block::ToolUse {
                            id: id(*i),
                            name: "tool".into(),
                            input: if *object_input {
                                json!({ "n": serial })
                            } else {
                                json!(serial)
                            },
                        },
                        B::ToolResult { id: i, is_error } => Block::ToolResult {
                            tool_use_id: id(*i),
                            content: format!("r{serial}"),
                            is_error: *is_error,
                            taint: Vec::new(),
                        },
                        B::Thinking { signed } => Block::Thinking {
                            text: format!("h{serial}"),
                            signature: signed.then(|| format!("s{serial}")),
                        },
                    }
                })
                .collect(),
        })
        .collect()
}

fuzz_target!(|desc: Vec<Msg>| {
    let messages = build(&desc);
    let was_valid = validate(&messages).is_ok();
    let repaired = repair(messages.clone());
    if let Err(v) = validate(&repaired) {
        panic!("repaired history is invalid: {v}\n{repaired:#?}");
    }
    assert_eq!(
        repair(repaired.clone()),
        repaired,
        "repair is not idempotent"
    );
    if was_valid {
        assert_eq!(repaired, messages, "a valid history was changed");
    }
    // A non-blank user text always survives, so an empty result would mean
    // the fail-closed fallback ("did not converge") was taken.
    let has_user_text = messages.iter().any(|m| {
        m.role == Role::User
            && m.blocks
                .iter()
                .any(|b| matches!(b, Block::Text { text } if !text.trim().is_empty()))
    });
    assert!(!has_user_text || !repaired.is_empty(), "history dropped");
    // Nothing is invented: every block comes from the input, except error
    // results for interrupted tool calls.
    let input_blocks: Vec<&Block> = messages.iter().flat_map(|m| &m.blocks).collect();
    for block in repaired.iter().flat_map(|m| &m.blocks) {
        let synthesized = matches!(block,
            Block::ToolResult { content, is_error: true, .. } if content == INTERRUPTED_RESULT);
        assert!(
            synthesized || input_blocks.contains(&block),
            "invented block {block:?}"
        );
    }
});
