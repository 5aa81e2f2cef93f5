//! Pattern matching and pattern subsumption, written here because the policy
//! needs both "does this pattern match this value" and "is every value this
//! pattern matches also matched by that pattern" (for child ⊆ parent and for
//! ceilings), and no glob crate answers the second question.
//!
//! Two layers:
//! * a *segment* glob on one string, where `*` matches any run of characters
//!   and `?` exactly one; everything else is literal;
//! * a *path* glob on '/'-separated workspace paths, where each component is
//!   a segment glob (so `*` never crosses '/') and a component that is exactly
//!   `**` matches zero or more whole components.
//!
//! Subsumption is decided by matching the narrower pattern *as text* with the
//! wider pattern, where a wildcard of the narrower pattern may only be
//! consumed by an equal-or-wider wildcard. That is sound (never claims ⊆ when
//! it is false) and complete for the patterns people actually write; where it
//! is incomplete it answers "not a subset", which fails closed.

/// Token of a segment glob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Lit(char),
    One,
    Any,
}

fn tokens(pattern: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    for c in pattern.chars() {
        match c {
            '*' => {
                // `**` inside a segment means the same as `*`.
                if out.last() != Some(&Tok::Any) {
                    out.push(Tok::Any);
                }
            }
            '?' => out.push(Tok::One),
            c => out.push(Tok::Lit(c)),
        }
    }
    out
}

/// Does segment glob `pattern` match the whole of `text`?
pub(crate) fn segment_matches(pattern: &str, text: &str) -> bool {
    let p = tokens(pattern);
    let t: Vec<char> = text.chars().collect();
    // Classic two-pointer wildcard match with backtracking to the last `*`:
    // linear in practice, no recursion, no blow-up on hostile input.
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some(Tok::Lit(c)) if *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            Some(Tok::One) => {
                pi += 1;
                ti += 1;
            }
            Some(Tok::Any) => {
                star = Some((pi, ti));
                pi += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|t| *t == Tok::Any)
}

/// Is every string matched by segment glob `narrow` also matched by `wide`?
pub(crate) fn segment_subset(narrow: &str, wide: &str) -> bool {
    let a = tokens(narrow);
    let b = tokens(wide);
    // memo[i][j]: can b[j..] consume a[i..]
    let mut memo = vec![vec![None; b.len() + 1]; a.len() + 1];
    seg_sub(&a, &b, 0, 0, &mut memo)
}

fn seg_sub(a: &[Tok], b: &[Tok], i: usize, j: usize, memo: &mut Vec<Vec<Option<bool>>>) -> bool {
    if let Some(v) = memo[i][j] {
        return v;
    }
    let r = match (a.get(i), b.get(j)) {
        (None, None) => true,
        (_, Some(Tok::Any)) => {
            // b's `*` consumes nothing, or one more token of a (any kind).
            seg_sub(a, b, i, j + 1, memo) || (i < a.len() && seg_sub(a, b, i + 1, j, memo))
        }
        (Some(Tok::Lit(x)), Some(Tok::Lit(y))) => x == y && seg_sub(a, b, i + 1, j + 1, memo),
        (Some(Tok::Lit(_) | Tok::One), Some(Tok::One)) => seg_sub(a, b, i + 1, j + 1, memo),
        _ => false,
    };
    memo[i][j] = Some(r);
    r
}

/// A parsed path glob: components, each `**` or a segment glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathGlob {
    comps: Vec<Comp>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Comp {
    Deep,
    Seg(String),
}

impl PathGlob {
    /// Parse a file pattern. A single leading '/' means the workspace root
    /// and is stripped. Refuses what would be ambiguous or could name
    /// something outside the workspace.
    pub(crate) fn parse(pattern: &str) -> Result<PathGlob, String> {
        if pattern.chars().any(char::is_control) {
            return Err(format!("pattern {pattern:?} contains a control character"));
        }
        if pattern.contains('\\') {
            return Err(format!(
                "pattern {pattern:?} contains a backslash; use '/' and note that escapes are not supported"
            ));
        }
        if let Some(c) = pattern.chars().find(|c| matches!(c, '[' | ']' | '{' | '}')) {
            return Err(format!(
                "pattern {pattern:?} contains {c:?}: only '*', '?' and a whole-component '**' are supported"
            ));
        }
        let body = pattern.strip_prefix('/').unwrap_or(pattern);
        if body.is_empty() {
            return Err(format!(
                "pattern {pattern:?} is empty; use \"**\" for the whole workspace"
            ));
        }
        if body.starts_with('/') {
            return Err(format!(
                "pattern {pattern:?} is absolute; patterns are relative to the workspace root"
            ));
        }
        let mut comps = Vec::new();
        for c in body.split('/') {
            match c {
                "" => {
                    return Err(format!(
                        "pattern {pattern:?} has an empty component (a doubled or trailing '/'); write \"dir/**\" for a directory and its contents"
                    ));
                }
                "." | ".." => {
                    return Err(format!(
                        "pattern {pattern:?} contains a {c:?} component; write the normalized path"
                    ));
                }
                "**" => {
                    // Consecutive `**` mean the same as one.
                    if comps.last() != Some(&Comp::Deep) {
                        comps.push(Comp::Deep);
                    }
                }
                c if c.contains("**") => {
                    return Err(format!(
                        "pattern {pattern:?}: '**' must be a whole component (like \"a/**/b\"); use '*' inside a name"
                    ));
                }
                c if c.len() > crate::path::MAX_COMPONENT_BYTES => {
                    return Err(format!(
                        "pattern {pattern:?} has a component longer than 255 bytes"
                    ));
                }
                c => comps.push(Comp::Seg(c.to_string())),
            }
        }
        Ok(PathGlob { comps })
    }

    /// Does the glob match these path components?
    pub(crate) fn matches<'a>(&self, path: impl IntoIterator<Item = &'a str>) -> bool {
        self.matches_as(path, Naming::Wild)
    }

    /// Does the glob match these components *for a write*? Protected
    /// components (see [`is_protected`]) are matched only by a segment that
    /// names them, never by `*`, `?` or `**`.
    pub(crate) fn matches_for_write<'a>(&self, path: impl IntoIterator<Item = &'a str>) -> bool {
        self.matches_as(path, Naming::Protected)
    }

    fn matches_as<'a>(&self, path: impl IntoIterator<Item = &'a str>, naming: Naming) -> bool {
        let path: Vec<&str> = path.into_iter().collect();
        let mut memo = vec![vec![None; path.len() + 1]; self.comps.len() + 1];
        self.match_from(&path, 0, 0, naming, &mut memo)
    }

    fn match_from(
        &self,
        path: &[&str],
        i: usize,
        j: usize,
        naming: Naming,
        memo: &mut Vec<Vec<Option<bool>>>,
    ) -> bool {
        if let Some(v) = memo[i][j] {
            return v;
        }
        let guarded = |j: usize| naming == Naming::Protected && is_protected(path, j);
        let r = match self.comps.get(i) {
            None => j == path.len(),
            Some(Comp::Deep) => {
                self.match_from(path, i + 1, j, naming, memo)
                    || (j < path.len()
                        && !guarded(j)
                        && self.match_from(path, i, j + 1, naming, memo))
            }
            Some(Comp::Seg(s)) => {
                j < path.len()
                    && segment_matches(s, path[j])
                    && (!guarded(j) || names(s, path, j))
                    && self.match_from(path, i + 1, j + 1, naming, memo)
            }
        };
        memo[i][j] = Some(r);
        r
    }

    /// Is every path matched by `self` also matched by `wide`?
    pub(crate) fn is_subset_of(&self, wide: &PathGlob) -> bool {
        let mut memo = vec![vec![None; wide.comps.len() + 1]; self.comps.len() + 1];
        path_sub(&self.comps, &wide.comps, 0, 0, Naming::Wild, &mut memo)
    }

    /// Is every path `self` matches for a write also matched by `wide` for
    /// a write? Sound (never a wrong "yes"); "no" where unsure.
    pub(crate) fn is_write_subset_of(&self, wide: &PathGlob) -> bool {
        let mut memo = vec![vec![None; wide.comps.len() + 1]; self.comps.len() + 1];
        path_sub(&self.comps, &wide.comps, 0, 0, Naming::Protected, &mut memo)
    }
}

/// Whether protected components need naming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Naming {
    Wild,
    Protected,
}

/// Components a write must name: dotfiles and dot-directories (`.bashrc`,
/// `.gitconfig`, `.cargo/`, `.git/`, where programs find configuration that
/// steers what they run) and a repository's `config` and `hooks` below
/// `.git`.
pub(crate) fn is_protected(path: &[&str], j: usize) -> bool {
    let Some(comp) = path.get(j) else {
        return false;
    };
    comp.starts_with('.') || is_git_special(path, j)
}

fn is_git_special(path: &[&str], j: usize) -> bool {
    j > 0
        && path.get(j - 1) == Some(&".git")
        && path.get(j).is_some_and(|c| GIT_SPECIAL.contains(c))
}

const GIT_SPECIAL: &[&str] = &["config", "hooks"];

/// Does pattern segment `seg` name protected component `path[j]`? A dot
/// component is named by a segment that itself starts with a dot (`.*`,
/// `.git`); `.git/config` and `.git/hooks` only by their literal names.
fn names(seg: &str, path: &[&str], j: usize) -> bool {
    if is_git_special(path, j) {
        path.get(j).is_some_and(|c| *c == seg)
    } else {
        seg.starts_with('.')
    }
}

fn path_sub(
    a: &[Comp],
    b: &[Comp],
    i: usize,
    j: usize,
    naming: Naming,
    memo: &mut Vec<Vec<Option<bool>>>,
) -> bool {
    if let Some(v) = memo[i][j] {
        return v;
    }
    // Under write naming, can a[i] match a protected component? Then only a
    // segment of `b` that names it the same way may consume it.
    let dot =
        naming == Naming::Protected && matches!(a.get(i), Some(Comp::Seg(x)) if x.starts_with('.'));
    let git = naming == Naming::Protected && may_be_git_special(a, i);
    let r = match (a.get(i), b.get(j)) {
        (None, None) => true,
        (_, Some(Comp::Deep)) => {
            path_sub(a, b, i, j + 1, naming, memo)
                || (i < a.len() && !dot && !git && path_sub(a, b, i + 1, j, naming, memo))
        }
        (Some(Comp::Seg(x)), Some(Comp::Seg(y))) => {
            segment_subset(x, y)
                && (!dot || y.starts_with('.'))
                && (!git || x == y)
                && path_sub(a, b, i + 1, j + 1, naming, memo)
        }
        _ => false,
    };
    memo[i][j] = Some(r);
    r
}

/// Can `a[i]` match `config`/`hooks` right below a `.git`? Only a literal
/// segment can (writes name them), and only if the nearest segment before
/// it can be `.git` (a `**` in between may match nothing, and cannot match
/// `.git` itself).
fn may_be_git_special(a: &[Comp], i: usize) -> bool {
    let Some(Comp::Seg(x)) = a.get(i) else {
        return false;
    };
    if !GIT_SPECIAL.contains(&x.as_str()) {
        return false;
    }
    a[..i]
        .iter()
        .rev()
        .find_map(|c| match c {
            Comp::Seg(s) => Some(segment_matches(s, ".git")),
            Comp::Deep => None,
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(p: &str, path: &str) -> bool {
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        PathGlob::parse(p).unwrap().matches(comps)
    }

    #[test]
    fn component_aware_matching() {
        assert!(m("/data/*", "data/x"));
        assert!(!m("/data/*", "database"));
        assert!(!m("/data/*", "data/x/y"));
        assert!(!m("/data/*", "data"));
        assert!(m("data/**", "data"));
        assert!(m("data/**", "data/x"));
        assert!(m("data/**", "data/x/y"));
        assert!(!m("data/**", "database/x"));
        assert!(m("**", ""));
        assert!(m("**/*.md", "a/b/c.md"));
        assert!(m("**/*.md", "c.md"));
        assert!(m("a/**/b", "a/b"));
        assert!(m("a/**/b", "a/x/y/b"));
        assert!(m("notes/?.md", "notes/a.md"));
        assert!(!m("notes/?.md", "notes/ab.md"));
        assert!(!m("*", ""));
    }

    #[test]
    fn writes_must_name_protected_components() {
        let w = |p: &str, path: &str| {
            let comps: Vec<&str> = path.split('/').collect();
            PathGlob::parse(p).unwrap().matches_for_write(comps)
        };
        for (p, path) in [
            ("**", ".gitconfig"),
            ("**", ".bashrc"),
            ("*", ".profile"),
            ("?bashrc", ".bashrc"),
            ("**", ".config/git/config"),
            ("**", ".git/config"),
            (".git/**", ".git/config"),
            (".git/*", ".git/hooks"),
            (".git/**", ".git/hooks/pre-commit"),
            ("src/**", "src/.cargo/config.toml"),
            ("**/.git/*", "sub/.git/config"),
        ] {
            assert!(!w(p, path), "{p} must not grant a write of {path}");
            assert!(m(p, path), "{p} still grants a read of {path}");
        }
        for (p, path) in [
            (".gitconfig", ".gitconfig"),
            (".*", ".bashrc"),
            (".git/config", ".git/config"),
            (".git/hooks/*", ".git/hooks/pre-commit"),
            (".git/**", ".git/objects/ab/cd"),
            (".github/**", ".github/workflows/ci.yml"),
            ("**", "src/main.rs"),
            ("**", "config/settings.toml"),
            ("**", "hooks/x"),
            ("src/*", "src/config"),
        ] {
            assert!(w(p, path), "{p} must grant a write of {path}");
        }
        let ws = |a: &str, b: &str| {
            PathGlob::parse(a)
                .unwrap()
                .is_write_subset_of(&PathGlob::parse(b).unwrap())
        };
        assert!(!ws(".git/config", "**"));
        assert!(!ws(".git/config", ".git/*"));
        assert!(!ws(".bashrc", "*"));
        assert!(ws(".bashrc", ".*"));
        assert!(ws(".git/config", ".git/config"));
        assert!(ws("config/**", "**"));
        assert!(ws("src/**", "**"));
    }

    #[test]
    fn refuses_bad_patterns() {
        for p in [
            "", "/", "//etc", "a/../b", "./a", "a//b", "a/", "a**", "[ab]", "{a,b}", "a\\b", "a\0",
        ] {
            assert!(PathGlob::parse(p).is_err(), "{p:?} accepted");
        }
    }

    #[test]
    fn subset_examples() {
        let s = |a: &str, b: &str| {
            PathGlob::parse(a)
                .unwrap()
                .is_subset_of(&PathGlob::parse(b).unwrap())
        };
        assert!(s("data/x", "data/*"));
        assert!(s("data/*", "data/**"));
        assert!(s("data/**", "**"));
        assert!(s("data/a*", "data/*"));
        assert!(!s("data/**", "data/*"));
        assert!(!s("data/*", "data/x"));
        assert!(!s("**", "data/**"));
        assert!(!s("database/*", "data/*"));
        assert!(s("a/b/c.md", "**/*.md"));
        assert!(segment_subset("a?c", "a*"));
        assert!(!segment_subset("a*", "a?"));
        assert!(segment_subset("x", "x"));
        assert!(segment_matches("a*b*c", "aXbYbc"));
        assert!(!segment_matches("a*b", "a"));
        assert!(segment_matches("", ""));
    }

    fn comp() -> impl Strategy<Value = String> {
        prop_oneof![
            "[ab]{1,2}",
            Just(".a".to_string()),
            Just("ab.b".to_string())
        ]
    }

    /// Components that include the protected names.
    fn write_comp() -> impl Strategy<Value = String> {
        prop_oneof![
            "[ab]{1,2}",
            Just(".a".to_string()),
            Just(".git".to_string()),
            Just("config".to_string()),
            Just("hooks".to_string()),
        ]
    }

    fn write_pat_comp() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => "[ab*?]{1,3}".prop_filter("no ** in segment", |s| !s.contains("**")),
            1 => Just("**".to_string()),
            1 => Just(".*".to_string()),
            1 => Just(".git".to_string()),
            1 => Just(".g?t".to_string()),
            1 => Just("config".to_string()),
            1 => Just("hooks".to_string()),
        ]
    }

    fn write_pattern() -> impl Strategy<Value = String> {
        prop::collection::vec(write_pat_comp(), 1..4)
            .prop_filter("no consecutive **", |v| {
                v.windows(2).all(|w| !(w[0] == "**" && w[1] == "**"))
            })
            .prop_map(|v| v.join("/"))
    }

    fn pat_comp() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => "[ab*?]{1,3}".prop_filter("no ** in segment", |s| !s.contains("**")),
            1 => Just("**".to_string()),
        ]
    }

    fn pattern() -> impl Strategy<Value = String> {
        prop::collection::vec(pat_comp(), 1..4)
            .prop_filter("no consecutive **", |v| {
                v.windows(2).all(|w| !(w[0] == "**" && w[1] == "**"))
            })
            .prop_map(|v| v.join("/"))
    }

    fn path() -> impl Strategy<Value = String> {
        prop::collection::vec(comp(), 1..5).prop_map(|v| v.join("/"))
    }

    fn oracle(p: &str, path: &str) -> bool {
        let g = |p: &str| {
            globset::GlobBuilder::new(p)
                .literal_separator(true)
                .build()
                .unwrap()
                .compile_matcher()
        };
        // globset's `dir/**` does not match `dir` itself; ours does (zero
        // components), so the oracle also tries the pattern without it.
        g(p).is_match(path)
            || p.strip_suffix("/**")
                .is_some_and(|pre| g(pre).is_match(path))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn matcher_agrees_with_globset(p in pattern(), path in path()) {
            let ours = m(&p, &path);
            prop_assert_eq!(ours, oracle(&p, &path), "pattern {} path {}", p, path);
        }

        #[test]
        fn path_subset_is_sound(a in pattern(), b in pattern(), path in path()) {
            let (ga, gb) = (PathGlob::parse(&a).unwrap(), PathGlob::parse(&b).unwrap());
            let comps: Vec<&str> = path.split('/').collect();
            if ga.is_subset_of(&gb) && ga.matches(comps.clone()) {
                prop_assert!(gb.matches(comps));
            }
            prop_assert!(ga.is_subset_of(&ga));
        }

        #[test]
        fn write_subset_is_sound(
            a in write_pattern(),
            b in write_pattern(),
            path in prop::collection::vec(write_comp(), 1..5),
        ) {
            let (ga, gb) = (PathGlob::parse(&a).unwrap(), PathGlob::parse(&b).unwrap());
            let comps: Vec<&str> = path.iter().map(String::as_str).collect();
            if ga.is_write_subset_of(&gb) && ga.matches_for_write(comps.clone()) {
                prop_assert!(gb.matches_for_write(comps.clone()), "{} ⊆ {} but {:?}", a, b, comps);
            }
            prop_assert!(ga.is_write_subset_of(&ga));
            // Write matching is never wider than read matching, and equal
            // on paths with no protected component.
            if ga.matches_for_write(comps.clone()) {
                prop_assert!(ga.matches(comps.clone()));
            }
            if !(0..comps.len()).any(|j| is_protected(&comps, j)) {
                prop_assert_eq!(ga.matches_for_write(comps.clone()), ga.matches(comps));
            }
        }

        #[test]
        fn segment_subset_is_sound(a in "[ab*?]{0,4}", b in "[ab*?]{0,4}", t in "[abc]{0,5}") {
            if segment_subset(&a, &b) && segment_matches(&a, &t) {
                prop_assert!(segment_matches(&b, &t));
            }
            prop_assert!(segment_subset(&a, &a));
        }
    }
}
