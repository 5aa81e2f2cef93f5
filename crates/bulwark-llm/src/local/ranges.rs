//! Quantities a question gives ("if I cancel *10 days* before") and the
//! ranges a file's lines state for them ("*7 to 13 days* before", "*at
//! least 14 days*", "*less than 7 days*").
//!
//! Why: the line that answers is the one whose range holds the asked
//! quantity, and no word of the question tells it apart: every refund
//! line said "cancel", "days" and "before", and the 1.5B model read the
//! answer off the last of them. Nor is the asked number absent from such
//! a file: "10" is in no line, yet "7 to 13 days" covers it.
//!
//! Only ranges that name the quantity's unit count ("13 days", not the
//! "10% off" beside them), so a price or a date never reads as a range.

use super::mentions::{is_function_word, stem};

/// A quantity of the question: a number and the word after it ("10
/// days"), the unit lowercase.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Quantity {
    pub(crate) number: String,
    value: f64,
    unit: String,
}

impl Quantity {
    /// The quantity as the question has it, lowercase ("10 days").
    pub(crate) fn spoken(&self) -> String {
        format!("{} {}", self.number, self.unit)
    }
}

/// The quantities `question` gives: a number followed by a word that is
/// not a function word ("10 days", "3 kg", "25 people").
pub(crate) fn asked_quantities(question: &str) -> Vec<Quantity> {
    let tokens = tokens(&question.to_lowercase());
    tokens
        .windows(2)
        .filter_map(|pair| {
            let value = number(&pair[0])?;
            let unit = &pair[1];
            let is_word = unit.chars().all(char::is_alphabetic);
            (is_word && !is_function_word(unit)).then(|| Quantity {
                number: pair[0].clone(),
                value,
                unit: unit.clone(),
            })
        })
        .collect()
}

/// Whether `line` (lowercase) states a range of `quantity`'s unit, and if
/// so whether the quantity is in it; `None` when it states none. Of two
/// ranges on one line, the line holds the quantity if either does.
pub(crate) fn range_holds(line: &str, quantity: &Quantity) -> Option<bool> {
    let tokens = tokens(line);
    let mut verdict: Option<bool> = None;
    for at in 0..tokens.len() {
        if !same_unit(&tokens[at], &quantity.unit) {
            continue;
        }
        if let Some(range) = range_before(&tokens[..at], &tokens[at + 1..]) {
            let holds = range.holds(quantity.value);
            verdict = Some(verdict.unwrap_or(false) || holds);
        }
    }
    verdict
}

/// Whether some line of `lines` (lowercase) states a range of the unit
/// that `number` is given in by the question, and holds it.
pub(crate) fn in_a_stated_range(question: &str, number: &str, lines: &[String]) -> bool {
    asked_quantities(question)
        .iter()
        .filter(|q| q.number == number)
        .any(|q| lines.iter().any(|l| range_holds(l, q) == Some(true)))
}

/// A stated range: its bounds, each with whether it is included.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Range {
    low: Option<(f64, bool)>,
    high: Option<(f64, bool)>,
}

impl Range {
    fn holds(self, value: f64) -> bool {
        let above = self.low.is_none_or(
            |(low, inclusive)| {
                if inclusive { value >= low } else { value > low }
            },
        );
        let below = self.high.is_none_or(|(high, inclusive)| {
            if inclusive {
                value <= high
            } else {
                value < high
            }
        });
        above && below
    }
}

/// The range stated by the tokens right before a unit (`before`) and
/// right after it (`after`): "7 to 13", "between 7 and 13", "14+", "at
/// least 14", "less than 7", "up to 3", "14 ... or more".
fn range_before(before: &[String], after: &[String]) -> Option<Range> {
    let word = |from_end: usize| -> &str {
        before
            .len()
            .checked_sub(from_end)
            .and_then(|i| before.get(i))
            .map_or("", String::as_str)
    };
    let at_least = |value| Range {
        low: Some((value, true)),
        high: None,
    };
    let at_most = |value| Range {
        low: None,
        high: Some((value, true)),
    };
    if word(1) == "+" {
        return number(word(2)).map(at_least);
    }
    let last = number(word(1))?;
    if matches!(word(2), "to" | "-" | "\u{2013}" | "and")
        && let Some(first) = number(word(3))
    {
        let between = word(2) != "and" || word(4) == "between";
        return between.then_some(Range {
            low: Some((first, true)),
            high: Some((last, true)),
        });
    }
    let pair = (word(3), word(2));
    let stated = match pair {
        ("at", "least") | (_, "minimum") => Some(at_least(last)),
        ("at", "most") | ("up", "to") | (_, "maximum") | (_, "within") => Some(at_most(last)),
        ("more" | "longer" | "greater", "than") | (_, "over" | "above") => Some(Range {
            low: Some((last, false)),
            high: None,
        }),
        ("less" | "fewer" | "shorter", "than") | (_, "under" | "below") => Some(Range {
            low: None,
            high: Some((last, false)),
        }),
        _ => None,
    };
    if stated.is_some() {
        return stated;
    }
    let next = |i: usize| after.get(i).map_or("", String::as_str);
    match (next(0), next(1)) {
        ("or" | "and", "more" | "over" | "above" | "longer") => Some(at_least(last)),
        ("or" | "and", "less" | "fewer" | "under" | "below") => Some(at_most(last)),
        _ => None,
    }
}

/// Whether `word` is `unit` or its other number ("day" for "days").
fn same_unit(word: &str, unit: &str) -> bool {
    word == unit || stem(word) == stem(unit)
}

/// A token's value when it is a number ("13", "2.5").
fn number(token: &str) -> Option<f64> {
    let numeric = !token.is_empty() && token.chars().all(|c| c.is_ascii_digit() || c == '.');
    numeric.then(|| token.parse().ok()).flatten()
}

/// Words, numbers, and the signs a range is written with ("+", "-",
/// "–"), in order; "14+" is "14" and "+", "7-13" is "7", "-", "13".
fn tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut kind = ' ';
    for c in text.chars() {
        let this = if c.is_ascii_digit() || (c == '.' && kind == '0') {
            '0'
        } else if c.is_alphabetic() {
            'a'
        } else {
            ' '
        };
        if this != kind && !current.is_empty() {
            out.push(
                std::mem::take(&mut current)
                    .trim_end_matches('.')
                    .to_owned(),
            );
        }
        kind = this;
        if this == ' ' {
            if matches!(c, '+' | '-' | '\u{2013}') {
                out.push(c.to_string());
            }
        } else {
            current.push(c);
        }
    }
    if !current.is_empty() {
        out.push(current.trim_end_matches('.').to_owned());
    }
    out
}

#[cfg(test)]
#[path = "ranges_tests.rs"]
mod tests;
