//! Unit tests of the wrapper unwrapping and script scanning.

use super::*;

fn texts(s: &str) -> Result<Vec<(String, bool)>, String> {
    scan_script(s).map(|ws| ws.into_iter().map(|w| (w.text, w.assignment)).collect())
}

#[test]
fn scan_words_and_assignments() {
    let w = |s: &str, a| (s.to_string(), a);
    assert_eq!(
        texts("A=1 _b=x git 'a b' \"c\\$d\" e\\ f"),
        Ok(vec![
            w("A=1", true),
            w("_b=x", true),
            w("git", false),
            w("a b", false),
            w("c$d", false),
            w("e f", false),
        ])
    );
    assert_eq!(
        texts("'A'=1 git"),
        Ok(vec![w("A=1", false), w("git", false)])
    );
    assert_eq!(texts("A\\=1"), Ok(vec![w("A=1", false)]));
    assert_eq!(texts("1A=1"), Ok(vec![w("1A=1", false)]));
    assert_eq!(texts("git a=b"), Ok(vec![w("git", false), w("a=b", true)]));
    assert_eq!(texts("  "), Ok(vec![]));
    assert_eq!(texts("''"), Ok(vec![w("", false)]));
}

#[test]
fn scan_refuses_metacharacters() {
    for s in [
        "a;b", "a|b", "a&b", "a>b", "a<b", "`a`", "$(a)", "$a", "\"$a\"", "\"`a`\"", "(a)",
        "{a,b}", "a*", "a?", "a[b]", "~", "a\nb", "#c", "a \\\nb", "'a", "\"a", "a\\", "=a", "a^b",
    ] {
        assert!(scan_script(s).is_err(), "{s:?}");
    }
    // Quoted, these are plain text.
    for s in [
        "'a;b'", "\"a|b\"", "'$(x)'", "a\\;b", "'a\nb'", "a#b", "'#'",
    ] {
        assert!(scan_script(s).is_ok(), "{s:?}");
    }
}

#[test]
fn durations() {
    for s in ["10", "2.5", "2.5s", "1m", ".5", "3d", "0"] {
        assert!(is_duration(s), "{s}");
    }
    for s in ["", "s", "git", "1x", "1..2", "-1", "1e3", "inf"] {
        assert!(!is_duration(s), "{s}");
    }
}

#[test]
fn classify_names() {
    assert_eq!(classify(command_name("/usr/bin/env")), Some(Kind::Env));
    assert_eq!(classify(command_name("./sudo")), Some(Kind::Escalator));
    assert_eq!(classify(command_name("git")), None);
    assert_eq!(command_name("/usr/bin/"), "");
}
