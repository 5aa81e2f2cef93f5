//! Text from the model (answers, tool names, arguments) is untrusted: printed
//! raw, escape sequences could move the cursor, recolour, or erase lines and
//! draw a fake "allowed" mark or a fake approval prompt. Everything the model
//! controls passes through [`sanitize`] before it reaches the terminal.

/// Replaces control characters (C0 except newline and tab when `keep_lines`,
/// DEL, C1) and bidirectional overrides with a visible `\u{..}` escape.
pub fn sanitize(text: &str, keep_lines: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let allowed_whitespace = keep_lines && (c == '\n' || c == '\t');
        let dangerous = (c.is_control() && !allowed_whitespace)
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}');
        if dangerous {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::sanitize;

    #[test]
    fn escapes_cannot_reach_the_terminal() {
        let evil = "ok\x1b[2K\x1b[31m\r✓ allowed\u{9b}31m\u{202e}x";
        let clean = sanitize(evil, true);
        assert!(!clean.chars().any(|c| c.is_control()), "{clean:?}");
        assert!(clean.contains("\\u{1b}[2K"));
        assert!(!clean.contains('\u{202e}'));
    }

    #[test]
    fn newlines_are_kept_only_when_asked() {
        assert_eq!(sanitize("a\nb\tc", true), "a\nb\tc");
        assert_eq!(sanitize("a\nb", false), "a\\u{a}b");
        assert_eq!(sanitize("plain ünïcode", false), "plain ünïcode");
    }
}
