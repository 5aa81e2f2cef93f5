//! What a worker may send (the relay allowlist and the event sequence),
//! what happens when it crashes, and the per-conversation FIFO lock.

use super::common::*;
use bulwark_protocol::protocol::{Command, ErrorCode, Event, TurnEnd};
use bulwark_server::workers::{EndReason, Supervisor};
use std::time::Duration;

/// Each of these makes the fake send something the relay must refuse.
const VIOLATIONS: &[&str] = &[
    "unknown-field",
    "unknown-type",
    "wrong-type",
    "oversized",
    "bad-bound",
    "foreign",
    "lost",
    "ready-again",
    "store",
];

#[tokio::test]
async fn anything_off_the_allowlist_kills_the_worker_and_reports_it_lost() {
    let supervisor = Supervisor::new(config("good"));
    for (n, what) in VIOLATIONS.iter().enumerate() {
        let mut conversation = supervisor.open(request("alice")).await.unwrap();
        let pid = conversation.worker.pid().unwrap();
        say(&conversation, 1, what).await;
        let events = rest(&mut conversation).await;
        assert_eq!(
            events.len(),
            1,
            "{what}: only the verdict reaches the server: {events:?}"
        );
        assert!(is_worker_lost(&events[0]), "{what}: {events:?}");
        if let Event::Error { message, .. } = &events[0] {
            assert!(message.contains("killed by signal 9"), "{what}: {message}");
        }
        assert!(!alive(pid), "{what}: the worker is gone");
        assert!(matches!(
            conversation.worker.wait().await,
            EndReason::Lost(_)
        ));
        let stats = supervisor.stats();
        assert_eq!(stats.protocol_violations, n as u64 + 1, "{what}");
        assert_eq!(stats.workers, 0);
    }
}

#[tokio::test]
async fn a_crash_mid_stream_is_one_worker_lost_error_then_the_end() {
    let supervisor = Supervisor::new(config("good"));
    let mut conversation = supervisor.open(request("alice")).await.unwrap();
    say(&conversation, 1, "crash").await;
    let events = rest(&mut conversation).await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(
        events[0],
        Event::TextDelta {
            message_id: 1,
            text: "partial".into()
        }
    );
    assert!(is_worker_lost(&events[1]), "{events:?}");
    if let Event::Error { message, .. } = &events[1] {
        assert!(message.contains("exit status 3"), "{message}");
    }
    // Commands to a lost conversation fail instead of vanishing.
    assert!(
        conversation
            .commands
            .send(Command::Interrupt)
            .await
            .is_err()
    );
    let stats = supervisor.stats();
    assert_eq!(
        (stats.crashed, stats.protocol_violations, stats.workers),
        (1, 0, 0)
    );
}

#[tokio::test]
async fn queued_messages_run_one_at_a_time_in_order() {
    let supervisor = Supervisor::new(config("good"));
    let mut conversation = supervisor.open(request("alice")).await.unwrap();
    say(&conversation, 1, "sleep:300").await;
    say(&conversation, 2, "second").await;
    say(&conversation, 3, "third").await;
    let mut seen = Vec::new();
    for id in 1..=3 {
        for event in turn(&mut conversation, id).await {
            match event {
                Event::TextDelta { message_id, .. } => seen.push(("delta", message_id)),
                Event::TurnEnded { message_id, .. } => seen.push(("end", message_id)),
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(
        seen,
        vec![
            ("delta", 1),
            ("end", 1),
            ("delta", 2),
            ("end", 2),
            ("delta", 3),
            ("end", 3)
        ]
    );
}

#[tokio::test]
async fn a_message_that_waits_too_long_gets_busy_and_the_queue_keeps_order() {
    let mut config = config("good");
    config.turn_wait = Duration::from_millis(1500);
    let supervisor = Supervisor::new(config);
    let mut conversation = supervisor.open(request("alice")).await.unwrap();
    say(&conversation, 1, "hold").await;
    say(&conversation, 2, "hold").await;
    say(&conversation, 3, "never").await;
    assert!(matches!(
        next(&mut conversation).await,
        Some(Event::TextDelta { message_id: 1, .. })
    ));
    // Turn 1 ends quickly, so 2 starts within its wait...
    send(&conversation, Command::Interrupt).await;
    assert!(matches!(
        next(&mut conversation).await,
        Some(Event::TurnEnded {
            message_id: 1,
            end: TurnEnd::Interrupted,
            ..
        })
    ));
    assert!(matches!(
        next(&mut conversation).await,
        Some(Event::TextDelta { message_id: 2, .. })
    ));
    // ...but 2 holds on, and 3 runs out of time.
    match next(&mut conversation).await {
        Some(Event::Error {
            code: ErrorCode::Busy,
            message,
            fatal: false,
        }) => assert!(message.contains("message 3"), "{message}"),
        other => panic!("{other:?}"),
    }
    send(&conversation, Command::Interrupt).await;
    assert!(matches!(
        next(&mut conversation).await,
        Some(Event::TurnEnded { message_id: 2, .. })
    ));
    // The conversation goes on; 3 never ran.
    say(&conversation, 4, "after").await;
    let events = turn(&mut conversation, 4).await;
    assert!(matches!(events[0], Event::TextDelta { message_id: 4, .. }));
}

#[tokio::test]
async fn a_full_queue_answers_busy_at_once() {
    let mut config = config("good");
    config.max_queued = 1;
    let supervisor = Supervisor::new(config);
    let mut conversation = supervisor.open(request("alice")).await.unwrap();
    say(&conversation, 1, "hold").await;
    say(&conversation, 2, "queued").await;
    say(&conversation, 3, "one too many").await;
    // The refusal is the supervisor's, so it may come before the worker's
    // first delta.
    let mut first_two = vec![
        next(&mut conversation).await.unwrap(),
        next(&mut conversation).await.unwrap(),
    ];
    first_two.sort_by_key(|e| matches!(e, Event::Error { .. }));
    assert!(
        matches!(first_two[0], Event::TextDelta { message_id: 1, .. }),
        "{first_two:?}"
    );
    match &first_two[1] {
        Event::Error {
            code: ErrorCode::Busy,
            message,
            fatal: false,
        } => assert!(message.contains("message 3"), "{message}"),
        other => panic!("{other:?}"),
    }
    send(&conversation, Command::Interrupt).await;
    turn(&mut conversation, 1).await;
    turn(&mut conversation, 2).await;
}

#[tokio::test]
async fn approvals_go_to_the_worker_and_tool_events_come_back() {
    let supervisor = Supervisor::new(config("good"));
    let mut conversation = supervisor.open(request("alice")).await.unwrap();
    say(&conversation, 1, "approve").await;
    let request_id = match next(&mut conversation).await {
        Some(Event::ApprovalRequest { request_id, .. }) => request_id,
        other => panic!("{other:?}"),
    };
    send(
        &conversation,
        Command::ToolApproval {
            request_id,
            approve: true,
        },
    )
    .await;
    let events = turn(&mut conversation, 1).await;
    assert_eq!(
        events[0],
        Event::TextDelta {
            message_id: 1,
            text: "approved".into()
        }
    );
    say(&conversation, 2, "tool").await;
    let events = turn(&mut conversation, 2).await;
    assert!(matches!(events[0], Event::ToolCall { message_id: 2, .. }));
    assert!(matches!(events[1], Event::ToolResult { message_id: 2, .. }));
}
