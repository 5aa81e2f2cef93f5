//! The ledger requests of a worker: credits of the session's agent
//! account, as the session's user, under the session's keys.

use super::*;

impl DatabaseBroker {
    /// A ledger request, for the session's agent account, as the session's
    /// user, with the session's keys. Nothing in the request picks any of
    /// them.
    pub(super) fn ledger(
        &self,
        scope: &mut BrokerScope,
        session: &str,
        request: StoreRequest,
    ) -> StoreReply {
        if !plain_id(session) {
            return failed(
                StoreFailure::Forbidden,
                "credits are not available in a session whose id is not plain",
            );
        }
        let wallet = format!("agent:{}", scope.agent);
        if !scope.wallet_open {
            if let Err(err) = self.store.ensure_account(&wallet, AccountKind::Agent) {
                return ledger_failed(err);
            }
            scope.wallet_open = true;
        }
        let prefix = key_prefix(session);
        let actor = Actor {
            user: scope.user.clone(),
            agent: scope.agent.clone(),
            session: session.to_owned(),
        };
        match request {
            StoreRequest::LedgerBalance {} => match self.store.balance(&wallet) {
                Ok(b) => StoreReply::LedgerBalance {
                    balance: b.balance,
                    held: b.held,
                },
                Err(err) => ledger_failed(err),
            },
            StoreRequest::LedgerTransfer {
                key,
                to,
                amount,
                memo,
            } => {
                let transfer = TransferRequest {
                    key: format!("{prefix}{key}"),
                    from: wallet,
                    to,
                    amount,
                    memo,
                    actor,
                };
                match self.store.transfer(&transfer) {
                    Ok(r) => StoreReply::LedgerTransfer(Box::new(LedgerReceipt {
                        id: r.id,
                        time_ms: r.time_ms,
                        key,
                        from: r.from,
                        to: r.to,
                        amount: r.amount,
                        balance_before: r.balance_before,
                        memo: r.memo,
                    })),
                    Err(err) => ledger_failed(err),
                }
            }
            StoreRequest::LedgerHold { key, amount } => {
                if scope.holds.len() >= MAX_OPEN_HOLDS {
                    return StoreReply::LedgerRefused {
                        message: format!(
                            "this session has {MAX_OPEN_HOLDS} holds open; settle or release one first"
                        ),
                        denial: true,
                    };
                }
                let limits = match &self.limits {
                    None => CreditLimits::default(),
                    Some(lookup) => match lookup(&scope.user) {
                        Ok(limits) => limits,
                        Err(why) => {
                            tracing::error!(user = %scope.user, %why, "cannot read credit limits");
                            return StoreReply::LedgerRefused {
                                message: "the server cannot read this user's credit limits \
                                          (access.toml); no credits can be reserved until \
                                          it is fixed"
                                    .into(),
                                denial: true,
                            };
                        }
                    },
                };
                let hold = HoldRequest {
                    key: format!("{prefix}{key}"),
                    account: wallet,
                    amount,
                    budget: Some(Budget {
                        user: scope.user.clone(),
                        session: session.to_owned(),
                        per_session: limits.per_session,
                        per_day: limits.per_day,
                        per_month: limits.per_month,
                    }),
                    actor,
                };
                match self.store.reserve(&hold) {
                    Ok(HoldId(id)) => {
                        scope.holds.insert(id, amount);
                        StoreReply::LedgerHold { hold: id }
                    }
                    Err(err) => ledger_failed(err),
                }
            }
            StoreRequest::LedgerSettle { key, hold, actual } => {
                let closed = self
                    .store
                    .settle(&format!("{prefix}{key}"), HoldId(hold), actual);
                self.closed(scope, hold, closed)
            }
            StoreRequest::LedgerRelease { key, hold } => {
                let closed = self.store.release(&format!("{prefix}{key}"), HoldId(hold));
                self.closed(scope, hold, closed)
            }
            _ => failed(StoreFailure::Forbidden, "not a ledger operation"),
        }
    }

    /// The reply to a settle or release; a hold no longer open is no
    /// longer the worker's to name.
    fn closed(
        &self,
        scope: &mut BrokerScope,
        hold: i64,
        result: Result<bulwark_store::SettleReceipt, LedgerError>,
    ) -> StoreReply {
        match result {
            Ok(r) => {
                scope.holds.remove(&hold);
                StoreReply::LedgerClosed {
                    id: r.id,
                    hold: r.hold.0,
                    charged: r.charged,
                    released: r.released,
                }
            }
            Err(err) => {
                if matches!(err, LedgerError::HoldClosed { .. }) {
                    scope.holds.remove(&hold);
                }
                ledger_failed(err)
            }
        }
    }
}
