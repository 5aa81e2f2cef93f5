//! The commands that run other commands, and how to see through them.
//!
//! Each wrapper's options are modelled on the GNU / util-linux / bash
//! implementation closely enough to find the command it runs; anything not
//! understood is refused (fail closed), because a misread option would make
//! the policy check a different command than the one that runs.

use crate::exec_policy::ExecDenyReason;
use crate::exec_script::{SHELL_SET_O, SHELL_WORDS, check_assignment, scan_script};

/// What kind of program a command name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Changes privileges or namespaces: always refused.
    Escalator,
    Env,
    Shell,
    Xargs,
    Find,
    Nice,
    Ionice,
    Nohup,
    Stdbuf,
    Timeout,
    Time,
    Command,
    Exec,
    Chrt,
    Taskset,
    Setsid,
    Busybox,
    Flock,
}

/// Refused whatever the rules and the mode.
pub(crate) const ESCALATORS: &[&str] = &[
    "sudo",
    "sudoedit",
    "doas",
    "su",
    "pkexec",
    "runuser",
    "chroot",
    "nsenter",
    "unshare",
    "setpriv",
    "capsh",
    "run0",
    "sg",
    "newgrp",
    "systemd-run",
    "chpst",
    "setuidgid",
    "envuidgid",
    "switch_root",
    "pivot_root",
];

/// POSIX-style shells whose `-c SCRIPT` is checked.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "rbash"];

/// The name a command is known by: its basename when it is a path.
pub(crate) fn command_name(argv0: &str) -> &str {
    argv0.rsplit('/').next().unwrap_or(argv0)
}

/// Classify a command name (a basename; see [`command_name`]).
pub(crate) fn classify(name: &str) -> Option<Kind> {
    if ESCALATORS.contains(&name) {
        return Some(Kind::Escalator);
    }
    if SHELLS.contains(&name) {
        return Some(Kind::Shell);
    }
    Some(match name {
        "env" => Kind::Env,
        "xargs" => Kind::Xargs,
        "find" => Kind::Find,
        "nice" => Kind::Nice,
        "ionice" => Kind::Ionice,
        "nohup" => Kind::Nohup,
        "stdbuf" => Kind::Stdbuf,
        "timeout" => Kind::Timeout,
        "time" => Kind::Time,
        "command" => Kind::Command,
        "exec" => Kind::Exec,
        "chrt" => Kind::Chrt,
        "taskset" => Kind::Taskset,
        "setsid" => Kind::Setsid,
        "busybox" => Kind::Busybox,
        "flock" => Kind::Flock,
        _ => return None,
    })
}

/// What happens to arguments appended after the inner command (by `xargs`
/// or `find -exec ... {}`) once a wrapper has been seen through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tail {
    /// They land at the end of the inner command (`env`, `nice`, ...).
    Passed,
    /// The wrapper itself appends or substitutes arguments (`xargs`).
    Appended,
    /// They become the script's positional parameters, which a checked
    /// script cannot reference (`sh -c`).
    Absorbed,
}

/// How a wrapper was seen through.
#[derive(Debug)]
pub(crate) enum Unwrap {
    /// Runs nothing else: the argv itself is matched against the rules.
    Plain,
    /// Runs `inner`; `label` names the wrapper in messages.
    Inner {
        inner: Vec<String>,
        label: String,
        tail: Tail,
    },
    /// `find`: itself (matched against the rules) plus each `-exec` command,
    /// with whether file names are substituted into it.
    Find { execs: Vec<(Vec<String>, bool)> },
}

/// A wrapper that cannot be seen through.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) reason: ExecDenyReason,
    pub(crate) message: String,
}

pub(crate) fn refuse(reason: ExecDenyReason, message: String) -> Refusal {
    Refusal { reason, message }
}

/// See through the wrapper `kind` at the start of `argv`. `at` is the
/// " (inside `...`)" suffix for messages.
pub(crate) fn unwrap(kind: Kind, argv: &[String], at: &str) -> Result<Unwrap, Refusal> {
    let w = Wrapper {
        name: argv.first().map_or("", String::as_str),
        args: argv.get(1..).unwrap_or_default(),
        at,
    };
    match kind {
        // Handled by the caller; refusing here too keeps this total.
        Kind::Escalator => Err(refuse(
            ExecDenyReason::Escalator,
            format!("`{}`{at} is always refused", w.name),
        )),
        Kind::Env => w.env(),
        Kind::Shell => w.shell(),
        Kind::Xargs => w.xargs(),
        Kind::Find => w.find(),
        Kind::Nice => w.nice(),
        Kind::Ionice => w.simple(IONICE, &[]),
        Kind::Nohup => w.nohup(),
        Kind::Stdbuf => w.simple(STDBUF, &[]),
        Kind::Timeout => w.timeout(),
        // Shell builtins/keywords too: they run other builtins.
        Kind::Time => w.simple(TIME, &[]).and_then(|u| w.no_shell_word(u)),
        Kind::Command => w.command().and_then(|u| w.no_shell_word(u)),
        Kind::Exec => w.simple(EXEC, &[]),
        Kind::Chrt => w.chrt(),
        Kind::Taskset => w.taskset(),
        Kind::Setsid => w.simple(SETSID, &[]),
        Kind::Busybox => w.busybox(),
        Kind::Flock => w.flock(),
    }
}

// ---------------------------------------------------------------------------
// getopt-style option parsing

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    Flag,
    /// `-x V`, `-xV`, `--long V`, `--long=V`.
    Required,
    /// Only attached: `-xV`, `--long=V` (GNU `optional_argument`).
    Optional,
    /// Understood, but refused: the message says why.
    Refused(&'static str),
}

/// One option: `short` is a char or '\0', `long` a name or "".
#[derive(Debug, Clone, Copy)]
struct Opt {
    id: &'static str,
    short: char,
    long: &'static str,
    arity: Arity,
}

const fn opt(id: &'static str, short: char, long: &'static str, arity: Arity) -> Opt {
    Opt {
        id,
        short,
        long,
        arity,
    }
}

use Arity::{Flag, Optional, Refused, Required};

const OTHER_PROCESS: &str = "acts on another process instead of running a command";

const ENV: &[Opt] = &[
    opt("i", 'i', "ignore-environment", Flag),
    opt("u", 'u', "unset", Required),
    opt("C", 'C', "chdir", Required),
    opt(
        "S",
        'S',
        "split-string",
        Refused("splits a string into a command line, which cannot be checked"),
    ),
];
const NICE: &[Opt] = &[opt("n", 'n', "adjustment", Required)];
const IONICE: &[Opt] = &[
    opt("c", 'c', "class", Required),
    opt("n", 'n', "classdata", Required),
    opt("t", 't', "ignore", Flag),
    opt("p", 'p', "pid", Refused(OTHER_PROCESS)),
    opt("P", 'P', "pgid", Refused(OTHER_PROCESS)),
    opt("u", 'u', "uid", Refused(OTHER_PROCESS)),
];
const STDBUF: &[Opt] = &[
    opt("i", 'i', "input", Required),
    opt("o", 'o', "output", Required),
    opt("e", 'e', "error", Required),
];
const TIMEOUT: &[Opt] = &[
    opt("s", 's', "signal", Required),
    opt("k", 'k', "kill-after", Required),
    opt("v", 'v', "verbose", Flag),
    opt("preserve-status", '\0', "preserve-status", Flag),
    opt("foreground", '\0', "foreground", Flag),
];
const TIME: &[Opt] = &[
    opt("p", 'p', "portability", Flag),
    opt("v", 'v', "verbose", Flag),
    opt("q", 'q', "quiet", Flag),
    opt("a", 'a', "append", Flag),
    opt("f", 'f', "format", Required),
    opt("o", 'o', "output", Required),
];
const COMMAND: &[Opt] = &[
    opt("p", 'p', "", Flag),
    opt("v", 'v', "", Flag),
    opt("V", 'V', "", Flag),
];
const EXEC: &[Opt] = &[
    opt("c", 'c', "", Flag),
    opt("l", 'l', "", Flag),
    opt(
        "a",
        'a',
        "",
        Refused("renames the program it runs, which multi-call programs act on"),
    ),
];
const CHRT: &[Opt] = &[
    opt("b", 'b', "batch", Flag),
    opt("d", 'd', "deadline", Flag),
    opt("f", 'f', "fifo", Flag),
    opt("i", 'i', "idle", Flag),
    opt("o", 'o', "other", Flag),
    opt("r", 'r', "rr", Flag),
    opt("R", 'R', "reset-on-fork", Flag),
    opt("v", 'v', "verbose", Flag),
    opt("m", 'm', "max", Flag),
    opt("T", 'T', "sched-runtime", Required),
    opt("P", 'P', "sched-period", Required),
    opt("D", 'D', "sched-deadline", Required),
    opt("p", 'p', "pid", Refused(OTHER_PROCESS)),
    opt("a", 'a', "all-tasks", Refused(OTHER_PROCESS)),
];
const TASKSET: &[Opt] = &[
    opt("c", 'c', "cpu-list", Flag),
    opt("p", 'p', "pid", Refused(OTHER_PROCESS)),
    opt("a", 'a', "all-tasks", Refused(OTHER_PROCESS)),
];
const SETSID: &[Opt] = &[
    opt("c", 'c', "ctty", Flag),
    opt("f", 'f', "fork", Flag),
    opt("w", 'w', "wait", Flag),
];
const FLOCK: &[Opt] = &[
    opt("s", 's', "shared", Flag),
    opt("x", 'x', "exclusive", Flag),
    opt("x", 'e', "", Flag),
    opt("u", 'u', "unlock", Flag),
    opt("n", 'n', "nonblock", Flag),
    opt("n", '\0', "nb", Flag),
    opt("o", 'o', "close", Flag),
    opt("F", 'F', "no-fork", Flag),
    opt("verbose", '\0', "verbose", Flag),
    opt("w", 'w', "wait", Required),
    opt("w", '\0', "timeout", Required),
    opt("E", 'E', "conflict-exit-code", Required),
];
const XARGS: &[Opt] = &[
    opt("0", '0', "null", Flag),
    opt("r", 'r', "no-run-if-empty", Flag),
    opt("t", 't', "verbose", Flag),
    opt("x", 'x', "exit", Flag),
    opt("n", 'n', "max-args", Required),
    opt("L", 'L', "", Required),
    opt("l", '\0', "max-lines", Optional),
    opt("P", 'P', "max-procs", Required),
    opt("s", 's', "max-chars", Required),
    opt("d", 'd', "delimiter", Required),
    opt("a", 'a', "arg-file", Required),
    opt("I", 'I', "", Required),
    opt("I", '\0', "replace", Optional),
];
const SHELL: &[Opt] = &[
    opt("c", 'c', "", Flag),
    opt("e", 'e', "", Flag),
    opt("u", 'u', "", Flag),
    opt("x", 'x', "", Flag),
    opt("v", 'v', "", Flag),
    opt("f", 'f', "", Flag),
    opt("l", 'l', "login", Flag),
    opt("n", 'n', "", Flag),
    opt("i", 'i', "", Flag),
    opt("s", 's', "", Flag),
    opt("o", 'o', "", Required),
    opt("noprofile", '\0', "noprofile", Flag),
    opt("norc", '\0', "norc", Flag),
    opt("posix", '\0', "posix", Flag),
    opt("verbose", '\0', "verbose", Flag),
];

/// Options parsed from the front of a wrapper's arguments.
struct Parsed {
    /// (id, value) in order.
    opts: Vec<(&'static str, Option<String>)>,
    /// Index (into the arguments) of the first operand.
    rest: usize,
}

impl Parsed {
    fn has(&self, id: &str) -> bool {
        self.opts.iter().any(|(i, _)| *i == id)
    }

    fn value(&self, id: &str) -> Option<&str> {
        self.opts
            .iter()
            .rev()
            .find(|(i, _)| *i == id)
            .and_then(|(_, v)| v.as_deref())
    }
}

struct Wrapper<'a> {
    name: &'a str,
    args: &'a [String],
    at: &'a str,
}

impl Wrapper<'_> {
    /// Parse options getopt-style, stopping at the first operand (the `+`
    /// convention every wrapper here uses) or after `--`.
    fn parse(&self, from: usize, spec: &[Opt]) -> Result<Parsed, Refusal> {
        let (name, at) = (self.name, self.at);
        let unknown = |o: &str| {
            refuse(
                ExecDenyReason::UnknownOption,
                format!(
                    "`{name}`{at} option `{o}` is not understood, so the command it runs cannot be \
                     found; remove the option or run the command without `{name}`"
                ),
            )
        };
        let missing = |o: &str| {
            refuse(
                ExecDenyReason::Malformed,
                format!("`{name}`{at} option `{o}` needs a value"),
            )
        };
        let refused = |o: &str, why: &str| {
            refuse(
                ExecDenyReason::Unsupported,
                format!("`{name} {o}`{at} {why}; it is refused"),
            )
        };
        let args = self.args;
        let mut opts = Vec::new();
        let mut i = from;
        while let Some(a) = args.get(i) {
            i += 1;
            if a == "--" {
                break;
            }
            if let Some(long) = a.strip_prefix("--") {
                let (key, val) = match long.split_once('=') {
                    Some((k, v)) => (k, Some(v.to_string())),
                    None => (long, None),
                };
                let Some(o) = spec.iter().find(|o| !o.long.is_empty() && o.long == key) else {
                    return Err(unknown(a));
                };
                let val = match o.arity {
                    Refused(why) => return Err(refused(&format!("--{key}"), why)),
                    Flag if val.is_some() => return Err(unknown(a)),
                    Flag | Optional => val,
                    Required => match val {
                        Some(v) => Some(v),
                        None => {
                            let v = args.get(i).ok_or_else(|| missing(a))?;
                            i += 1;
                            Some(v.clone())
                        }
                    },
                };
                opts.push((o.id, val));
                continue;
            }
            let Some(cluster) = a.strip_prefix('-').filter(|c| !c.is_empty()) else {
                // An operand (including a lone "-"): options end here.
                i -= 1;
                break;
            };
            for (pos, c) in cluster.char_indices() {
                let Some(o) = spec.iter().find(|o| o.short != '\0' && o.short == c) else {
                    return Err(unknown(&format!("-{c}")));
                };
                let attached = &cluster[pos + c.len_utf8()..];
                match o.arity {
                    Refused(why) => return Err(refused(&format!("-{c}"), why)),
                    Flag => opts.push((o.id, None)),
                    Optional => {
                        opts.push((o.id, Some(attached.to_string()).filter(|s| !s.is_empty())));
                        break;
                    }
                    Required => {
                        let v = if attached.is_empty() {
                            let v = args.get(i).ok_or_else(|| missing(&format!("-{c}")))?;
                            i += 1;
                            v.clone()
                        } else {
                            attached.to_string()
                        };
                        opts.push((o.id, Some(v)));
                        break;
                    }
                }
            }
        }
        Ok(Parsed { opts, rest: i })
    }

    /// Runs `args[from..]`, or nothing (plain) when that is empty.
    fn inner_from(&self, from: usize, label: &str) -> Unwrap {
        match self.args.get(from..) {
            Some(inner) if !inner.is_empty() => Unwrap::Inner {
                inner: inner.to_vec(),
                label: label.to_string(),
                tail: Tail::Passed,
            },
            _ => Unwrap::Plain,
        }
    }

    /// `WRAPPER [OPTIONS] [CMD ...]`, with `plain_if` options meaning it
    /// runs nothing.
    fn simple(&self, spec: &[Opt], plain_if: &[&str]) -> Result<Unwrap, Refusal> {
        let p = self.parse(0, spec)?;
        if plain_if.iter().any(|id| p.has(id)) {
            return Ok(Unwrap::Plain);
        }
        Ok(self.inner_from(p.rest, self.name))
    }

    fn env(&self) -> Result<Unwrap, Refusal> {
        let p = self.parse(0, ENV)?;
        let mut i = p.rest;
        if self.args.get(i).is_some_and(|a| a == "-") {
            i += 1;
        }
        while let Some(a) = self.args.get(i) {
            let Some((var, _)) = a.split_once('=') else {
                break;
            };
            check_assignment(var, self.name, self.at)?;
            i += 1;
        }
        Ok(self.inner_from(i, self.name))
    }

    fn nice(&self) -> Result<Unwrap, Refusal> {
        // GNU nice accepts the legacy `-N`, `--N`, `-+N` adjustments first.
        let legacy = |a: &str| {
            let b = a.as_bytes();
            let skip = 1 + usize::from(matches!(b.get(1), Some(b'-' | b'+')));
            b.first() == Some(&b'-') && b.get(skip).is_some_and(u8::is_ascii_digit)
        };
        let mut from = 0;
        while self.args.get(from).is_some_and(|a| legacy(a)) {
            from += 1;
        }
        let p = self.parse(from, NICE)?;
        Ok(self.inner_from(p.rest, self.name))
    }

    fn nohup(&self) -> Result<Unwrap, Refusal> {
        // GNU nohup has no options but --help/--version.
        self.parse(0, &[])
            .map(|p| self.inner_from(p.rest, self.name))
    }

    fn command(&self) -> Result<Unwrap, Refusal> {
        // `command -v/-V` describes the command instead of running it.
        self.simple(COMMAND, &["v", "V"])
    }

    fn timeout(&self) -> Result<Unwrap, Refusal> {
        let p = self.parse(0, TIMEOUT)?;
        let Some(duration) = self.args.get(p.rest) else {
            return Ok(Unwrap::Plain);
        };
        if !is_duration(duration) {
            return Err(self.malformed(&format!(
                "duration `{duration}` is not a number like 10, 2.5s or 1m"
            )));
        }
        Ok(self.inner_from(p.rest + 1, self.name))
    }

    fn chrt(&self) -> Result<Unwrap, Refusal> {
        let p = self.parse(0, CHRT)?;
        if p.has("m") {
            return Ok(Unwrap::Plain);
        }
        let Some(prio) = self.args.get(p.rest) else {
            return Ok(Unwrap::Plain);
        };
        if prio.is_empty() || !prio.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.malformed(&format!(
                "priority `{prio}` is not a number (chrt [options] PRIORITY COMMAND)"
            )));
        }
        Ok(self.inner_from(p.rest + 1, self.name))
    }

    fn taskset(&self) -> Result<Unwrap, Refusal> {
        let p = self.parse(0, TASKSET)?;
        let Some(mask) = self.args.get(p.rest) else {
            return Ok(Unwrap::Plain);
        };
        let mask_char = |c: char| c.is_ascii_hexdigit() || matches!(c, 'x' | 'X' | ',' | '-' | ':');
        if mask.is_empty() || !mask.chars().all(mask_char) {
            return Err(self.malformed(&format!(
                "CPU mask `{mask}` is not a mask or list (taskset MASK COMMAND)"
            )));
        }
        Ok(self.inner_from(p.rest + 1, self.name))
    }

    fn busybox(&self) -> Result<Unwrap, Refusal> {
        match self.args.first().map(String::as_str) {
            None | Some("--list" | "--list-full" | "--help") => Ok(Unwrap::Plain),
            Some(o) if o.starts_with('-') => {
                // Parsing with no known option yields the standard message.
                self.parse(0, &[])?;
                Err(self.malformed(&format!("option `{o}` is not understood")))
            }
            Some(_) => Ok(self.inner_from(0, self.name)),
        }
    }

    fn flock(&self) -> Result<Unwrap, Refusal> {
        let p = self.parse(0, FLOCK)?;
        // The lock file (or descriptor) operand.
        if self.args.get(p.rest).is_none() {
            return Ok(Unwrap::Plain);
        }
        let cmd = p.rest + 1;
        match self.args.get(cmd).map(String::as_str) {
            Some("-c" | "--command") => {
                let rest = self.args.get(cmd + 1..).unwrap_or_default();
                let [script] = rest else {
                    return Err(self.malformed("`-c` needs exactly one script argument"));
                };
                self.script(script, &format!("{} -c", self.name))
            }
            _ => Ok(self.inner_from(cmd, self.name)),
        }
    }

    fn xargs(&self) -> Result<Unwrap, Refusal> {
        let p = self.parse(0, XARGS)?;
        let mut inner: Vec<String> = self.args.get(p.rest..).unwrap_or_default().to_vec();
        if p.has("I") {
            // `--replace` alone means `{}`.
            let pat = p.value("I").unwrap_or("{}");
            if pat.is_empty() {
                return Err(self.malformed("`-I` needs a non-empty replacement string"));
            }
            // Input replaces every occurrence: only what precedes the first
            // one is known.
            if let Some(k) = inner.iter().position(|a| a.contains(pat)) {
                if k == 0 {
                    return Err(refuse(
                        ExecDenyReason::AppendedArguments,
                        format!(
                            "`{}`{} would take the command name itself from its input (`-I {pat}`), \
                             which cannot be checked",
                            self.name, self.at
                        ),
                    ));
                }
                inner.truncate(k);
            }
        }
        if inner.is_empty() {
            // xargs runs `echo` by default.
            inner.push("echo".to_string());
        }
        Ok(Unwrap::Inner {
            inner,
            label: self.name.to_string(),
            tail: Tail::Appended,
        })
    }

    fn find(&self) -> Result<Unwrap, Refusal> {
        let args = self.args;
        let mut execs = Vec::new();
        let mut i = 0;
        while let Some(a) = args.get(i) {
            i += 1;
            if !matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                continue;
            }
            let start = i;
            // GNU find: the command ends at `;`, or at `+` right after `{}`.
            let end = (start..args.len())
                .find(|&j| args[j] == ";" || (args[j] == "+" && j > start && args[j - 1] == "{}"));
            let Some(end) = end else {
                return Err(self.malformed(&format!("`{a}` has no terminating `;` or `{{}} +`")));
            };
            let mut cmd: Vec<String> = args[start..end].to_vec();
            match cmd.first().map(String::as_str) {
                None => return Err(self.malformed(&format!("`{a}` has no command"))),
                // A predicate here means an earlier `-exec` was an option's
                // value; refuse rather than guess how find reads it.
                Some(c) if c.starts_with('-') || matches!(c, "(" | ")" | "!" | ",") => {
                    return Err(
                        self.malformed(&format!("`{a}` is followed by `{c}`, not a command"))
                    );
                }
                Some(_) => {}
            }
            // `{}` is replaced by file names, which the agent may choose.
            let substituted = match cmd.iter().position(|x| x.contains("{}")) {
                Some(0) => {
                    return Err(refuse(
                        ExecDenyReason::AppendedArguments,
                        format!(
                            "`{} {a}`{} takes the command name from a file name (`{{}}`), \
                             which cannot be checked",
                            self.name, self.at
                        ),
                    ));
                }
                Some(k) => {
                    cmd.truncate(k);
                    true
                }
                None => false,
            };
            execs.push((cmd, substituted));
            i = end + 1;
        }
        Ok(Unwrap::Find { execs })
    }

    fn shell(&self) -> Result<Unwrap, Refusal> {
        let p = self.parse(0, SHELL)?;
        let mut rest = p.rest;
        // A lone `-` ends a shell's options like `--`.
        if self.args.get(rest).is_some_and(|a| a == "-") {
            rest += 1;
        }
        if !p.has("c") {
            // A script file, stdin or an interactive shell: the shell
            // itself must be allowed.
            return Ok(Unwrap::Plain);
        }
        if let Some(o) = p
            .opts
            .iter()
            .filter(|(id, _)| *id == "o")
            .filter_map(|(_, v)| v.as_deref())
            .find(|v| !SHELL_SET_O.contains(v))
        {
            return Err(refuse(
                ExecDenyReason::UnknownOption,
                format!(
                    "`{} -o {o}`{} is not understood (known: {}); remove it or pass the command's \
                     argv directly",
                    self.name,
                    self.at,
                    SHELL_SET_O.join(", ")
                ),
            ));
        }
        if p.has("i") || p.has("s") {
            return Err(refuse(
                ExecDenyReason::Unsupported,
                format!(
                    "`{} -c`{} with `-i` or `-s` reads more commands than the script; it is refused",
                    self.name, self.at
                ),
            ));
        }
        let Some(script) = self.args.get(rest) else {
            return Err(self.malformed("`-c` has no script"));
        };
        self.script(script, &format!("{} -c", self.name))
    }

    /// A `-c` script: one simple command, possibly after assignments.
    fn script(&self, script: &str, label: &str) -> Result<Unwrap, Refusal> {
        let at = self.at;
        let not_checkable = |what: &str| {
            refuse(
                ExecDenyReason::Script,
                format!(
                    "`{label}`{at} runs a script with {what}; a script cannot be checked, \
                     pass the command's argv directly"
                ),
            )
        };
        let words = scan_script(script).map_err(|what| not_checkable(&what))?;
        // Defence in depth: shlex must read the same words.
        let texts: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
        if shlex::split(script).is_none_or(|s| s != texts) {
            return Err(not_checkable("quoting that cannot be split unambiguously"));
        }
        let mut k = 0;
        while let Some(w) = words.get(k).filter(|w| w.assignment) {
            let var = w.text.split_once('=').map_or("", |(v, _)| v);
            check_assignment(var, label, at)?;
            k += 1;
        }
        let inner: Vec<String> = words.into_iter().skip(k).map(|w| w.text).collect();
        let Some(first) = inner.first() else {
            return Err(refuse(
                ExecDenyReason::Malformed,
                format!("`{label}`{at} has a script that runs no command"),
            ));
        };
        if SHELL_WORDS.contains(&first.as_str()) {
            return Err(refuse(
                ExecDenyReason::Script,
                format!(
                    "`{label}`{at} runs the shell keyword or builtin `{first}`, which is not a \
                     program and cannot be checked; pass the command's argv directly"
                ),
            ));
        }
        Ok(Unwrap::Inner {
            inner,
            label: label.to_string(),
            tail: Tail::Absorbed,
        })
    }

    /// `command` and `time` in a shell run builtins (`command eval ...`),
    /// which are not the programs of that name.
    fn no_shell_word(&self, u: Unwrap) -> Result<Unwrap, Refusal> {
        if let Unwrap::Inner { inner, .. } = &u
            && let Some(first) = inner.first().filter(|f| SHELL_WORDS.contains(&f.as_str()))
        {
            return Err(refuse(
                ExecDenyReason::Script,
                format!(
                    "`{}`{} runs the shell keyword or builtin `{first}`, which is not a program \
                     and cannot be checked; pass the command's argv directly",
                    self.name, self.at
                ),
            ));
        }
        Ok(u)
    }

    fn malformed(&self, what: &str) -> Refusal {
        refuse(
            ExecDenyReason::Malformed,
            format!("`{}`{}: {what}", self.name, self.at),
        )
    }
}

/// `timeout`'s DURATION: a decimal number with an optional s/m/h/d suffix.
fn is_duration(s: &str) -> bool {
    let num = s.strip_suffix(['s', 'm', 'h', 'd']).unwrap_or(s);
    let mut digits = 0;
    let mut dots = 0;
    for b in num.bytes() {
        match b {
            b'0'..=b'9' => digits += 1,
            b'.' => dots += 1,
            _ => return false,
        }
    }
    digits > 0 && dots <= 1
}

#[cfg(test)]
#[path = "exec_wrappers_tests.rs"]
mod tests;
