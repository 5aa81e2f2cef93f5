//! The arguments of `bulwark credits`, and their parsers: amounts are
//! positive whole numbers the ledger can store, fractions `num/den`.

use clap::{Args, Subcommand};

/// The largest amount the ledger stores (its amounts are SQLite's signed
/// 64-bit integers).
pub(super) const MAX_AMOUNT: u64 = i64::MAX as u64;

#[derive(Subcommand)]
pub enum CreditsCommand {
    /// Spendable and held credits of one account, or of every account with
    /// the conservation check (balances + held == minted; exit 1 if not).
    #[command(
        after_help = "Examples:\n  bulwark credits balance                      every account, and the totals\n  bulwark credits balance agent:researcher\n  bulwark credits balance --json\n\nAccounts: user:<name> and agent:<name> (opened by `credits mint`, an agent's\nwhen it first runs), child:<id> (a child agent's, funded by its parent),\nsystem:usage (what model calls and tool costs were paid to). `held` is\nreserved by model calls and tool calls in flight."
    )]
    Balance {
        /// The account (default: every account).
        account: Option<String>,
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Move credits from one account to another, under the paying
    /// account's policy (at most half per transfer by default).
    #[command(
        after_help = "Examples:\n  bulwark credits transfer user:alice agent:researcher 400 --memo \"march budget\"\n  bulwark credits transfer user:alice agent:researcher 400 --key fund-2025-03\n  bulwark credits transfer user:alice agent:new 100 --open\n\nThe paying account's rules apply exactly as they do to agents: at most its\nmax fraction of the spendable balance per transfer, never below its reserve\nfloor, within its daily cap, only to its counterparties (see `bulwark credits\npolicy FROM`). A refusal exits 2, names the rule, and moves nothing.\n\nEvery transfer has an idempotency key: re-running with the same --key (and\nthe same accounts, amount and memo) moves the credits once. Without --key a\nnew one is made and printed before the transfer starts."
    )]
    Transfer(TransferArgs),
    /// Create new credits in a user: or agent: account (opened with the
    /// default policy when missing). The only way credits come into being.
    #[command(
        after_help = "Examples:\n  bulwark credits mint user:alice 10000 --memo \"monthly allowance\"\n  bulwark credits mint agent:researcher 500 --key topup-2025-03\n\nAmounts are whole minor units (if your unit is a cent, 10000 is 100.00).\nA child:<id> account is funded by its parent (`fund_child`, or `bulwark\ncredits transfer agent:PARENT child:ID N`); system accounts cannot be minted\ninto. Re-running with the same --key mints once."
    )]
    Mint(MintArgs),
    /// The newest ledger rows touching an account, newest first.
    #[command(
        after_help = "Examples:\n  bulwark credits history agent:researcher\n  bulwark credits history user:alice --limit 100 --json\n  bulwark credits history system:issuer        every mint\n\nKinds: mint, transfer, hold (a call reserves its maximum cost), settle (the\nactual cost is paid to system:usage, the rest released), release (the call\nwas not made; everything goes back)."
    )]
    History {
        /// The account (or system:issuer, for every mint).
        account: String,
        /// How many rows to show.
        #[arg(short = 'n', long, default_value_t = 20, value_name = "N",
              value_parser = clap::value_parser!(u32).range(1..))]
        limit: u32,
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show an account's spending rules, or change the ones given (the
    /// others are kept). Changes are audited.
    #[command(
        after_help = "Examples:\n  bulwark credits policy agent:researcher\n  bulwark credits policy agent:researcher --max-fraction 1/1 --reserve 100\n  bulwark credits policy agent:researcher --daily-cap 5000\n  bulwark credits policy agent:researcher --daily-cap none\n  bulwark credits policy agent:researcher --counterparty user:alice --counterparty agent:helper\n  bulwark credits policy agent:researcher --any-counterparty\n\nThe rules bind every debit of the account: --max-fraction limits one\ntransfer to NUM/DEN of the spendable balance (default 1/2; 0/1 forbids\ntransfers, 1/1 allows all); --reserve is the balance a transfer or a call\nmust leave; --daily-cap limits transfers plus what calls cost per UTC day;\n--counterparty replaces the accounts it may pay (default: any). They apply\nfrom the next operation on."
    )]
    Policy(PolicyArgs),
}

#[derive(Args)]
pub struct TransferArgs {
    /// The paying account.
    pub(super) from: String,
    /// The receiving account.
    pub(super) to: String,
    /// Whole minor units, at least 1.
    #[arg(value_parser = parse_amount, allow_negative_numbers = true)]
    pub(super) amount: u64,
    /// A note kept with the journal row.
    #[arg(long, default_value = "", value_name = "TEXT")]
    pub(super) memo: String,
    /// Idempotency key: the same key moves the credits once.
    #[arg(long, value_name = "KEY")]
    pub(super) key: Option<String>,
    /// Open TO (user: or agent:, default policy) if it does not exist yet.
    #[arg(long)]
    pub(super) open: bool,
    /// Print the receipt as one JSON object.
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Args)]
pub struct MintArgs {
    /// The receiving account: user:<name> or agent:<name>.
    pub(super) to: String,
    /// Whole minor units, at least 1.
    #[arg(value_parser = parse_amount, allow_negative_numbers = true)]
    pub(super) amount: u64,
    /// A note kept with the journal row.
    #[arg(long, default_value = "", value_name = "TEXT")]
    pub(super) memo: String,
    /// Idempotency key: the same key mints once.
    #[arg(long, value_name = "KEY")]
    pub(super) key: Option<String>,
    /// Print the receipt as one JSON object.
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Args)]
pub struct PolicyArgs {
    /// The account.
    pub(super) account: String,
    /// At most this fraction of the spendable balance per transfer.
    #[arg(long, value_name = "NUM/DEN", value_parser = parse_fraction)]
    pub(super) max_fraction: Option<Fraction>,
    /// The spendable balance every transfer or call must leave.
    #[arg(long, value_name = "N", value_parser = parse_limit, allow_negative_numbers = true)]
    pub(super) reserve: Option<u64>,
    /// Transfers plus call costs per UTC day, or `none`.
    #[arg(long, value_name = "N|none", value_parser = parse_cap, allow_negative_numbers = true)]
    pub(super) daily_cap: Option<DailyCap>,
    /// An account this one may pay (repeatable; replaces the list).
    #[arg(long = "counterparty", value_name = "ACCOUNT")]
    pub(super) counterparties: Vec<String>,
    /// Allow paying any account (empties the counterparty list).
    #[arg(long, conflicts_with = "counterparties")]
    pub(super) any_counterparty: bool,
    /// Print the policy as one JSON object.
    #[arg(long)]
    pub(super) json: bool,
}

/// `--max-fraction NUM/DEN`, validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fraction {
    pub(super) num: u64,
    pub(super) den: u64,
}

/// `--daily-cap N|none`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DailyCap(pub(super) Option<u64>);

/// A positive amount of whole minor units that the ledger can store.
pub(super) fn parse_amount(text: &str) -> Result<u64, String> {
    let example = "a whole number of minor units, e.g. 250";
    if text.is_empty() {
        return Err(format!("an amount is {example}"));
    }
    if text.starts_with('-') {
        return Err(format!("must be positive: an amount is {example}"));
    }
    if text.contains(['.', ',']) {
        return Err(format!(
            "credits are whole minor units, written without a decimal point or separators: {example} (if your unit is a cent, 2.50 is 250)"
        ));
    }
    let value = parse_whole(text, example)?;
    if value == 0 {
        return Err(format!("must be at least 1: an amount is {example}"));
    }
    Ok(value)
}

/// A limit (0 allowed) that the ledger can store.
pub(super) fn parse_limit(text: &str) -> Result<u64, String> {
    let example = "a whole number of minor units (0 or more), e.g. 100";
    if text.starts_with('-') {
        return Err(format!("cannot be negative: a limit is {example}"));
    }
    if text.contains(['.', ',']) {
        return Err(format!(
            "credits are whole minor units, written without a decimal point or separators: {example}"
        ));
    }
    parse_whole(text, example)
}

/// Digits only, at most [`MAX_AMOUNT`].
pub(super) fn parse_whole(text: &str, example: &str) -> Result<u64, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{text:?} is not a number: expected {example}"));
    }
    match text.parse::<u64>() {
        Ok(v) if v <= MAX_AMOUNT => Ok(v),
        _ => Err(format!(
            "{text} is larger than the largest amount the ledger stores ({MAX_AMOUNT})"
        )),
    }
}

pub(super) fn parse_fraction(text: &str) -> Result<Fraction, String> {
    let shape = "expected NUM/DEN with 0 <= NUM <= DEN and DEN > 0, e.g. 1/2 (half), 1/1 (all), 0/1 (no transfers)";
    let Some((num, den)) = text.split_once('/') else {
        return Err(format!("{text:?} is not a fraction: {shape}"));
    };
    let whole = |part: &str| {
        if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
            part.parse::<u64>()
                .ok()
                .filter(|v| *v <= MAX_AMOUNT)
                .ok_or_else(|| format!("{part} is too large: {shape}"))
        } else {
            Err(format!("{text:?} is not a fraction: {shape}"))
        }
    };
    let (num, den) = (whole(num.trim())?, whole(den.trim())?);
    if den == 0 {
        return Err(format!(
            "{text}: the denominator must be at least 1; {shape}"
        ));
    }
    if num > den {
        return Err(format!(
            "{text} is more than the whole balance: one transfer can move at most all of it (1/1); {shape}"
        ));
    }
    Ok(Fraction { num, den })
}

pub(super) fn parse_cap(text: &str) -> Result<DailyCap, String> {
    if text.eq_ignore_ascii_case("none") {
        return Ok(DailyCap(None));
    }
    parse_limit(text)
        .map(|v| DailyCap(Some(v)))
        .map_err(|e| format!("{e}; or `none` for no cap"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd_credits::{openable_kind, utc};
    use bulwark_store::AccountKind;

    #[test]
    fn amounts_are_positive_whole_storable_numbers() {
        assert_eq!(parse_amount("250"), Ok(250));
        assert_eq!(parse_amount("9223372036854775807"), Ok(MAX_AMOUNT));
        for bad in [
            "",
            "0",
            "-5",
            "2.5",
            "1,000",
            "abc",
            "+5",
            " 5",
            "9223372036854775808",
            "99999999999999999999999",
        ] {
            assert!(parse_amount(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(parse_amount("0").unwrap_err().contains("at least 1"));
        assert!(parse_amount("-5").unwrap_err().contains("positive"));
        assert!(
            parse_amount("2.5")
                .unwrap_err()
                .contains("whole minor units")
        );
        assert!(
            parse_amount("18446744073709551616")
                .unwrap_err()
                .contains("largest")
        );
    }

    #[test]
    fn fractions_and_caps() {
        assert_eq!(parse_fraction("1/2"), Ok(Fraction { num: 1, den: 2 }));
        assert_eq!(parse_fraction("0/1"), Ok(Fraction { num: 0, den: 1 }));
        assert_eq!(parse_fraction("1/1"), Ok(Fraction { num: 1, den: 1 }));
        assert!(parse_fraction("3/2").unwrap_err().contains("more than"));
        assert!(parse_fraction("0/0").unwrap_err().contains("denominator"));
        assert!(
            parse_fraction("abc")
                .unwrap_err()
                .contains("not a fraction")
        );
        assert!(parse_fraction("1/").is_err());
        assert!(parse_fraction("-1/2").is_err());
        assert_eq!(parse_cap("none"), Ok(DailyCap(None)));
        assert_eq!(parse_cap("0"), Ok(DailyCap(Some(0))));
        assert!(parse_cap("-3").is_err());
        assert_eq!(parse_limit("0"), Ok(0));
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc(1_735_689_599_999), "2024-12-31 23:59:59");
        assert_eq!(utc(-1000), "1969-12-31 23:59:59");
    }

    #[test]
    fn only_user_and_agent_accounts_open() {
        assert_eq!(
            openable_kind("user:alice", "x").ok(),
            Some(AccountKind::User)
        );
        assert_eq!(openable_kind("agent:r", "x").ok(), Some(AccountKind::Agent));
        for bad in ["child:a.1", "system:usage", "alice", "user:"] {
            assert!(openable_kind(bad, "x").is_err(), "{bad}");
        }
    }
}
