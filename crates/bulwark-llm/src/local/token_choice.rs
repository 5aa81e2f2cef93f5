//! Choosing the next token from the model's logits: the shortlist the
//! grammar is checked against, and the best token no rule bans. Kept
//! apart from the engine because it is pure arithmetic over logits.

use llama_cpp_2::token::LlamaToken;

/// Tokens the grammar filters before the whole vocabulary, when it refuses
/// the greedy favourite: a schema's next token is nearly always among the
/// model's few hundred likeliest.
pub(super) const SHORTLIST: usize = 256;

/// The `k` highest finite, unbanned logits (in id order, as [`argmax`]
/// breaks ties), and the highest logit left out (`-inf` if none): a token
/// of the shortlist above it is the best of the whole vocabulary.
pub(super) fn shortlist(logits: &[f32], banned: &[bool], k: usize) -> (Vec<(usize, f32)>, f32) {
    let mut all: Vec<(usize, f32)> = logits
        .iter()
        .copied()
        .enumerate()
        .filter(|&(id, l)| l.is_finite() && !banned.get(id).copied().unwrap_or(true))
        .collect();
    let mut floor = f32::NEG_INFINITY;
    if all.len() > k {
        all.select_nth_unstable_by(k, |a, b| b.1.total_cmp(&a.1));
        floor = all[k..]
            .iter()
            .map(|&(_, l)| l)
            .fold(f32::NEG_INFINITY, f32::max);
        all.truncate(k);
    }
    all.sort_unstable_by_key(|&(id, _)| id);
    (all, floor)
}

/// The highest finite logit that is not banned.
pub(super) fn argmax(
    logits: impl Iterator<Item = (usize, f32)>,
    banned: &[bool],
) -> Option<LlamaToken> {
    let mut best: Option<(usize, f32)> = None;
    for (id, logit) in logits {
        if !logit.is_finite() || banned.get(id).copied().unwrap_or(true) {
            continue;
        }
        if best.is_none_or(|(_, b)| logit > b) {
            best = Some((id, logit));
        }
    }
    best.and_then(|(id, _)| i32::try_from(id).ok())
        .map(LlamaToken::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortlist_holds_the_best_and_knows_what_it_left_out() {
        let logits = [5.0, 9.0, f32::NEG_INFINITY, 7.0, 1.0, 8.0, 7.0];
        let banned = [false, true, false, false, false, false, false];
        let (list, floor) = shortlist(&logits, &banned, 2);
        // 8.0, and one of the two 7.0s: the other is the floor, so a
        // 7.0 picked from the list would not be known to be the best.
        assert_eq!(list.len(), 2);
        assert_eq!(list[1], (5, 8.0));
        assert!(list[0] == (3, 7.0) || list[0] == (6, 7.0), "{list:?}");
        assert_eq!(floor, 7.0);
        let (all, floor) = shortlist(&logits, &banned, 10);
        assert_eq!(all, vec![(0, 5.0), (3, 7.0), (4, 1.0), (5, 8.0), (6, 7.0)]);
        assert_eq!(floor, f32::NEG_INFINITY);
    }

    #[test]
    fn argmax_skips_banned_and_infinite() {
        let banned = [true, false, false, false];
        let logits = [9.0, f32::NEG_INFINITY, 1.0, 2.0];
        assert_eq!(
            argmax(logits.iter().copied().enumerate(), &banned),
            Some(LlamaToken::new(3))
        );
        assert_eq!(argmax([(0, 1.0)].into_iter(), &banned), None);
    }
}
