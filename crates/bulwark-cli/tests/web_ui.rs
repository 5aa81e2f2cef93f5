//! The web page in a real browser: headless Chromium, driven over WebDriver
//! (chromedriver, through fantoccini), against the real `bulwark serve`
//! and its worker processes, with scripted agents (no model, no network).
//!
//! It does what a person does: signs in (with a wrong token first), picks
//! an agent, watches the answer stream in with the door's decisions,
//! approves one tool call and denies another, loses the connection while an
//! approval waits and gets it back, sees a model failure, and resumes a
//! session from the list. Along the way it checks that model output made of
//! HTML stays text, that the token is stored nowhere, that the page works
//! at phone width, and that the strict CSP is never violated.
//!
//! Chromium and chromedriver are Debian's (`chromium`, `chromium-driver`;
//! `scripts/test` installs them as root). Without them this test fails:
//! a skipped browser test would hide a broken page.

use crate::common;

use common::serve::{start, token_for};
use common::{Bw, SCRUBBED};
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// How long anything may take to show on the page. Generous: a debug
/// build on a busy 2-core machine; the bound only keeps a broken page from
/// hanging the suite.
const WAIT: Duration = Duration::from_secs(20);

/// An agent whose answers test the page: HTML in an answer, a write that
/// needs approval (twice), and a model failure.
/// The probe agent: HTML in an answer, approvals, a model failure.
fn probe_manifest() -> String {
    format!(
        "description = \"Scripted: HTML in an answer, approvals, a model failure.\"\n{}{}",
        common::APPROVED_WRITES,
        common::FOR_ALICE
    )
}

/// An answer that would run script if the page inserted it as HTML.
const HTML_ANSWER: &str =
    r#"<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>bold</b> & done"#;

fn probe_script() -> String {
    let write = |file: &str, content: &str| json!([{"name": "file_write", "input": {"path": file, "content": content}}]);
    [
        json!({"text": HTML_ANSWER}),
        json!({"text": "Writing the first file.", "tool_calls": write("out/a.txt", "approved")}),
        json!({"text": "First write finished."}),
        json!({"text": "Writing the second file.", "tool_calls": write("out/b.txt", "denied")}),
        json!({"text": "Second write finished."}),
        json!({"error": "scripted provider failure"}),
    ]
    .iter()
    .map(|line| format!("{line}\n"))
    .collect()
}

/// Installed in the page once signed in: records CSP violations, the
/// frames the page sends and receives, its sockets (so the test can drop
/// one), and every change to an assistant bubble's text (streaming).
const INSTRUMENT: &str = r#"
window.__csp = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
window.__sent = []; window.__recv = []; window.__sockets = []; window.__grew = 0;
const Native = window.WebSocket;
window.WebSocket = class extends Native {
  constructor(url, protocols) {
    super(url, protocols);
    window.__sockets.push(this);
    this.addEventListener('message', (e) => window.__recv.push(String(e.data)));
  }
  send(data) { window.__sent.push(String(data)); super.send(data); }
};
new MutationObserver((records) => {
  for (const r of records) if (r.target.classList && r.target.classList.contains('assistant')) window.__grew += 1;
}).observe(document.getElementById('log'), { childList: true, subtree: true });
return true;
"#;

// ---- the browser ---------------------------------------------------------

/// chromedriver on a free loopback port, and the fresh profile directory
/// its Chromium uses.
struct Browser {
    driver: Child,
    port: u16,
    profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // A Chromium whose session was not closed (the test failed)
        // outlives its chromedriver: end the processes using this test's
        // own profile directory, by pid.
        for pid in pids_with_arg(self.profile.path()) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

fn pids_with_arg(profile: &Path) -> Vec<u32> {
    let needle = format!("--user-data-dir={}", profile.display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == needle.as_bytes()))
        })
        .collect()
}

impl Browser {
    fn start() -> Self {
        for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(
                Path::new(path).is_file(),
                "{path} is missing: the web page's test needs headless Chromium and chromedriver. \
                 Install them with `apt-get install chromium chromium-driver` \
                 (`scripts/test` does it when run as root); missing: {package}"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut cmd = Command::new(CHROMEDRIVER);
        cmd.arg(format!("--port={port}"));
        for var in SCRUBBED {
            cmd.env_remove(var);
        }
        let driver = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let mut browser = Browser {
            driver,
            port,
            profile: tempfile::tempdir().expect("a profile directory"),
        };
        let deadline = Instant::now() + WAIT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = browser.driver.try_wait() {
                panic!("chromedriver exited at start: {status}");
            }
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        browser
    }

    /// A WebDriver session with a fresh headless Chromium. Without the
    /// background-networking flags Chromium keeps trying to reach Google's
    /// services, which on a closed network stalls it.
    async fn session(&self) -> Client {
        let args = [
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1200,900".into(),
            format!("--user-data-dir={}", self.profile.path().display()),
        ];
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({"binary": CHROMIUM, "args": args}),
        );
        caps.insert("goog:loggingPrefs".into(), json!({"browser": "ALL"}));
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a Chromium session through chromedriver")
    }
}

/// chromedriver's console log (`goog:loggingPrefs`): what the page logged
/// and what Chromium reported about it, CSP violations included.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.into()))
    }
}

// ---- page helpers ----------------------------------------------------

async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![])
        .await
        .unwrap_or_else(|e| panic!("script failed ({e}): {script}"))
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// Polls `script` until it returns something truthy (and returns that), up
/// to [`WAIT`]; on timeout, fails with what the page shows.
async fn wait_for(c: &Client, what: &str, script: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let v = js(c, script).await;
        if truthy(&v) {
            return v;
        }
        if Instant::now() > deadline {
            let page = js(c, "return document.body.innerText").await;
            panic!(
                "waited {} s for {what}; the page shows:\n{}",
                WAIT.as_secs(),
                page.as_str().unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn find(c: &Client, css: &str) -> fantoccini::elements::Element {
    c.wait()
        .at_most(WAIT)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no element {css}: {e}"))
}

/// Clicks `css`, finding it again when the page re-rendered it between
/// finding and clicking (the session list refreshes on its own).
async fn click(c: &Client, css: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        match find(c, css).await.click().await {
            Ok(()) => return,
            Err(e) if e.to_string().contains("stale element") && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("click {css}: {e}"),
        }
    }
}

async fn type_into(c: &Client, css: &str, text: &str) {
    let field = find(c, css).await;
    field.clear().await.expect("clear the field");
    field.send_keys(text).await.expect("type");
}

async fn send_message(c: &Client, text: &str) {
    type_into(c, "#message", text).await;
    click(c, "#send").await;
}

/// `[tool, decision shown]` of every tool block in the conversation.
async fn tool_blocks(c: &Client) -> Vec<(String, String)> {
    let v = js(
        c,
        "return [...document.querySelectorAll('#log .tool')].map(t => \
         [t.querySelector('.tool-name').textContent, t.querySelector('.decision').textContent])",
    )
    .await;
    serde_json::from_value(v).expect("pairs of strings")
}

/// Texts of the bubbles with class `who` (`user`, `assistant`).
async fn bubbles(c: &Client, who: &str) -> Vec<String> {
    let v = js(
        c,
        &format!(
            "return [...document.querySelectorAll('#log .msg.{who}')].map(m => m.textContent)"
        ),
    )
    .await;
    serde_json::from_value(v).expect("strings")
}

/// The turn is over: the page shows `text` in an answer and no turn runs.
async fn wait_for_answer(c: &Client, text: &str) {
    let script = format!(
        "return !document.getElementById('interrupt').disabled ? false : \
         [...document.querySelectorAll('#log .msg.assistant')].some(m => m.textContent === {})",
        json!(text)
    );
    wait_for(c, &format!("the answer {text:?}"), &script).await;
}

/// The page holds no token anywhere a later visitor could find it.
async fn assert_nothing_stored(c: &Client, base: &str, token: &str) {
    let kept = js(
        c,
        "return {local: localStorage.length, session: sessionStorage.length, \
         cookie: document.cookie, url: location.href, field: document.getElementById('token').value, \
         html: document.documentElement.outerHTML}",
    )
    .await;
    assert_eq!(kept["local"], 0, "localStorage is used");
    assert_eq!(kept["session"], 0, "sessionStorage is used");
    assert_eq!(kept["cookie"], "", "a cookie is set");
    assert_eq!(kept["url"], base, "the URL changed");
    assert_eq!(kept["field"], "", "the token stays in the field");
    let html = kept["html"].as_str().expect("the page's HTML");
    assert!(!html.contains(token), "the token is in the page's markup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_page_works_in_headless_chromium() {
    let browser = Browser::start();
    let bw = Bw::init();
    // Agents are private (admins only) unless their manifest admits users.
    let manifest = std::fs::read_to_string(bw.path("agents/demo/agent.toml")).expect("the demo");
    bw.write(
        "agents/demo/agent.toml",
        &format!("{manifest}\n[access]\nmode = \"users\"\nusers = [\"alice\"]\n"),
    );
    bw.agent(
        "probe",
        &common::scripted("probe", &probe_manifest()),
        Some(&probe_script()),
    );
    // `init` gives the local user the demo's sample file; alice gets her own.
    bw.write(
        "users/alice/agents/demo/workspace/notes.txt",
        "Notes for alice.\n",
    );
    let token = token_for(&bw, "alice", "demo,probe");
    let server = start(&bw);
    let started = Instant::now();
    let c = browser.session().await;
    let base = format!("http://{}/", server.addr);
    c.goto(&base).await.expect("the page loads");
    assert_eq!(c.title().await.expect("a title"), "Bulwark");

    // A wrong token: a clear error, still signed out, the field emptied.
    type_into(&c, "#token", "bwk_not-a-real-token-0000").await;
    click(&c, "#login-form button[type=submit]").await;
    let error = wait_for(
        &c,
        "the sign-in error",
        "return document.getElementById('login-error').textContent",
    )
    .await;
    assert!(
        error
            .as_str()
            .is_some_and(|e| e.starts_with("Sign-in failed")),
        "{error}"
    );
    assert_eq!(
        js(&c, "return document.getElementById('app').hidden").await,
        true
    );

    // The right token: the agents alice may use.
    type_into(&c, "#token", &token).await;
    click(&c, "#login-form button[type=submit]").await;
    let agents = wait_for(
        &c,
        "the agent list",
        "const a = [...document.querySelectorAll('#agents [data-agent]')].map(b => b.dataset.agent); \
         return a.length ? a.sort() : null",
    )
    .await;
    assert_eq!(agents, json!(["demo", "probe"]));
    assert_nothing_stored(&c, &base, &token).await;
    js(&c, INSTRUMENT).await;

    // The demo: streamed text and the door's decisions as tool blocks.
    click(&c, "#agents [data-agent=demo]").await;
    wait_for(
        &c,
        "the demo's subscription",
        "return document.getElementById('chat-title').textContent.startsWith('demo — session ')",
    )
    .await;
    send_message(&c, "show me").await;
    let done = "Done: one read allowed, the shell refused (this agent was never granted it), \
                the repeated read blocked by the loop guard, and the .. path refused. \
                See `bulwark audit tail`.";
    wait_for_answer(&c, done).await;
    let tools = tool_blocks(&c).await;
    let shown = |tool: &str, decision: &str| tools.iter().any(|(t, d)| t == tool && d == decision);
    assert!(shown("file_read", "allowed"), "{tools:?}");
    assert!(shown("shell_exec", "denied"), "{tools:?}");
    assert!(
        bubbles(&c, "assistant")
            .await
            .contains(&"Reading the notes file (granted).".to_string())
    );
    // Streaming: every text_delta frame changed the answer on the page as
    // it came (one text change per frame), not once at the end.
    let deltas = js(
        &c,
        "return window.__recv.filter(f => JSON.parse(f).type === 'text_delta').length",
    )
    .await;
    let grew = js(&c, "return window.__grew").await;
    assert!(deltas.as_u64().is_some_and(|n| n > 10), "{deltas}");
    assert_eq!(grew, deltas, "one text change per text_delta frame");

    // An answer made of HTML is shown as text and runs nothing.
    click(&c, "#agents [data-agent=probe]").await;
    let title = wait_for(
        &c,
        "the probe's subscription",
        "const t = document.getElementById('chat-title').textContent; \
         return t.startsWith('probe — session ') ? t : null",
    )
    .await;
    let session = title
        .as_str()
        .and_then(|t| t.strip_prefix("probe — session "))
        .expect("a session id")
        .to_owned();
    send_message(&c, "show me some html").await;
    let shown = wait_for(
        &c,
        "the HTML answer",
        "const m = [...document.querySelectorAll('#log .msg.assistant')] \
           .find(m => m.textContent.endsWith('done')); \
         return m && document.getElementById('interrupt').disabled ? m.textContent : null",
    )
    .await;
    assert_eq!(
        shown, HTML_ANSWER,
        "the answer is not shown as the text it is"
    );
    let dom = js(
        &c,
        "return {imgs: document.querySelectorAll('img').length, scripts: document.scripts.length, \
         bold: document.querySelectorAll('#log b').length, pwned: typeof window.__pwned}",
    )
    .await;
    assert_eq!(
        dom,
        json!({"imgs": 0, "scripts": 1, "bold": 0, "pwned": "undefined"})
    );

    // An approval request: buttons, focus on Approve. The connection drops
    // while it waits; the page reconnects with last_message_id, and the
    // approval given on the new connection lets the turn finish.
    send_message(&c, "write the first file").await;
    let pending = "#log .approval:not([data-answer]) button.approve";
    wait_for(
        &c,
        "the approval request",
        &format!(
            "const b = document.querySelector({}); return !!b && !b.disabled && document.activeElement === b",
            json!(pending)
        ),
    )
    .await;
    let sockets = js(&c, "return window.__sockets.length").await;
    js(
        &c,
        "window.__sockets[window.__sockets.length - 1].close(4000, 'test drop'); return null",
    )
    .await;
    let again = wait_for(
        &c,
        "a new subscription after the drop",
        &format!(
            "const s = window.__sent.map(f => JSON.parse(f)).filter(f => f.type === 'subscribe'); \
             const last = s[s.length - 1]; \
             return window.__sockets.length > {sockets} && 'last_message_id' in last \
               && document.getElementById('status').textContent === 'Connected' ? last : null"
        ),
    )
    .await;
    assert_eq!(again["agent"], "probe", "{again}");
    assert_eq!(again["session"], session.as_str(), "{again}");
    assert!(again["last_message_id"].as_u64().is_some(), "{again}");
    click(&c, pending).await;
    wait_for_answer(&c, "First write finished.").await;
    assert!(
        tool_blocks(&c)
            .await
            .contains(&("file_write".into(), "allowed".into()))
    );
    assert_eq!(
        js(
            &c,
            "return document.querySelectorAll('#log .approval').length"
        )
        .await,
        1,
        "the approval request was shown once"
    );
    let workspace = bw.path("users/alice/agents/probe/workspace");
    assert_eq!(
        std::fs::read_to_string(workspace.join("out/a.txt")).expect("the approved write ran"),
        "approved"
    );

    // Denied: the door refuses the call, and the turn still finishes.
    send_message(&c, "write the second file").await;
    wait_for(
        &c,
        "the second approval request",
        &format!("return !!document.querySelector({})", json!(pending)),
    )
    .await;
    click(&c, "#log .approval:not([data-answer]) button.deny").await;
    wait_for_answer(&c, "Second write finished.").await;
    let tools = tool_blocks(&c).await;
    assert_eq!(
        tools
            .iter()
            .filter(|(t, _)| t == "file_write")
            .collect::<Vec<_>>(),
        [
            &("file_write".to_string(), "allowed".to_string()),
            &("file_write".to_string(), "denied".to_string())
        ]
    );
    assert!(
        !workspace.join("out/b.txt").exists(),
        "the denied write ran"
    );

    // A model failure arrives as an error frame, shown as an alert.
    send_message(&c, "fail now").await;
    let error = wait_for(
        &c,
        "the error frame",
        "const e = [...document.querySelectorAll('#log .error-frame[role=alert] .code')] \
           .find(c => c.textContent === 'model'); \
         return e && document.getElementById('interrupt').disabled ? e.parentElement.textContent : null",
    )
    .await;
    assert!(
        error
            .as_str()
            .is_some_and(|e| e.starts_with("Error model: ")),
        "{error}"
    );

    // The session list holds both conversations; resuming the probe's shows
    // its history from the store and subscribes to it again.
    click(&c, "#refresh-sessions").await;
    let listed = wait_for(
        &c,
        "both sessions in the list",
        "const s = [...document.querySelectorAll('#sessions [data-session]')] \
           .map(b => [b.querySelector('strong').textContent, b.dataset.session]); \
         return s.length === 2 ? s : null",
    )
    .await;
    assert!(
        listed
            .as_array()
            .expect("pairs")
            .contains(&json!(["probe", session])),
        "{listed}"
    );
    click(&c, &format!("#sessions [data-session=\"{session}\"]")).await;
    wait_for(
        &c,
        "the resumed session",
        &format!(
            "return document.getElementById('chat-title').textContent === {} \
               && document.getElementById('status').textContent === 'Connected' \
               && !!document.querySelector('#log .note')",
            json!(format!("probe — session {session}"))
        ),
    )
    .await;
    assert_eq!(
        bubbles(&c, "user").await,
        [
            "show me some html",
            "write the first file",
            "write the second file",
            "fail now"
        ]
    );
    let answers = bubbles(&c, "assistant").await;
    assert!(answers.contains(&HTML_ANSWER.to_string()), "{answers:?}");
    assert!(
        answers.contains(&"Second write finished.".to_string()),
        "{answers:?}"
    );
    assert_eq!(
        tool_blocks(&c)
            .await
            .iter()
            .filter(|(t, _)| t == "file_write")
            .count(),
        2
    );
    assert_eq!(
        js(&c, "return document.querySelectorAll('img').length").await,
        0
    );

    // No CSP violation: none seen by the page's listener, none in
    // Chromium's console log.
    assert_eq!(js(&c, "return window.__csp").await, json!([]));
    let log = c.issue_cmd(BrowserLog).await.expect("the browser log");
    let entries = log.as_array().expect("log entries");
    let bad: Vec<&Value> = entries
        .iter()
        .filter(|e| {
            let m = e["message"].as_str().unwrap_or_default();
            m.contains("Content Security Policy") || m.contains("Uncaught")
        })
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");

    // Accessibility basics: every field has a label, every button a name.
    let unnamed = js(
        &c,
        "return [...document.querySelectorAll('input, textarea')].filter(e => !e.labels.length).length \
         + [...document.querySelectorAll('button')].filter(b => !b.textContent.trim()).length",
    )
    .await;
    assert_eq!(unnamed, 0);

    // Phone width: one column, nothing wider than the screen.
    c.set_window_size(390, 800).await.expect("resize");
    let narrow = wait_for(
        &c,
        "the one-column layout",
        "const d = document.documentElement, \
           s = document.getElementById('side').getBoundingClientRect(), \
           m = document.getElementById('chat').getBoundingClientRect(); \
         return d.scrollWidth <= d.clientWidth && s.bottom <= m.top ? d.clientWidth : null",
    )
    .await;
    assert!(narrow.as_u64().is_some_and(|w| w <= 720), "{narrow}");

    // Signing out forgets everything and stores nothing.
    click(&c, "#signout").await;
    wait_for(
        &c,
        "the sign-in form",
        "return !document.getElementById('login').hidden && document.getElementById('app').hidden",
    )
    .await;
    assert_nothing_stored(&c, &base, &token).await;

    c.close().await.expect("the browser closes");
    eprintln!(
        "web page test: {:.1} s in the browser",
        started.elapsed().as_secs_f64()
    );
}
