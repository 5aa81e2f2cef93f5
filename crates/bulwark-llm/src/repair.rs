//! Session repair: keep a conversation well-formed for every provider.
//!
//! A history can be damaged in ordinary ways: a stream dies mid tool call, a
//! worker crashes between a tool use and its result, the store replays a
//! result twice, a user edits a message away. Both provider APIs then reject
//! the *whole* request, so one broken turn would wedge the session forever.
//! [`repair`] runs before every provider call and rewrites the history into
//! the smallest well-formed variant; [`validate`] states the rules it
//! guarantees, as the union of what the Anthropic Messages API and the OpenAI
//! Chat Completions API require (so a session can move between providers).
//!
//! Repair never invents model output. The only block it creates is an error
//! tool result saying a call was interrupted, which is the truth: the model
//! asked for something and never got an answer.

use std::collections::{HashMap, HashSet};

use crate::message::{Block, Message, Role};

/// Content of the result synthesized for a tool use that never got one.
pub const INTERRUPTED_RESULT: &str = "tool call was interrupted; no result";

/// Why a history is not well-formed: the message index and the rule broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("message {index}: {rule}")]
pub struct Violation {
    /// Index into the message slice.
    pub index: usize,
    pub rule: Rule,
}

/// The ordering rules, one variant per rule. `block` is an index into the
/// message's blocks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rule {
    #[error("the first message must come from the user")]
    FirstNotUser,
    #[error("roles must alternate, but this {role} message follows another")]
    NotAlternating { role: &'static str },
    #[error("message has no blocks")]
    EmptyMessage,
    #[error("block {block} is an empty or whitespace-only text")]
    EmptyText { block: usize },
    #[error("block {block}: a {kind} block may not appear in a {role} message")]
    WrongRole {
        block: usize,
        kind: &'static str,
        role: &'static str,
    },
    #[error("assistant message holds nothing but thinking (an aborted turn)")]
    AbortedTurn,
    #[error("block {block}: tool use id {id:?} was already used earlier")]
    DuplicateToolUseId { block: usize, id: String },
    #[error("block {block}: input of tool use {id:?} is not a JSON object")]
    ToolInputNotObject { block: usize, id: String },
    #[error("tool use {id:?} is not answered in the immediately following user message")]
    UnansweredToolUse { id: String },
    #[error("block {block}: tool use {id:?} is answered more than once")]
    DuplicateToolResult { block: usize, id: String },
    #[error(
        "block {block}: tool result {id:?} answers no tool use of the immediately preceding assistant message"
    )]
    OrphanToolResult { block: usize, id: String },
    #[error("block {block}: tool result comes after a non-result block")]
    ToolResultAfterOtherBlocks { block: usize },
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn kind_name(block: &Block) -> &'static str {
    match block {
        Block::Text { .. } => "text",
        Block::ToolUse { .. } => "tool_use",
        Block::ToolResult { .. } => "tool_result",
        Block::Thinking { .. } => "thinking",
    }
}

/// May a block of this kind appear in a message of this role at all?
fn allowed_in(role: Role, block: &Block) -> bool {
    match block {
        Block::Text { .. } => true,
        Block::ToolUse { .. } | Block::Thinking { .. } => role == Role::Assistant,
        Block::ToolResult { .. } => role == Role::User,
    }
}

fn is_thinking(block: &Block) -> bool {
    matches!(block, Block::Thinking { .. })
}

/// Check every rule; the first violation found (in message order) is returned.
pub fn validate(messages: &[Message]) -> Result<(), Violation> {
    let fail = |index, rule| Err(Violation { index, rule });
    let mut use_ids: HashSet<&str> = HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        let role = message.role;
        if index == 0 && role != Role::User {
            return fail(index, Rule::FirstNotUser);
        }
        if index > 0 && messages[index - 1].role == role {
            let role = role_name(role);
            return fail(index, Rule::NotAlternating { role });
        }
        if message.blocks.is_empty() {
            return fail(index, Rule::EmptyMessage);
        }
        if role == Role::Assistant && message.blocks.iter().all(is_thinking) {
            return fail(index, Rule::AbortedTurn);
        }
        // Tool uses of the preceding assistant message: what results here may answer.
        let answerable: HashSet<&str> = match index.checked_sub(1).map(|p| &messages[p]) {
            Some(prev) if role == Role::User => prev.tool_uses().map(|(id, _, _)| id).collect(),
            _ => HashSet::new(),
        };
        let mut answered: HashSet<&str> = HashSet::new();
        let mut seen_other = false;
        for (block, b) in message.blocks.iter().enumerate() {
            if !allowed_in(role, b) {
                let (kind, role) = (kind_name(b), role_name(role));
                return fail(index, Rule::WrongRole { block, kind, role });
            }
            match b {
                Block::Text { text } => {
                    if text.trim().is_empty() {
                        return fail(index, Rule::EmptyText { block });
                    }
                    seen_other = true;
                }
                Block::Thinking { .. } => seen_other = true,
                Block::ToolUse { id, input, .. } => {
                    if !use_ids.insert(id) {
                        let id = id.clone();
                        return fail(index, Rule::DuplicateToolUseId { block, id });
                    }
                    if !input.is_object() {
                        let id = id.clone();
                        return fail(index, Rule::ToolInputNotObject { block, id });
                    }
                }
                Block::ToolResult { tool_use_id, .. } => {
                    if seen_other {
                        return fail(index, Rule::ToolResultAfterOtherBlocks { block });
                    }
                    let id = tool_use_id.clone();
                    if !answerable.contains(tool_use_id.as_str()) {
                        return fail(index, Rule::OrphanToolResult { block, id });
                    }
                    if !answered.insert(tool_use_id) {
                        return fail(index, Rule::DuplicateToolResult { block, id });
                    }
                }
            }
        }
        if role == Role::Assistant {
            let next_results: HashSet<&str> = match messages.get(index + 1) {
                Some(next) if next.role == Role::User => next
                    .blocks
                    .iter()
                    .filter_map(|b| match b {
                        Block::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
                        _ => None,
                    })
                    .collect(),
                _ => HashSet::new(),
            };
            if let Some((id, _, _)) = message
                .tool_uses()
                .find(|(id, _, _)| !next_results.contains(id))
            {
                let id = id.to_owned();
                return fail(index, Rule::UnansweredToolUse { id });
            }
        }
    }
    Ok(())
}

/// Rewrite a history so that [`validate`] accepts it. A history that is
/// already valid is returned unchanged, so repair is idempotent.
///
/// Repairs, in order: drop blocks that cannot be sent (empty text, tool uses
/// whose input is not an object, later duplicates of a tool use id, blocks in
/// a role that cannot carry them); drop aborted assistant turns (nothing but
/// thinking left) and empty messages; drop leading assistant messages; merge
/// consecutive same-role messages; move each tool result to the user message
/// right after its tool use, first in that message, keeping the first of
/// duplicates and dropping orphans; synthesize an error result
/// ([`INTERRUPTED_RESULT`]) for every tool use left unanswered.
pub fn repair(messages: Vec<Message>) -> Vec<Message> {
    match converge(messages) {
        Ok(repaired) => repaired,
        Err(violation) => {
            // Unreachable by construction (a property test hunts for it);
            // failing closed beats sending a history the provider rejects.
            tracing::error!(%violation, "session repair did not converge; dropping history");
            Vec::new()
        }
    }
}

/// Run repair passes until the history validates. One pass settles almost
/// everything; a pass leaves work only by emptying (and so dropping) a
/// message, so the passes needed are bounded by the number of messages.
fn converge(messages: Vec<Message>) -> Result<Vec<Message>, Violation> {
    let mut current = messages;
    let budget = current.len() + 2;
    for _ in 0..budget {
        if validate(&current).is_ok() {
            return Ok(current);
        }
        current = repair_pass(current);
    }
    validate(&current).map(|()| current)
}

/// One repair pass; see [`repair`] for the order of the steps.
fn repair_pass(messages: Vec<Message>) -> Vec<Message> {
    let mut use_ids: HashSet<String> = HashSet::new();
    let mut messages: Vec<Message> = messages
        .into_iter()
        .filter_map(|message| {
            let role = message.role;
            let blocks: Vec<Block> = message
                .blocks
                .into_iter()
                .filter(|b| keep_block(role, b, &mut use_ids))
                .collect();
            let aborted = role == Role::Assistant && blocks.iter().all(is_thinking);
            (!blocks.is_empty() && !aborted).then_some(Message { role, blocks })
        })
        .collect();

    let first_user = messages
        .iter()
        .position(|m| m.role == Role::User)
        .unwrap_or(messages.len());
    messages.drain(..first_user);

    let mut merged: Vec<Message> = Vec::with_capacity(messages.len());
    for message in messages {
        match merged.last_mut() {
            Some(last) if last.role == message.role => last.blocks.extend(message.blocks),
            _ => merged.push(message),
        }
    }

    let mut paired = pair_results(merged);
    paired.retain(|m| !m.blocks.is_empty());
    paired
}

/// Step one of a pass: may this block stay where it is?
fn keep_block(role: Role, block: &Block, use_ids: &mut HashSet<String>) -> bool {
    if !allowed_in(role, block) {
        return false;
    }
    match block {
        Block::Text { text } => !text.trim().is_empty(),
        Block::ToolUse { id, input, .. } => input.is_object() && use_ids.insert(id.clone()),
        Block::ToolResult { .. } | Block::Thinking { .. } => true,
    }
}

/// Put every tool result right after its tool use. Expects a history that
/// starts with a user message, alternates roles and has unique tool use ids.
fn pair_results(messages: Vec<Message>) -> Vec<Message> {
    // Which assistant message owns each tool use id.
    let mut owner: HashMap<String, usize> = HashMap::new();
    for (index, message) in messages.iter().enumerate() {
        for (id, _, _) in message.tool_uses() {
            owner.insert(id.to_owned(), index);
        }
    }

    // Strip every result out, claiming the first one (in history order) for
    // each tool use that it follows; the rest are orphans or duplicates.
    let mut claimed: HashSet<String> = HashSet::new();
    let mut results_for: HashMap<usize, Vec<Block>> = HashMap::new();
    let mut stripped: Vec<Message> = Vec::with_capacity(messages.len() + 1);
    for (index, message) in messages.into_iter().enumerate() {
        let mut blocks = Vec::with_capacity(message.blocks.len());
        for block in message.blocks {
            let Block::ToolResult { tool_use_id, .. } = &block else {
                blocks.push(block);
                continue;
            };
            let Some(&asker) = owner.get(tool_use_id) else {
                continue;
            };
            if asker < index && claimed.insert(tool_use_id.clone()) {
                results_for.entry(asker).or_default().push(block);
            }
        }
        stripped.push(Message {
            role: message.role,
            blocks,
        });
    }

    let mut index = 0;
    while index < stripped.len() {
        let uses: Vec<String> = stripped[index]
            .tool_uses()
            .map(|(id, _, _)| id.to_owned())
            .collect();
        if uses.is_empty() {
            index += 1;
            continue;
        }
        let mut results = results_for.remove(&index).unwrap_or_default();
        for id in uses.into_iter().filter(|id| !claimed.contains(id)) {
            results.push(Block::ToolResult {
                tool_use_id: id,
                content: INTERRUPTED_RESULT.to_owned(),
                is_error: true,
                taint: Vec::new(),
            });
        }
        match stripped.get_mut(index + 1) {
            Some(next) if next.role == Role::User => {
                results.append(&mut next.blocks);
                next.blocks = results;
            }
            _ => stripped.insert(
                index + 1,
                Message {
                    role: Role::User,
                    blocks: results,
                },
            ),
        }
        index += 2;
    }
    stripped
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn block() -> impl Strategy<Value = Block> {
        let id = || prop_oneof![Just("a"), Just("b")].prop_map(str::to_owned);
        prop_oneof![
            prop_oneof![Just(""), Just("x")].prop_map(|t| Block::Text { text: t.into() }),
            (id(), prop_oneof![Just(json!({})), Just(json!(1))]).prop_map(|(id, input)| {
                Block::ToolUse {
                    id,
                    name: "t".into(),
                    input,
                }
            }),
            id().prop_map(|id| Block::ToolResult {
                tool_use_id: id,
                content: String::new(),
                is_error: false,
                taint: vec![],
            }),
            Just(Block::Thinking {
                text: "t".into(),
                signature: None,
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        /// The fail-closed fallback in `repair` is never taken: the pass
        /// loop always reaches a valid history within its budget.
        #[test]
        fn passes_converge_within_budget(
            messages in proptest::collection::vec(
                (any::<bool>(), proptest::collection::vec(block(), 0..4)).prop_map(|(user, blocks)| {
                    Message { role: if user { Role::User } else { Role::Assistant }, blocks }
                }),
                0..12,
            )
        ) {
            prop_assert!(converge(messages).is_ok());
        }
    }
}
