//! The sandbox's one way out: an egress proxy on a Unix socket.
//!
//! A command with `network = false` lives in an empty network namespace.
//! When its spec names an `egress_proxy` socket, the helper brings up
//! loopback in that namespace and relays TCP connections to
//! `127.0.0.1:`[`EGRESS_PROXY_PORT`] (and `[::1]` where the namespace has
//! IPv6) to the socket, so programs that honour `HTTP_PROXY`/`HTTPS_PROXY`
//! (curl, git, npm, pip, Python's `httpx`, Node's `undici` with a proxy
//! agent) reach exactly what the proxy on the host allows, and nothing
//! else: there is no route out of the namespace, and the socket is the only
//! host object it can connect to.
//!
//! The relay is a process the helper forks after entering the network
//! namespace and *before* the mount namespace, so it still sees the socket
//! by its host path while the command's root never contains it. It runs
//! only this file's code, confined as far as that allows: every other
//! descriptor closed, stdio on `/dev/null`, `no_new_privs`, a Landlock
//! domain with no file-system, TCP or scope rights (connecting to a
//! pathname socket is not a Landlock right at the ABIs used here) and the
//! no-network seccomp filter (`AF_UNIX` sockets only). It shares the
//! command's process group and cgroups, and its parent-death signal is
//! tied to the command, so it dies with it. One thread multiplexes at most
//! [`MAX_CONNECTIONS`] connections with `poll`, so it costs the command's
//! process budget one process, not one per connection.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

use rustix::event::{PollFd, PollFlags, poll};

/// The loopback port inside the sandbox's network namespace that relays to
/// the egress proxy socket.
pub const EGRESS_PROXY_PORT: u16 = 3128;

/// Relayed connections open at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 64;
/// Buffer per direction per connection.
const BUF_BYTES: usize = 16 * 1024;

/// The proxy URL the command's environment names.
pub fn egress_proxy_url() -> String {
    format!("http://127.0.0.1:{EGRESS_PROXY_PORT}")
}

/// Variables set to [`egress_proxy_url`] in the command's environment.
const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "npm_config_proxy",
    "npm_config_https_proxy",
];
/// Variables emptied, so no host is exempted from the proxy (a direct
/// connection would fail anyway, but a clear proxy error is better).
const NO_PROXY_VARS: &[&str] = &["NO_PROXY", "no_proxy"];

/// The proxy variables of a command whose relay is up. They replace any
/// the caller passed.
pub(crate) fn proxy_env() -> Vec<(&'static str, String)> {
    let url = egress_proxy_url();
    PROXY_VARS
        .iter()
        .map(|k| (*k, url.clone()))
        .chain(NO_PROXY_VARS.iter().map(|k| (*k, String::new())))
        .collect()
}

/// The socket must exist and be a socket: a typo would otherwise show up
/// as every request of the command failing inside the sandbox.
pub(crate) fn check_socket(path: &Path) -> Result<(), String> {
    if !path.is_absolute() {
        return Err(format!(
            "egress_proxy {} is not an absolute path",
            path.display()
        ));
    }
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_socket() => Ok(()),
        Ok(_) => Err(format!(
            "egress_proxy {} is not a Unix socket; pass the path the egress proxy listens on",
            path.display()
        )),
        Err(e) => Err(format!(
            "egress_proxy {} is not usable: {e}; start the egress proxy before the command",
            path.display()
        )),
    }
}

/// Bring up loopback in the (new, empty) network namespace, listen on the
/// relay port and fork the relay. Called by the single-threaded helper
/// after it entered its own network namespace, never in the host's.
pub(crate) fn start_relay(socket: &Path) -> Result<(), String> {
    check_socket(socket)?;
    loopback_up()?;
    let mut listeners = vec![
        TcpListener::bind(("127.0.0.1", EGRESS_PROXY_PORT))
            .map_err(|e| format!("listening on 127.0.0.1:{EGRESS_PROXY_PORT}: {e}"))?,
    ];
    // IPv6 loopback exists only where the kernel has IPv6 enabled.
    if let Ok(v6) = TcpListener::bind(("::1", EGRESS_PROXY_PORT)) {
        listeners.push(v6);
    }
    for l in &listeners {
        l.set_nonblocking(true)
            .map_err(|e| format!("relay listener: {e}"))?;
    }
    let parent = rustix::process::getpid();
    // SAFETY: the helper is a single-threaded process (it is started fresh
    // and spawns no threads), so the child of fork is a complete copy in
    // which ordinary Rust, allocation included, is sound. The child never
    // returns from `relay_main` (it exits), so no destructor of the
    // parent's state runs twice.
    #[allow(unsafe_code)]
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(format!("fork: {}", io::Error::last_os_error())),
        0 => relay_main(listeners, socket, parent),
        _ => Ok(()),
    }
}

/// `SIOCSIFFLAGS` `IFF_UP` on `lo`: a new network namespace starts with
/// its loopback down. Needs `CAP_NET_ADMIN` over the namespace, which the
/// helper has in its own user namespace.
fn loopback_up() -> Result<(), String> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let fail = |what: &str| {
        format!(
            "bringing up loopback: {what}: {}",
            io::Error::last_os_error()
        )
    };
    // SAFETY: socket() takes integers and returns a new descriptor or -1.
    #[allow(unsafe_code)]
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(fail("socket"));
    }
    // SAFETY: `raw` is a descriptor just returned to us that nothing else
    // owns.
    #[allow(unsafe_code)]
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain data (a name and a union of integers and
    // addresses) for which all zero bytes are a valid value.
    #[allow(unsafe_code)]
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the NUL-terminated name from `ifr` and
    // writes the flags into it; `ifr` outlives the call.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr) };
    if rc != 0 {
        return Err(fail("SIOCGIFFLAGS"));
    }
    // SAFETY: the kernel just filled the union's flags member, the one
    // read and written here.
    #[allow(unsafe_code)]
    unsafe {
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    // SAFETY: SIOCSIFFLAGS reads the name and flags from `ifr`, which
    // outlives the call.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &ifr) };
    if rc != 0 {
        return Err(fail("SIOCSIFFLAGS"));
    }
    Ok(())
}

/// The relay process: confine, then relay until killed.
fn relay_main(listeners: Vec<TcpListener>, socket: &Path, parent: rustix::process::Pid) -> ! {
    confine_relay(&listeners, parent);
    relay_loop(&listeners, socket);
    std::process::exit(0)
}

/// Everything the relay can give up. Best effort: it runs only our code,
/// and the command's own confinement does not depend on it.
fn confine_relay(listeners: &[TcpListener], parent: rustix::process::Pid) {
    use rustix::process::Signal;
    // Die with the command (the helper, after its exec).
    let _ = rustix::process::set_parent_process_death_signal(Some(Signal::KILL));
    if rustix::process::getppid() != Some(parent) {
        std::process::exit(0);
    }
    // stdio on /dev/null: the relay must not hold the command's stdout or
    // stderr pipes open (the caller waits for their end of file).
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for target in 0..3 {
            // SAFETY: dup2 onto the standard descriptors, which no Rust
            // owner in this process closes; the source stays open across
            // the calls.
            #[allow(unsafe_code)]
            unsafe {
                libc::dup2(null.as_raw_fd(), target);
            }
        }
    }
    let mut keep: Vec<RawFd> = listeners.iter().map(|l| l.as_fd().as_raw_fd()).collect();
    keep.sort_unstable();
    close_all_but(&keep);
    let _ = rustix::thread::set_no_new_privs(true);
    let _ = crate::landlock_rules::restrict_nothing();
    let _ = crate::seccomp_filter::install(false, false);
}

/// Close every descriptor above stderr except `keep` (sorted): the ready
/// pipe, and anything else the helper held, stay out of the relay.
fn close_all_but(keep: &[RawFd]) {
    let mut first: libc::c_uint = 3;
    for fd in keep
        .iter()
        .filter_map(|fd| libc::c_uint::try_from(*fd).ok())
    {
        if fd > first {
            close_range(first, fd - 1);
        }
        first = first.max(fd.saturating_add(1));
    }
    close_range(first, libc::c_uint::MAX);
}

fn close_range(first: libc::c_uint, last: libc::c_uint) {
    // SAFETY: the relay process never returns to code that owns these
    // descriptors (it exits from `relay_main`), and the ones it still uses
    // (the listeners) are excluded by the caller.
    #[allow(unsafe_code)]
    unsafe {
        libc::syscall(libc::SYS_close_range, first, last, 0 as libc::c_uint);
    }
}

/// One direction of a relayed connection.
struct Pipe {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// The source reached end of file.
    eof: bool,
    /// The destination's write side was shut after the last byte.
    shut: bool,
}

impl Pipe {
    fn new() -> Self {
        Self {
            buf: vec![0; BUF_BYTES].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            shut: false,
        }
    }

    fn wants_read(&self) -> bool {
        !self.eof && self.start == self.end
    }

    fn has_data(&self) -> bool {
        self.start < self.end
    }

    /// Move what can move without blocking; `Err` ends the connection.
    fn pump(&mut self, src: &mut impl Read, dst: &mut (impl Write + ShutWrite)) -> io::Result<()> {
        loop {
            if self.wants_read() {
                match src.read(&mut self.buf) {
                    Ok(0) => self.eof = true,
                    Ok(n) => {
                        self.start = 0;
                        self.end = n;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
            if self.has_data() {
                match dst.write(&self.buf[self.start..self.end]) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => {
                        self.start += n;
                        if self.start == self.end {
                            continue;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
            if self.eof && !self.has_data() && !self.shut {
                self.shut = true;
                let _ = dst.shut_write();
            }
            return Ok(());
        }
    }
}

trait ShutWrite {
    fn shut_write(&self) -> io::Result<()>;
}
impl ShutWrite for TcpStream {
    fn shut_write(&self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
}
impl ShutWrite for UnixStream {
    fn shut_write(&self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
}

struct Conn {
    tcp: TcpStream,
    unix: UnixStream,
    /// Command to proxy.
    up: Pipe,
    /// Proxy to command.
    down: Pipe,
}

impl Conn {
    fn done(&self) -> bool {
        self.up.shut && self.down.shut
    }

    fn pump(&mut self) -> io::Result<()> {
        self.up.pump(&mut self.tcp, &mut self.unix)?;
        self.down.pump(&mut self.unix, &mut self.tcp)
    }
}

/// Accept, connect to the proxy socket, copy both ways; forever.
fn relay_loop(listeners: &[TcpListener], socket: &Path) {
    let mut conns: Vec<Conn> = Vec::new();
    loop {
        let accepting = conns.len() < MAX_CONNECTIONS;
        let mut ready_listeners = vec![false; listeners.len()];
        let mut ready_conns = vec![false; conns.len()];
        {
            let mut fds: Vec<PollFd<'_>> = Vec::new();
            if accepting {
                fds.extend(listeners.iter().map(|l| PollFd::new(l, PollFlags::IN)));
            }
            for c in &conns {
                let mut tcp = PollFlags::empty();
                let mut unix = PollFlags::empty();
                if c.up.wants_read() {
                    tcp |= PollFlags::IN;
                }
                if c.down.has_data() {
                    tcp |= PollFlags::OUT;
                }
                if c.down.wants_read() {
                    unix |= PollFlags::IN;
                }
                if c.up.has_data() {
                    unix |= PollFlags::OUT;
                }
                fds.push(PollFd::new(&c.tcp, tcp));
                fds.push(PollFd::new(&c.unix, unix));
            }
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                // Nothing sensible is left to do; the command sees its
                // connections close.
                Err(_) => return,
            }
            let offset = if accepting { listeners.len() } else { 0 };
            for (i, ready) in ready_listeners.iter_mut().enumerate().take(offset) {
                *ready = !fds[i].revents().is_empty();
            }
            for (i, ready) in ready_conns.iter_mut().enumerate() {
                let a = fds[offset + 2 * i].revents();
                let b = fds[offset + 2 * i + 1].revents();
                *ready = !a.is_empty() || !b.is_empty();
            }
        }
        let mut keep = Vec::with_capacity(conns.len());
        for (mut c, ready) in conns.into_iter().zip(ready_conns) {
            if ready && c.pump().is_err() {
                continue;
            }
            if !c.done() {
                keep.push(c);
            }
        }
        conns = keep;
        for (l, ready) in listeners.iter().zip(ready_listeners) {
            while ready && conns.len() < MAX_CONNECTIONS {
                let Ok((tcp, _)) = l.accept() else { break };
                if let Some(c) = connect(tcp, socket) {
                    conns.push(c);
                }
            }
        }
    }
}

/// Pair an accepted connection with a new one to the proxy socket; `None`
/// (closing the accepted one) when the proxy cannot be reached.
fn connect(tcp: TcpStream, socket: &Path) -> Option<Conn> {
    let unix = UnixStream::connect(socket).ok()?;
    tcp.set_nonblocking(true).ok()?;
    unix.set_nonblocking(true).ok()?;
    let _ = tcp.set_nodelay(true);
    Some(Conn {
        tcp,
        unix,
        up: Pipe::new(),
        down: Pipe::new(),
    })
}
