//! `bulwark serve` for the tests that talk to it over the network: start
//! it on a free loopback port, read the address it bound, keep its log,
//! kill it on drop; tokens from `bulwark access create`; its worker
//! processes; and a WebSocket client.

use super::{BIN, Bw, SCRUBBED};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// The longest wait for a frame or for the server to stop: a debug-build
/// worker starts in well under a second; the bound only keeps a broken
/// server from hanging CI.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A running `bulwark serve`, killed (and reaped) when dropped.
pub struct Server {
    child: Child,
    /// `127.0.0.1:PORT`, as the server printed it.
    pub addr: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every line the server logged on stderr so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Sends SIGTERM and waits (at most [`PATIENCE`]) for a clean exit.
    pub fn terminate(&mut self) {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).expect("a pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
        let asked = Instant::now();
        while self.child.try_wait().expect("wait").is_none() {
            assert!(asked.elapsed() < PATIENCE, "serve did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `bulwark serve --bind 127.0.0.1:0` and reads the bound address
/// from its first line on stderr.
pub fn start(bw: &Bw) -> Server {
    start_with(Path::new(BIN), bw, &[])
}

/// [`start`] with another `bulwark` binary (a release build, say) and more
/// `serve` arguments.
pub fn start_with(bin: &Path, bw: &Bw, extra: &[&str]) -> Server {
    let mut cmd = Command::new(bin);
    cmd.arg("--home")
        .arg(bw.home())
        .args(["serve", "--bind", "127.0.0.1:0"])
        .args(extra);
    for var in SCRUBBED {
        cmd.env_remove(var);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bulwark serve starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("serve printed its address before exiting")
            .expect("stderr is text");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest
                .split_whitespace()
                .next()
                .expect("an address")
                .to_owned();
        }
    };
    // Keep draining (and keeping) the log so the server never blocks on a
    // full pipe.
    let log = Arc::new(Mutex::new(Vec::new()));
    let kept = log.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            kept.lock().unwrap_or_else(|p| p.into_inner()).push(line);
        }
    });
    Server { child, addr, log }
}

/// A new token for `user` (created with access to `agents`), as
/// `bulwark access create` prints it.
pub fn token_for(bw: &Bw, user: &str, agents: &str) -> String {
    let out = bw.run(&["access", "create", user, "--agents", agents]);
    out.ok();
    out.stdout
        .lines()
        .find(|l| l.starts_with("bwk_"))
        .unwrap_or_else(|| panic!("no token in:\n{}", out.stdout))
        .to_owned()
}

/// The `bulwark worker` processes whose parent is `server`, only those
/// started for `user` when one is named (workers get `--user=NAME`).
pub fn workers_of(server: u32, user: Option<&str>) -> Vec<u32> {
    let flag = user.map(|u| format!("--user={u}"));
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces and parens.
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if parent != Some(server) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let for_user = flag.as_ref().is_none_or(|f| args.contains(&f.as_bytes()));
        if args.contains(&b"worker".as_slice()) && for_user {
            pids.push(pid);
        }
    }
    pids
}

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket to the server, authenticated as a browser does it (the
/// token in the `bearer.<token>` subprotocol).
pub async fn connect(addr: &str, token: &str) -> Ws {
    let mut request = format!("ws://{addr}/api/v1/ws")
        .into_client_request()
        .expect("a request");
    request.headers_mut().insert(
        "sec-websocket-protocol",
        format!("bulwark.v1, bearer.{token}")
            .parse()
            .expect("a header value"),
    );
    tokio_tungstenite::connect_async(request)
        .await
        .expect("the WebSocket handshake")
        .0
}

pub async fn send(ws: &mut Ws, frame: Value) {
    ws.send(Message::text(frame.to_string()))
        .await
        .expect("send a frame");
}

/// The next JSON frame, within [`PATIENCE`].
pub async fn next(ws: &mut Ws) -> Value {
    loop {
        let message = tokio::time::timeout(PATIENCE, ws.next())
            .await
            .expect("a frame in time")
            .expect("the connection is open")
            .expect("a WebSocket message");
        if let Message::Text(text) = message {
            return serde_json::from_str(&text).expect("server frames are JSON");
        }
    }
}

/// Frames until one of type `kind`: that frame and those before it.
pub async fn until(ws: &mut Ws, kind: &str) -> (Value, Vec<Value>) {
    let mut seen = Vec::new();
    loop {
        let frame = next(ws).await;
        if frame["type"] == kind {
            return (frame, seen);
        }
        seen.push(frame);
    }
}
