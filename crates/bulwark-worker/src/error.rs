//! Why a worker ended without serving its conversation, and the exit
//! status that says so to the supervisor (the same as when the worker
//! lived in the CLI: 2 for what the operator or the request got wrong, 1
//! for everything else).

use bulwark_kernel::OpenError;
use bulwark_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The process could not harden itself (not dumpable, no core).
    #[error(transparent)]
    Harden(bulwark_sandbox::HardeningError),
    /// Worker mode was started without the supervisor's pipes.
    #[error("cannot take the IPC pipes")]
    Pipes(#[source] std::io::Error),
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error("cannot install the Ctrl-C / SIGTERM handlers")]
    Signals(#[source] std::io::Error),
    /// `Start` names another user or agent than `--user`/`--agent`.
    #[error("this worker was started for a different user or agent than `Start` names")]
    WrongConversation,
    /// Confinement failed under strict enforcement: the reason.
    #[error("{0}")]
    Unconfined(String),
    /// The session to resume is not this user's with this agent, or does
    /// not exist (which of the two is not said).
    #[error("no session `{id}` of user `{user}` with agent `{agent}`")]
    NoSession {
        id: String,
        user: String,
        agent: String,
    },
    /// Another process runs the session; the server's message says which.
    #[error("{0}")]
    Busy(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The session factory refused or failed to open the session.
    #[error("{0}")]
    Open(OpenError),
    /// A setup failure whose text went to the server log only: the user
    /// was given `reference` to quote.
    #[error("reference {reference}")]
    Referenced {
        reference: String,
        #[source]
        source: Box<WorkerError>,
    },
}

impl WorkerError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            WorkerError::Harden(_)
            | WorkerError::WrongConversation
            | WorkerError::NoSession { .. }
            | WorkerError::Open(OpenError::Usage(_)) => 2,
            WorkerError::Referenced { source, .. } => source.exit_code(),
            _ => 1,
        }
    }

    /// The error and its causes on one line, `outer: inner`, as the CLI
    /// prints errors.
    pub fn report(&self) -> String {
        chain(self)
    }
}

/// `err` and its causes, `outer: inner`.
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(err) = cause {
        text.push_str(": ");
        text.push_str(&err.to_string());
        cause = err.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_and_reports_match_the_cli() {
        let setup = WorkerError::Referenced {
            reference: "abc".into(),
            source: Box::new(WorkerError::Open(OpenError::Usage("no agent `x`".into()))),
        };
        assert_eq!(setup.exit_code(), 2);
        assert_eq!(setup.report(), "reference abc: no agent `x`");
        let pipes = WorkerError::Pipes(std::io::Error::other("not a pipe"));
        assert_eq!(pipes.exit_code(), 1);
        assert_eq!(pipes.report(), "cannot take the IPC pipes: not a pipe");
        assert_eq!(WorkerError::WrongConversation.exit_code(), 2);
        assert_eq!(WorkerError::Busy("leased".into()).exit_code(), 1);
        let refused = WorkerError::Open(OpenError::Refused("unsigned".into()));
        assert_eq!(refused.exit_code(), 1);
    }
}
