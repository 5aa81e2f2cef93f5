//! The broker's unit tests.

use super::*;

/// The supervisor's path: a request naming a hold the worker was not
/// given ends the worker (`Err`), and nothing is asked of the store.
#[tokio::test]
async fn naming_a_foreign_hold_ends_the_worker() {
    let store = Store::open_in_memory().expect("a store");
    let broker = Broker::new(DatabaseBroker::new(store));
    let (to_worker, mut replies) = tokio::sync::mpsc::channel(4);
    let mut scope = BrokerScope::new("alice", "helper");
    let create = StoreRequest::Create {
        session: "a1".into(),
    };
    let created = answer(Some(&broker), &mut scope, 1, create, &to_worker).await;
    assert_eq!(created, Ok(()));
    assert!(replies.try_recv().is_ok());
    let settle = StoreRequest::LedgerSettle {
        key: "k".into(),
        hold: 1,
        actual: 0,
    };
    let ended = answer(Some(&broker), &mut scope, 2, settle, &to_worker).await;
    assert!(ended.is_err(), "{ended:?}");
    assert!(replies.try_recv().is_err(), "no reply is sent");
}

#[test]
fn a_page_holds_at_least_one_item_and_at_most_the_budget() {
    let big = "x".repeat(bulwark_protocol::store_ipc::MAX_STORED_JSON);
    let items = vec![big.clone(), "1".into(), "2".into()];
    let StoreReply::Messages { items: got, more } = page(items.clone().into_iter(), 0) else {
        panic!("a page");
    };
    assert_eq!((got.len(), more), (1, true));
    let StoreReply::Messages { items: got, more } = page(items.clone().into_iter(), 1) else {
        panic!("a page");
    };
    assert_eq!((got, more), (vec!["1".to_string(), "2".to_string()], false));
    let StoreReply::Messages { items: got, more } = page(items.into_iter(), 9) else {
        panic!("a page");
    };
    assert!(got.is_empty() && !more);
}
