//! Properties: a copied run is found wherever it sits and however it was
//! re-cased or re-spaced; the index agrees exactly with a naive oracle (no
//! false hits, no misses) on repetitive text; persistence keeps behaviour.

use super::{labels, longest_common, normal, oracle, word_oracle};
use bulwark_policy::TaintLabel;
use bulwark_policy::value_taint::{MIN_RUN, RUN, UntrustedText};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// Prose-like text with case, punctuation, whitespace and non-ASCII.
const TEXT: &str = "[a-zA-Z0-9 .:/_\\t\\nÄéλ-]";

fn text(min: usize, max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("{TEXT}{{{min},{max}}}")).unwrap()
}

/// Re-cases ASCII letters and re-spaces whitespace, as a model copying a
/// command might.
fn disguise(sub: &str, flips: &[bool], spaces: &[String]) -> String {
    let mut out = String::new();
    for (i, ch) in sub.chars().enumerate() {
        let flip = flips.get(i % flips.len().max(1)).copied().unwrap_or(false);
        if ch.is_ascii_whitespace() {
            out.push_str(&spaces[i % spaces.len()]);
        } else if ch.is_ascii_alphabetic() && flip {
            out.push(if ch.is_ascii_lowercase() {
                ch.to_ascii_uppercase()
            } else {
                ch.to_ascii_lowercase()
            });
        } else {
            out.push(ch);
        }
    }
    out
}

/// Puts `arg` somewhere in a call's arguments; returns them and the JSON
/// pointer it sits at.
fn embed(shape: usize, key: &str, arg: String) -> (Value, String) {
    let escaped = key.replace('~', "~0").replace('/', "~1");
    match shape % 4 {
        0 => (json!({ "command": arg, "timeout": 5 }), "/command".into()),
        1 => (
            json!({ "a": [1, { "b": arg }], "c": "short" }),
            "/a/1/b".into(),
        ),
        2 => (json!([true, null, arg]), "/2".into()),
        _ => {
            let mut env = serde_json::Map::new();
            env.insert(key.to_string(), Value::String(arg));
            (json!({ "env": env }), format!("/env/{escaped}"))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn a_copied_run_is_found_wherever_it_sits(
        sub in text(RUN, 120),
        chunk_pre in text(0, 300),
        chunk_post in text(0, 300),
        other in text(0, 300),
        before in text(0, 200),
        after in text(0, 200),
        flips in proptest::collection::vec(any::<bool>(), 1..64),
        spaces in proptest::collection::vec("[ \\t\\n\\r]{1,3}", 1..8),
        shape in 0usize..4,
        key in "[a-z/~]{1,6}",
    ) {
        prop_assume!(normal(&sub).len() >= RUN);
        let mut text = UntrustedText::default();
        text.add(&other, &labels(&[TaintLabel::Peer]), "call-0");
        let chunk_labels = labels(&[TaintLabel::External, TaintLabel::Memory]);
        text.add(&format!("{chunk_pre}{sub}{chunk_post}"), &chunk_labels, "call-1");
        let arg = format!("{before}{}{after}", disguise(&sub, &flips, &spaces));
        let (args, field) = embed(shape, &key, arg);
        let hits = text.find(&args);
        prop_assert!(
            hits.iter().any(|h| h.field == field
                && h.source == "call-1"
                && h.labels == chunk_labels
                && h.run_len >= RUN),
            "no hit at {field}: {hits:?}"
        );
    }

    /// On a tiny alphabet (long repetitive runs, many near misses, runs that
    /// would cross chunk boundaries) the index names exactly the chunks the
    /// documented rule names. Most arguments wrap a piece of a chunk whose
    /// length is close to `RUN`, where an off-by-one would show.
    #[test]
    fn the_index_agrees_with_the_oracle(
        chunks in proptest::collection::vec("[abAB \\n]{0,160}", 1..4),
        arg in "[abAB \\n]{0,60}",
        copy in 0usize..4,
        from in 0usize..160,
        len in (RUN - 6)..(RUN + 6),
        pre in "[abAB \\n]{0,10}",
        post in "[abAB \\n]{0,10}",
    ) {
        let arg = if copy > 0 {
            let c = &chunks[from % chunks.len()];
            let start = from.min(c.len());
            format!("{pre}{}{post}", &c[start..(start + len).min(c.len())])
        } else {
            arg
        };
        let mut text = UntrustedText::default();
        for (i, c) in chunks.iter().enumerate() {
            text.add(c, &labels(&[TaintLabel::External]), &format!("call-{i}"));
        }
        let hits = text.find(&json!({ "arg": arg }));
        let got: BTreeSet<String> = hits.iter().map(|h| h.source.clone()).collect();
        let want: BTreeSet<String> = if arg.len() < MIN_RUN {
            word_oracle(&chunks, &arg).map(|i| format!("call-{i}")).into_iter().collect()
        } else {
            chunks
                .iter()
                .enumerate()
                .filter(|(_, c)| oracle(c, &arg))
                .map(|(i, _)| format!("call-{i}"))
                .collect()
        };
        prop_assert_eq!(&got, &want, "arg {:?} chunks {:?}", arg, chunks);
        let a = normal(&arg);
        for hit in &hits {
            prop_assert_eq!(hit.field.as_str(), "/arg");
            let i: usize = hit.source["call-".len()..].parse().unwrap();
            if a.len() < RUN {
                prop_assert_eq!(hit.run_len, a.len());
            } else {
                prop_assert!(hit.run_len >= RUN);
                prop_assert!(hit.run_len <= longest_common(&a, &normal(&chunks[i])));
            }
        }
        // A short value names at most the first chunk that has it as a word.
        prop_assert!(arg.len() >= MIN_RUN || hits.len() <= 1);
    }

    #[test]
    fn a_restart_keeps_what_is_found(
        chunks in proptest::collection::vec(text(0, 200), 1..4),
        probe in 0usize..4,
        from in 0usize..200,
    ) {
        let mut text = UntrustedText::default();
        for (i, c) in chunks.iter().enumerate() {
            let l = TaintLabel::ALL[i % TaintLabel::ALL.len()];
            text.add(c, &labels(&[l]), &format!("call-{i}"));
        }
        let json = serde_json::to_string(&text).unwrap();
        let back: UntrustedText = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back, &text);
        let c = &chunks[probe % chunks.len()];
        let start = c.floor_char_boundary(from.min(c.len()));
        let piece = &c[start..];
        let args = json!({ "x": piece, "y": [c] });
        prop_assert_eq!(back.find(&args), text.find(&args));
        prop_assert_eq!(back.mentions(piece), text.mentions(piece));
        prop_assert_eq!(back.is_empty(), text.is_empty());
    }
}
