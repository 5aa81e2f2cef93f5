//! The supervisor's life cycle of workers: start, ready timeout, refusal,
//! caps, re-open, idle timeout, kill and shutdown.

use super::common::*;
use bulwark_protocol::protocol::{Command, ErrorCode, Event, TurnEnd};
use bulwark_server::workers::{CapScope, EndReason, Supervisor, SupervisorError};
use std::time::Duration;

#[tokio::test]
async fn a_good_worker_streams_a_turn_and_shuts_down_cleanly() {
    let supervisor = Supervisor::new(config("good"));
    let mut conversation = supervisor.open(request("alice")).await.unwrap();
    assert!(conversation.session_id.starts_with("fake-"));
    assert_eq!(conversation.history_messages, 0);
    let stats = supervisor.stats();
    assert_eq!((stats.workers, stats.spawned), (1, 1));
    assert_eq!(stats.per_user.get("alice"), Some(&1));

    say(&conversation, 1, "hello").await;
    let events = turn(&mut conversation, 1).await;
    assert_eq!(
        events,
        vec![
            Event::TextDelta {
                message_id: 1,
                text: "echo: hello".into()
            },
            Event::TurnEnded {
                message_id: 1,
                end: TurnEnd::Completed,
                text: "hello".into(),
                usage: Default::default()
            }
        ]
    );

    let pid = conversation.worker.pid().unwrap();
    send(&conversation, Command::Shutdown).await;
    assert_eq!(
        rest(&mut conversation).await,
        vec![],
        "a clean end has no error"
    );
    assert_eq!(conversation.worker.wait().await, EndReason::Shutdown);
    assert!(!alive(pid));
    let stats = supervisor.stats();
    assert_eq!((stats.workers, stats.crashed), (0, 0));
    assert!(stats.per_user.is_empty());
}

#[tokio::test]
async fn a_worker_that_is_never_ready_is_killed_at_the_ready_timeout() {
    let mut config = config("silent");
    config.ready_timeout = Duration::from_millis(300);
    let supervisor = Supervisor::new(config);
    let err = supervisor.open(request("alice")).await.err().unwrap();
    assert!(matches!(err, SupervisorError::ReadyTimeout(_)), "{err:?}");
    let stats = supervisor.stats();
    assert_eq!((stats.workers, stats.ready_timeouts), (0, 1));
}

#[tokio::test]
async fn setup_refusals_and_early_exits_are_typed_errors() {
    let supervisor = Supervisor::new(config("refuse"));
    match supervisor.open(request("alice")).await.err().unwrap() {
        SupervisorError::Refused { code, message } => {
            assert_eq!(code, ErrorCode::Forbidden);
            assert_eq!(message, "not your session");
        }
        other => panic!("{other:?}"),
    }
    let supervisor = Supervisor::new(config("exit"));
    match supervisor.open(request("alice")).await.err().unwrap() {
        SupervisorError::Exited(status) => assert_eq!(status, "exit status 7"),
        other => panic!("{other:?}"),
    }
    let supervisor = Supervisor::new(config("garbage"));
    let err = supervisor.open(request("alice")).await.err().unwrap();
    assert!(matches!(err, SupervisorError::Protocol(_)), "{err:?}");
    assert_eq!(supervisor.stats().workers, 0);
}

#[tokio::test]
async fn caps_hold_globally_and_per_user() {
    let mut config = config("good");
    config.max_workers = 2;
    config.max_workers_per_user = 1;
    let supervisor = Supervisor::new(config);
    let alice = supervisor.open(request("alice")).await.unwrap();
    let err = supervisor.open(request("alice")).await.err().unwrap();
    assert!(
        matches!(
            err,
            SupervisorError::AtCapacity {
                scope: CapScope::User,
                limit: 1
            }
        ),
        "{err:?}"
    );
    let _bob = supervisor.open(request("bob")).await.unwrap();
    let err = supervisor.open(request("carol")).await.err().unwrap();
    assert!(
        matches!(
            err,
            SupervisorError::AtCapacity {
                scope: CapScope::Global,
                limit: 2
            }
        ),
        "{err:?}"
    );
    assert_eq!(supervisor.stats().spawned, 2, "refused opens spawn nothing");

    alice.worker.kill();
    assert_eq!(alice.worker.wait().await, EndReason::Killed);
    let _carol = supervisor.open(request("carol")).await.unwrap();
    let stats = supervisor.stats();
    assert_eq!((stats.workers, stats.refused_at_capacity), (2, 2));
}

#[tokio::test]
async fn reopening_a_session_kills_the_previous_worker_first() {
    let supervisor = Supervisor::new(config("good"));
    let mut first = supervisor.open(resume("alice", "s1")).await.unwrap();
    assert_eq!(first.session_id, "s1");
    assert_eq!(first.history_messages, 3);
    let first_pid = first.worker.pid().unwrap();
    // Another user's session of the same id is not touched.
    let bob = supervisor.open(resume("bob", "s1")).await.unwrap();

    let mut second = supervisor.open(resume("alice", "s1")).await.unwrap();
    assert_eq!(first.worker.end_reason(), Some(EndReason::Replaced));
    assert!(!alive(first_pid));
    assert_eq!(rest(&mut first).await, vec![], "replaced, not lost");
    assert_eq!(bob.worker.end_reason(), None);
    assert_eq!(supervisor.stats().workers, 2);

    say(&second, 1, "still here").await;
    assert_eq!(turn(&mut second, 1).await.len(), 2);
}

#[tokio::test]
async fn an_idle_worker_is_shut_down_but_a_running_turn_is_not_idle() {
    let mut config = config("good");
    config.idle_timeout = Duration::from_millis(400);
    let supervisor = Supervisor::new(config);
    let mut conversation = supervisor.open(request("alice")).await.unwrap();
    // A turn longer than the idle timeout runs to its end.
    say(&conversation, 1, "sleep:1200").await;
    let events = turn(&mut conversation, 1).await;
    assert!(matches!(
        events.last(),
        Some(Event::TurnEnded {
            end: TurnEnd::Completed,
            ..
        })
    ));
    // Then nothing happens, and the worker is shut down.
    assert_eq!(rest(&mut conversation).await, vec![]);
    assert_eq!(conversation.worker.wait().await, EndReason::Idle);
    let stats = supervisor.stats();
    assert_eq!((stats.workers, stats.idle_closed, stats.crashed), (0, 1, 0));
}

#[tokio::test]
async fn kill_ends_the_conversation_without_a_worker_lost_error() {
    let supervisor = Supervisor::new(config("good"));
    let mut conversation = supervisor.open(request("alice")).await.unwrap();
    let pid = conversation.worker.pid().unwrap();
    conversation.worker.kill();
    assert_eq!(rest(&mut conversation).await, vec![]);
    assert_eq!(conversation.worker.wait().await, EndReason::Killed);
    assert!(!alive(pid));
    assert_eq!(supervisor.stats().crashed, 0);
}

#[tokio::test]
async fn dropping_the_conversation_ends_the_worker() {
    let supervisor = Supervisor::new(config("good"));
    let conversation = supervisor.open(request("alice")).await.unwrap();
    let worker = conversation.worker.clone();
    drop(conversation);
    assert_eq!(worker.wait().await, EndReason::Abandoned);
    assert_eq!(supervisor.stats().workers, 0);
}

#[tokio::test]
async fn shutdown_ends_every_worker_and_refuses_new_ones() {
    let supervisor = Supervisor::new(config("good"));
    let a = supervisor.open(request("alice")).await.unwrap();
    let b = supervisor.open(request("bob")).await.unwrap();
    supervisor.shutdown().await;
    assert_eq!(a.worker.end_reason(), Some(EndReason::Shutdown));
    assert_eq!(b.worker.end_reason(), Some(EndReason::Shutdown));
    assert_eq!(supervisor.stats().workers, 0);
    let err = supervisor.open(request("carol")).await.err().unwrap();
    assert!(matches!(err, SupervisorError::ShuttingDown), "{err:?}");
}

#[tokio::test]
async fn a_second_start_and_out_of_bounds_commands_are_answered_not_forwarded() {
    let supervisor = Supervisor::new(config("good"));
    let mut conversation = supervisor.open(request("alice")).await.unwrap();
    send(
        &conversation,
        Command::Start {
            user: "mallory".into(),
            agent: "demo".into(),
            resume: None,
        },
    )
    .await;
    let long = "x".repeat(bulwark_protocol::protocol::MAX_MESSAGE_CHARS + 1);
    say(&conversation, 1, &long).await;
    for _ in 0..2 {
        let event = next(&mut conversation).await.unwrap();
        assert!(
            matches!(
                event,
                Event::Error {
                    code: ErrorCode::BadCommand,
                    fatal: false,
                    ..
                }
            ),
            "{event:?}"
        );
    }
    say(&conversation, 2, "fine").await;
    assert_eq!(turn(&mut conversation, 2).await.len(), 2);
}

#[tokio::test]
async fn open_requests_out_of_bounds_are_refused_before_spawning() {
    let supervisor = Supervisor::new(config("good"));
    let err = supervisor
        .open(request(&"u".repeat(1000)))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, SupervisorError::BadRequest(_)), "{err:?}");
    assert_eq!(supervisor.stats().spawned, 0);
}
