//! One test per repair and per validation rule.

use bulwark_llm::{Block, INTERRUPTED_RESULT, Message, Role, Rule, Violation, repair, validate};
use bulwark_policy::TaintLabel;
use serde_json::json;

fn user(blocks: Vec<Block>) -> Message {
    Message {
        role: Role::User,
        blocks,
    }
}
fn assistant(blocks: Vec<Block>) -> Message {
    Message {
        role: Role::Assistant,
        blocks,
    }
}
fn text(t: &str) -> Block {
    Block::Text { text: t.into() }
}
fn think(t: &str) -> Block {
    Block::Thinking {
        text: t.into(),
        signature: Some("sig".into()),
    }
}
fn tool_use(id: &str) -> Block {
    Block::ToolUse {
        id: id.into(),
        name: "shell".into(),
        input: json!({"cmd": "ls"}),
    }
}
fn result(id: &str, content: &str) -> Block {
    Block::ToolResult {
        tool_use_id: id.into(),
        content: content.into(),
        is_error: false,
        taint: vec![],
    }
}
fn interrupted(id: &str) -> Block {
    Block::ToolResult {
        tool_use_id: id.into(),
        content: INTERRUPTED_RESULT.into(),
        is_error: true,
        taint: vec![],
    }
}

fn repaired(messages: Vec<Message>) -> Vec<Message> {
    let out = repair(messages);
    assert_eq!(validate(&out), Ok(()), "{out:#?}");
    assert_eq!(repair(out.clone()), out, "not idempotent");
    out
}

#[test]
fn valid_history_is_untouched() {
    let history = vec![
        user(vec![text("hi")]),
        assistant(vec![
            think("plan"),
            text("running"),
            tool_use("a"),
            tool_use("b"),
        ]),
        user(vec![result("b", "2"), result("a", "1"), text("and?")]),
        assistant(vec![text("done")]),
    ];
    assert_eq!(validate(&history), Ok(()));
    assert_eq!(repair(history.clone()), history);
}

#[test]
fn orphan_results_are_dropped() {
    let out = repaired(vec![
        user(vec![result("ghost", "x"), text("hi")]),
        assistant(vec![text("hello")]),
        user(vec![result("ghost2", "y"), text("again")]),
    ]);
    assert_eq!(
        out,
        vec![
            user(vec![text("hi")]),
            assistant(vec![text("hello")]),
            user(vec![text("again")])
        ]
    );
}

#[test]
fn result_before_its_tool_use_is_an_orphan() {
    let out = repaired(vec![
        user(vec![text("hi"), result("a", "early")]),
        assistant(vec![tool_use("a")]),
    ]);
    assert_eq!(out[0], user(vec![text("hi")]));
    assert_eq!(out[2], user(vec![interrupted("a")]));
}

#[test]
fn empty_messages_and_blocks_are_dropped() {
    let out = repaired(vec![
        user(vec![]),
        user(vec![text(""), text("  \n\t"), text("real")]),
        assistant(vec![text(" ")]),
        assistant(vec![text("answer")]),
    ]);
    assert_eq!(
        out,
        vec![user(vec![text("real")]), assistant(vec![text("answer")])]
    );
}

#[test]
fn misplaced_result_is_moved_after_its_tool_use() {
    let out = repaired(vec![
        user(vec![text("go")]),
        assistant(vec![tool_use("a")]),
        user(vec![text("(typing while the tool runs)")]),
        assistant(vec![text("waiting")]),
        user(vec![result("a", "late result"), text("next")]),
    ]);
    assert_eq!(
        out,
        vec![
            user(vec![text("go")]),
            assistant(vec![tool_use("a")]),
            user(vec![
                result("a", "late result"),
                text("(typing while the tool runs)")
            ]),
            assistant(vec![text("waiting")]),
            user(vec![text("next")]),
        ]
    );
}

#[test]
fn result_after_text_is_moved_first_keeping_taint() {
    let tainted = Block::ToolResult {
        tool_use_id: "a".into(),
        content: "page".into(),
        is_error: false,
        taint: vec![TaintLabel::External],
    };
    let out = repaired(vec![
        user(vec![text("go")]),
        assistant(vec![tool_use("a")]),
        user(vec![text("note"), tainted.clone()]),
    ]);
    assert_eq!(out[2], user(vec![tainted, text("note")]));
}

#[test]
fn duplicate_results_keep_the_first() {
    let out = repaired(vec![
        user(vec![text("go")]),
        assistant(vec![tool_use("a")]),
        user(vec![result("a", "first"), result("a", "second")]),
        assistant(vec![text("ok")]),
        user(vec![result("a", "replayed")]),
    ]);
    assert_eq!(
        out,
        vec![
            user(vec![text("go")]),
            assistant(vec![tool_use("a")]),
            user(vec![result("a", "first")]),
            assistant(vec![text("ok")]),
        ]
    );
}

#[test]
fn unanswered_tool_uses_get_an_interrupted_result() {
    let out = repaired(vec![
        user(vec![text("go")]),
        assistant(vec![tool_use("a"), tool_use("b")]),
        user(vec![result("b", "2"), text("hm")]),
    ]);
    assert_eq!(
        out[2],
        user(vec![result("b", "2"), interrupted("a"), text("hm")])
    );
}

#[test]
fn trailing_tool_use_gets_a_new_user_message() {
    let out = repaired(vec![user(vec![text("go")]), assistant(vec![tool_use("a")])]);
    assert_eq!(out.len(), 3);
    assert_eq!(out[2], user(vec![interrupted("a")]));
}

#[test]
fn consecutive_same_role_messages_are_merged() {
    let out = repaired(vec![
        user(vec![text("one")]),
        user(vec![text("two")]),
        assistant(vec![text("a")]),
        assistant(vec![tool_use("x")]),
        user(vec![result("x", "r")]),
    ]);
    assert_eq!(
        out,
        vec![
            user(vec![text("one"), text("two")]),
            assistant(vec![text("a"), tool_use("x")]),
            user(vec![result("x", "r")]),
        ]
    );
}

#[test]
fn thinking_only_assistant_turn_is_dropped() {
    let out = repaired(vec![
        user(vec![text("q")]),
        assistant(vec![think("half a thought")]),
        user(vec![text("hello?")]),
    ]);
    assert_eq!(out, vec![user(vec![text("q"), text("hello?")])]);
}

#[test]
fn tool_use_with_non_object_input_is_an_aborted_turn() {
    let broken = Block::ToolUse {
        id: "a".into(),
        name: "shell".into(),
        input: json!("{\"cmd\": \"rm -"),
    };
    let out = repaired(vec![
        user(vec![text("q")]),
        assistant(vec![think("t"), broken]),
        user(vec![result("a", "should not exist"), text("retry")]),
    ]);
    assert_eq!(out, vec![user(vec![text("q"), text("retry")])]);
}

#[test]
fn leading_assistant_messages_are_dropped_with_their_results() {
    let out = repaired(vec![
        assistant(vec![text("greeting"), tool_use("a")]),
        user(vec![result("a", "r"), text("hi")]),
        assistant(vec![text("hello")]),
    ]);
    assert_eq!(
        out,
        vec![user(vec![text("hi")]), assistant(vec![text("hello")])]
    );
}

#[test]
fn cascade_when_the_first_user_message_held_only_orphans() {
    let out = repaired(vec![
        user(vec![result("z", "orphan")]),
        assistant(vec![tool_use("a")]),
        user(vec![result("a", "r")]),
        assistant(vec![text("later")]),
        user(vec![text("real start")]),
    ]);
    assert_eq!(out, vec![user(vec![text("real start")])]);
}

#[test]
fn duplicate_tool_use_ids_keep_the_first() {
    let out = repaired(vec![
        user(vec![text("go")]),
        assistant(vec![tool_use("a")]),
        user(vec![result("a", "1")]),
        assistant(vec![text("again"), tool_use("a")]),
        user(vec![result("a", "2")]),
    ]);
    assert_eq!(
        out,
        vec![
            user(vec![text("go")]),
            assistant(vec![tool_use("a")]),
            user(vec![result("a", "1")]),
            assistant(vec![text("again")]),
        ]
    );
}

#[test]
fn blocks_in_the_wrong_role_are_dropped() {
    let out = repaired(vec![
        user(vec![
            text("go"),
            tool_use("u"),
            think("user cannot think here"),
        ]),
        assistant(vec![result("u", "assistant cannot answer"), text("ok")]),
    ]);
    assert_eq!(
        out,
        vec![user(vec![text("go")]), assistant(vec![text("ok")])]
    );
}

#[test]
fn validate_names_index_and_rule() {
    let v = |messages: Vec<Message>| validate(&messages).unwrap_err();
    assert_eq!(
        v(vec![assistant(vec![text("x")])]),
        Violation {
            index: 0,
            rule: Rule::FirstNotUser
        }
    );
    assert_eq!(
        v(vec![user(vec![text("a")]), user(vec![text("b")])]).rule,
        Rule::NotAlternating { role: "user" }
    );
    assert_eq!(v(vec![user(vec![])]).rule, Rule::EmptyMessage);
    assert_eq!(
        v(vec![user(vec![text("a"), text(" ")])]).rule,
        Rule::EmptyText { block: 1 }
    );
    assert_eq!(
        v(vec![user(vec![text("a")]), assistant(vec![think("t")])]),
        Violation {
            index: 1,
            rule: Rule::AbortedTurn
        }
    );
    let unanswered = v(vec![user(vec![text("a")]), assistant(vec![tool_use("x")])]);
    assert_eq!(
        unanswered,
        Violation {
            index: 1,
            rule: Rule::UnansweredToolUse { id: "x".into() }
        }
    );
    assert_eq!(
        unanswered.to_string(),
        "message 1: tool use \"x\" is not answered in the immediately following user message"
    );
    let base = || vec![user(vec![text("a")]), assistant(vec![tool_use("x")])];
    let mut dup = base();
    dup.push(user(vec![result("x", "1"), result("x", "2")]));
    assert_eq!(
        v(dup).rule,
        Rule::DuplicateToolResult {
            block: 1,
            id: "x".into()
        }
    );
    let mut after = base();
    after.push(user(vec![text("t"), result("x", "1")]));
    assert_eq!(v(after).rule, Rule::ToolResultAfterOtherBlocks { block: 1 });
    let mut orphan = base();
    orphan.push(user(vec![result("x", "1"), result("y", "2")]));
    assert_eq!(
        v(orphan).rule,
        Rule::OrphanToolResult {
            block: 1,
            id: "y".into()
        }
    );
    let mut reuse = base();
    reuse.push(user(vec![result("x", "1")]));
    reuse.push(assistant(vec![tool_use("x")]));
    reuse.push(user(vec![result("x", "2")]));
    assert_eq!(
        v(reuse).rule,
        Rule::DuplicateToolUseId {
            block: 0,
            id: "x".into()
        }
    );
    let bad_input = vec![
        user(vec![text("a")]),
        assistant(vec![Block::ToolUse {
            id: "x".into(),
            name: "n".into(),
            input: json!([1]),
        }]),
    ];
    assert_eq!(
        v(bad_input).rule,
        Rule::ToolInputNotObject {
            block: 0,
            id: "x".into()
        }
    );
    assert_eq!(
        v(vec![user(vec![text("a"), think("t")])]).rule,
        Rule::WrongRole {
            block: 1,
            kind: "thinking",
            role: "user"
        }
    );
    assert_eq!(validate(&[]), Ok(()));
}
