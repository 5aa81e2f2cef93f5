//! The exec policy sees through wrappers: table-driven vectors, manifest
//! validation with located errors, and property tests.

use bulwark_policy::{
    ConfigError, ExecDenyReason as R, ExecMode, ExecPolicy, ExecPolicyError, ExecRule, ExecSection,
    MAX_EXEC_DEPTH, parse_manifest,
};
use proptest::prelude::*;

fn rule(prefix: &[&str]) -> ExecRule {
    ExecRule {
        prefix: prefix.iter().map(|s| s.to_string()).collect(),
        examples: vec![],
        counter_examples: vec![],
    }
}

fn policy(mode: ExecMode, rules: &[&[&str]]) -> ExecPolicy {
    ExecPolicy::from_section(&ExecSection {
        mode,
        allow: rules.iter().map(|p| rule(p)).collect(),
    })
    .unwrap()
}

/// The policy most vectors run against.
const STD_RULES: &[&[&str]] = &[
    &["git"],                   // 0
    &["cargo", "build"],        // 1
    &["find"],                  // 2
    &["ls"],                    // 3
    &["env"],                   // 4: `env` alone prints the environment
    &["bash", "scripts/ci.sh"], // 5
    &["echo"],                  // 6
    &["/usr/bin/make"],         // 7
    &["nice"],                  // 8
    &["busybox", "--list"],     // 9
    &["command", "-v"],         // 10
];

fn std_policy() -> ExecPolicy {
    policy(ExecMode::Allowlist, STD_RULES)
}

/// Test command lines are written shell-style and split with shlex.
fn argv(line: &str) -> Vec<String> {
    shlex::split(line).unwrap_or_else(|| panic!("bad test line {line:?}"))
}

/// (command line, number of commands checked: the argv and each unwrapped one)
const ALLOWED: &[(&str, usize)] = &[
    ("git status", 1),
    ("git", 1),
    ("git push --force", 1),
    ("git status 'a b'", 1),
    ("cargo build --release", 1),
    ("ls -la", 1),
    ("echo hi", 1),
    ("/usr/bin/make all", 1),
    ("bash scripts/ci.sh --fast", 1),
    // env
    ("env", 1),
    ("env LC_ALL=C", 1),
    ("env git status", 2),
    ("env -i git status", 2),
    ("env --ignore-environment git status", 2),
    ("env -i -u HOME --chdir=/tmp LANG=C git status", 2),
    ("env -u HOME -C /tmp git log", 2),
    ("env --unset HOME --unset=USER git log", 2),
    ("env -iu HOME git log", 2),
    ("env -uHOME git log", 2),
    ("env - LC_ALL=C git", 2),
    ("env -- git status", 2),
    ("env TZ=UTC LC_ALL=C git status", 2),
    ("/usr/bin/env git status", 2),
    // nice, ionice
    ("nice", 1),
    ("nice git log", 2),
    ("nice -n 5 git log", 2),
    ("nice -n5 git log", 2),
    ("nice -5 git log", 2),
    ("nice --10 git log", 2),
    ("nice --adjustment=5 git log", 2),
    ("nice --adjustment 5 git log", 2),
    ("nice -n -5 git log", 2),
    ("ionice -c 3 git gc", 2),
    ("ionice -c2 -n7 -t git gc", 2),
    ("ionice --class=idle git gc", 2),
    // nohup, stdbuf, timeout, time
    ("nohup git fetch", 2),
    ("nohup -- git fetch", 2),
    ("stdbuf -oL git log", 2),
    ("stdbuf -o L -e 0 -i0 git log", 2),
    ("stdbuf --output=L git log", 2),
    ("timeout 10 git fetch", 2),
    ("timeout 2.5s git fetch", 2),
    ("timeout -s KILL -k 5 1m git fetch", 2),
    (
        "timeout --signal=TERM --kill-after=5 --preserve-status --foreground 10 git fetch",
        2,
    ),
    ("time git status", 2),
    ("time -p git status", 2),
    // command, exec, chrt, taskset, setsid
    ("command git status", 2),
    ("command -p git status", 2),
    ("command -v git", 1),
    ("exec git status", 2),
    ("exec -c git status", 2),
    ("chrt -b 0 git gc", 2),
    ("chrt --idle 0 git gc", 2),
    ("taskset 0x3 git gc", 2),
    ("taskset -c 0-3 git gc", 2),
    ("setsid git fetch", 2),
    ("setsid -w -f git fetch", 2),
    // busybox, flock
    ("busybox ls -l", 2),
    ("busybox --list", 1),
    ("/bin/busybox env git status", 3),
    ("flock /tmp/lock git fetch", 2),
    ("flock -n -w 5 /tmp/lock git fetch", 2),
    ("flock -x /tmp/lock -c 'git fetch'", 2),
    // shells
    ("sh -c 'git status'", 2),
    ("bash -lc \"git log --oneline\"", 2),
    ("bash -euc 'git status'", 2),
    ("sh -ec 'git status'", 2),
    ("bash -c -e 'git status'", 2),
    ("bash -c -- 'git status'", 2),
    ("bash -o pipefail -c 'git status'", 2),
    ("bash --norc --noprofile -c 'git status'", 2),
    ("dash -c 'git status' arg0 arg1", 2),
    ("zsh -c 'git commit -m \"a; b | c\"'", 2),
    (r#"sh -c "git commit -m 'x \$HOME'""#, 2),
    (r#"sh -c 'git commit -m "a \"b\" \\ c"'"#, 2),
    ("sh -c 'git log a\\;b'", 2),
    ("sh -c 'LC_ALL=C git status'", 2),
    ("sh -c '  git   status  '", 2),
    ("sh -c 'exec git status'", 3),
    ("sh -c 'echo hi'", 2),
    ("/bin/sh -c 'git status'", 2),
    ("sh -c 'git log a#b'", 2),
    // xargs
    ("xargs git add", 2),
    ("xargs -0 git add", 2),
    ("xargs -0 -r -n 1 -P 4 git add", 2),
    (
        "xargs --null --no-run-if-empty --max-args=2 --delimiter=, git add",
        2,
    ),
    ("xargs -I {} git add {}", 2),
    ("xargs --replace git add {}", 2),
    ("xargs -d '\\n' -t git add", 2),
    ("xargs -L 1 git add", 2),
    ("xargs", 2), // runs `echo`
    ("xargs -- git add", 2),
    ("xargs env git add", 3),
    ("xargs sh -c 'git status'", 3),
    // find
    ("find . -name x", 1),
    ("find . -name x -delete", 1),
    ("find . -name x -exec git add {} \\;", 2),
    ("find . -exec git add {} +", 2),
    ("find . -execdir git add {} ;", 2),
    ("find . -ok git add {} ;", 2),
    ("find . -okdir git add {} ;", 2),
    ("find . -exec git status ; -exec ls -l {} +", 3),
    ("find . -exec sh -c 'git status' {} \\;", 3),
    ("find . -exec git log -- {}.rs \\;", 2),
    ("find . -exec git add + ;", 2), // `+` ends -exec only right after `{}`
    // nested
    ("env nice timeout 5 sh -c 'git status'", 5),
    (
        "env LANG=C nice -n 5 nohup timeout 5 stdbuf -oL time git status",
        7,
    ),
    (
        "nohup nohup nohup nohup nohup nohup nohup nohup git status",
        MAX_EXEC_DEPTH + 1,
    ),
    ("sh -c 'env git status'", 3),
    ("bash -c 'nice -n 3 git log'", 3),
];

/// (command line, reason, a piece of the message or "")
const REFUSED: &[(&str, R, &str)] = &[
    (
        "curl x",
        R::NoMatchingRule,
        "`curl x` matches no [[exec.allow]] rule",
    ),
    ("gitk", R::NoMatchingRule, ""),
    ("cargo test", R::NoMatchingRule, ""),
    ("cargo", R::NoMatchingRule, ""),
    ("make", R::NoMatchingRule, ""),
    (
        "/usr/bin/git status",
        R::NoMatchingRule,
        "`/usr/bin/git` is not `git`",
    ),
    ("bash", R::NoMatchingRule, ""),
    ("bash evil.sh", R::NoMatchingRule, ""),
    ("busybox", R::NoMatchingRule, ""),
    ("timeout 5", R::NoMatchingRule, ""),
    ("command -V git", R::NoMatchingRule, ""),
    ("''", R::Malformed, "empty"),
    // env
    (
        "env curl x",
        R::NoMatchingRule,
        "`curl x` (inside `env`) matches no [[exec.allow]] rule",
    ),
    ("env -i curl x", R::NoMatchingRule, ""),
    (
        "/usr/bin/env curl",
        R::NoMatchingRule,
        "(inside `/usr/bin/env`)",
    ),
    ("env -S 'git status'", R::Unsupported, "env -S"),
    (
        "env --split-string='git status'",
        R::Unsupported,
        "`env --split-string` splits",
    ),
    (
        "env --bogus git",
        R::UnknownOption,
        "`--bogus` is not understood",
    ),
    ("env -0 git", R::UnknownOption, ""),
    ("env --ignore git", R::UnknownOption, ""), // no GNU abbreviations
    ("env -u", R::Malformed, "needs a value"),
    ("env -C", R::Malformed, ""),
    (
        "env LD_PRELOAD=/tmp/x.so git status",
        R::DangerousVariable,
        "`LD_PRELOAD`",
    ),
    ("env PATH=/tmp git status", R::DangerousVariable, ""),
    (
        "env GIT_SSH_COMMAND='curl x' git fetch",
        R::DangerousVariable,
        "",
    ),
    (
        "env BASH_ENV=/tmp/x bash -c 'git status'",
        R::DangerousVariable,
        "",
    ),
    ("env =x git", R::Malformed, ""),
    // An allowlist, not a denylist: variables that steer a program into
    // reading agent-written configuration (issue 16, item 4).
    (
        "env SSH_CLIENT=1 bash -c 'git status'",
        R::DangerousVariable,
        "`SSH_CLIENT`",
    ),
    (
        "env XDG_CONFIG_HOME=cfg git status",
        R::DangerousVariable,
        "",
    ),
    ("env HOME=. git status", R::DangerousVariable, ""),
    (
        "env GIT_CONFIG_GLOBAL=x git status",
        R::DangerousVariable,
        "",
    ),
    ("env GIT_DIR=x git status", R::DangerousVariable, ""),
    ("env FOO=1 git status", R::DangerousVariable, "`FOO`"),
    ("env LC_=x git status", R::DangerousVariable, ""),
    ("sh -c 'SSH_CLIENT=1 git status'", R::DangerousVariable, ""),
    (
        "env TZ=UTC SSH_CONNECTION=x git status",
        R::DangerousVariable,
        "",
    ),
    // shells
    (
        "sh -c 'git status; curl x'",
        R::Script,
        "`sh -c` runs a script with `;`; a script cannot be checked, pass the command's argv directly",
    ),
    ("sh -c 'git $(curl x)'", R::Script, "`$(`"),
    ("sh -c \"git `curl x`\"", R::Script, ""),
    ("sh -c 'git \"`curl x`\"'", R::Script, ""),
    ("sh -c 'git $HOME'", R::Script, "`$`"),
    ("sh -c 'git \"$HOME\"'", R::Script, "`$`"),
    ("bash -c 'git status | sh'", R::Script, "`|`"),
    ("bash -c 'git status && curl x'", R::Script, "`&`"),
    ("bash -c 'git status > /etc/passwd'", R::Script, "`>`"),
    ("bash -c 'git status < x'", R::Script, "`<`"),
    ("bash -c 'git log *'", R::Script, "`*`"),
    ("bash -c 'git log a?'", R::Script, "`?`"),
    ("bash -c 'git log [ab]'", R::Script, "`[`"),
    ("bash -c 'git log ~'", R::Script, "`~`"),
    ("bash -c 'git log {a,b}'", R::Script, "`{`"),
    ("bash -c '(git status)'", R::Script, "`(`"),
    ("bash -c 'git status\ncurl x'", R::Script, "newline"),
    ("bash -c 'git status # comment'", R::Script, "comment"),
    ("bash -c 'git \"unterminated'", R::Script, "unterminated"),
    ("zsh -c '=curl x'", R::Script, ""),
    (
        "bash -c '! git status'",
        R::Script,
        "keyword or builtin `!`",
    ),
    ("bash -c 'eval git status'", R::Script, "`eval`"),
    ("bash -c 'source x'", R::Script, ""),
    ("bash -c \"let 'x[\\$(curl x)]=1'\"", R::Script, "`let`"),
    ("bash -c 'printf -v x y'", R::Script, ""),
    (
        "bash -c 'curl x'",
        R::NoMatchingRule,
        "`curl x` (inside `bash -c`)",
    ),
    ("bash -c 'TZ=UTC LANG=C curl'", R::NoMatchingRule, ""),
    (
        "bash -c 'LD_PRELOAD=/x git status'",
        R::DangerousVariable,
        "`LD_PRELOAD`",
    ),
    ("bash -c 'LC_ALL=C'", R::Malformed, "runs no command"),
    ("bash -c ''", R::Malformed, ""),
    ("bash -c", R::Malformed, "no script"),
    ("bash -ic 'git status'", R::Unsupported, ""),
    ("bash -s -c 'git status'", R::Unsupported, ""),
    (
        "bash --rcfile x -c 'git status'",
        R::UnknownOption,
        "`--rcfile`",
    ),
    (
        "bash -o keyword -c 'git status'",
        R::UnknownOption,
        "-o keyword",
    ),
    ("bash -O extglob -c 'git status'", R::UnknownOption, ""),
    ("bash -k -c 'git status'", R::UnknownOption, ""),
    ("sh -c \"'sudo' x\"", R::Escalator, ""),
    ("sh -c 's\\udo x'", R::Escalator, ""),
    ("bash -c 'time sudo ls'", R::Escalator, ""),
    ("bash -c 'exec -a sudo busybox'", R::Unsupported, ""),
    ("bash -c 'command -p curl'", R::NoMatchingRule, ""),
    ("bash -c 'command eval x'", R::Script, "`eval`"),
    ("bash -c 'time let x=1'", R::Script, "`let`"),
    // timeout, nice, ionice, nohup, stdbuf, time, command, exec
    ("timeout 10 curl", R::NoMatchingRule, "(inside `timeout`)"),
    ("timeout git status", R::Malformed, "duration `git`"),
    ("timeout -x 10 git", R::UnknownOption, ""),
    ("timeout -s", R::Malformed, ""),
    (
        "nice --bogus git",
        R::UnknownOption,
        "`nice` option `--bogus` is not understood",
    ),
    ("nice -n", R::Malformed, ""),
    ("nice curl", R::NoMatchingRule, ""),
    ("ionice -p 1234", R::Unsupported, "another process"),
    ("ionice -c 3 curl", R::NoMatchingRule, ""),
    ("nohup -x git", R::UnknownOption, ""),
    ("nohup curl x", R::NoMatchingRule, ""),
    ("stdbuf -oL curl x", R::NoMatchingRule, ""),
    ("stdbuf -z git", R::UnknownOption, ""),
    ("time -x git", R::UnknownOption, ""),
    ("time curl", R::NoMatchingRule, ""),
    ("command curl", R::NoMatchingRule, ""),
    ("exec -a git busybox", R::Unsupported, ""),
    ("exec curl", R::NoMatchingRule, ""),
    // chrt, taskset, setsid, busybox, flock
    ("chrt -p 0 1234", R::Unsupported, ""),
    ("chrt x git", R::Malformed, "priority"),
    ("chrt 0 curl", R::NoMatchingRule, ""),
    ("taskset -p 3 1234", R::Unsupported, ""),
    ("taskset zz git", R::Malformed, "mask"),
    ("taskset 1 curl", R::NoMatchingRule, ""),
    ("setsid curl", R::NoMatchingRule, ""),
    (
        "busybox wget http://x",
        R::NoMatchingRule,
        "`wget http://x` (inside `busybox`)",
    ),
    ("busybox su", R::Escalator, ""),
    ("busybox --install", R::UnknownOption, ""),
    ("flock /tmp/l curl", R::NoMatchingRule, ""),
    (
        "flock /tmp/l -c 'git status; curl x'",
        R::Script,
        "`flock -c`",
    ),
    ("flock /tmp/l -c git extra", R::Malformed, "exactly one"),
    ("flock -c 'git status' /tmp/l", R::UnknownOption, ""),
    (
        "env SHELL=/tmp/x flock /tmp/l -c 'git status'",
        R::DangerousVariable,
        "",
    ),
    // xargs
    ("xargs curl", R::NoMatchingRule, "(inside `xargs`)"),
    ("xargs -i git add", R::UnknownOption, ""),
    ("xargs -e git add", R::UnknownOption, ""),
    ("xargs -a", R::Malformed, ""),
    (
        "xargs env",
        R::AppendedArguments,
        "`xargs` would append arguments to `env`",
    ),
    ("xargs nice", R::AppendedArguments, ""),
    ("xargs timeout 5", R::AppendedArguments, ""),
    ("xargs find .", R::AppendedArguments, ""),
    ("xargs sh", R::AppendedArguments, ""),
    ("xargs env nice", R::AppendedArguments, ""),
    ("xargs -I X X", R::AppendedArguments, "command name itself"),
    ("xargs -I % sh -c %", R::Malformed, ""),
    ("xargs -I '' git", R::Malformed, ""),
    // find
    (
        "find . -exec curl {} \\;",
        R::NoMatchingRule,
        "`curl` (inside `find -exec`)",
    ),
    ("find . -exec curl {} +", R::NoMatchingRule, ""),
    ("find . -execdir sh -c 'curl x' \\;", R::NoMatchingRule, ""),
    ("find . -ok curl {} ;", R::NoMatchingRule, ""),
    (
        "find . -exec git add {} \\; -exec curl x \\;",
        R::NoMatchingRule,
        "",
    ),
    ("find . -exec git add {}", R::Malformed, "no terminating"),
    ("find . -exec \\;", R::Malformed, "no command"),
    ("find . -exec {} \\;", R::AppendedArguments, "file name"),
    ("find . -exec env {} \\;", R::AppendedArguments, ""),
    ("find . -exec nice {} +", R::AppendedArguments, ""),
    (
        "find . -name -exec -exec sudo x \\;",
        R::Malformed,
        "not a command",
    ),
    ("find . -exec sudo {} \\;", R::Escalator, ""),
    // escalators, anywhere
    ("sudo git status", R::Escalator, "`sudo` is always refused"),
    ("/usr/bin/sudo git", R::Escalator, ""),
    ("./sudo git", R::Escalator, ""),
    (
        "env sudo git",
        R::Escalator,
        "`sudo` (inside `env`) is always refused",
    ),
    ("sh -c 'sudo git status'", R::Escalator, ""),
    ("nice -n 5 sudo git", R::Escalator, ""),
    ("xargs sudo", R::Escalator, ""),
    ("busybox sudo", R::Escalator, ""),
    ("doas git", R::Escalator, ""),
    ("su -c git", R::Escalator, ""),
    ("pkexec git", R::Escalator, ""),
    ("runuser -u x git", R::Escalator, ""),
    ("chroot / git", R::Escalator, ""),
    ("nsenter -t 1 git", R::Escalator, ""),
    ("unshare -r git", R::Escalator, ""),
    ("setpriv git", R::Escalator, ""),
    ("capsh -- -c git", R::Escalator, ""),
    ("sudoedit x", R::Escalator, ""),
    ("run0 git", R::Escalator, ""),
    ("busybox chpst -u root git", R::Escalator, ""),
    ("setuidgid root git", R::Escalator, ""),
    // nesting
    (
        "env nice timeout 5 sh -c 'curl x'",
        R::NoMatchingRule,
        "`curl x` (inside `env` → `nice` → `timeout` → `sh -c`) matches no [[exec.allow]] rule",
    ),
    (
        "nohup nohup nohup nohup nohup nohup nohup nohup nohup git status",
        R::TooDeep,
        "more than 8",
    ),
    ("sh -c 'sh -c \"sh -c curl\"'", R::NoMatchingRule, ""),
];

#[test]
fn allowed_vectors() {
    let p = std_policy();
    for (line, n) in ALLOWED {
        let a = argv(line);
        match p.check(&a) {
            Ok(ok) => {
                assert_eq!(ok.commands.len(), *n, "{line}: {:?}", ok.commands);
                assert_eq!(ok.rules.len(), ok.commands.len(), "{line}");
                assert_eq!(ok.commands[0], a, "{line}");
                assert!(
                    ok.rules.iter().any(Option::is_some),
                    "{line}: no rule matched"
                );
            }
            Err(e) => panic!("{line}: refused: {e}"),
        }
    }
}

#[test]
fn refused_vectors() {
    let p = std_policy();
    for (line, reason, needle) in REFUSED {
        match p.check(&argv(line)) {
            Ok(ok) => panic!("{line}: allowed: {:?}", ok.commands),
            Err(e) => {
                assert_eq!(e.reason, *reason, "{line}: {e}");
                assert!(
                    e.message.contains(needle),
                    "{line}: {e} (wanted {needle:?})"
                );
                assert!(!e.message.is_empty());
            }
        }
    }
}

#[test]
fn vector_counts() {
    assert!(
        ALLOWED.len() + REFUSED.len() >= 200,
        "{}",
        ALLOWED.len() + REFUSED.len()
    );
}

#[test]
fn approval_lists_the_chain_and_rules() {
    let p = std_policy();
    let ok = p.check(&argv("env nice git status")).unwrap();
    assert_eq!(
        ok.commands,
        vec![
            argv("env nice git status"),
            argv("nice git status"),
            argv("git status")
        ]
    );
    assert_eq!(ok.rules, vec![None, None, Some(0)]);

    let ok = p
        .check(&argv("find . -exec git add {} ; -exec ls {} +"))
        .unwrap();
    assert_eq!(
        ok.commands,
        vec![
            argv("find . -exec git add {} ; -exec ls {} +"),
            argv("git add"),
            argv("ls")
        ]
    );
    assert_eq!(ok.rules, vec![Some(2), Some(0), Some(3)]);

    let ok = p.check(&argv("sh -c 'LC_ALL=C git status'")).unwrap();
    assert_eq!(ok.commands[1], argv("git status"));

    // A wrapper that runs nothing is itself matched.
    let ok = p.check(&argv("env LC_ALL=C")).unwrap();
    assert_eq!(ok.rules, vec![Some(4)]);
}

#[test]
fn denial_names_the_inner_command() {
    let e = std_policy()
        .check(&argv("env -i nice curl -s x"))
        .unwrap_err();
    assert_eq!(e.command, argv("curl -s x"));
    assert_eq!(e.inside, vec!["env".to_string(), "nice".to_string()]);
    assert_eq!(e.to_string(), e.message);

    let e = std_policy()
        .check(&argv("find . -exec git add {} ; -exec curl {} ;"))
        .unwrap_err();
    assert_eq!(e.command, argv("curl"));
    assert_eq!(e.inside, vec!["find -exec".to_string()]);
}

#[test]
fn malformed_argv() {
    let p = std_policy();
    assert_eq!(p.check(&[]).unwrap_err().reason, R::Malformed);
    let nul = vec!["git".to_string(), "a\0b".to_string()];
    assert_eq!(p.check(&nul).unwrap_err().reason, R::Malformed);
    let e = p.check(&["".to_string()]).unwrap_err();
    assert_eq!(e.reason, R::Malformed);
}

#[test]
fn depth_limit_is_exactly_max() {
    let p = std_policy();
    for n in 0..=MAX_EXEC_DEPTH + 3 {
        let mut a: Vec<String> = vec!["env".to_string(); n];
        a.extend(argv("git status"));
        let r = p.check(&a);
        if n <= MAX_EXEC_DEPTH {
            assert_eq!(r.unwrap().commands.len(), n + 1);
        } else {
            assert_eq!(r.unwrap_err().reason, R::TooDeep, "{n}");
        }
    }
}

#[test]
fn narrow_rules_are_not_widened_by_wrappers() {
    let p = policy(ExecMode::Allowlist, &[&["git", "status"], &["find", "."]]);
    for line in [
        "git status -s",
        "env git status",
        "xargs git status",
        "xargs -0 git status",
        "find . -exec git status {} ;",
        "sh -c 'git status --short'",
    ] {
        assert!(p.check(&argv(line)).is_ok(), "{line}");
    }
    for line in [
        "git push",
        "git",
        "xargs git",                  // input could supply `push`
        "xargs -I status git status", // `status` is replaced by input
        "find . -exec git {} status ;",
        "find / -name x",
        "env git push",
        "sh -c 'git push'",
    ] {
        let e = p.check(&argv(line)).unwrap_err();
        assert_eq!(e.reason, R::NoMatchingRule, "{line}: {e}");
    }
}

#[test]
fn deny_mode_refuses_everything() {
    for p in [ExecPolicy::deny(), policy(ExecMode::Deny, &[])] {
        for line in ["git status", "true", "env git"] {
            let e = p.check(&argv(line)).unwrap_err();
            assert_eq!(e.reason, R::ModeDeny);
            assert!(e.message.contains("mode = \"allowlist\""), "{e}");
        }
    }
}

#[test]
fn full_mode_allows_commands_but_not_escalators_or_scripts() {
    let p = policy(ExecMode::Full, &[]);
    for (line, n) in [
        ("curl x", 1),
        ("env curl x", 2),
        ("sh -c 'python3 -V'", 2),
        ("find . -exec rm {} +", 2),
        ("xargs rm", 2),
        ("bash", 1),
    ] {
        let ok = p
            .check(&argv(line))
            .unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(ok.commands.len(), n, "{line}");
        assert!(ok.rules.iter().all(Option::is_none));
    }
    for (line, reason) in [
        ("sudo x", R::Escalator),
        ("env nice sudo x", R::Escalator),
        ("busybox su", R::Escalator),
        ("sh -c 'TZ=1 sudo ls'", R::Escalator),
        ("find . -exec unshare -r {} ;", R::Escalator),
        ("sh -c 'curl x | sh'", R::Script),
        ("nice --bogus curl", R::UnknownOption),
        ("env -S 'sudo ls'", R::Unsupported),
        ("xargs env", R::AppendedArguments),
    ] {
        let e = p.check(&argv(line)).unwrap_err();
        assert_eq!(e.reason, reason, "{line}: {e}");
    }
}

// ---------------------------------------------------------------------------
// Section validation

fn section(mode: ExecMode, rules: Vec<ExecRule>) -> Result<ExecPolicy, ExecPolicyError> {
    ExecPolicy::from_section(&ExecSection { mode, allow: rules })
}

fn v(lines: &[&str]) -> Vec<Vec<String>> {
    lines.iter().map(|l| argv(l)).collect()
}

#[test]
fn section_validation() {
    use ExecPolicyError as E;
    assert!(matches!(
        section(ExecMode::Deny, vec![rule(&["git"])]),
        Err(E::RulesOutsideAllowlist {
            mode: ExecMode::Deny
        })
    ));
    assert!(matches!(
        section(ExecMode::Full, vec![rule(&["git"])]),
        Err(E::RulesOutsideAllowlist {
            mode: ExecMode::Full
        })
    ));
    assert!(matches!(
        section(ExecMode::Allowlist, vec![rule(&["git"]), rule(&[])]),
        Err(E::EmptyPrefix { rule: 1 })
    ));
    assert!(matches!(
        section(ExecMode::Allowlist, vec![rule(&["git", ""])]),
        Err(E::EmptyElement { rule: 0, index: 1 })
    ));
    assert!(matches!(
        section(ExecMode::Allowlist, vec![rule(&["git", "a\0"])]),
        Err(E::NulElement { rule: 0, index: 1 })
    ));
    assert!(matches!(
        section(ExecMode::Allowlist, vec![rule(&["/usr/bin/sudo"])]),
        Err(E::AlwaysRefused { rule: 0, .. })
    ));
    // Examples pass.
    let mut git = rule(&["git", "status"]);
    git.examples = v(&["git status -s", "env git status", "sh -c 'git status'"]);
    git.counter_examples = v(&[
        "git push",
        "gitk",
        "sh -c 'git status; x'",
        "sudo git status",
    ]);
    assert!(section(ExecMode::Allowlist, vec![git.clone()]).is_ok());
    // An example this rule does not allow.
    let mut bad = git.clone();
    bad.examples.push(argv("git push"));
    let e = section(ExecMode::Allowlist, vec![bad]).unwrap_err();
    assert!(
        matches!(
            e,
            E::ExampleNotAllowed {
                rule: 0,
                index: 3,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("`git push`"), "{e}");
    // Allowed, but by another rule.
    let mut other = rule(&["ls"]);
    other.examples = v(&["git status"]);
    let e = section(ExecMode::Allowlist, vec![git.clone(), other]).unwrap_err();
    assert!(
        matches!(
            e,
            E::ExampleNotAllowed {
                rule: 1,
                index: 0,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("by rule 0"), "{e}");
    // A counter-example the policy allows.
    let mut wide = rule(&["git"]);
    wide.counter_examples = v(&["gitk", "env git push"]);
    let e = section(ExecMode::Allowlist, vec![wide]).unwrap_err();
    assert!(
        matches!(
            e,
            E::CounterExampleAllowed {
                rule: 0,
                index: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("rule 0: counter-example 1 `env git push`"),
        "{e}"
    );
    assert!(e.to_string().contains("by rule 0"), "{e}");
}

// ---------------------------------------------------------------------------
// Manifest integration: located errors

const HEAD: &str = "[agent]\nname = \"coder\"\n\n";

fn manifest_err(body: &str) -> ConfigError {
    let src = format!("{HEAD}{body}");
    match parse_manifest(&src, "agents/coder/agent.toml") {
        Ok(m) => panic!("accepted: {:?}", m.exec),
        Err(e) => e,
    }
}

fn line_in(body: &str, needle: &str) -> usize {
    let src = format!("{HEAD}{body}");
    src.lines()
        .position(|l| l.contains(needle))
        .expect("needle")
        + 1
}

const GOOD_EXEC: &str = r#"[exec]
mode = "allowlist"

[[exec.allow]]
prefix = ["git", "status"]
examples = [["git", "status", "-s"], ["env", "git", "status"]]
counter_examples = [["git", "push"], ["gitk"]]

[[exec.allow]]
prefix = ["cargo", "build"]
"#;

#[test]
fn manifest_exec_section_parses() {
    let m = parse_manifest(&format!("{HEAD}{GOOD_EXEC}"), "a.toml").unwrap();
    let exec = m.exec.clone().unwrap();
    assert_eq!(exec.mode, ExecMode::Allowlist);
    assert_eq!(exec.allow.len(), 2);
    assert_eq!(exec.allow[0].prefix, vec!["git", "status"]);
    let p = ExecPolicy::from_section(&exec).unwrap();
    assert!(p.check(&argv("nice cargo build")).is_ok());
    assert_eq!(p.rules().len(), 2);
    assert_eq!(p.mode(), ExecMode::Allowlist);

    // Absent: full mode behind the capabilities (escalators and scripts
    // still refused); an empty section: deny.
    let m = parse_manifest(HEAD, "a.toml").unwrap();
    assert_eq!(m.exec, None);
    assert_eq!(m.exec_policy().mode(), ExecMode::Full);
    assert!(m.exec_policy().check(&argv("sudo ls")).is_err());
    let m = parse_manifest(&format!("{HEAD}[exec]\n"), "a.toml").unwrap();
    assert_eq!(m.exec, Some(ExecSection::default()));
    assert_eq!(m.exec_policy().mode(), ExecMode::Deny);
    let m = parse_manifest(&format!("{HEAD}[exec]\nmode = \"full\"\n"), "a.toml").unwrap();
    assert_eq!(m.exec_policy().mode(), ExecMode::Full);
}

#[test]
fn manifest_exec_errors_are_located() {
    struct Case {
        body: String,
        line_of: &'static str,
        field: &'static str,
        needle: &'static str,
    }
    let with = |from: &str, to: &str| {
        assert!(GOOD_EXEC.contains(from), "{from}");
        GOOD_EXEC.replacen(from, to, 1)
    };
    let cases = [
        Case {
            body: with("prefix = [\"cargo\", \"build\"]", "prefix = []"),
            line_of: "prefix = []",
            field: "exec.allow[1].prefix",
            needle: "prefix is empty",
        },
        Case {
            body: with(
                "prefix = [\"cargo\", \"build\"]",
                "prefix = [\"cargo\", \"\"]",
            ),
            line_of: "prefix = [\"cargo\", \"\"]",
            field: "exec.allow[1].prefix[1]",
            needle: "empty string",
        },
        Case {
            body: with("[\"env\", \"git\", \"status\"]", "[\"git\", \"log\"]"),
            line_of: "examples = ",
            field: "exec.allow[0].examples[1]",
            needle: "rule 0: example 1 `git log`",
        },
        Case {
            body: with("[\"gitk\"]", "[\"gitk\"], [\"nice\", \"git\", \"status\"]"),
            line_of: "counter_examples = ",
            field: "exec.allow[0].counter_examples[2]",
            needle: "rule 0: counter-example 2 `nice git status` is allowed by the policy (by rule 0)",
        },
        Case {
            body: with("mode = \"allowlist\"\n", ""),
            line_of: "[[exec.allow]]",
            field: "exec.allow",
            needle: "rules only apply in allowlist mode, and mode is \"deny\" (the default)",
        },
        Case {
            body: with("mode = \"allowlist\"", "mode = \"full\""),
            line_of: "[[exec.allow]]",
            field: "exec.allow",
            needle: "rules only apply in allowlist mode",
        },
        Case {
            body: with("prefix = [\"cargo\", \"build\"]", "prefix = [\"sudo\"]"),
            line_of: "prefix = [\"sudo\"]",
            field: "exec.allow[1].prefix[0]",
            needle: "always refused",
        },
        Case {
            body: with("mode = \"allowlist\"", "mode = \"sometimes\""),
            line_of: "mode = ",
            field: "exec.mode",
            needle: "unknown variant",
        },
        Case {
            body: with("mode = \"allowlist\"", "mode = \"allowlist\"\nmod = 1"),
            line_of: "mod = 1",
            field: "exec",
            needle: "unknown field `mod`",
        },
        Case {
            body: with("prefix = [\"cargo\", \"build\"]", "prefixes = [\"cargo\"]"),
            line_of: "prefixes = ",
            field: "exec.allow[1]",
            needle: "unknown field `prefixes`",
        },
        Case {
            body: with(
                "prefix = [\"cargo\", \"build\"]",
                "prefix = \"cargo build\"",
            ),
            line_of: "prefix = \"cargo build\"",
            field: "exec.allow[1].prefix",
            needle: "invalid type",
        },
    ];
    for c in cases {
        let e = manifest_err(&c.body);
        let want = line_in(&c.body, c.line_of);
        assert_eq!(e.line, want, "{}: {e}", c.field);
        assert_eq!(e.origin, "agents/coder/agent.toml");
        assert!(
            e.field.as_deref().is_some_and(|f| f.starts_with(c.field)),
            "{}: field {:?}: {e}",
            c.field,
            e.field
        );
        assert!(e.message.contains(c.needle), "{e} (wanted {:?})", c.needle);
        assert!(
            e.to_string()
                .starts_with(&format!("agents/coder/agent.toml:{want}:"))
        );
    }
}

// ---------------------------------------------------------------------------
// Properties

/// Words that steer the parser into every wrapper and option path.
const VOCAB: &[&str] = &[
    "env",
    "sh",
    "bash",
    "-c",
    "-lc",
    "xargs",
    "find",
    "-exec",
    "-execdir",
    ";",
    "+",
    "{}",
    "nice",
    "-n",
    "5",
    "ionice",
    "nohup",
    "stdbuf",
    "-oL",
    "timeout",
    "10",
    "time",
    "command",
    "exec",
    "chrt",
    "taskset",
    "setsid",
    "busybox",
    "flock",
    "sudo",
    "/usr/bin/env",
    "git",
    "status",
    "curl",
    "-",
    "--",
    "-I",
    "X",
    "LC_ALL=C",
    "PATH=x",
    "-i",
    "-u",
    "-C",
    "-o",
    "-S",
    "'",
    "\"",
    "\\",
    "$",
    "git status",
    "git status; curl",
    "-p",
    "-a",
    "--list",
    "",
];

fn any_word() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(VOCAB).prop_map(str::to_string),
        1 => any::<String>(),
        1 => "[ -~]{0,6}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn check_never_panics(a in prop::collection::vec(any_word(), 0..14)) {
        for p in [std_policy(), policy(ExecMode::Full, &[]), ExecPolicy::deny()] {
            match p.check(&a) {
                Ok(ok) => {
                    prop_assert_eq!(&ok.commands[0], &a);
                    prop_assert_eq!(ok.commands.len(), ok.rules.len());
                    prop_assert!(ok.commands.len() <= 64);
                }
                Err(e) => prop_assert!(!e.message.is_empty()),
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Wrap {
    Env,
    EnvAssign,
    EnvI,
    Nice,
    Timeout,
    Nohup,
    Stdbuf,
    ShC,
    BashLc,
}

fn wrap(w: Wrap, inner: Vec<String>) -> Vec<String> {
    let pre: &[&str] = match w {
        Wrap::Env => &["env"],
        Wrap::EnvAssign => &["env", "LANG=C"],
        Wrap::EnvI => &["env", "-i", "--"],
        Wrap::Nice => &["nice", "-n", "5"],
        Wrap::Timeout => &["timeout", "5"],
        Wrap::Nohup => &["nohup"],
        Wrap::Stdbuf => &["stdbuf", "-oL"],
        Wrap::ShC | Wrap::BashLc => {
            let script = shlex::try_join(inner.iter().map(String::as_str)).expect("no NUL");
            let shell: &[&str] = if matches!(w, Wrap::ShC) {
                &["sh", "-c"]
            } else {
                &["bash", "-lc"]
            };
            let mut v: Vec<String> = shell.iter().map(|s| s.to_string()).collect();
            v.push(script);
            return v;
        }
    };
    pre.iter().map(|s| s.to_string()).chain(inner).collect()
}

fn wraps() -> impl Strategy<Value = Vec<Wrap>> {
    prop::collection::vec(
        prop::sample::select(vec![
            Wrap::Env,
            Wrap::EnvAssign,
            Wrap::EnvI,
            Wrap::Nice,
            Wrap::Timeout,
            Wrap::Nohup,
            Wrap::Stdbuf,
            Wrap::ShC,
            Wrap::BashLc,
        ]),
        0..=MAX_EXEC_DEPTH,
    )
}

/// Arguments with shell metacharacters, quotes and whitespace: quoting
/// must keep them plain text.
fn arg() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 ._/'\"$;|&<>()*?~#=\\\\\t\n-]{0,8}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn transparent_wrappers_preserve_the_verdict(
        allowed in any::<bool>(),
        name in prop::sample::select(vec!["git", "ls", "echo", "curl", "wget", "gitk", "python3"]),
        args in prop::collection::vec(arg(), 0..4),
        ws in wraps(),
    ) {
        let p = policy(ExecMode::Allowlist, &[&["git"], &["ls"], &["echo"], &["cargo", "build"]]);
        // Half the refused names are swapped for the narrow `cargo build`.
        let head: &[&str] = if allowed && matches!(name, "curl" | "wget" | "gitk" | "python3") {
            &["cargo", "build"]
        } else {
            &[name]
        };
        let base: Vec<String> = head.iter().map(|s| s.to_string()).chain(args).collect();
        let direct = p.check(&base);
        let mut a = base.clone();
        for w in &ws {
            a = wrap(*w, a);
        }
        match (direct, p.check(&a)) {
            (Ok(_), Ok(ok)) => {
                prop_assert_eq!(ok.commands.len(), ws.len() + 1);
                prop_assert_eq!(ok.commands.last(), Some(&base));
            }
            (Err(d), Err(e)) => {
                prop_assert_eq!(d.reason, R::NoMatchingRule);
                prop_assert_eq!(e.reason, R::NoMatchingRule, "{}", e);
                prop_assert_eq!(e.command, base);
                prop_assert_eq!(e.inside.len(), ws.len());
            }
            (d, e) => prop_assert!(false, "direct {:?} but wrapped {:?} for {:?}", d, e, a),
        }
    }
}
