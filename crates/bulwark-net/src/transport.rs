//! One request chain on the wire: connect to checked addresses, check the
//! peer, speak TLS and HTTP/1.1 (rustls, hyper), follow redirects by hand,
//! read a capped and, if compressed, capped-decompressed body.

use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use url::Url;

use crate::check::Target;
use crate::{
    BodyMode, CallContext, CredentialUse, HttpRequest, HttpResponse, NetError, SafeHttp, clip,
};

/// Headers the client owns; a caller setting them could smuggle a second
/// request or redirect the connection.
const RESERVED: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "accept-encoding",
];

/// Dropped when a redirect leaves the origin they were meant for.
const ORIGIN_BOUND: &[&str] = &["authorization", "cookie", "proxy-authorization"];

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Aborts the connection task when the response is done with, whatever
/// path leaves the function.
struct ConnTask(tokio::task::JoinHandle<()>);
impl Drop for ConnTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The mutable part of a request as it moves along a redirect chain.
struct Hop {
    method: http::Method,
    headers: HeaderMap,
    body: Bytes,
}

impl SafeHttp {
    pub(crate) async fn fetch(
        &self,
        ctx: &CallContext,
        request: HttpRequest,
        mode: BodyMode,
        follow: bool,
        uses: &mut Vec<CredentialUse>,
    ) -> Result<HttpResponse, NetError> {
        let mut target = self.decide(crate::parse_url(&request.url)?)?;
        let mut hop = Hop {
            method: http::Method::from_bytes(request.method.to_ascii_uppercase().as_bytes())
                .map_err(|_| NetError::InvalidUrl {
                    url: clip(&request.url),
                    detail: format!("{:?} is not an HTTP method", request.method),
                })?,
            headers: caller_headers(&request.headers)?,
            body: Bytes::from(request.body),
        };
        let mut hops: u8 = 0;
        loop {
            let wire = self.credentials_for_hop(ctx, &target, &hop, uses)?;
            let addrs = self.addresses(&target).await?;
            let stream = self.connect(&target, &addrs).await?;
            let first_byte = self.limits.first_byte_timeout;
            let (resp, conn) =
                tokio::time::timeout(first_byte, self.exchange(&target, wire, stream))
                    .await
                    .map_err(|_| NetError::Timeout {
                        url: clip(target.url.as_str()),
                    })??;
            let status = resp.status().as_u16();
            let location = resp.headers().get(header::LOCATION).cloned();
            if let (true, Some(location)) = (
                follow && matches!(status, 301 | 302 | 303 | 307 | 308),
                location,
            ) {
                drop((resp, conn));
                if hops >= self.limits.max_redirects {
                    return Err(NetError::TooManyRedirects {
                        url: clip(target.url.as_str()),
                    });
                }
                let location = location.to_str().map_err(|_| NetError::InvalidUrl {
                    url: clip(target.url.as_str()),
                    detail: "redirect Location header is not valid ASCII".into(),
                })?;
                // The same decision as the first request's (scheme, host,
                // port against the allowlist's `host:port` rules, address).
                let next = self
                    .decide(next_hop(&target.url, location)?)
                    .map_err(|e| redirected(e, &target.url))?;
                if next.url.origin() != target.url.origin() {
                    for name in ORIGIN_BOUND {
                        hop.headers.remove(*name);
                    }
                }
                if status == 303
                    || (matches!(status, 301 | 302) && hop.method == http::Method::POST)
                {
                    hop.method = http::Method::GET;
                    hop.body = Bytes::new();
                    hop.headers.remove(header::CONTENT_TYPE);
                }
                target = next;
                hops += 1;
                continue;
            }
            let content_type = resp
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let encoding = resp.headers().get(header::CONTENT_ENCODING).map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .trim()
                    .to_ascii_lowercase()
            });
            let (parts, body) = resp.into_parts();
            let (raw, cut) = self.read_body(&target, body, mode).await?;
            drop(conn);
            let (body, truncated) = self.decode(&target, encoding.as_deref(), raw, cut, mode)?;
            return Ok(HttpResponse {
                status,
                final_url: target.url.to_string(),
                content_type,
                body,
                truncated,
                headers: parts.headers,
            });
        }
    }

    /// The request as it goes on the wire for this hop: the exfiltration
    /// guard over what the tool supplied, then placeholders and grant
    /// injections for this host only. Errors and `final_url` keep using the
    /// pre-injection URL, so an injected query credential is never shown.
    fn credentials_for_hop(
        &self,
        ctx: &CallContext,
        target: &Target,
        hop: &Hop,
        uses: &mut Vec<CredentialUse>,
    ) -> Result<http::Request<Full<Bytes>>, NetError> {
        let mut wire_url = target.url.clone();
        let mut headers = hop.headers.clone();
        match &self.credentials {
            Some(c) => {
                c.guard(&target.host, &target.url, &hop.headers, &hop.body)?;
                uses.extend(c.apply(
                    ctx,
                    &target.host,
                    target.port,
                    &mut headers,
                    &mut wire_url,
                )?);
            }
            None => {
                if let Some((name, _)) = headers
                    .iter()
                    .find(|(_, v)| v.as_bytes().windows(2).any(|w| w == b"${"))
                {
                    return Err(NetError::Credential {
                        detail: format!(
                            "header {name} names a credential placeholder, but this client has no credentials configured"
                        ),
                    });
                }
            }
        }
        build_request(target, &wire_url, &hop.method, headers, hop.body.clone()).map_err(|detail| {
            NetError::Transport {
                url: clip(target.url.as_str()),
                detail,
            }
        })
    }

    /// Dial the checked addresses in order; the first socket whose peer
    /// passes the check is used. No byte is written before that check.
    pub(crate) async fn connect(
        &self,
        target: &Target,
        addrs: &[IpAddr],
    ) -> Result<TcpStream, NetError> {
        let mut last = String::from("no address to try");
        for ip in addrs {
            let addr = SocketAddr::new(*ip, target.port);
            let stream =
                match tokio::time::timeout(self.limits.connect_timeout, self.dialer.dial(addr))
                    .await
                {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        last = format!("connect to {addr}: {e}");
                        continue;
                    }
                    Err(_) => {
                        last = format!("connect to {addr} timed out");
                        continue;
                    }
                };
            let peer = stream.peer_addr().map_err(|e| NetError::Transport {
                url: clip(target.url.as_str()),
                detail: format!("could not read the peer address of the socket: {e}"),
            })?;
            self.check_addr(&target.host, peer.ip(), target.internal)?;
            if peer != addr {
                return Err(NetError::ForbiddenAddress {
                    host: target.host.clone(),
                    addr: peer.to_string(),
                    range: format!("a connection meant for {addr} reached another peer"),
                });
            }
            return Ok(stream);
        }
        Err(NetError::Transport {
            url: clip(target.url.as_str()),
            detail: last,
        })
    }

    /// TLS (for https) and one HTTP/1.1 request on a checked socket, up to
    /// the response head.
    async fn exchange(
        &self,
        target: &Target,
        request: http::Request<Full<Bytes>>,
        stream: TcpStream,
    ) -> Result<(http::Response<hyper::body::Incoming>, ConnTask), NetError> {
        let transport = |detail: String| NetError::Transport {
            url: clip(target.url.as_str()),
            detail,
        };
        let io: Box<dyn Io> = if target.url.scheme() == "https" {
            let config = self.tls_config().map_err(&transport)?;
            let name = match target.literal {
                Some(ip) => ServerName::IpAddress(ip.into()),
                None => ServerName::try_from(target.host.trim_end_matches('.').to_string())
                    .map_err(|e| transport(format!("not a TLS server name: {e}")))?,
            };
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(name, stream)
                .await
                .map_err(|e| transport(format!("TLS handshake failed: {e}")))?;
            Box::new(tls)
        } else {
            Box::new(stream)
        };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| transport(format!("HTTP handshake failed: {e}")))?;
        let task = ConnTask(tokio::spawn(async move {
            let _ = conn.await;
        }));
        let resp = sender
            .send_request(request)
            .await
            .map_err(|e| transport(format!("{e}")))?;
        Ok((resp, task))
    }

    fn tls_config(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        self.tls
            .get_or_init(|| {
                let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
                let roots = self
                    .extra_roots
                    .iter()
                    .map(|der| CertificateDer::from(der.clone()));
                let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(
                    roots,
                    provider.clone(),
                )
                .map_err(|e| format!("could not load the system's trusted roots: {e}"))?;
                let mut config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("TLS setup failed: {e}"))?
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(verifier))
                    .with_no_client_auth();
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                Ok(Arc::new(config))
            })
            .clone()
    }

    /// Read the body up to the cap. Returns the bytes and whether more
    /// followed (only possible in [`BodyMode::Prefix`]).
    async fn read_body(
        &self,
        target: &Target,
        mut body: hyper::body::Incoming,
        mode: BodyMode,
    ) -> Result<(Vec<u8>, bool), NetError> {
        let limit = self.limits.max_body_bytes;
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| NetError::Transport {
                url: clip(target.url.as_str()),
                detail: format!("reading the body: {e}"),
            })?;
            let Ok(chunk) = frame.into_data() else {
                continue;
            };
            let room = limit - out.len();
            if chunk.len() > room {
                if mode == BodyMode::Complete {
                    return Err(NetError::TooLarge {
                        url: clip(target.url.as_str()),
                        limit,
                    });
                }
                out.extend_from_slice(&chunk[..room]);
                return Ok((out, true));
            }
            out.extend_from_slice(&chunk);
        }
        Ok((out, false))
    }

    /// Undo `Content-Encoding`, with the same cap on the decoded size: a
    /// 10 KB gzip bomb that inflates to gigabytes stops at the cap.
    fn decode(
        &self,
        target: &Target,
        encoding: Option<&str>,
        raw: Vec<u8>,
        cut: bool,
        mode: BodyMode,
    ) -> Result<(Vec<u8>, bool), NetError> {
        let limit = self.limits.max_body_bytes;
        let mut decoder: Box<dyn Read + '_> = match encoding {
            None | Some("" | "identity") => return Ok((raw, cut)),
            Some("gzip" | "x-gzip") => Box::new(flate2::read::GzDecoder::new(raw.as_slice())),
            Some("deflate") => Box::new(flate2::read::ZlibDecoder::new(raw.as_slice())),
            Some(other) => {
                return Err(NetError::Encoding {
                    url: clip(target.url.as_str()),
                    encoding: other.chars().take(64).collect(),
                });
            }
        };
        let mut out = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            match decoder.read(&mut buf) {
                Ok(0) => return Ok((out, cut)),
                Ok(n) => {
                    let room = limit - out.len();
                    if n > room {
                        if mode == BodyMode::Complete {
                            return Err(NetError::TooLarge {
                                url: clip(target.url.as_str()),
                                limit,
                            });
                        }
                        out.extend_from_slice(&buf[..room]);
                        return Ok((out, true));
                    }
                    out.extend_from_slice(&buf[..n]);
                }
                // A body we cut ourselves ends mid-stream: keep the prefix.
                Err(_) if cut => return Ok((out, true)),
                Err(e) => {
                    return Err(NetError::Transport {
                        url: clip(target.url.as_str()),
                        detail: format!("corrupt {} body: {e}", encoding.unwrap_or_default()),
                    });
                }
            }
        }
    }
}

/// Validate the caller's headers (names and values as HTTP defines them, so
/// CR/LF cannot split the request; none of the headers the client owns).
fn caller_headers(given: &[(String, String)]) -> Result<HeaderMap, NetError> {
    let mut map = HeaderMap::new();
    for (name, value) in given {
        let bad = |detail: &str| NetError::Header {
            name: name.chars().take(64).collect(),
            detail: detail.into(),
        };
        let header =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad("not a valid header name"))?;
        if RESERVED.contains(&header.as_str()) {
            return Err(bad("the client sets this header itself"));
        }
        let value = HeaderValue::from_str(value)
            .map_err(|_| bad("the value contains characters headers cannot carry"))?;
        map.append(header, value);
    }
    Ok(map)
}

fn build_request(
    target: &Target,
    url: &Url,
    method: &http::Method,
    headers: HeaderMap,
    body: Bytes,
) -> Result<http::Request<Full<Bytes>>, String> {
    let mut path = url.path().to_string();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    let host = match url.port() {
        Some(p) => format!("{}:{p}", target.host),
        None => target.host.clone(),
    };
    let mut builder = http::Request::builder()
        .method(method.clone())
        .uri(path)
        .header(header::HOST, host)
        .header(header::CONNECTION, "close")
        .header(header::ACCEPT_ENCODING, "gzip, deflate");
    if !headers.contains_key(header::USER_AGENT) {
        builder = builder.header(
            header::USER_AGENT,
            concat!("bulwark/", env!("CARGO_PKG_VERSION")),
        );
    }
    if let Some(map) = builder.headers_mut() {
        for (k, v) in headers {
            if let Some(k) = k {
                map.append(k, v);
            }
        }
    }
    builder
        .body(Full::new(body))
        .map_err(|e| format!("could not build the request: {e}"))
}

/// A refused redirect hop says where the redirect came from, so a user
/// can tell a server's redirect from their own URL.
fn redirected(error: NetError, from: &Url) -> NetError {
    match error {
        NetError::NotAllowed { host, rule } => NetError::NotAllowed {
            host,
            rule: format!(
                "{rule}; a redirect from {} pointed there",
                clip(from.as_str())
            ),
        },
        other => other,
    }
}

/// Resolve a redirect target against the current URL and refuse an
/// https→http downgrade (which would expose the request to the network).
/// The result still has to pass the full per-hop decision.
pub(crate) fn next_hop(current: &Url, location: &str) -> Result<Url, NetError> {
    if location.len() > crate::MAX_URL_BYTES {
        return Err(NetError::InvalidUrl {
            url: clip(location),
            detail: format!("redirect target longer than {} bytes", crate::MAX_URL_BYTES),
        });
    }
    let next = current.join(location).map_err(|e| NetError::InvalidUrl {
        url: clip(location),
        detail: format!("bad redirect target from {}: {e}", clip(current.as_str())),
    })?;
    if current.scheme() == "https" && next.scheme() == "http" {
        return Err(NetError::Downgrade {
            url: clip(next.as_str()),
        });
    }
    Ok(next)
}
