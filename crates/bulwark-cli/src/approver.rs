//! Asks the person at the terminal. With no terminal on stdin, every request
//! is denied: an unattended run must not approve anything by accident.

use crate::terminal::sanitize;
use bulwark_kernel::{ApprovalAnswer, ApprovalRequest, Approver, PreApproved};
use std::io::{BufRead, IsTerminal, Write};

pub struct TerminalApprover {
    pre: PreApproved,
}

impl TerminalApprover {
    pub fn new(pre: PreApproved) -> Self {
        Self { pre }
    }
}

fn ask_blocking(request: ApprovalRequest) -> ApprovalAnswer {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "\n  approval needed: {} ({}:{})\n  why: {}\n  args: {}",
        sanitize(&request.tool, false),
        request.domain,
        request.operation,
        sanitize(&request.why, false),
        sanitize(&request.args_preview, false)
    );
    let stdin = std::io::stdin();
    loop {
        let _ = write!(err, "  allow [o]nce, allow for this [s]ession, or [d]eny? ");
        let _ = err.flush();
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => return ApprovalAnswer::Deny,
            Ok(_) => {}
        }
        match line.trim().to_ascii_lowercase().as_str() {
            "o" | "once" | "y" | "yes" => return ApprovalAnswer::AllowOnce,
            "s" | "session" => return ApprovalAnswer::AllowSession,
            "d" | "deny" | "n" | "no" => return ApprovalAnswer::Deny,
            _ => {}
        }
    }
}

#[async_trait::async_trait]
impl Approver for TerminalApprover {
    async fn ask(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        if self.pre.allows(request) {
            return ApprovalAnswer::AllowOnce;
        }
        if !std::io::stdin().is_terminal() {
            eprintln!(
                "  approval needed for {} ({}:{}) but nobody is at a terminal: denied (pass --approve {}:{} to allow)",
                request.tool, request.domain, request.operation, request.domain, request.operation
            );
            return ApprovalAnswer::Deny;
        }
        let request = request.clone();
        tokio::task::spawn_blocking(move || ask_blocking(request))
            .await
            .unwrap_or(ApprovalAnswer::Deny)
    }
}
