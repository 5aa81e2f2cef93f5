//! `bulwark serve` under load on loopback, bounded in time: thousands of
//! idle authenticated WebSockets held at once, then tens of concurrent
//! conversations, each in its own `bulwark worker` process, streaming
//! scripted answers (no model, no network) while the idle sockets stay.
//!
//! It measures and prints (one block on stderr) the server's memory idle
//! and with the sockets held, each worker's memory, the time to a turn's
//! first frame and to its end, and the relay's throughput. It asserts only
//! correctness: every socket held and answering, every turn complete and
//! intact, no error frame. Timings and memory are never asserted: they
//! depend on the machine, and a debug build is far slower than a release.
//!
//! Knobs (environment):
//! * `BULWARK_LOAD_IDLE`: idle WebSockets (default 2,000). The test and the
//!   server each need a descriptor per socket: the soft `RLIMIT_NOFILE` is
//!   raised to the hard limit, and a hard limit too low fails the test
//!   with the number it needs.
//! * `BULWARK_LOAD_ACTIVE`: concurrent conversations (default 20).
//! * `BULWARK_LOAD_BIN`: the `bulwark` binary to serve with, e.g.
//!   `target/release/bulwark` (a relative path is tried from the current
//!   directory, then from the workspace root). Default: this build's.
//!
//! Release numbers:
//! `cargo build --release -p bulwark-cli && BULWARK_LOAD_BIN=target/release/bulwark
//!  cargo test -p bulwark-cli --test serve_load -- --nocapture`.
//!
//! The server's limits are respected, not disabled: idle sockets come from
//! many loopback addresses (127.1.x.y; the per-address budget allows about
//! 200 handshakes in a burst) and many users whose access.toml entries
//! raise `max_connections` and `requests_per_minute`, so neither the
//! per-address handshake budget nor the per-user connection cap is what is
//! measured. Conversations are spread over users so that each has at most
//! the server's default of 4 running.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Bw;
use common::serve::{Server, start_with, token_for, workers_of};
use futures_util::{FutureExt, SinkExt, StreamExt};
use serde_json::{Value, json};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{Barrier, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

type Ws = WebSocketStream<TcpStream>;

const DEFAULT_IDLE: usize = 2_000;
const DEFAULT_ACTIVE: usize = 20;
/// Idle sockets per loopback source address: 50 handshakes (2 budget units
/// each) and a few pings stay well inside the per-address burst of 400.
const IDLE_PER_IP: usize = 50;
/// Users the idle sockets are spread over.
const IDLE_USERS: usize = 10;
/// Conversations per user: `bulwark serve`'s default `--max-workers-per-user`.
const SESSIONS_PER_USER: usize = 4;
/// Turns per conversation, each one scripted answer.
const TURNS: usize = 2;
/// Words per answer: the script model streams one `text_delta` per word.
/// Kept under the server's per-subscriber queue (512 frames), so a turn
/// can never outrun a client that reads it as fast as it can.
const WORDS: usize = 320;
/// Handshakes in flight at once while opening the idle sockets.
const CONNECT_CONCURRENCY: usize = 64;
/// Idle sockets asked for a `pong` (evenly spread over all of them).
const PING_SAMPLE: usize = 200;
/// Bound of each phase (opening the idle sockets, the conversations, the
/// checks); a debug build on 2 cores needs a few seconds for each.
const PHASE: Duration = Duration::from_secs(30);
/// Bound on any single frame a conversation waits for.
const FRAME_WAIT: Duration = Duration::from_secs(20);
/// Descriptors beyond the sockets: the runtime, pipes to the workers, the
/// store and audit files, logs.
const FD_SLACK: usize = 256;
/// Requests per minute for every test user: far above what the test spends.
const USER_RATE: u32 = 1_000_000;

const AGENT: &str = "load";
const MANIFEST_REST: &str = r#"description = "Scripted long answers for the load test."
max_turns = 4
[access]
mode = "public"
"#;

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a count")),
        Err(_) => default,
    }
}

/// The `bulwark` to serve with: `BULWARK_LOAD_BIN` or this build's.
fn load_bin() -> PathBuf {
    let Some(given) = std::env::var_os("BULWARK_LOAD_BIN") else {
        return PathBuf::from(common::BIN);
    };
    let given = PathBuf::from(given);
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = if given.is_absolute() || given.is_file() {
        given
    } else {
        workspace.join(given)
    };
    assert!(
        path.is_file(),
        "BULWARK_LOAD_BIN: {} is not a file (build it first, e.g. `cargo build --release -p bulwark-cli`)",
        path.display()
    );
    path.canonicalize().expect("the binary's path")
}

/// The answer of turn `turn`: `WORDS` words of varied length, one
/// `text_delta` each.
fn answer(turn: usize) -> String {
    const VOCABULARY: [&str; 16] = [
        "the",
        "worker",
        "streams",
        "every",
        "word",
        "of",
        "its",
        "answer",
        "through",
        "the",
        "supervisor",
        "and",
        "server",
        "to",
        "one",
        "subscriber,",
    ];
    let words: Vec<String> = (0..WORDS)
        .map(|i| match i % 40 {
            0 => format!("[turn-{turn}/word-{i}]"),
            _ => VOCABULARY[(i * 7 + turn) % VOCABULARY.len()].to_owned(),
        })
        .collect();
    words.join(" ")
}

fn script() -> String {
    (0..TURNS)
        .map(|t| format!("{}\n", json!({ "text": answer(t) })))
        .collect()
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit when it is below
/// `need` (the server, started after, inherits it); fails when even the
/// hard limit is too low. Returns the soft limit now in force.
fn raise_nofile(need: usize, idle: usize) -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let need = need as u64;
    let mut limit = getrlimit(Resource::Nofile);
    let soft = limit.current.unwrap_or(u64::MAX);
    if soft >= need {
        return soft;
    }
    let hard = limit.maximum.unwrap_or(u64::MAX);
    assert!(
        hard >= need,
        "{idle} idle WebSockets need {need} open files in this test and in the server, \
         but the hard RLIMIT_NOFILE is {hard}: raise it (`ulimit -Hn`, as root) or \
         set BULWARK_LOAD_IDLE to at most {}",
        hard.saturating_sub(need - idle as u64)
    );
    limit.current = limit.maximum;
    setrlimit(Resource::Nofile, limit).expect("raise the soft RLIMIT_NOFILE to the hard limit");
    hard
}

/// Resident memory of a process, in KiB: `VmRSS`, and `RssAnon`, its
/// own heap and stacks without the mapped binary and libraries that
/// `VmRSS` also counts (and that processes of one binary share).
#[derive(Clone, Copy)]
struct Mem {
    rss: u64,
    anon: u64,
}

fn mem(pid: u32) -> Mem {
    Mem {
        rss: status_kib(pid, "VmRSS:"),
        anon: status_kib(pid, "RssAnon:"),
    }
}

impl std::fmt::Display for Mem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (anon {})", mib(self.rss), mib(self.anon))
    }
}

/// Mean, range and sum of the workers' memory.
fn per_worker(workers: &[Mem]) -> String {
    let n = workers.len().max(1) as u64;
    let rss: Vec<u64> = workers.iter().map(|m| m.rss).collect();
    let anon: u64 = workers.iter().map(|m| m.anon).sum();
    format!(
        "VmRSS mean {} ({}..{}), anon mean {}; VmRSS sum {} (n={})",
        mib(rss.iter().sum::<u64>() / n),
        mib(rss.iter().copied().min().unwrap_or(0)),
        mib(rss.iter().copied().max().unwrap_or(0)),
        mib(anon / n),
        mib(rss.iter().sum()),
        workers.len()
    )
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// CPU time `pid` has used (user + system), in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // `pid (comm) state ...`: utime and stime are fields 14 and 15.
    stat.rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|t| t.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

/// Seconds of `ticks` (Linux reports them at USER_HZ, 100 per second).
fn cpu_secs(ticks: u64) -> f64 {
    ticks as f64 / 100.0
}

/// Open descriptors of `pid`.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// A WebSocket to `server` from the loopback address `from`, authenticated
/// with the `bearer.<token>` subprotocol. Small buffers, as the server's:
/// thousands of clients live in this process too.
async fn connect_from(from: Ipv4Addr, server: SocketAddr, token: &str) -> Result<Ws, String> {
    let socket = TcpSocket::new_v4().map_err(|e| format!("socket: {e}"))?;
    socket
        .bind(SocketAddr::new(from.into(), 0))
        .map_err(|e| format!("bind {from}: {e}"))?;
    let stream = socket
        .connect(server)
        .await
        .map_err(|e| format!("connect from {from}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut request = format!("ws://{server}/api/v1/ws")
        .into_client_request()
        .map_err(|e| e.to_string())?;
    request.headers_mut().insert(
        "sec-websocket-protocol",
        format!("bulwark.v1, bearer.{token}")
            .parse()
            .map_err(|_| "a header value".to_string())?,
    );
    let config = WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(4096);
    let (ws, _) = tokio_tungstenite::client_async_with_config(request, stream, Some(config))
        .await
        .map_err(|e| format!("handshake from {from}: {e}"))?;
    Ok(ws)
}

async fn send(ws: &mut Ws, frame: Value) -> Result<(), String> {
    ws.send(Message::text(frame.to_string()))
        .await
        .map_err(|e| format!("send: {e}"))
}

/// The next text frame (raw), within [`FRAME_WAIT`].
async fn next_text(ws: &mut Ws) -> Result<String, String> {
    loop {
        let message = tokio::time::timeout(FRAME_WAIT, ws.next())
            .await
            .map_err(|_| format!("no frame within {} s", FRAME_WAIT.as_secs()))?
            .ok_or("the server closed the connection")?
            .map_err(|e| format!("receive: {e}"))?;
        match message {
            Message::Text(text) => return Ok(text.as_str().to_owned()),
            Message::Close(close) => return Err(format!("closed by the server: {close:?}")),
            _ => {}
        }
    }
}

fn parse(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): {text}"))
}

/// Nothing arrived and nothing broke: the socket is open and idle.
fn still_idle(ws: &mut Ws) -> Result<(), String> {
    match ws.next().now_or_never() {
        None => Ok(()),
        Some(None) => Err("closed".into()),
        Some(Some(Err(e))) => Err(format!("broken: {e}")),
        Some(Some(Ok(m))) => Err(format!("unexpected message: {m:?}")),
    }
}

/// Every socket idle, and an evenly spread sample answering `ping`.
async fn check_idle(idle: &mut [Ws], round: &str) {
    let broken: Vec<String> = idle
        .iter_mut()
        .enumerate()
        .filter_map(|(i, ws)| still_idle(ws).err().map(|e| format!("#{i}: {e}")))
        .collect();
    assert!(
        broken.is_empty(),
        "{round}: {} of {} idle WebSockets are no longer open, e.g. {:?}",
        broken.len(),
        idle.len(),
        &broken[..broken.len().min(5)]
    );
    let step = (idle.len() / PING_SAMPLE).max(1);
    let pings = idle
        .iter_mut()
        .enumerate()
        .step_by(step)
        .map(|(i, ws)| async move {
            let nonce = format!("n{i}");
            send(ws, json!({"type": "ping", "nonce": nonce})).await?;
            let pong = parse(&next_text(ws).await?)?;
            if pong == json!({"type": "pong", "nonce": nonce}) {
                Ok(())
            } else {
                Err(format!("#{i}: not its pong: {pong}"))
            }
        });
    let answers = tokio::time::timeout(PHASE, futures_util::future::join_all(pings))
        .await
        .unwrap_or_else(|_| panic!("{round}: pings unanswered after {} s", PHASE.as_secs()));
    let failed: Vec<String> = answers.into_iter().filter_map(Result::err).collect();
    assert!(failed.is_empty(), "{round}: pings failed: {failed:?}");
}

/// What one conversation saw.
#[derive(Default)]
struct Session {
    /// `subscribe` → `subscribed` (a worker started and ready).
    subscribed: Duration,
    /// Per turn: `message` → its first relayed frame (a `text_delta`; the
    /// server's own `accepted` does not count), and → `turn_ended`.
    first_frame: Vec<Duration>,
    /// Per turn: `message` → the server's `accepted` (when it sends one).
    accepted: Vec<Duration>,
    turn_end: Vec<Duration>,
    frames: u64,
    bytes: u64,
    /// When its last turn ended.
    done: Option<Instant>,
}

/// Opens a conversation, waits at `ready` (all workers up) and for `go`,
/// then runs [`TURNS`] turns, checking every frame. Returns the socket
/// still open, so its worker lives until the main task has measured it.
async fn converse(
    from: Ipv4Addr,
    server: SocketAddr,
    token: String,
    ready: Arc<Barrier>,
    mut go: watch::Receiver<bool>,
) -> Result<(Session, Ws), String> {
    let mut stats = Session::default();
    let opened = async {
        let mut ws = connect_from(from, server, &token).await?;
        let asked = Instant::now();
        send(&mut ws, json!({"type": "subscribe", "agent": AGENT})).await?;
        let frame = parse(&next_text(&mut ws).await?)?;
        if frame["type"] != "subscribed" {
            return Err(format!("instead of `subscribed`: {frame}"));
        }
        stats.subscribed = asked.elapsed();
        Ok(ws)
    }
    .await;
    // Everyone reaches the barrier, failed or not, so none waits forever.
    ready.wait().await;
    let mut ws = opened?;
    go.wait_for(|g| *g).await.map_err(|_| "no go signal")?;
    for turn in 0..TURNS {
        let expected = answer(turn);
        let sent = Instant::now();
        send(
            &mut ws,
            json!({"type": "message", "text": format!("turn {turn}")}),
        )
        .await?;
        let mut streamed = String::new();
        let mut first = None;
        // The turn's id: from `accepted` (the server's answer to the
        // message, not relayed) or else from its first frame.
        let mut turn_id = None;
        loop {
            let text = next_text(&mut ws).await?;
            let frame = parse(&text)?;
            let kind = frame["type"].as_str().unwrap_or_default();
            if kind == "error" {
                return Err(format!("turn {turn}: an error frame: {frame}"));
            }
            let id = frame["message_id"].as_u64();
            if id.is_none() || *turn_id.get_or_insert(id) != id {
                return Err(format!("turn {turn}: a frame of another turn: {frame}"));
            }
            if kind == "accepted" {
                stats.accepted.push(sent.elapsed());
                continue;
            }
            // A frame the worker sent, relayed.
            first.get_or_insert_with(|| sent.elapsed());
            stats.frames += 1;
            stats.bytes += text.len() as u64;
            match kind {
                "text_delta" => {
                    streamed.push_str(frame["text"].as_str().ok_or("a delta without text")?)
                }
                "turn_ended" => {
                    if frame["end"] != "completed" || frame["text"] != expected.as_str() {
                        return Err(format!("turn {turn} ended wrong: {frame}"));
                    }
                    break;
                }
                _ => return Err(format!("turn {turn}: unexpected frame {frame}")),
            }
        }
        if streamed != expected {
            return Err(format!(
                "turn {turn}: the streamed deltas ({} bytes) are not the answer ({} bytes)",
                streamed.len(),
                expected.len()
            ));
        }
        stats.first_frame.push(first.unwrap_or_default());
        stats.turn_end.push(sent.elapsed());
    }
    stats.done = Some(Instant::now());
    Ok((stats, ws))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// `p50 X / max Y` of `samples`.
fn spread(mut samples: Vec<Duration>) -> String {
    samples.sort_unstable();
    let p50 = samples.get(samples.len() / 2).copied().unwrap_or_default();
    let max = samples.last().copied().unwrap_or_default();
    format!("p50 {} / max {} (n={})", ms(p50), ms(max), samples.len())
}

fn idle_source(i: usize) -> Ipv4Addr {
    let k = i / IDLE_PER_IP;
    Ipv4Addr::new(127, 1, (k / 200) as u8, (k % 200 + 1) as u8)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_idle_sockets_and_tens_of_conversations() {
    let started = Instant::now();
    let idle_n = env_usize("BULWARK_LOAD_IDLE", DEFAULT_IDLE);
    let active_n = env_usize("BULWARK_LOAD_ACTIVE", DEFAULT_ACTIVE).max(1);
    let bin = load_bin();
    // The server holds a socket per client and three pipes per worker.
    let need = idle_n + 4 * active_n + FD_SLACK;
    let nofile = raise_nofile(need, idle_n);

    // A home with the scripted agent and the users, their limits raised.
    let bw = Bw::init();
    bw.agent(
        AGENT,
        &common::scripted(AGENT, MANIFEST_REST),
        Some(&script()),
    );
    let idle_users: Vec<(String, String)> = (0..IDLE_USERS.min(idle_n.max(1)))
        .map(|u| {
            let name = format!("idle-{u:02}");
            let token = token_for(&bw, &name, AGENT);
            (name, token)
        })
        .collect();
    let active_users: Vec<(String, String)> = (0..active_n.div_ceil(SESSIONS_PER_USER))
        .map(|u| {
            let name = format!("active-{u:02}");
            let token = token_for(&bw, &name, AGENT);
            (name, token)
        })
        .collect();
    let per_user = idle_n.div_ceil(idle_users.len()) + SESSIONS_PER_USER + 8;
    let mut access = std::fs::read_to_string(bw.path("access.toml")).expect("access.toml");
    for (name, _) in idle_users.iter().chain(&active_users) {
        access.push_str(&format!(
            "\n[users.{name}.limits]\nrequests_per_minute = {USER_RATE}\nmax_connections = {per_user}\n"
        ));
    }
    bw.write("access.toml", &access);
    let setup = started.elapsed();

    let extra_workers = (active_n + 8).to_string();
    let extra: Vec<&str> = if active_n + 8 > 64 {
        vec!["--max-workers", &extra_workers]
    } else {
        Vec::new()
    };
    let server: Server = start_with(&bin, &bw, &extra);
    let pid = server.pid();
    let addr: SocketAddr = server.addr.parse().expect("a socket address");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mem_idle = mem(pid);

    // Phase 1: the idle sockets.
    let t = Instant::now();
    let opened: Vec<(usize, Result<Ws, String>)> = tokio::time::timeout(
        PHASE,
        futures_util::stream::iter(0..idle_n)
            .map(|i| {
                let token = idle_users[i % idle_users.len()].1.clone();
                async move { (i, connect_from(idle_source(i), addr, &token).await) }
            })
            .buffer_unordered(CONNECT_CONCURRENCY)
            .collect(),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "opening {idle_n} idle WebSockets took over {} s",
            PHASE.as_secs()
        )
    });
    let connect_time = t.elapsed();
    let mut idle = Vec::with_capacity(idle_n);
    let mut refused = Vec::new();
    for (i, ws) in opened {
        match ws {
            Ok(ws) => idle.push(ws),
            Err(e) => refused.push(format!("#{i}: {e}")),
        }
    }
    assert!(
        refused.is_empty(),
        "{} of {idle_n} idle WebSockets failed to open, e.g. {:?}",
        refused.len(),
        &refused[..refused.len().min(5)]
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    check_idle(&mut idle, "after opening").await;
    let mem_held = mem(pid);
    let fds_held = open_fds(pid);

    // Phase 2: the conversations, with the idle sockets still held.
    let ready = Arc::new(Barrier::new(active_n + 1));
    let (go_tx, go_rx) = watch::channel(false);
    let tasks: Vec<_> = (0..active_n)
        .map(|s| {
            let from = Ipv4Addr::new(127, 2, (s / 200) as u8, (s % 200 + 1) as u8);
            let token = active_users[s / SESSIONS_PER_USER].1.clone();
            tokio::spawn(converse(from, addr, token, ready.clone(), go_rx.clone()))
        })
        .collect();
    let t = Instant::now();
    tokio::time::timeout(PHASE, ready.wait())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{active_n} conversations were not all opened (or failed) within {} s",
                PHASE.as_secs()
            )
        });
    let open_time = t.elapsed();
    let workers_ready = workers_of(pid, None);
    let workers_ready_mem: Vec<Mem> = workers_ready.iter().map(|p| mem(*p)).collect();
    let mem_active = mem(pid);
    let me = std::process::id();
    let cpu_before = (
        cpu_ticks(me),
        cpu_ticks(pid),
        workers_ready.iter().map(|p| cpu_ticks(*p)).sum::<u64>(),
    );
    let go = Instant::now();
    go_tx.send_replace(true);
    let results = tokio::time::timeout(PHASE, futures_util::future::join_all(tasks))
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{active_n} conversations of {TURNS} turns did not finish within {} s",
                PHASE.as_secs()
            )
        });
    let mut sessions = Vec::new();
    let mut active_ws = Vec::new();
    let mut failures = Vec::new();
    for (s, result) in results.into_iter().enumerate() {
        match result.expect("a conversation task panicked") {
            Ok((stats, ws)) => {
                sessions.push(stats);
                active_ws.push(ws);
            }
            Err(e) => failures.push(format!("conversation {s}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {active_n} conversations failed: {failures:#?}",
        failures.len()
    );
    assert_eq!(
        workers_ready.len(),
        active_n,
        "one worker process per conversation (children of the server: {workers_ready:?})"
    );
    let workers_after = workers_of(pid, None);
    let workers_after_mem: Vec<Mem> = workers_after.iter().map(|p| mem(*p)).collect();
    let mem_after_turns = mem(pid);
    let cpu = (
        cpu_secs(cpu_ticks(me).saturating_sub(cpu_before.0)),
        cpu_secs(cpu_ticks(pid).saturating_sub(cpu_before.1)),
        cpu_secs(
            workers_after
                .iter()
                .map(|p| cpu_ticks(*p))
                .sum::<u64>()
                .saturating_sub(cpu_before.2),
        ),
    );
    let last_done = sessions.iter().filter_map(|s| s.done).max().unwrap_or(go);
    let relay_window = last_done.duration_since(go);
    let frames: u64 = sessions.iter().map(|s| s.frames).sum();
    let bytes: u64 = sessions.iter().map(|s| s.bytes).sum();

    // The idle sockets lived through it.
    check_idle(&mut idle, "after the conversations").await;
    drop(active_ws);
    let held = idle.len();
    drop(idle);

    let grown = mem_held.rss.saturating_sub(mem_idle.rss);
    let per_socket = grown as f64 / idle_n.max(1) as f64;
    let secs = relay_window.as_secs_f64().max(1e-9);
    eprintln!(
        "\n==== bulwark serve load (loopback) ====\n\
         binary                {bin}\n\
         setup                 {setup} (home, {users} users), RLIMIT_NOFILE soft {nofile}\n\
         server idle           {mem_idle}\n\
         idle WebSockets       {held} held from {ips} addresses as {iu} users, opened in {connect} ({rate:.0}/s)\n\
         server, sockets held  {mem_held}: +{delta} VmRSS = {per_socket:.1} KiB per socket; {fds_held} fds\n\
         conversations         {active_n} ({au} users, {spu} each), all ready in {open_time}; subscribe -> subscribed {sub}\n\
         server, active        {mem_active} with all workers ready; {mem_after} after the turns\n\
         workers, ready        {wr}\n\
         workers, after turns  {wa}\n\
         message -> accepted   {accepted}\n\
         message -> 1st delta  {first}\n\
         message -> turn end   {end}\n\
         relay                 {frames} relayed frames ({TURNS} turns x ({WORDS} deltas + turn_ended) per conversation), \
         {kb:.0} KiB in {window}: {fps:.0} frames/s, {bps:.2} MiB/s\n\
         CPU while relaying    server {cs:.2} s, workers {cw:.2} s, this test's clients {cc:.2} s\n\
         test runtime          {total}\n\
         ======================================",
        bin = bin.display(),
        setup = ms(setup),
        users = idle_users.len() + active_users.len(),
        ips = idle_n.div_ceil(IDLE_PER_IP),
        iu = idle_users.len(),
        connect = ms(connect_time),
        rate = idle_n as f64 / connect_time.as_secs_f64().max(1e-9),
        delta = mib(grown),
        au = active_users.len(),
        spu = SESSIONS_PER_USER,
        open_time = ms(open_time),
        sub = spread(sessions.iter().map(|s| s.subscribed).collect()),
        mem_after = mem_after_turns,
        wr = per_worker(&workers_ready_mem),
        wa = per_worker(&workers_after_mem),
        accepted = spread(sessions.iter().flat_map(|s| s.accepted.clone()).collect()),
        first = spread(
            sessions
                .iter()
                .flat_map(|s| s.first_frame.clone())
                .collect()
        ),
        end = spread(sessions.iter().flat_map(|s| s.turn_end.clone()).collect()),
        kb = bytes as f64 / 1024.0,
        window = ms(relay_window),
        fps = frames as f64 / secs,
        bps = bytes as f64 / secs / (1024.0 * 1024.0),
        cc = cpu.0,
        cs = cpu.1,
        cw = cpu.2,
        total = ms(started.elapsed()),
    );
    drop(server);
}

#[path = "serve_load/half_open.rs"]
mod half_open;
