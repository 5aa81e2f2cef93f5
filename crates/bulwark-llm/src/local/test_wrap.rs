//! A tool result as the kernel wraps it, for the tests of the notes the
//! driver writes after a read.

pub(crate) const OPEN: &str =
    "<untrusted_0123456789abcdef tool=\"file_read\" source=\"workspace\">";
pub(crate) const CLOSE: &str = "</untrusted_0123456789abcdef>";

pub(crate) fn wrap(body: &str) -> String {
    format!("{OPEN}\n{body}\n{CLOSE}")
}
