//! Supervisor tests against `bulwark-fake-worker` (src/bin/fake_worker.rs).
#![allow(dead_code)]

use bulwark_protocol::protocol::{Command, ErrorCode, Event};
use bulwark_server::workers::{Conversation, OpenRequest, SupervisorConfig, WorkerEnv};
use secrecy::SecretString;
use std::time::Duration;

pub const FAKE: &str = env!("CARGO_BIN_EXE_bulwark-fake-worker");

/// Long enough for a loaded 2-core machine; only reached when a test fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A supervisor configuration for the fake in `mode`.
pub fn config(mode: &str) -> SupervisorConfig {
    let mut config = SupervisorConfig::new(FAKE, Vec::<String>::new(), std::env::temp_dir());
    config.env = WorkerEnv::from_process()
        .with_var("FAKE_WORKER_MODE", SecretString::from(mode))
        .unwrap();
    config.ready_timeout = PATIENCE;
    config
}

pub fn request(user: &str) -> OpenRequest {
    OpenRequest {
        user: user.into(),
        agent: "demo".into(),
        resume: None,
        keys: Vec::new(),
    }
}

pub fn resume(user: &str, session: &str) -> OpenRequest {
    OpenRequest {
        resume: Some(session.into()),
        ..request(user)
    }
}

/// The next event, or `None` when the channel closed.
pub async fn next(conversation: &mut Conversation) -> Option<Event> {
    tokio::time::timeout(PATIENCE, conversation.events.recv())
        .await
        .expect("an event or the end of the channel in time")
}

pub async fn say(conversation: &Conversation, message_id: u64, text: &str) {
    send(
        conversation,
        Command::UserMessage {
            message_id,
            text: text.into(),
        },
    )
    .await;
}

pub async fn send(conversation: &Conversation, command: Command) {
    conversation
        .commands
        .send(command)
        .await
        .expect("the conversation takes commands");
}

/// Every event up to and including the `TurnEnded` of `message_id`.
pub async fn turn(conversation: &mut Conversation, message_id: u64) -> Vec<Event> {
    let mut events = Vec::new();
    loop {
        let event = next(conversation)
            .await
            .unwrap_or_else(|| panic!("closed before turn {message_id} ended: {events:?}"));
        let done = matches!(&event, Event::TurnEnded { message_id: id, .. } if *id == message_id);
        events.push(event);
        if done {
            return events;
        }
    }
}

/// Every event until the channel closes.
pub async fn rest(conversation: &mut Conversation) -> Vec<Event> {
    let mut events = Vec::new();
    while let Some(event) = next(conversation).await {
        events.push(event);
    }
    events
}

pub fn is_worker_lost(event: &Event) -> bool {
    matches!(
        event,
        Event::Error {
            code: ErrorCode::WorkerLost,
            fatal: true,
            ..
        }
    )
}

/// Whether `pid` is a live (not zombie, not reaped) process.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}
