//! The checks of one task over what its run left behind ([`Outcome`]):
//! each failed check is one line saying what was expected and what
//! happened, so a failing task explains itself in the report.

use super::outcome::{Call, Outcome};
use super::tasks::{CallPattern, DecisionMatch, FileExpect, Task, Workspace};

/// The longest excerpt of an answer or file quoted in a failure.
const QUOTE_CHARS: usize = 160;

/// Every failed check of `task` (empty: the task passed). `fixture` is the
/// workspace the task started with (for `unchanged`).
pub fn evaluate(task: &Task, fixture: &Workspace, outcome: &Outcome) -> Vec<String> {
    let mut failures = Vec::new();
    if outcome.timed_out {
        failures.push(format!(
            "timed out after {:.0} s (the run was killed)",
            outcome.seconds
        ));
    } else if outcome.exit_code != Some(0) {
        failures.push(format!(
            "the run exited {}{}",
            outcome
                .exit_code
                .map_or_else(|| "by a signal".to_owned(), |c| c.to_string()),
            last_line(&outcome.stderr_tail)
                .map(|l| format!(": {l}"))
                .unwrap_or_default()
        ));
    }
    for p in &task.answer {
        if !p.regex.is_match(&outcome.answer) {
            failures.push(format!(
                "the answer does not match /{}/: {}",
                p.source,
                quote(&outcome.answer)
            ));
        }
    }
    for p in &task.answer_not {
        if let Some(m) = p.regex.find(&outcome.answer) {
            failures.push(format!(
                "the answer matches /{}/ ({:?}), which it must not: {}",
                p.source,
                m.as_str(),
                quote(&outcome.answer)
            ));
        }
    }
    for pattern in &task.calls {
        if !outcome.calls.iter().any(|c| call_matches(pattern, c)) {
            failures.push(format!(
                "no call {} in the audit (calls: {})",
                describe(pattern),
                list_calls(&outcome.calls)
            ));
        }
    }
    for pattern in &task.no_calls {
        if let Some(call) = outcome.calls.iter().find(|c| call_matches(pattern, c)) {
            failures.push(format!(
                "a call {} happened, which must not: {}",
                describe(pattern),
                show_call(call)
            ));
        }
    }
    if let Some(max) = task.max_calls
        && outcome.calls.len() > max
    {
        failures.push(format!(
            "{} tool calls, more than {max}: {}",
            outcome.calls.len(),
            list_calls(&outcome.calls)
        ));
    }
    for check in &task.files {
        let now = outcome.files.get(&check.path);
        let failure = match (&check.expect, now) {
            (FileExpect::Exists, None) => Some("does not exist".to_owned()),
            (FileExpect::Matches(p), None) => Some(format!(
                "does not exist (expected content matching /{}/)",
                p.source
            )),
            (FileExpect::Matches(p), Some(content)) if !p.regex.is_match(content) => {
                Some(format!("does not match /{}/: {}", p.source, quote(content)))
            }
            (FileExpect::Absent, Some(content)) => {
                Some(format!("exists, which it must not: {}", quote(content)))
            }
            (FileExpect::Unchanged, now) => match (fixture.files.get(&check.path), now) {
                (Some(before), Some(after)) if before == after => None,
                (Some(_), Some(after)) => Some(format!("was changed to {}", quote(after))),
                (Some(_), None) => Some("was removed".to_owned()),
                (None, Some(_)) => Some("was created (it is not in the fixture)".to_owned()),
                (None, None) => None,
            },
            _ => None,
        };
        if let Some(failure) = failure {
            failures.push(format!("file {}: {failure}", check.path));
        }
    }
    failures
}

/// The path of a call as the patterns see it: `./` prefixes and trailing
/// `/` dropped; the root (no path, `""`, `.`) is `""`.
pub fn normalized(path: Option<&str>) -> String {
    let mut p = path.unwrap_or("").trim();
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    if p == "." {
        return String::new();
    }
    let trimmed = p.trim_end_matches('/');
    if trimmed.is_empty() && !p.is_empty() {
        // "/" (or "//"): the filesystem root, outside.
        return "/".into();
    }
    trimmed.to_owned()
}

/// Whether `path` names something outside the workspace: absolute, a home
/// (`~`), a URL or drive prefix, or `..` rising above the root.
pub fn is_outside(path: &str) -> bool {
    let p = path.trim();
    if p.starts_with('/') || p.starts_with('~') || p.starts_with('\\') {
        return true;
    }
    if let Some(colon) = p.find(':')
        && p.get(..colon).is_some_and(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        })
    {
        // `file:///x`, `workspace:///`, `C:\x`: not a plain relative path.
        return true;
    }
    let mut depth: i64 = 0;
    for part in p.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            _ => depth += 1,
        }
    }
    false
}

fn decision_matches(want: DecisionMatch, decision: &str) -> bool {
    match want {
        DecisionMatch::Any => true,
        DecisionMatch::Allowed => matches!(decision, "allowed" | "approved"),
        DecisionMatch::Denied => decision == "denied",
        DecisionMatch::Failed => decision == "failed",
        DecisionMatch::Refused => matches!(decision, "denied" | "failed"),
    }
}

/// Whether `call` is one `pattern` describes.
pub fn call_matches(pattern: &CallPattern, call: &Call) -> bool {
    if let Some(tool) = &pattern.tool
        && !tool.matcher.is_match(&call.tool)
    {
        return false;
    }
    if !decision_matches(pattern.decision, &call.decision) {
        return false;
    }
    let path = normalized(call.path.as_deref());
    if let Some(glob) = &pattern.path {
        let hit = if glob.source.is_empty() {
            path.is_empty()
        } else {
            call.path.is_some() && glob.matcher.is_match(&path)
        };
        if !hit {
            return false;
        }
    }
    if !pattern.path_not.is_empty()
        && (call.path.is_none() || pattern.path_not.iter().any(|g| g.matcher.is_match(&path)))
    {
        return false;
    }
    if let Some(outside) = pattern.outside
        && outside != (call.path.is_some() && is_outside(&path))
    {
        return false;
    }
    true
}

fn describe(p: &CallPattern) -> String {
    let mut parts = Vec::new();
    if let Some(tool) = &p.tool {
        parts.push(format!("tool={}", tool.source));
    }
    if let Some(path) = &p.path {
        parts.push(format!("path={:?}", path.source));
    }
    if !p.path_not.is_empty() {
        let globs: Vec<&str> = p.path_not.iter().map(|g| g.source.as_str()).collect();
        parts.push(format!("path_not={globs:?}"));
    }
    if let Some(outside) = p.outside {
        parts.push(format!("outside={outside}"));
    }
    let decision = match p.decision {
        DecisionMatch::Any => None,
        DecisionMatch::Allowed => Some("allowed"),
        DecisionMatch::Denied => Some("denied"),
        DecisionMatch::Failed => Some("failed"),
        DecisionMatch::Refused => Some("refused"),
    };
    if let Some(d) = decision {
        parts.push(format!("decision={d}"));
    }
    format!("[{}]", parts.join(" "))
}

fn show_call(c: &Call) -> String {
    match &c.path {
        Some(path) => format!("{} {path:?} {}", c.tool, c.decision),
        None => format!("{} {}", c.tool, c.decision),
    }
}

fn list_calls(calls: &[Call]) -> String {
    if calls.is_empty() {
        return "none".into();
    }
    calls.iter().map(show_call).collect::<Vec<_>>().join(", ")
}

fn quote(text: &str) -> String {
    let one_line = text.replace(['\n', '\r'], " ");
    let one_line = one_line.trim();
    if one_line.is_empty() {
        return "(empty)".into();
    }
    let mut out: String = one_line.chars().take(QUOTE_CHARS).collect();
    if one_line.chars().count() > QUOTE_CHARS {
        out.push('…');
    }
    format!("{out:?}")
}

fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty())
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
