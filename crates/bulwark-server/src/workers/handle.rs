//! A handle on one running worker: end it, and learn how it ended.

use tokio::sync::{mpsc, watch};

/// Why a worker's supervision ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndReason {
    /// It was asked to shut down (by the server, or `Supervisor::shutdown`).
    Shutdown,
    /// No command and no running turn for the idle timeout.
    Idle,
    /// [`WorkerHandle::kill`].
    Killed,
    /// The same session was opened again; the new worker replaced it.
    Replaced,
    /// The server dropped the conversation's channels.
    Abandoned,
    /// It announced a fatal error, then exited (how, in the text).
    Exited(String),
    /// It died, or broke the protocol (the `WorkerLost` message).
    Lost(String),
}

/// What a pump is asked to do.
#[derive(Debug)]
pub(crate) enum Control {
    /// Ask the worker to shut down, then kill it after the grace period.
    Shutdown(EndReason),
    /// Kill it now.
    Kill(EndReason),
}

/// Controls one worker; cheap to clone.
#[derive(Clone, Debug)]
pub struct WorkerHandle {
    id: u64,
    pid: Option<u32>,
    control: mpsc::UnboundedSender<Control>,
    ended: watch::Receiver<Option<EndReason>>,
}

/// The pump's ends of a handle.
pub(crate) struct HandleParts {
    pub(crate) control: mpsc::UnboundedReceiver<Control>,
    pub(crate) ended: watch::Sender<Option<EndReason>>,
}

impl WorkerHandle {
    pub(crate) fn new(id: u64, pid: Option<u32>) -> (Self, HandleParts) {
        let (control_tx, control) = mpsc::unbounded_channel();
        let (ended_tx, ended) = watch::channel(None);
        (
            Self {
                id,
                pid,
                control: control_tx,
                ended,
            },
            HandleParts {
                control,
                ended: ended_tx,
            },
        )
    }

    /// The supervisor's number for this worker (in its logs).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The worker's process id (for health output and tests).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Kills the worker now (its process group, SIGKILL). The conversation's
    /// events close without a `WorkerLost` error.
    pub fn kill(&self) {
        let _ = self.control.send(Control::Kill(EndReason::Killed));
    }

    /// Asks the worker to finish (it flushes its audit records), killing it
    /// if it has not exited after the shutdown grace.
    pub fn shutdown(&self) {
        let _ = self.control.send(Control::Shutdown(EndReason::Shutdown));
    }

    /// Kills the worker because its session was opened again, and waits
    /// until it is gone.
    pub(crate) async fn replace(&self) {
        let _ = self.control.send(Control::Kill(EndReason::Replaced));
        self.wait().await;
    }

    /// Waits until the worker has been reaped and its slot released.
    pub async fn wait(&self) -> EndReason {
        let mut ended = self.ended.clone();
        match ended.wait_for(Option::is_some).await {
            Ok(reason) => reason
                .clone()
                .unwrap_or_else(|| EndReason::Lost("supervision ended".into())),
            // The pump went away without a verdict (its runtime stopped).
            Err(_) => EndReason::Lost("supervision ended".into()),
        }
    }

    /// How the worker ended, if it has.
    pub fn end_reason(&self) -> Option<EndReason> {
        self.ended.borrow().clone()
    }
}
