//! Property: the store never alters content. Arbitrary Unicode, embedded NULs
//! and JSON-looking junk read back byte-identical and in order.

use bulwark_store::{NewSession, Store};
use proptest::prelude::*;

fn content() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        // Bias towards the awkward cases: NULs, quotes, surrogates' neighbours.
        proptest::collection::vec(
            prop_oneof![
                Just('\0'),
                Just('\''),
                Just('"'),
                Just('\u{FFFF}'),
                Just('\u{10FFFF}'),
                Just('\u{FEFF}'),
                any::<char>()
            ],
            0..64
        )
        .prop_map(|cs| cs.into_iter().collect()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn appended_messages_read_back_identical(
        msgs in proptest::collection::vec((content(), content()), 0..24),
        state in content(),
    ) {
        let store = Store::open_in_memory().unwrap();
        store.create_session(&NewSession { id: "s".into(), agent: "a".into(), user: "u".into() }).unwrap();
        for (role, body) in &msgs {
            store.append_message("s", role, body).unwrap();
        }
        store.save_state("s", &state).unwrap();
        let back = store.messages("s").unwrap();
        prop_assert_eq!(back.len(), msgs.len());
        for (row, (role, body)) in back.iter().zip(&msgs) {
            prop_assert_eq!(row.role.as_bytes(), role.as_bytes());
            prop_assert_eq!(row.content_json.as_bytes(), body.as_bytes());
        }
        let row = store.session("s").unwrap().unwrap();
        prop_assert_eq!(row.state_json.as_deref().map(str::as_bytes), Some(state.as_bytes()));
        prop_assert_eq!(row.message_count, msgs.len() as u64);
    }

    #[test]
    fn arbitrary_session_ids_round_trip(id in content(), agent in content()) {
        let store = Store::open_in_memory().unwrap();
        store.create_session(&NewSession { id: id.clone(), agent: agent.clone(), user: "u".into() }).unwrap();
        store.append_message(&id, "user", "x").unwrap();
        let row = store.session(&id).unwrap().unwrap();
        prop_assert_eq!(row.id.as_bytes(), id.as_bytes());
        prop_assert_eq!(row.agent.as_bytes(), agent.as_bytes());
        let listed = store.list_sessions(Some(&agent), 5).unwrap();
        prop_assert_eq!(listed.len(), 1);
    }
}
