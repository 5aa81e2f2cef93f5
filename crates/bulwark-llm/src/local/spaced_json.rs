//! JSON spelled as Python's `json.dumps` spells it, which Qwen's chat
//! template uses: the grammar enforces this spelling and the prompt
//! renders it, so both must agree byte for byte.

use serde_json::Value;

/// A JSON string literal for `text` (quotes and escapes as `serde_json`
/// writes them, which is also how Python's `json.dumps` writes them with
/// `ensure_ascii=False`).
pub(crate) fn json_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// `value` as JSON with `", "` and `": "` separators and no other
/// whitespace: the spelling of Python's `json.dumps` (and of Qwen's chat
/// template), which the grammar enforces and the prompt renders.
pub fn to_spaced_json(value: &Value) -> String {
    let mut out = String::new();
    write_spaced(value, &mut out);
    out
}

fn write_spaced(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_spaced(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&json_string(key));
                out.push_str(": ");
                write_spaced(item, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}
