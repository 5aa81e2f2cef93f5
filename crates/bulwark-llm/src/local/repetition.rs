//! A degenerate loop in what the model generates: the same short run of
//! tokens, over and over, until `max_tokens`.
//!
//! Why: greedy decoding on a small model can fall into a cycle it never
//! leaves. Asked to save "the names of the blue items" to a file, the 1.5B
//! model wrote `blue\n` 250 times, spent 22 s of a 2-core machine reaching
//! `max_tokens`, and the run then failed with "the tool call was cut off".
//! Stopping at the loop fails the same turn ~20 s sooner, with an error
//! that says what happened.
//!
//! The bar is high enough that real content does not trip it: a cycle of
//! at most [`MAX_PERIOD`] tokens that fills the last [`MIN_SPAN`] tokens,
//! repeated at least [`MIN_REPEATS`] times. A separator line of dashes is
//! a few tokens; a table of distinct rows is not periodic; a file that
//! really is one line a hundred times is not something a person asks a
//! small model to type.

/// The longest cycle looked for, in tokens.
pub(crate) const MAX_PERIOD: usize = 16;
/// Tokens the cycle must fill, at the end of the output.
pub(crate) const MIN_SPAN: usize = 96;
/// Whole repetitions the cycle must show within the span.
pub(crate) const MIN_REPEATS: usize = 6;

/// The period of the cycle that fills the end of `tokens`, when that end is
/// a degenerate loop (see the module doc): `None` otherwise.
pub(crate) fn degenerate_loop<T: PartialEq>(tokens: &[T]) -> Option<usize> {
    if tokens.len() < MIN_SPAN {
        return None;
    }
    let tail = &tokens[tokens.len() - MIN_SPAN..];
    (1..=MAX_PERIOD)
        .filter(|period| MIN_SPAN / period >= MIN_REPEATS)
        .find(|&period| tail[period..].iter().zip(tail).all(|(a, b)| a == b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_word_over_and_over_is_a_loop() {
        // "blue", "\n" as the 1.5B model wrote it.
        let mut out: Vec<u32> = vec![7, 8, 9];
        for _ in 0..60 {
            out.extend([42, 13]);
        }
        assert_eq!(degenerate_loop(&out), Some(2));
        // Not yet, with less than the span repeated.
        assert_eq!(degenerate_loop(&out[..3 + 90]), None);
        // A single token repeated (a run of dashes as one token each).
        assert_eq!(degenerate_loop(&[5u32; MIN_SPAN]), Some(1));
    }

    #[test]
    fn content_that_only_resembles_a_loop_is_not_one() {
        // Rows that share a shape but not their values.
        let rows: Vec<u32> = (0..200).flat_map(|i| [1, 2, 1000 + i, 13]).collect();
        assert_eq!(degenerate_loop(&rows), None);
        // A cycle longer than MAX_PERIOD (a paragraph said twice).
        let long: Vec<u32> = (0..200).map(|i| i % (MAX_PERIOD as u32 + 1)).collect();
        assert_eq!(degenerate_loop(&long), None);
        // A loop that ended: the end of the output is what counts.
        let mut ended = vec![4u32; 120];
        ended.extend(500..520);
        assert_eq!(degenerate_loop(&ended), None);
    }

    proptest! {
        /// Any cycle of up to MAX_PERIOD tokens repeated over the span is
        /// found, whatever came before it, with a period that divides it.
        #[test]
        fn every_short_cycle_filling_the_span_is_found(
            before in proptest::collection::vec(0u32..50, 0..40),
            cycle in proptest::collection::vec(0u32..50, 1..=MAX_PERIOD),
        ) {
            let mut out = before;
            while out.len() < 200 || out.len() % cycle.len() != 0 {
                out.push(cycle[out.len() % cycle.len()]);
            }
            let period = degenerate_loop(&out);
            prop_assert!(period.is_some());
            prop_assert_eq!(cycle.len() % period.unwrap_or(usize::MAX), 0);
        }

        /// Output whose tokens never repeat is never a loop.
        #[test]
        fn distinct_tokens_are_never_a_loop(start in 0u32..1000, len in 0usize..400) {
            let out: Vec<u32> = (start..start + len as u32).collect();
            prop_assert_eq!(degenerate_loop(&out), None);
        }
    }
}
