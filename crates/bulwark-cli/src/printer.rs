//! Streams a turn to the terminal: model text on stdout, tool activity on stderr.

use crate::terminal::sanitize;
use bulwark_audit::Decision;
use bulwark_kernel::{DispatchResult, TurnObserver};
use serde_json::Value;
use std::io::Write;

pub struct Printer {
    at_line_start: bool,
}

impl Printer {
    pub fn new() -> Self {
        Self {
            at_line_start: true,
        }
    }
    fn newline_if_needed(&mut self) {
        if !self.at_line_start {
            println!();
            self.at_line_start = true;
        }
    }
}

fn preview(text: &str, max: usize) -> String {
    let one_line = sanitize(&text.replace('\n', " "), false);
    if one_line.chars().count() <= max {
        one_line
    } else {
        let cut: String = one_line.chars().take(max).collect();
        format!("{cut}…")
    }
}

impl TurnObserver for Printer {
    fn text_delta(&mut self, text: &str) {
        print!("{}", sanitize(text, true));
        let _ = std::io::stdout().flush();
        self.at_line_start = text.ends_with('\n');
    }
    fn tool_call(&mut self, name: &str, input: &Value) {
        self.newline_if_needed();
        eprintln!(
            "  → {} {}",
            sanitize(name, false),
            preview(&input.to_string(), 120)
        );
    }
    fn tool_result(&mut self, _name: &str, result: &DispatchResult) {
        // Error contents already start with "denied (reason)" / "failed (reason)".
        let mark = match result.decision {
            Decision::Denied => "✗",
            Decision::Failed => "!",
            _ => "✓",
        };
        if result.is_error {
            eprintln!("    {mark} {}", preview(&result.content, 160));
        } else {
            eprintln!("    {mark} {}", result.decision.as_str());
        }
    }
}
