//! Server-sent event streams as the model providers send them, for the
//! scripted providers that tests point the real drivers at.

use serde_json::Value;

/// OpenAI-style streaming: each chunk as one `data:` event, then
/// `data: [DONE]`.
pub fn openai(chunks: &[Value]) -> Vec<String> {
    let mut events: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    events.push("data: [DONE]\n\n".into());
    events
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn streams_are_framed_as_the_providers_frame_them() {
        assert_eq!(
            super::openai(&[json!({"a": 1})]),
            ["data: {\"a\":1}\n\n", "data: [DONE]\n\n"]
        );
    }
}
