//! Shell scripts given to `sh -c` and friends: split into words, refused
//! when they are more than one simple command, and assignments that would
//! change what an allowed program runs.

use crate::exec_policy::ExecDenyReason;
use crate::exec_wrappers::{Refusal, refuse};

/// `-o NAME` shell options that do not change how the script is read.
pub(crate) const SHELL_SET_O: &[&str] = &[
    "errexit",
    "nounset",
    "pipefail",
    "xtrace",
    "verbose",
    "noglob",
    "noclobber",
    "noexec",
    "posix",
];

/// Shell keywords and builtins that are not the program of the same name,
/// or that run code of their own (eval, source, arithmetic evaluation of
/// `a[$(cmd)]` subscripts in let/declare/printf -v/read/test ...).
pub(crate) const SHELL_WORDS: &[&str] = &[
    // keywords
    "!",
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "case",
    "esac",
    "for",
    "select",
    "while",
    "until",
    "do",
    "done",
    "function",
    "coproc",
    "in",
    "[[",
    "]]",
    "{",
    "}",
    "repeat",
    "foreach",
    // builtins that run code or evaluate arithmetic
    "eval",
    "source",
    ".",
    "trap",
    "builtin",
    "enable",
    "let",
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "read",
    "mapfile",
    "readarray",
    "printf",
    "print",
    "test",
    "[",
    "unset",
    "hash",
    "fc",
    "compgen",
    "complete",
    "bind",
    "alias",
    "shopt",
    "set",
    "getopts",
    "wait",
    "autoload",
    "zmodload",
    "emulate",
    "noglob",
    "nocorrect",
    "-",
    "sched",
    "zpty",
    "vared",
    "integer",
    "float",
    "disable",
    "functions",
    "whence",
    "ulimit",
];

/// The only environment variables a command may set for itself through
/// `env NAME=VALUE` or a script assignment. An allowlist, because the set
/// of variables that steer some program into reading a file or running code
/// is open-ended (`SSH_CLIENT` makes bash read `~/.bashrc`,
/// `XDG_CONFIG_HOME` moves git's configuration, `GIT_CONFIG_*` rewrites
/// it): these only pick a language, a time zone, colours, or the identity
/// written into a commit.
pub const SETTABLE_VARIABLES: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "COLUMNS",
    "LINES",
    "CI",
    "DEBIAN_FRONTEND",
    "SOURCE_DATE_EPOCH",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONHASHSEED",
    "PYTHONIOENCODING",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "CARGO_TERM_COLOR",
    "NODE_ENV",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
];

/// Families of settable variables: locale categories (`LC_ALL`, `LC_CTYPE`, ...).
pub const SETTABLE_PREFIXES: &[&str] = &["LC_"];

pub(crate) fn check_assignment(var: &str, who: &str, at: &str) -> Result<(), Refusal> {
    if var.is_empty() {
        return Err(refuse(
            ExecDenyReason::Malformed,
            format!("`{who}`{at} has an assignment without a variable name"),
        ));
    }
    let settable = SETTABLE_VARIABLES.contains(&var)
        || SETTABLE_PREFIXES
            .iter()
            .any(|p| var.len() > p.len() && var.starts_with(p));
    if !settable {
        return Err(refuse(
            ExecDenyReason::DangerousVariable,
            format!(
                "`{who}`{at} sets `{var}`, which is not one of the variables a command may set \
                 (locale, time zone, colours, commit identity; the README lists them); \
                 variables can steer a program into reading files or running code, so others \
                 are refused"
            ),
        ));
    }
    Ok(())
}

/// One word of a `-c` script.
#[derive(Debug)]
pub(crate) struct Word {
    pub(crate) text: String,
    /// An unquoted `NAME=` prefix: a variable assignment, not an argument.
    pub(crate) assignment: bool,
}

/// Split a script that must be exactly one simple command. Returns the
/// offending construct (for "runs a script with ...") otherwise.
pub(crate) fn scan_script(s: &str) -> Result<Vec<Word>, String> {
    #[derive(PartialEq)]
    enum Assign {
        Maybe,
        Yes,
        No,
    }
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut assign = Assign::Maybe;
    let mut chars = s.chars();
    let unterminated = || "an unterminated quote".to_string();
    while let Some(c) = chars.next() {
        // Any quoting or escaping before the `=` means "not an assignment".
        let quoted = matches!(c, '\'' | '"' | '\\');
        if assign == Assign::Maybe {
            let ident = c == '_' || c.is_ascii_alphabetic() || (in_word && c.is_ascii_digit());
            if c == '=' && in_word {
                assign = Assign::Yes;
            } else if quoted || !(ident || c == ' ' || c == '\t') {
                assign = Assign::No;
            }
        }
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(Word {
                        text: std::mem::take(&mut cur),
                        assignment: assign == Assign::Yes,
                    });
                    in_word = false;
                }
                assign = Assign::Maybe;
                continue;
            }
            '\n' => return Err("a newline".into()),
            '\\' => match chars.next() {
                None => return Err("a trailing backslash".into()),
                Some('\n') => return Err("a newline".into()),
                Some(x) => cur.push(x),
            },
            '\'' => loop {
                match chars.next() {
                    None => return Err(unterminated()),
                    Some('\'') => break,
                    Some(x) => cur.push(x),
                }
            },
            '"' => loop {
                match chars.next() {
                    None => return Err(unterminated()),
                    Some('"') => break,
                    Some('$') => return Err("`$`".into()),
                    Some('`') => return Err("`` ` ``".into()),
                    Some('\\') => match chars.next() {
                        None => return Err(unterminated()),
                        Some('\n') => return Err("a newline".into()),
                        Some(x @ ('$' | '`' | '"' | '\\')) => cur.push(x),
                        Some(x) => {
                            cur.push('\\');
                            cur.push(x);
                        }
                    },
                    Some(x) => cur.push(x),
                }
            },
            '#' if !in_word => return Err("a comment (`#`)".into()),
            '=' if !in_word => return Err("`=` starting a word".into()),
            '$' if chars.clone().next() == Some('(') => return Err("`$(`".into()),
            '`' => return Err("`` ` ``".into()),
            ';' | '|' | '&' | '<' | '>' | '$' | '(' | ')' | '{' | '}' | '*' | '?' | '[' | '~'
            | '^' => return Err(format!("`{c}`")),
            _ => cur.push(c),
        }
        in_word = true;
    }
    if in_word {
        words.push(Word {
            text: cur,
            assignment: assign == Assign::Yes,
        });
    }
    Ok(words)
}
