//! Reading back what the grammar let the model write.
//!
//! The grammar makes a turn either text or well-formed calls (tagged or
//! bare, see `grammar.rs`) to offered tools, so for a finished turn these
//! checks cannot fail. They run anyway
//! (a llama.cpp or grammar bug must surface as an error, never as a tool
//! call), and they are what reports a call cut off by `max_tokens`: that
//! is an error, not something to repair.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::grammar::{CALL_CLOSE, CALL_OPEN};
use crate::ToolDef;

/// One call read back: the tool's name and its arguments.
pub(crate) type Call = (String, Map<String, Value>);

/// What one generated turn said.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Output {
    Text(String),
    /// In the order written.
    Calls(Vec<Call>),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OutputError {
    #[error("the tool call was cut off by max_tokens ({0}); raise max_tokens")]
    Truncated(u32),
    #[error("the model wrote a malformed tool call ({0}); this is a grammar bug")]
    Malformed(String),
    #[error("the model called `{0}`, which this request did not offer; this is a grammar bug")]
    NotOffered(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireCall {
    name: String,
    arguments: Map<String, Value>,
}

/// Whether generated text (so far) is a tool call rather than an answer:
/// answers never start with `<` or `{` (the grammar forbids it), calls
/// always do (tagged or bare).
pub(crate) fn is_call(text: &str) -> bool {
    text.starts_with(['<', '{'])
}

/// Parse a finished turn. `truncated`: generation stopped at
/// `max_tokens` rather than at end-of-turn (`max_tokens` is for the message).
pub(crate) fn parse(
    text: &str,
    tools: &[ToolDef],
    truncated: Option<u32>,
) -> Result<Output, OutputError> {
    if !is_call(text) {
        return Ok(Output::Text(text.trim_end().to_owned()));
    }
    let result = parse_calls(text, tools);
    match (result, truncated) {
        (Err(OutputError::Malformed(_)), Some(max)) => Err(OutputError::Truncated(max)),
        (result, _) => result.map(Output::Calls),
    }
}

fn parse_calls(text: &str, tools: &[ToolDef]) -> Result<Vec<Call>, OutputError> {
    let malformed = |what: &str| OutputError::Malformed(what.to_owned());
    let mut calls = Vec::new();
    let mut rest = text;
    loop {
        let tagged = rest.starts_with('<');
        if tagged {
            rest = rest
                .strip_prefix(CALL_OPEN)
                .ok_or_else(|| malformed("no opening tag"))?;
        }
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<WireCall>();
        let call = match values.next() {
            Some(Ok(call)) => call,
            Some(Err(e)) => return Err(OutputError::Malformed(e.to_string())),
            None => return Err(malformed("no call object")),
        };
        let end = values.byte_offset();
        rest = rest
            .get(end..)
            .ok_or_else(|| malformed("cut inside a call"))?;
        if tagged {
            rest = rest
                .strip_prefix(CALL_CLOSE)
                .ok_or_else(|| malformed("no closing tag"))?;
        }
        if !tools.iter().any(|t| t.name == call.name) {
            return Err(OutputError::NotOffered(call.name));
        }
        calls.push((call.name, call.arguments));
        if rest.is_empty() {
            return Ok(calls);
        }
        rest = rest
            .strip_prefix('\n')
            .ok_or_else(|| malformed("text after a call"))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<ToolDef> {
        ["file_read", "shell_exec"]
            .iter()
            .map(|n| ToolDef {
                name: (*n).into(),
                description: String::new(),
                input_schema: json!({}),
            })
            .collect()
    }

    #[test]
    fn text_is_text() {
        assert_eq!(
            parse("The answer is 4.\n", &tools(), None),
            Ok(Output::Text("The answer is 4.".into()))
        );
    }

    #[test]
    fn calls_are_read_in_order() {
        let text = "<tool_call>\n{\"name\": \"file_read\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>\n{\"name\": \"shell_exec\", \"arguments\": {}}";
        let Ok(Output::Calls(calls)) = parse(text, &tools(), None) else {
            panic!("not calls");
        };
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].0, "file_read");
        assert_eq!(calls[0].1.get("path"), Some(&json!("a")));
        assert_eq!(calls[1].0, "shell_exec");
    }

    #[test]
    fn anything_else_is_an_error() {
        let t = tools();
        let cut = "<tool_call>\n{\"name\": \"file_read\", \"argu";
        assert_eq!(parse(cut, &t, Some(20)), Err(OutputError::Truncated(20)));
        assert!(matches!(
            parse(cut, &t, None),
            Err(OutputError::Malformed(_))
        ));
        let other = "<tool_call>\n{\"name\": \"net_fetch\", \"arguments\": {}}\n</tool_call>";
        assert_eq!(
            parse(other, &t, None),
            Err(OutputError::NotOffered("net_fetch".into()))
        );
        for bad in [
            "<tool_call>\n{\"name\": \"file_read\", \"arguments\": []}\n</tool_call>",
            "<tool_call>\n{\"name\": \"file_read\", \"arguments\": {}, \"x\": 1}\n</tool_call>",
            "<tool_call>\n{\"name\": \"file_read\", \"arguments\": {}}\n</tool_call>trailing",
            "<tool_call>\n{\"name\": \"file_read\", \"arguments\": {}}</tool_call>",
            "<b>bold</b>",
            "{\"name\": \"file_read\", \"arguments\": {}}\n</tool_call>",
            "{\"name\": \"file_read\", \"arguments\": {}} and text",
        ] {
            assert!(
                matches!(parse(bad, &t, None), Err(OutputError::Malformed(_))),
                "{bad}"
            );
        }
    }
}
