//! Through the real binary: an agent's shell commands run inside the
//! sandbox. Escapes fail (and each call is audited with its outcome);
//! ordinary work (compile and run, git, system libraries) succeeds.

use crate::common;

use common::{Bw, field, scripted, with_action};
use serde_json::json;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const SECRET: &str = "bw-sandbox-secret-Q9x7Lm2";

fn shell(argv: &[&str]) -> String {
    json!({"tool_calls": [{"name": "shell_exec", "input": {"argv": argv}}]}).to_string()
}

fn write(path: &str, content: &str) -> String {
    json!({"tool_calls": [{"name": "file_write", "input": {"path": path, "content": content}}]})
        .to_string()
}

const CONNECT_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
int main(int c, char **v) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) { perror("socket"); return 3; }
  struct sockaddr_in a; memset(&a, 0, sizeof a);
  a.sin_family = AF_INET; a.sin_port = htons(atoi(v[1]));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); return 4; }
  puts("CONNECTED"); return 0;
}
"#;

const FORK_BOMB_C: &str = "#include <unistd.h>\nint main(void) { for (;;) fork(); }\n";

const MEMORY_BOMB_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
  for (int i = 0; i < 64; i++) {
    char *p = malloc(256u << 20);
    if (!p) { puts("ALLOCATION REFUSED"); return 4; }
    memset(p, 1, 256u << 20);
  }
  puts("ALLOCATED 16 GiB"); return 0;
}
"#;

const IGNORE_TERM_C: &str = "#include <signal.h>\n#include <unistd.h>\nint main(void) { signal(SIGTERM, SIG_IGN); for (;;) pause(); }\n";

const HELLO_C: &str = "#include <stdio.h>\nint main(void) { puts(\"built and ran inside the workspace\"); return 0; }\n";

/// Processes whose command line mentions `marker`.
fn processes_named(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .bytes()
                        .all(|b| b.is_ascii_digit())
                })
                .filter(|e| {
                    std::fs::read(e.path().join("cmdline"))
                        .map(|c| String::from_utf8_lossy(&c).contains(marker))
                        .unwrap_or(false)
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn escapes_fail_and_work_succeeds_inside_the_sandbox() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    {
        let accepted = accepted.clone();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                accepted.fetch_add(1, Ordering::SeqCst);
                drop(s);
            }
        });
    }
    let bw = Bw::empty();
    let outside = tempfile::tempdir().unwrap();
    let ssh = outside.path().join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE KEY MATERIAL").unwrap();
    let key = ssh.join("id_ed25519").display().to_string();
    let pwned = outside.path().join("pwned").display().to_string();
    bw.write(
        "config.toml",
        "[secrets]\nenv = [\"BW_SANDBOX_SECRET\"]\n[sandbox]\ntimeout_secs = 3\nmemory_mib = 512\nmax_processes = 32\n",
    );
    let manifest = scripted(
        "worker",
        r#"max_turns = 40
[tools]
allow = ["shell", "files"]
[sandbox]
shell = true
[[capabilities]]
kind = "shell_exec"
argv = ["*", "**"]
[[capabilities]]
kind = "file_read"
path = "**"
[[capabilities]]
kind = "file_write"
path = "**"
"#,
    );
    let turns = [
        shell(&["cat", &key]),
        shell(&["cat", "/etc/shadow"]),
        shell(&["touch", &pwned]),
        shell(&["env"]),
        write("connect.c", CONNECT_C),
        shell(&["cc", "connect.c", "-o", "connect"]),
        shell(&["./connect", &port]),
        write("bomb.c", FORK_BOMB_C),
        shell(&["cc", "bomb.c", "-o", "forkbomb-bw-e2e"]),
        shell(&["./forkbomb-bw-e2e"]),
        write("mem.c", MEMORY_BOMB_C),
        shell(&["cc", "mem.c", "-o", "mem"]),
        shell(&["./mem"]),
        shell(&["sleep", "30"]),
        write("term.c", IGNORE_TERM_C),
        shell(&["cc", "term.c", "-o", "noterm-bw-e2e"]),
        shell(&["./noterm-bw-e2e"]),
        shell(&["git", "init", "-q"]),
        shell(&[
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "--allow-empty",
            "-q",
            "-m",
            "first",
        ]),
        shell(&["git", "log", "--oneline"]),
        shell(&["ls", "/usr/lib"]),
        write("hello.c", HELLO_C),
        shell(&["cc", "hello.c", "-o", "hello"]),
        shell(&["./hello"]),
        json!({"text": "done"}).to_string(),
    ];
    bw.agent("worker", &manifest, Some(&(turns.join("\n") + "\n")));
    let out = bw
        .cmd(&["run", "worker", "try everything"])
        .env("BW_SANDBOX_SECRET", SECRET)
        .env("ANTHROPIC_API_KEY", "sk-ant-not-a-real-key-000000")
        .run();
    out.ok();

    let records = bw.audit();
    let calls: Vec<(String, String, String)> = with_action(&records, "tool_call")
        .iter()
        .map(|r| {
            (
                field(r, "tool").to_string(),
                field(r, "decision").to_string(),
                field(r, "detail").to_string(),
            )
        })
        .collect();
    let shell_notes: Vec<&str> = calls
        .iter()
        .filter(|(t, _, _)| t == "shell_exec")
        .map(|(_, d, n)| {
            assert_eq!(d, "allowed", "{calls:?}");
            n.as_str()
        })
        .collect();
    let timed_out = "timed out; process group killed";
    assert_eq!(
        shell_notes,
        [
            "exit code 1", // cat ~/.ssh key: Landlock
            "exit code 1", // cat /etc/shadow (root can read it without Landlock)
            "exit code 1", // touch outside
            "exit code 0", // env
            "exit code 0", // cc
            "exit code 3", // socket() refused by seccomp
            "exit code 0", // cc
            timed_out,     // fork bomb: pids cgroup cap, then the timeout
            "exit code 0", // cc
            "exit code 4", // memory bomb: RLIMIT_AS
            timed_out,     // sleep 30
            "exit code 0", // cc
            timed_out,     // ignores SIGTERM: SIGKILL after the grace
            "exit code 0", // git init
            "exit code 0", // git commit
            "exit code 0", // git log
            "exit code 0", // ls /usr/lib
            "exit code 0", // cc
            "exit code 0", // hello
        ],
        "{calls:#?}"
    );
    assert!(
        !std::path::Path::new(&pwned).exists(),
        "wrote outside the workspace"
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "a sandboxed process reached loopback"
    );
    // Nothing survives its timeout.
    assert_eq!(processes_named("forkbomb-bw-e2e"), 0, "fork bomb survivors");
    assert_eq!(
        processes_named("noterm-bw-e2e"),
        0,
        "SIGTERM-ignoring survivor"
    );

    // The transcript (what the model saw) holds the env output but no
    // secret: not the credential, not the provider key, not the ssh key.
    let mut transcript = Vec::new();
    for entry in std::fs::read_dir(bw.home()).unwrap().flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with("bulwark.db")
        {
            transcript.extend(std::fs::read(entry.path()).unwrap());
        }
    }
    let has = |needle: &str| {
        transcript
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
    };
    for seen in [
        "PATH=/usr/local/bin",
        // Outside files are not even in the command's root.
        "No such file or directory",
        "socket: Operation not permitted",
        "ALLOCATION REFUSED",
        "first",
        "built and ran inside the workspace",
    ] {
        assert!(has(seen), "{seen:?} missing from the transcript");
    }
    for secret in [SECRET, "sk-ant-not-a-real-key", "PRIVATE KEY MATERIAL"] {
        assert!(!has(secret), "{secret} reached the transcript");
        assert!(!out.stdout.contains(secret) && !out.stderr.contains(secret));
    }
}

/// `bulwark sandbox exec` in `cwd` with `HOME=home`.
fn sandbox_exec(cwd: &std::path::Path, home: &std::path::Path, args: &[&str]) -> common::Out {
    let data = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(common::BIN)
        .args(["sandbox", "exec"])
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("BULWARK_HOME", data.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    common::Out {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[test]
fn sandbox_exec_needs_a_dedicated_workspace_and_creates_nothing_in_it() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let home_s = home.display().to_string();
    let parent_s = tmp.path().display().to_string();
    let cases: [(&std::path::Path, Vec<&str>, &str); 6] = [
        (
            std::path::Path::new("/"),
            vec![],
            "the root of the file system",
        ),
        (
            project.as_path(),
            vec!["--workspace", "/"],
            "the root of the file system",
        ),
        (project.as_path(), vec!["--workspace", "/usr"], "system"),
        (
            project.as_path(),
            vec!["--workspace", "/etc/ssl"],
            "system directory",
        ),
        (home.as_path(), vec![], "your home directory"),
        (
            project.as_path(),
            vec!["--workspace", &parent_s],
            "contains your home",
        ),
    ];
    let root_tmp_existed = std::path::Path::new("/.tmp").exists();
    for (cwd, flags, why) in cases {
        let mut args = flags.clone();
        // `true`: nothing is written, even where the refusal is missing.
        args.extend(["--", "true"]);
        let out = sandbox_exec(cwd, &home, &args);
        assert_eq!(
            out.code,
            Some(2),
            "{cwd:?} {flags:?}: {}{}",
            out.stdout,
            out.stderr
        );
        assert!(
            out.stderr.contains("refusing") && out.stderr.contains(why),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains("--workspace"), "{}", out.stderr);
    }
    assert_eq!(
        std::path::Path::new("/.tmp").exists(),
        root_tmp_existed,
        "/.tmp created"
    );
    assert!(
        std::fs::read_dir(&home).unwrap().next().is_none(),
        "{home_s} was written"
    );
    // A dedicated directory works, as cwd or named; its /tmp is private
    // and nothing but the command's own file appears in it.
    for flags in [vec![], vec!["--workspace", project.to_str().unwrap()]] {
        let mut args = flags.clone();
        args.extend([
            "--",
            "sh",
            "-c",
            "echo t > /tmp/t && cat /tmp/t && echo ok > made && test \"$TMPDIR\" = /tmp",
        ]);
        let cwd = if flags.is_empty() {
            project.as_path()
        } else {
            tmp.path()
        };
        let out = sandbox_exec(cwd, &home, &args);
        assert_eq!(out.code, Some(0), "{flags:?}: {}{}", out.stdout, out.stderr);
        assert_eq!(out.stdout, "t\n");
        let names: Vec<String> = std::fs::read_dir(&project)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["made"], "only the command's file in the workspace");
    }
}
