//! Credits in served sessions, through the real worker binary: the worker
//! never opens the database, so its model calls reserve and settle through
//! the server's broker, which picks the account (`agent:<name>`) and the
//! user's budget itself. A spent session budget stops the turn before the
//! model call, and the client is told why.

use crate::common;

use bulwark_protocol::protocol::{Command, ErrorCode, Event, TurnEnd};
use bulwark_server::workers::{
    Broker, Conversation, CreditLimits, DatabaseBroker, OpenRequest, Supervisor, SupervisorConfig,
};
use bulwark_store::{Actor, Store};
use common::{BIN, Bw, scripted};
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(60);
const SESSION_BUDGET: u64 = 10;

async fn turn(c: &mut Conversation, message_id: u64) -> Vec<Event> {
    c.commands
        .send(Command::UserMessage {
            message_id,
            text: "hello".into(),
        })
        .await
        .expect("the worker is open");
    let mut events = Vec::new();
    loop {
        let event = tokio::time::timeout(PATIENCE, c.events.recv())
            .await
            .expect("an event in time")
            .unwrap_or_else(|| panic!("closed: {events:?}"));
        let done = matches!(&event, Event::TurnEnded { message_id: id, .. } if *id == message_id);
        events.push(event);
        if done {
            return events;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_session_pays_through_the_broker_within_its_budget() {
    let bw = Bw::empty();
    bw.write(
        "config.toml",
        "[credits]\ninput_per_mtok = 1000\noutput_per_mtok = 1000\n",
    );
    bw.write("access.toml", "[users.alice]\n");
    let answer =
        r#"{"text": "paid answer", "usage": {"input_tokens": 100, "output_tokens": 2000}}"#;
    bw.agent(
        "payer",
        &scripted(
            "payer",
            "[tools]\nallow = [\"time\"]\n[access]\nmode = \"public\"\n",
        ),
        Some(&[answer; 6].join("\n")),
    );
    let store = Store::open(&bw.path("bulwark.db")).unwrap();
    store
        .ensure_account("agent:payer", bulwark_store::AccountKind::Agent)
        .unwrap();
    store
        .mint(&Actor::default(), "seed", "agent:payer", 1_000, "")
        .unwrap();
    let mut config = SupervisorConfig::new(BIN, ["worker"], bw.home());
    config.broker = Some(Broker::new(DatabaseBroker::new(store.clone()).with_limits(
        |_user| {
            Ok(CreditLimits {
                per_session: Some(SESSION_BUDGET),
                per_day: None,
                per_month: None,
            })
        },
    )));
    let supervisor = Supervisor::new(config);
    let mut c = supervisor
        .open(OpenRequest {
            user: "alice".into(),
            agent: "payer".into(),
            resume: None,
            keys: Vec::new(),
        })
        .await
        .unwrap();

    let mut paid = 0;
    let refusal = loop {
        let events = turn(&mut c, paid + 1).await;
        let error = events.iter().find_map(|e| match e {
            Event::Error { code, message, .. } => Some((*code, message.clone())),
            _ => None,
        });
        if let Some(error) = error {
            assert!(
                events.iter().any(|e| matches!(
                    e,
                    Event::TurnEnded {
                        end: TurnEnd::Stopped,
                        ..
                    }
                )),
                "{events:?}"
            );
            break error;
        }
        assert!(
            events.iter().any(
                |e| matches!(e, Event::TurnEnded { text, .. } if text.contains("paid answer"))
            ),
            "{events:?}"
        );
        paid += 1;
        assert!(paid < 6, "the session budget never stopped a turn");
    };
    assert!(paid >= 1, "at least one turn fits the budget");
    eprintln!("{paid} turns paid before the session budget of {SESSION_BUDGET} stopped one");
    assert_eq!(refusal.0, ErrorCode::BudgetExhausted);
    assert!(refusal.1.contains("not made"), "{}", refusal.1);
    assert!(refusal.1.contains("session budget"), "{}", refusal.1);
    // Each paid turn cost ceil(2.1) = 3 credits, charged to the agent's
    // account and counted against the user's session budget, never past it.
    assert_eq!(store.balance("system:usage").unwrap().balance, 3 * paid);
    let b = store.balance("agent:payer").unwrap();
    assert_eq!((b.balance, b.held), (1_000 - 3 * paid, 0));
    let sessions = store.sessions_of(Some("alice"), Some("payer"), 10).unwrap();
    let used = store.budget_use("alice", &sessions[0].id).unwrap();
    assert!(used.session <= SESSION_BUDGET, "{used:?}");
    assert_eq!(used.session, 3 * paid);
    c.commands.send(Command::Shutdown).await.unwrap();
}
