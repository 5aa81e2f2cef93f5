//! Loopback HTTP/1.1 origins: the minimal servers that tests of the web
//! tool, the egress client and the model fetcher point the real client at.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

/// A whole HTTP/1.1 response that closes the connection after `body`.
pub fn response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Reads a request head (request line and headers, through the blank
/// line), or what arrived before the peer closed or failed.
pub fn read_head(stream: &mut impl Read) -> Vec<u8> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    head
}

/// Serves on 127.0.0.1 from a thread: for each of at most `max`
/// connections, one after another, reads the request head and writes what
/// `answer` makes of it (as text), then closes. Returns the address.
pub fn serve(max: usize, answer: impl Fn(&str) -> Vec<u8> + Send + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen on loopback (tests need it)");
    let addr = listener.local_addr().expect("the listener's address");
    std::thread::spawn(move || {
        for stream in listener.incoming().take(max) {
            let Ok(mut stream) = stream else { continue };
            answer_one(&mut stream, &answer);
        }
    });
    addr
}

fn answer_one(stream: &mut TcpStream, answer: &impl Fn(&str) -> Vec<u8>) {
    let head = read_head(stream);
    let _ = stream.write_all(&answer(&String::from_utf8_lossy(&head)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_frames_its_body() {
        let r = response("404 Not Found", &[("Location", "/x")], b"gone");
        assert_eq!(
            String::from_utf8(r).unwrap(),
            "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\nConnection: close\r\nLocation: /x\r\n\r\ngone"
        );
    }

    #[test]
    fn a_served_origin_answers_from_the_request_head() {
        let addr = serve(1, |head| {
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
            response("200 OK", &[], path.as_bytes())
        });
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut got = String::new();
        s.read_to_string(&mut got).unwrap();
        assert!(got.ends_with("\r\n\r\n/hello"), "{got}");
    }
}
