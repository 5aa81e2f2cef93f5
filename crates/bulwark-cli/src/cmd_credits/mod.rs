//! `bulwark credits balance | transfer | mint | history | policy`: the
//! operator's hands on the credits ledger.
//!
//! Nothing here decides anything the ledger would not: a transfer is one
//! `Store::transfer`, checked against the paying account's policy in the
//! same serialized transaction that debits it, exactly as an agent's
//! `transfer_credits` is. Every change is audited by the store under the
//! local operator (`user local`, session `cli`). Refusals and mistakes the
//! operator can fix exit 2 with the ledger's message; a store that fails
//! (or a ledger that does not add up) exits 1.

use crate::terminal::sanitize;
use crate::{Failure, usage_error};
use anyhow::{Context, anyhow};
use bulwark_kernel::{Home, LOCAL_USER};
use bulwark_store::{
    AccountKind, Actor, ISSUER, JournalEntry, LedgerError, Policy, Store, TransferReceipt,
    TransferRequest,
};
use serde_json::json;

mod args;
pub use args::CreditsCommand;
use args::*;

/// The actor of every ledger operation this command makes.
fn operator() -> Actor {
    Actor {
        user: LOCAL_USER.to_owned(),
        agent: String::new(),
        session: "cli".to_owned(),
    }
}

/// Refusals and requests the operator can correct are exit 2 with the
/// ledger's message (it already says what to do); a failing store is 1.
fn ledger_failure(err: LedgerError) -> Failure {
    match err {
        LedgerError::Store(_) | LedgerError::Remote { denial: false, .. } => err.into(),
        LedgerError::UnknownAccount(ref id) if id == ISSUER => usage_error(anyhow!(
            "{ISSUER} is not an account: it is where minted credits come from (`bulwark credits history {ISSUER}` lists every mint)"
        )),
        LedgerError::UnknownAccount(_) => usage_error(anyhow!(
            "{err} (`bulwark credits balance` lists the accounts; `bulwark credits mint user:NAME N` opens and funds one)"
        )),
        _ => usage_error(err),
    }
}

/// The kind a `user:`/`agent:` id opens with; a teaching error otherwise.
pub(super) fn openable_kind(id: &str, what: &str) -> Result<AccountKind, Failure> {
    let (kind, name) = if let Some(name) = id.strip_prefix("user:") {
        (AccountKind::User, name)
    } else if let Some(name) = id.strip_prefix("agent:") {
        (AccountKind::Agent, name)
    } else if id.starts_with("child:") {
        return Err(usage_error(anyhow!(
            "{what} {id:?}: a child's account is opened when its parent spawns it and is funded by the parent (the `fund_child` tool, or `bulwark credits transfer agent:PARENT {id} N`)"
        )));
    } else if id.starts_with("system:") {
        return Err(usage_error(anyhow!(
            "{what} {id:?}: system accounts belong to the ledger (system:usage only receives what model calls and tools cost)"
        )));
    } else {
        return Err(usage_error(anyhow!(
            "{what} {id:?}: an account id is user:<name> or agent:<name>, e.g. user:alice or agent:researcher"
        )));
    };
    // The ledger's rule for user and agent names (it checks it again when
    // opening); refused here before the database is touched.
    if !AccountKind::valid_name(name) {
        let prefix = kind.as_str();
        let missing = if name.is_empty() {
            " is missing: it"
        } else {
            ""
        };
        return Err(usage_error(anyhow!(
            "{what} {id:?}: the {prefix} name after `{prefix}:`{missing} must be 1-64 lowercase letters, digits, `-` or `_`, starting with a letter or digit, e.g. {prefix}:alice"
        )));
    }
    Ok(kind)
}

/// The database for reading; its absence is a usage error.
fn open_existing(home: &Home) -> Result<Store, Failure> {
    let path = home.db_path();
    if !path.exists() {
        return Err(usage_error(anyhow!(
            "no database at {} yet, so no credits: create some with `bulwark credits mint user:NAME AMOUNT`",
            path.display()
        )));
    }
    Ok(Store::open(&path).with_context(|| format!("cannot open {}", path.display()))?)
}

/// The database for writing (created when missing), after checking the
/// audit log every change is recorded in, as `run` does.
fn open_for_writing(home: &Home) -> Result<Store, Failure> {
    std::fs::create_dir_all(home.root())
        .with_context(|| format!("cannot create {}", home.root().display()))?;
    let path = home.db_path();
    let store = Store::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
    crate::cmd_audit::require_verified(home, &store.audit_sink())?;
    Ok(store)
}

fn print_json(value: &serde_json::Value) -> Result<(), Failure> {
    println!("{}", serde_json::to_string(value)?);
    Ok(())
}

/// `bulwark credits ...`
pub fn credits(home: &Home, command: CreditsCommand) -> Result<(), Failure> {
    match command {
        CreditsCommand::Balance { account, json } => match account {
            Some(id) => balance_one(home, &id, json),
            None => balance_all(home, json),
        },
        CreditsCommand::Transfer(args) => transfer(home, args),
        CreditsCommand::Mint(args) => mint(home, args),
        CreditsCommand::History {
            account,
            limit,
            json,
        } => history(home, &account, limit, json),
        CreditsCommand::Policy(args) => policy(home, args),
    }
}

fn balance_one(home: &Home, id: &str, json: bool) -> Result<(), Failure> {
    let store = open_existing(home)?;
    let kind = store.account_kind(id).map_err(ledger_failure)?;
    let b = store.balance(id).map_err(ledger_failure)?;
    if json {
        return print_json(&json!({
            "account": id, "kind": kind, "balance": b.balance, "held": b.held,
        }));
    }
    print_accounts(&[(id.to_owned(), kind, b.balance, b.held)]);
    Ok(())
}

fn print_accounts(rows: &[(String, AccountKind, u64, u64)]) {
    let width = rows
        .iter()
        .map(|r| r.0.chars().count())
        .chain(["ACCOUNT".len()])
        .max()
        .unwrap_or(0);
    let digits = |n: u64| n.to_string().len();
    let w_bal = rows
        .iter()
        .map(|r| digits(r.2))
        .chain(["SPENDABLE".len()])
        .max()
        .unwrap_or(0);
    let w_held = rows
        .iter()
        .map(|r| digits(r.3))
        .chain(["HELD".len()])
        .max()
        .unwrap_or(0);
    println!(
        "{:<width$}  {:<6}  {:>w_bal$}  {:>w_held$}",
        "ACCOUNT", "KIND", "SPENDABLE", "HELD"
    );
    for (id, kind, balance, held) in rows {
        println!(
            "{:<width$}  {:<6}  {balance:>w_bal$}  {held:>w_held$}",
            sanitize(id, false),
            kind.as_str()
        );
    }
}

fn balance_all(home: &Home, json: bool) -> Result<(), Failure> {
    let store = open_existing(home)?;
    let accounts = store.accounts().map_err(ledger_failure)?;
    let (total, minted) = store.ledger_totals().map_err(ledger_failure)?;
    let conserved = total == minted;
    // Exact at any size; a JSON number as long as it fits in u64 (a ledger
    // past 2^63 - 1 can only come from a version without the supply limit).
    let number = |n: u128| u64::try_from(n).map_or_else(|_| json!(n.to_string()), |n| json!(n));
    let (total_json, minted_json) = (number(total), number(minted));
    if json {
        let list: Vec<_> = accounts
            .iter()
            .map(|a| {
                json!({"account": a.id, "kind": a.kind,
                    "balance": a.balance.balance, "held": a.balance.held})
            })
            .collect();
        print_json(&json!({
            "accounts": list, "total": total_json, "minted": minted_json, "conserved": conserved,
        }))?;
    } else {
        let rows: Vec<_> = accounts
            .iter()
            .map(|a| (a.id.clone(), a.kind, a.balance.balance, a.balance.held))
            .collect();
        print_accounts(&rows);
        println!();
        if conserved {
            println!(
                "total {total} (spendable + held) = {minted} minted: every credit is accounted for"
            );
            if minted == 0 {
                println!(
                    "no credits yet: create some with `bulwark credits mint user:NAME AMOUNT`"
                );
            }
        }
    }
    if conserved {
        return Ok(());
    }
    Err(Failure {
        code: 1,
        error: anyhow!(
            "the ledger does not add up: the accounts hold {total} (spendable + held) but {minted} were minted. \
             Something changed the database outside Bulwark, or it is damaged: check it with `bulwark audit verify` \
             and restore bulwark.db from a backup"
        ),
    })
}

/// Refuses an empty `--key` before anything is opened.
fn check_key(key: Option<&str>) -> Result<(), Failure> {
    if key.is_some_and(str::is_empty) {
        return Err(usage_error(anyhow!(
            "--key must not be empty: pick any text you can repeat, e.g. --key fund-2025-03"
        )));
    }
    Ok(())
}

/// The given key, or a new one printed before the operation starts, so
/// that a run interrupted at any point can be retried without moving twice.
fn key_or_new(key: Option<String>, json: bool, verb: &str) -> String {
    if let Some(k) = key {
        return k;
    }
    let k = format!("cli-{}", uuid::Uuid::new_v4());
    let note = format!("key {k} (re-running with `--key {k}` is safe: it {verb} once)");
    if json {
        eprintln!("{note}");
    } else {
        println!("{note}");
    }
    k
}

/// The newest journal id touching `account` (0 if none): a receipt at or
/// below it was already there, i.e. the key was a replay.
fn newest_id(store: &Store, account: &str) -> Result<i64, Failure> {
    Ok(store
        .history(account, 1)
        .map_err(ledger_failure)?
        .first()
        .map_or(0, |e| e.id))
}

fn print_receipt(
    store: &Store,
    r: &TransferReceipt,
    replayed: bool,
    verb: &str,
    json: bool,
) -> Result<(), Failure> {
    if json {
        let mut value = serde_json::to_value(r)?;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("replayed".into(), replayed.into());
        }
        return print_json(&value);
    }
    if replayed {
        println!(
            "already done: key {} {verb} {} from {} to {} at {} UTC (journal #{}); nothing moved now",
            sanitize(&r.key, false),
            r.amount,
            sanitize(&r.from, false),
            sanitize(&r.to, false),
            utc(r.time_ms),
            r.id
        );
    } else {
        println!(
            "{verb} {} from {} to {} (journal #{})",
            r.amount,
            sanitize(&r.from, false),
            sanitize(&r.to, false),
            r.id
        );
    }
    for id in [&r.from, &r.to] {
        if id == ISSUER {
            continue;
        }
        let b = store.balance(id).map_err(ledger_failure)?;
        println!(
            "  {}: {} spendable, {} held",
            sanitize(id, false),
            b.balance,
            b.held
        );
    }
    Ok(())
}

fn transfer(home: &Home, args: TransferArgs) -> Result<(), Failure> {
    check_key(args.key.as_deref())?;
    let store = open_for_writing(home)?;
    store.account_kind(&args.from).map_err(ledger_failure)?;
    if args.open {
        let kind = openable_kind(&args.to, "--open cannot open")?;
        if store
            .ensure_account(&args.to, kind)
            .map_err(ledger_failure)?
            && !args.json
        {
            println!(
                "opened account {} with the default policy (at most 1/2 per transfer)",
                sanitize(&args.to, false)
            );
        }
    } else if let Err(LedgerError::UnknownAccount(id)) = store.account_kind(&args.to) {
        return Err(usage_error(anyhow!(
            "account {id:?} does not exist: check the spelling (`bulwark credits balance` lists the accounts), or pass --open to open a user: or agent: account"
        )));
    }
    let key = key_or_new(args.key, args.json, "moves the credits");
    let before = newest_id(&store, &args.from)?;
    let request = TransferRequest {
        key,
        from: args.from.clone(),
        to: args.to,
        amount: args.amount,
        memo: args.memo,
        actor: operator(),
    };
    let receipt = store.transfer(&request).map_err(|err| {
        let rule = matches!(
            err,
            LedgerError::FractionExceeded { .. }
                | LedgerError::BelowReserve { .. }
                | LedgerError::DailyCap { .. }
                | LedgerError::CounterpartyNotAllowed { .. }
        );
        let failure = ledger_failure(err);
        if rule {
            usage_error(anyhow!(
                "{:#} (the account's rules: `bulwark credits policy {}`)",
                failure.error,
                args.from
            ))
        } else {
            failure
        }
    })?;
    print_receipt(&store, &receipt, receipt.id <= before, "moved", args.json)
}

fn mint(home: &Home, args: MintArgs) -> Result<(), Failure> {
    check_key(args.key.as_deref())?;
    let kind = openable_kind(&args.to, "cannot mint into")?;
    let store = open_for_writing(home)?;
    let key = key_or_new(args.key, args.json, "mints");
    let before = newest_id(&store, &args.to)?;
    // Opened in the mint's transaction: a refused mint opens nothing.
    let (receipt, opened) = store
        .mint_opening(&operator(), &key, &args.to, kind, args.amount, &args.memo)
        .map_err(ledger_failure)?;
    if opened && !args.json {
        println!(
            "opened account {} with the default policy (at most 1/2 per transfer)",
            sanitize(&args.to, false)
        );
    }
    print_receipt(&store, &receipt, receipt.id <= before, "minted", args.json)
}

fn history(home: &Home, id: &str, limit: u32, json: bool) -> Result<(), Failure> {
    let store = open_existing(home)?;
    if id != ISSUER {
        store.account_kind(id).map_err(ledger_failure)?;
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let rows = store.history(id, limit).map_err(ledger_failure)?;
    if json {
        return print_json(&json!({"account": id, "entries": rows}));
    }
    if rows.is_empty() {
        println!("no ledger rows touch {}", sanitize(id, false));
        return Ok(());
    }
    let w_from = column(&rows, "FROM", |e| &e.from);
    let w_to = column(&rows, "TO", |e| &e.to);
    println!(
        "{:>8}  {:<19}  {:<8}  {:<w_from$}  {:<w_to$}  {:>20}  NOTE",
        "ID", "TIME (UTC)", "KIND", "FROM", "TO", "AMOUNT"
    );
    for e in &rows {
        println!(
            "{:>8}  {:<19}  {:<8}  {:<w_from$}  {:<w_to$}  {:>20}  {}",
            e.id,
            utc(e.time_ms),
            e.kind,
            sanitize(&e.from, false),
            sanitize(&e.to, false),
            e.amount,
            note(e)
        );
    }
    Ok(())
}

fn column(rows: &[JournalEntry], title: &str, field: fn(&JournalEntry) -> &String) -> usize {
    rows.iter()
        .map(|e| field(e).chars().count())
        .chain([title.len()])
        .max()
        .unwrap_or(title.len())
}

/// The last column of a history row: the memo, or what a hold row did.
fn note(e: &JournalEntry) -> String {
    let memo = sanitize(&e.memo, false);
    let hold = e.hold.map(|h| h.0);
    match (e.kind.as_str(), hold) {
        ("hold", Some(h)) => format!("hold {h} reserved {}", e.amount),
        ("settle", Some(h)) => format!("hold {h}: charged {}, released {}", e.amount, e.released),
        ("release", Some(h)) => format!("hold {h}: released {}", e.released),
        _ => memo,
    }
}

fn policy(home: &Home, args: PolicyArgs) -> Result<(), Failure> {
    let id = args.account.as_str();
    let changing = args.max_fraction.is_some()
        || args.reserve.is_some()
        || args.daily_cap.is_some()
        || !args.counterparties.is_empty()
        || args.any_counterparty;
    if !changing {
        let store = open_existing(home)?;
        let current = store.policy(id).map_err(ledger_failure)?;
        return show_policy(id, &current, args.json);
    }
    let store = open_for_writing(home)?;
    let before = store.policy(id).map_err(ledger_failure)?;
    let mut after = before.clone();
    if let Some(f) = args.max_fraction {
        after.max_fraction_num = f.num;
        after.max_fraction_den = f.den;
    }
    if let Some(floor) = args.reserve {
        after.reserve_floor = floor;
    }
    if let Some(DailyCap(cap)) = args.daily_cap {
        after.daily_cap = cap;
    }
    if args.any_counterparty {
        after.counterparties.clear();
    } else if !args.counterparties.is_empty() {
        let mut parties = args.counterparties.clone();
        parties.sort();
        parties.dedup();
        after.counterparties = parties;
    }
    if after == before {
        if !args.json {
            println!(
                "nothing changed: the policy of {} already is that",
                sanitize(id, false)
            );
        }
        return show_policy(id, &after, args.json);
    }
    store
        .set_policy(&operator(), id, &after)
        .map_err(ledger_failure)?;
    for party in &after.counterparties {
        if matches!(
            store.account_kind(party),
            Err(LedgerError::UnknownAccount(_))
        ) {
            eprintln!(
                "note: counterparty {} does not exist yet; transfers to it are allowed once it does",
                sanitize(party, false)
            );
        }
    }
    if args.json {
        return print_json(&json!({"account": id, "policy": after}));
    }
    println!(
        "changed the policy of {} (audited); it applies from the next operation on",
        sanitize(id, false)
    );
    println!("was:");
    print_policy(&before);
    println!("now:");
    print_policy(&after);
    Ok(())
}

fn show_policy(id: &str, p: &Policy, json: bool) -> Result<(), Failure> {
    if json {
        return print_json(&json!({"account": id, "policy": p}));
    }
    println!("policy of {}", sanitize(id, false));
    print_policy(p);
    Ok(())
}

fn print_policy(p: &Policy) {
    let fraction = match (p.max_fraction_num, p.max_fraction_den) {
        (0, _) => "nothing: no transfers (0/1)".to_owned(),
        (n, d) if n == d => format!("all of the spendable balance ({n}/{d})"),
        (n, d) => format!("{n}/{d} of the spendable balance"),
    };
    println!("  max per transfer  {fraction}");
    println!("  reserve floor     {}", p.reserve_floor);
    match p.daily_cap {
        Some(cap) => println!("  daily cap         {cap} per UTC day"),
        None => println!("  daily cap         none"),
    }
    if p.counterparties.is_empty() {
        println!("  counterparties    any account");
    } else {
        let list: Vec<String> = p
            .counterparties
            .iter()
            .map(|c| sanitize(c, false))
            .collect();
        println!("  counterparties    {}", list.join(", "));
    }
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) of a Unix time in milliseconds.
pub(super) fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
