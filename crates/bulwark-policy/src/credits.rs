//! `[credits]` of config.toml: the price list of credit metering.
//!
//! Credits are integer minor units, never floats, so that every charge is
//! exact and the ledger (which stores signed 64-bit amounts) can conserve
//! them. This module only prices things; holding, charging and refusing are
//! the ledger's job. The section being absent means metering is off: nothing
//! is priced and nothing is held.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, Located, Seg};

/// Tokens per price unit: prices are quoted per million tokens, as model
/// providers quote theirs.
const TOKENS_PER_PRICE_UNIT: u128 = 1_000_000;

/// `[credits]` of config.toml.
///
/// ```toml
/// [credits]
/// input_per_mtok = 300
/// output_per_mtok = 1500
/// [credits.tool_costs]
/// shell = 2
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreditsSection {
    /// Credits per million input (prompt) tokens of a model call.
    #[serde(default)]
    pub input_per_mtok: u64,
    /// Credits per million output (completion) tokens of a model call.
    #[serde(default)]
    pub output_per_mtok: u64,
    /// Credits charged per call of a tool domain; a domain not listed is free.
    #[serde(default)]
    pub tool_costs: BTreeMap<String, u64>,
}

impl CreditsSection {
    /// Largest accepted price per million tokens. Costs are computed in
    /// `u128` (so the products cannot overflow) and then must fit the
    /// ledger's `i64` amounts: at this price a call would need more than
    /// nine million million tokens to exceed `i64::MAX`, far beyond any
    /// model's context, so no realistic call is ever clamped.
    pub const MAX_PRICE_PER_MTOK: u64 = 1_000_000_000_000;

    /// Largest accepted cost of one tool call: generous for any real price
    /// list, and small enough that even a very long session's tool costs
    /// stay far below the ledger's `i64::MAX`.
    pub const MAX_TOOL_COST: u64 = 1_000_000_000;

    /// Credits one model call costs:
    /// `ceil((input × input_per_mtok + output × output_per_mtok) / 1_000_000)`.
    ///
    /// Rounded up so that many tiny calls cannot each round down to a free
    /// call. Computed in `u128`, which cannot overflow for validated prices;
    /// the result saturates at `u64::MAX` (only reachable with unvalidated
    /// prices or absurd token counts), and the ledger must refuse any amount
    /// above `i64::MAX` rather than wrap it.
    pub fn llm_cost(&self, input_tokens: u64, output_tokens: u64) -> u64 {
        let input = u128::from(input_tokens).saturating_mul(u128::from(self.input_per_mtok));
        let output = u128::from(output_tokens).saturating_mul(u128::from(self.output_per_mtok));
        let total = input.saturating_add(output).div_ceil(TOKENS_PER_PRICE_UNIT);
        u64::try_from(total).unwrap_or(u64::MAX)
    }

    /// Credits one call of tool `domain` costs; 0 when the domain is not
    /// listed in `tool_costs`.
    pub fn tool_cost(&self, domain: &str) -> u64 {
        self.tool_costs.get(domain).copied().unwrap_or(0)
    }
}

/// Validate `[credits]` of the global config.
pub(crate) fn validate_credits(
    loc: &Located<'_>,
    credits: &CreditsSection,
) -> Result<(), ConfigError> {
    use Seg::Key;
    let max = CreditsSection::MAX_PRICE_PER_MTOK;
    for (field, value) in [
        ("input_per_mtok", credits.input_per_mtok),
        ("output_per_mtok", credits.output_per_mtok),
    ] {
        if value > max {
            return Err(loc.at(
                &[Key("credits"), Key(field)],
                format_args!(
                    "{value} is too large; use at most {max} credits per million tokens (costs must fit the ledger's 64-bit amounts)"
                ),
            ));
        }
    }
    let max = CreditsSection::MAX_TOOL_COST;
    for (domain, &cost) in &credits.tool_costs {
        let at = [Key("credits"), Key("tool_costs"), Key(domain.as_str())];
        if !crate::mcp::is_tool_domain(domain) {
            return Err(loc.at(
                &at,
                format_args!(
                    "{domain:?} is not a tool domain name: use lowercase [a-z0-9_-] (at most 64 characters) or \"mcp:<server>\", as in tools.allow"
                ),
            ));
        }
        if cost > max {
            return Err(loc.at(
                &at,
                format_args!("{cost} is too large; use at most {max} credits per call"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_global_config;

    fn parse(src: &str) -> Result<Option<CreditsSection>, ConfigError> {
        parse_global_config(src, "config.toml").map(|c| c.credits)
    }

    #[test]
    fn absent_section_means_metering_off() {
        assert_eq!(parse("").unwrap(), None);
        assert_eq!(
            parse("[credits]\n").unwrap(),
            Some(CreditsSection::default())
        );
    }

    #[test]
    fn the_documented_example_parses() {
        let c = parse(
            "[credits]\ninput_per_mtok = 300\noutput_per_mtok = 1500\n[credits.tool_costs]\nshell = 2\nweb = 1\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.input_per_mtok, 300);
        assert_eq!(c.output_per_mtok, 1500);
        assert_eq!(c.tool_cost("shell"), 2);
        assert_eq!(c.tool_cost("web"), 1);
        assert_eq!(c.tool_cost("files"), 0);
        // 1000 in × 300 + 2000 out × 1500 = 3_300_000 → 3.3 → 4 credits.
        assert_eq!(c.llm_cost(1000, 2000), 4);
    }

    #[test]
    fn unknown_key_is_located() {
        let e = parse("[credits]\ninput_per_mtok = 1\nprice = 3\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("price"), "{e}");
    }

    #[test]
    fn too_large_prices_name_their_line_and_field() {
        let e =
            parse("[credits]\ninput_per_mtok = 1\noutput_per_mtok = 1000000000001\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert_eq!(e.field.as_deref(), Some("credits.output_per_mtok"));
        assert!(e.message.contains("at most 1000000000000"), "{e}");
        let e = parse("[credits]\ninput_per_mtok = 1000000000001\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        // The maximum itself is accepted.
        parse("[credits]\ninput_per_mtok = 1000000000000\n").unwrap();
    }

    #[test]
    fn bad_tool_costs_are_located() {
        let e = parse("[credits]\n[credits.tool_costs]\nweb = 1\nShell = 2\n").unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert_eq!(e.field.as_deref(), Some("credits.tool_costs.Shell"));
        let e = parse("[credits.tool_costs]\nshell = 1000000001\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.message.contains("at most 1000000000"), "{e}");
        // Negative numbers are not credits.
        let e = parse("[credits.tool_costs]\nshell = -1\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }

    #[test]
    fn model_costs_round_up() {
        let c = CreditsSection {
            input_per_mtok: 1,
            output_per_mtok: 1,
            ..Default::default()
        };
        assert_eq!(c.llm_cost(0, 0), 0);
        assert_eq!(c.llm_cost(1, 0), 1);
        assert_eq!(c.llm_cost(0, 1), 1);
        assert_eq!(c.llm_cost(1_000_000, 0), 1);
        assert_eq!(c.llm_cost(1_000_000, 1), 2);
        // Input and output are summed before rounding, not rounded apiece.
        assert_eq!(c.llm_cost(500_000, 500_000), 1);
    }

    #[test]
    fn zero_prices_cost_nothing() {
        let c = CreditsSection::default();
        assert_eq!(c.llm_cost(u64::MAX, u64::MAX), 0);
        assert_eq!(c.tool_cost("shell"), 0);
    }

    #[test]
    fn huge_costs_saturate_instead_of_wrapping() {
        let max = CreditsSection::MAX_PRICE_PER_MTOK;
        let c = CreditsSection {
            input_per_mtok: max,
            output_per_mtok: max,
            ..Default::default()
        };
        // In range: exact.
        assert_eq!(c.llm_cost(1_000_000, 0), max);
        // 2 × u64::MAX × 10^12 / 10^6 does not fit u64.
        assert_eq!(c.llm_cost(u64::MAX, u64::MAX), u64::MAX);
        // Even unvalidated prices do not overflow the u128 arithmetic.
        let wild = CreditsSection {
            input_per_mtok: u64::MAX,
            output_per_mtok: u64::MAX,
            ..Default::default()
        };
        assert_eq!(wild.llm_cost(u64::MAX, u64::MAX), u64::MAX);
    }
}
