//! Property: for any history, however mangled, repair yields one that
//! validates; repair is idempotent; and a valid history is left alone.
//! Ids come from a pool of three so duplicates, orphans and misplacements
//! are common rather than rare.

use bulwark_llm::{Block, Message, Role, repair, validate};
use proptest::prelude::*;
use serde_json::json;

fn id() -> impl Strategy<Value = String> {
    prop_oneof![Just("a"), Just("b"), Just("c")].prop_map(str::to_owned)
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        prop_oneof![
            Just(""),
            Just("  "),
            Just("\n"),
            Just("hi"),
            Just("ok then")
        ]
        .prop_map(|t| Block::Text { text: t.into() }),
        (
            id(),
            prop_oneof![
                4 => Just(json!({"k": 1})),
                1 => Just(json!("not an object")),
                1 => Just(json!(null)),
                1 => Just(json!([1]))
            ]
        )
            .prop_map(|(id, input)| Block::ToolUse {
                id,
                name: "tool".into(),
                input
            }),
        (id(), any::<bool>()).prop_map(|(id, is_error)| Block::ToolResult {
            tool_use_id: id,
            content: "out".into(),
            is_error,
            taint: vec![],
        }),
        (
            prop_oneof![Just(""), Just("hmm")],
            proptest::option::of(Just("sig".to_owned()))
        )
            .prop_map(|(t, signature)| Block::Thinking {
                text: t.into(),
                signature
            }),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    (
        prop_oneof![Just(Role::User), Just(Role::Assistant)],
        proptest::collection::vec(block(), 0..5),
    )
        .prop_map(|(role, blocks)| Message { role, blocks })
}

fn history() -> impl Strategy<Value = Vec<Message>> {
    proptest::collection::vec(message(), 0..10)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn repaired_history_always_validates(messages in history()) {
        let out = repair(messages);
        prop_assert_eq!(validate(&out), Ok(()), "{:#?}", out);
    }

    #[test]
    fn repair_is_idempotent(messages in history()) {
        let once = repair(messages);
        prop_assert_eq!(repair(once.clone()), once);
    }

    #[test]
    fn valid_histories_are_left_alone(messages in history()) {
        if validate(&messages).is_ok() {
            prop_assert_eq!(repair(messages.clone()), messages);
        }
    }

    /// Repair never invents model output: every text and tool use in the
    /// result was in the input, and every result is either an input result
    /// or the synthesized "interrupted" error.
    #[test]
    fn repair_invents_nothing(messages in history()) {
        let input: Vec<Block> = messages.iter().flat_map(|m| m.blocks.clone()).collect();
        for message in repair(messages) {
            for block in message.blocks {
                match &block {
                    Block::ToolResult { content, is_error: true, .. }
                        if content == bulwark_llm::INTERRUPTED_RESULT => {}
                    _ => prop_assert!(input.contains(&block), "invented {:?}", block),
                }
            }
        }
    }

    /// Nothing valid is lost: a history made of whole user/assistant text
    /// exchanges keeps every non-empty text.
    #[test]
    fn plain_text_survives(texts in proptest::collection::vec("[a-z]{1,5}", 1..8)) {
        let messages: Vec<Message> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| if i % 2 == 0 { Message::user_text(t.clone()) } else { Message::assistant_text(t.clone()) })
            .collect();
        prop_assert_eq!(repair(messages.clone()), messages);
    }
}
