//! A tool result as the text the kernel hands to the model: bounded, with
//! binary content summarized rather than inlined.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use super::CallOutcome;

/// Renders `result`, cutting the text at `limit` bytes with a marker.
pub(crate) fn render(result: CallToolResult, limit: usize) -> CallOutcome {
    let mut parts: Vec<String> = Vec::with_capacity(result.content.len() + 1);
    let mut texts: Vec<&str> = Vec::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(text) => {
                texts.push(&text.text);
                parts.push(text.text.clone());
            }
            ContentBlock::Image(image) => parts.push(format!(
                "[image: {}, {} bytes]",
                short(&image.mime_type),
                base64_len(&image.data)
            )),
            ContentBlock::Audio(audio) => parts.push(format!(
                "[audio: {}, {} bytes]",
                short(&audio.mime_type),
                base64_len(&audio.data)
            )),
            ContentBlock::Resource(embedded) => match &embedded.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    parts.push(format!("[resource: {}]\n{text}", short(uri)));
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => parts.push(format!(
                    "[resource: {}, {}, {} bytes]",
                    short(uri),
                    short(mime_type.as_deref().unwrap_or("application/octet-stream")),
                    base64_len(blob)
                )),
                _ => parts.push("[resource]".into()),
            },
            ContentBlock::ResourceLink(link) => {
                parts.push(format!("[resource link: {}]", short(&link.uri)));
            }
            _ => parts.push("[content of an unknown kind]".into()),
        }
    }
    if let Some(structured) = &result.structured_content {
        // Servers are asked to repeat structured content as a text block;
        // when one already says the same, once is enough.
        let repeated = texts
            .iter()
            .any(|t| serde_json::from_str::<serde_json::Value>(t).is_ok_and(|v| &v == structured));
        if !repeated {
            parts.push(structured.to_string());
        }
    }
    CallOutcome {
        text: bound(parts.join("\n"), limit),
        is_error: result.is_error.unwrap_or(false),
    }
}

/// Decoded size of base64 text (without decoding it).
fn base64_len(data: &str) -> usize {
    let trimmed = data.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

/// A server-supplied label (MIME type, URI) kept short and on one line.
fn short(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// `text` cut at a char boundary so that, with the marker, it stays within
/// `limit` bytes.
pub(crate) fn bound(text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let marker = format!(
        "\n[... cut: the result was {} bytes, the limit is {limit}]",
        text.len()
    );
    let mut end = limit.saturating_sub(marker.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut cut = text;
    cut.truncate(end);
    cut.push_str(&marker);
    cut
}
