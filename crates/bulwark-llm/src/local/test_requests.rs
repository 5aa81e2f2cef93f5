//! Requests and calls the tests of the steering rules share: three file
//! tools over a small workspace, as the kernel would describe them.

use crate::{
    AllowedPaths, Block, ChatRequest, Message, PathArgumentChoices, PathChoices, PathKind, Role,
    ToolDef,
};
use serde_json::json;

pub(crate) fn tool(name: &str, schema: serde_json::Value) -> ToolDef {
    ToolDef {
        name: name.into(),
        description: String::new(),
        input_schema: schema,
    }
}

pub(crate) fn tools() -> Vec<ToolDef> {
    vec![
        tool(
            "file_list",
            json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        ),
        tool(
            "file_read",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        ),
        tool(
            "file_edit",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"}}, "required": ["path", "old"]}),
        ),
    ]
}

pub(crate) fn listed(tool: &str, kind: PathKind, paths: &[&str]) -> PathArgumentChoices {
    PathArgumentChoices {
        tool: tool.into(),
        argument: "path".into(),
        kind,
        reads_only: tool != "file_edit",
        allowed: AllowedPaths::Listed(paths.iter().map(|p| (*p).to_owned()).collect()),
    }
}

pub(crate) fn paths() -> PathChoices {
    PathChoices {
        arguments: vec![
            listed("file_list", PathKind::Directory, &["", "docs"]),
            listed(
                "file_read",
                PathKind::File,
                &["notes.txt", "docs/guide.md", "docs/notes.txt", "a.csv"],
            ),
            listed("file_edit", PathKind::File, &["notes.txt"]),
        ],
    }
}

pub(crate) fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        tools: tools(),
        messages,
        paths: paths(),
        ..ChatRequest::default()
    }
}

pub(crate) fn call(name: &str, input: serde_json::Value) -> Message {
    Message {
        role: Role::Assistant,
        blocks: vec![Block::ToolUse {
            id: format!("c-{name}"),
            name: name.into(),
            input,
        }],
    }
}

pub(crate) fn listed_of<'a>(choices: &'a PathChoices, tool: &str) -> &'a [String] {
    match choices.for_argument(tool, "path") {
        Some(AllowedPaths::Listed(list)) => list,
        other => panic!("{tool}: {other:?}"),
    }
}

pub(crate) fn read_paths(calls: &[crate::local::output::Call]) -> Vec<&str> {
    calls
        .iter()
        .map(|(tool, args)| {
            assert_eq!(tool, "file_read");
            assert_eq!(args.len(), 1, "{args:?}");
            args["path"].as_str().expect("a path")
        })
        .collect()
}
