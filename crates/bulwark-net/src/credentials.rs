//! Credentials at the boundary: the client, not the agent, puts secrets
//! into requests, per request and per host.
//!
//! A manifest's grants (`[credentials.grants.<name>]`) say which keys which
//! tool domains may have sent to which hosts, and how (`inject`: a header
//! or query parameter rendered from a `${KEY}` template). A tool may also
//! name a key in a header value as `${KEY}`; the client substitutes it only
//! if a grant allows that key, for that tool, to that host.
//!
//! Strict mode (any grant declared) is the only safe one. Legacy mode (no
//! grants) mirrors the seed's backward-compatible behaviour: every
//! injectable key may be substituted into a request to any host the egress
//! policy allows. It is reported loudly by `preflight` and `credentials
//! check`. In both modes nothing is injected without a grant, and the
//! exfiltration guard applies to every request.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bulwark_policy::{
    CredentialGrant, CredentialMode, GrantApproval, HostPattern, InjectionTarget, Template,
};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use url::Url;
use zeroize::Zeroizing;

use crate::{NetError, SecretStore};

/// Who is asking: the tool domain, and whether a human approved this call
/// (grants with `approval = "required"` are used only then).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallContext {
    pub tool: String,
    pub human_approved: bool,
}

impl CallContext {
    pub fn tool(tool: &str) -> Self {
        CallContext {
            tool: tool.to_string(),
            human_approved: false,
        }
    }
}

/// One use of credentials on one hop, by names only: what the audit log
/// records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialUse {
    /// `None` in legacy mode.
    pub grant: Option<String>,
    pub keys: Vec<String>,
    pub host: String,
    pub outcome: UseOutcome,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UseOutcome {
    /// Injected by the grant's `inject` rules.
    Injected,
    /// A `${KEY}` placeholder in a tool-supplied header was substituted.
    Substituted,
    /// The grant matched but requires a human approval this call lacks.
    SkippedNeedsApproval,
}

struct CompiledGrant {
    name: String,
    keys: Vec<String>,
    tools: Vec<String>,
    hosts: Vec<HostPattern>,
    inject: Vec<(InjectionTarget, Template)>,
    approval_required: bool,
}

impl CompiledGrant {
    fn applies(&self, tool: &str, host: &str, port: u16) -> bool {
        self.tools.iter().any(|t| t == tool || t == "*")
            && self.hosts.iter().any(|h| h.covers(host, port))
    }
}

/// A session's credential rules plus the runtime's secret store.
pub struct Credentials {
    grants: Vec<CompiledGrant>,
    store: Arc<SecretStore>,
    /// The end of what recent requests sent to each host, so a secret split
    /// across requests is seen whole (see [`Window`]).
    window: Mutex<Window>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("mode", &self.mode())
            .field(
                "grants",
                &self.grants.iter().map(|g| &g.name).collect::<Vec<_>>(),
            )
            .field("store", &self.store)
            .finish()
    }
}

impl Credentials {
    /// Compile validated grants. A grant that still fails to compile (it
    /// was not validated by the manifest parser) fails closed.
    pub fn new(
        grants: &BTreeMap<String, CredentialGrant>,
        store: Arc<SecretStore>,
    ) -> Result<Credentials, NetError> {
        let mut compiled = Vec::new();
        for (name, g) in grants {
            let bad = |detail: String| NetError::Credential {
                detail: format!("grant {name:?}: {detail}"),
            };
            let hosts = g
                .hosts
                .iter()
                .map(|h| HostPattern::parse(h).map_err(&bad))
                .collect::<Result<Vec<_>, _>>()?;
            let inject = g
                .inject
                .iter()
                .map(|i| {
                    let template = i.template().map_err(|e| bad(e.to_string()))?;
                    Ok((i.target(), template))
                })
                .collect::<Result<Vec<_>, NetError>>()?;
            compiled.push(CompiledGrant {
                name: name.clone(),
                keys: g.keys.clone(),
                tools: g.tools.clone(),
                hosts,
                inject,
                approval_required: g.approval == Some(GrantApproval::Required),
            });
        }
        Ok(Credentials {
            grants: compiled,
            store,
            window: Mutex::new(Window::default()),
        })
    }

    /// Only the exfiltration guard: no grants, nothing injectable (for
    /// clients whose callers must never carry credentials).
    pub fn guard_only(store: Arc<SecretStore>) -> Credentials {
        Credentials {
            grants: Vec::new(),
            store,
            window: Mutex::new(Window::default()),
        }
    }

    pub fn mode(&self) -> CredentialMode {
        if self.grants.is_empty() {
            CredentialMode::Legacy
        } else {
            CredentialMode::Strict
        }
    }

    pub fn store(&self) -> &SecretStore {
        &self.store
    }

    /// Refuse a hop whose URL, headers or body (as the tool gave them, before
    /// any injection) carries a known secret value, alone or joined with
    /// the end of what earlier requests of this session sent to `host`.
    pub(crate) fn guard(
        &self,
        host: &str,
        url: &Url,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(), NetError> {
        let refuse = |key: &str, place: &str| NetError::Exfiltration {
            host: host.to_string(),
            key: key.to_string(),
            place: place.to_string(),
        };
        if let Some(key) = self.store.find_in(url.as_str().as_bytes()) {
            return Err(refuse(key, "the URL"));
        }
        for (name, value) in headers {
            if let Some(key) = self.store.find_in(value.as_bytes()) {
                return Err(refuse(key, &format!("header {}", name.as_str())));
            }
        }
        if let Some(key) = self.store.find_in(body) {
            return Err(refuse(key, "the body"));
        }
        let len = self.store.window_len();
        if len == 0 {
            return Ok(());
        }
        let parts = window_parts(url, headers, body);
        // A poisoned lock only means another request panicked mid-update;
        // the window is advisory state, so carry on with what it holds.
        let mut window = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let streams = window.host(host);
        let mut splits = Vec::with_capacity(parts.len());
        for (place, value) in &parts {
            let Some(stream) = streams.iter().find(|s| s.place == *place) else {
                splits.push((0, 0));
                continue;
            };
            let (keep, prefix) = stream.split(value);
            splits.push((keep, prefix));
            if keep == 0 || prefix >= value.len() {
                continue;
            }
            // Only a match that crosses into this request is new: the
            // earlier part was checked when it was sent.
            let probe = stream.probe(value, keep, prefix, len);
            if let Some(key) = self.store.find_in(&probe) {
                return Err(refuse(
                    key,
                    &format!("{place}, joined with what earlier requests sent to this host"),
                ));
            }
        }
        for ((place, value), (keep, prefix)) in parts.iter().zip(splits) {
            match streams.iter().position(|s| s.place == *place) {
                Some(i) => streams[i].commit(value, keep, prefix, len),
                None if streams.len() < MAX_STREAMS_PER_HOST => {
                    let mut s = Stream::new(place.clone());
                    s.commit(value, 0, 0, len);
                    streams.push(s);
                }
                None => {}
            }
        }
        Ok(())
    }

    /// Substitute `${KEY}` placeholders in the tool's headers and apply the
    /// grants' injections for this host. Returns what was used, by name.
    pub(crate) fn apply(
        &self,
        ctx: &CallContext,
        host: &str,
        port: u16,
        headers: &mut HeaderMap,
        wire_url: &mut Url,
    ) -> Result<Vec<CredentialUse>, NetError> {
        let mut uses = Vec::new();
        let placeholders: Vec<HeaderName> = headers
            .iter()
            .filter(|(_, v)| v.as_bytes().windows(2).any(|w| w == b"${"))
            .map(|(k, _)| k.clone())
            .collect();
        for name in placeholders {
            let values: Vec<HeaderValue> = headers.get_all(&name).iter().cloned().collect();
            headers.remove(&name);
            for value in values {
                let text = value.to_str().map_err(|_| NetError::Header {
                    name: name.to_string(),
                    detail: "a value with a ${KEY} placeholder must be ASCII".into(),
                })?;
                let template = Template::parse(text).map_err(|e| NetError::Header {
                    name: name.to_string(),
                    detail: format!("bad placeholder: {e}"),
                })?;
                let mut grant_names = Vec::new();
                for key in template.keys() {
                    grant_names.push(self.authorize(ctx, key, host, port)?);
                }
                let rendered = self.render(&template)?;
                headers.append(name.clone(), sensitive(&name, &rendered)?);
                let keys: Vec<String> = template.keys().map(str::to_string).collect();
                uses.push(CredentialUse {
                    grant: grant_names.into_iter().flatten().next(),
                    keys,
                    host: host.to_string(),
                    outcome: UseOutcome::Substituted,
                });
            }
        }
        for grant in self
            .grants
            .iter()
            .filter(|g| g.applies(&ctx.tool, host, port))
        {
            if grant.inject.is_empty() {
                continue;
            }
            let keys = grant.keys.clone();
            if grant.approval_required && !ctx.human_approved {
                uses.push(CredentialUse {
                    grant: Some(grant.name.clone()),
                    keys,
                    host: host.to_string(),
                    outcome: UseOutcome::SkippedNeedsApproval,
                });
                continue;
            }
            for (target, template) in &grant.inject {
                let rendered = self.render(template)?;
                match target {
                    InjectionTarget::Header(h) => {
                        let name = HeaderName::from_bytes(h.as_bytes()).map_err(|_| {
                            NetError::Credential {
                                detail: format!(
                                    "grant {:?}: {h:?} is not a header name",
                                    grant.name
                                ),
                            }
                        })?;
                        let value = sensitive(&name, &rendered)?;
                        headers.insert(name, value);
                    }
                    InjectionTarget::Query(q) => {
                        wire_url.query_pairs_mut().append_pair(q, &rendered);
                    }
                }
            }
            uses.push(CredentialUse {
                grant: Some(grant.name.clone()),
                keys,
                host: host.to_string(),
                outcome: UseOutcome::Injected,
            });
        }
        Ok(uses)
    }

    /// Does a grant send `key` to `host:port` for `ctx.tool`, usable on this
    /// call (approval-required grants count only with a human approval)?
    /// Legacy mode (no grants) answers no: an opaque tunnel has no request
    /// to substitute into, so only an explicit grant lets a held key go.
    pub(crate) fn sends_key(&self, ctx: &CallContext, key: &str, host: &str, port: u16) -> bool {
        self.grants.iter().any(|g| {
            g.keys.iter().any(|k| k == key)
                && g.applies(&ctx.tool, host, port)
                && (!g.approval_required || ctx.human_approved)
        })
    }

    /// May `key` go to `host:port` for this call? Returns the grant that
    /// allows it (`None` in legacy mode).
    fn authorize(
        &self,
        ctx: &CallContext,
        key: &str,
        host: &str,
        port: u16,
    ) -> Result<Option<String>, NetError> {
        if !self.store.is_injectable(key) {
            return Err(NetError::Credential {
                detail: format!(
                    "key {key:?} is not an available credential; an operator must set it and grant it to this agent"
                ),
            });
        }
        if self.grants.is_empty() {
            return Ok(None);
        }
        let mut needs_approval = None;
        for g in &self.grants {
            if g.keys.iter().any(|k| k == key) && g.applies(&ctx.tool, host, port) {
                if g.approval_required && !ctx.human_approved {
                    needs_approval = Some(g.name.clone());
                    continue;
                }
                return Ok(Some(g.name.clone()));
            }
        }
        Err(NetError::Credential {
            detail: match needs_approval {
                Some(g) => format!(
                    "key {key:?} for {host} is granted by {g:?} only with a human approval of the call"
                ),
                None => format!(
                    "no credential grant lets tool domain {:?} send key {key:?} to {host}:{port}",
                    ctx.tool
                ),
            },
        })
    }

    fn render(&self, template: &Template) -> Result<Zeroizing<String>, NetError> {
        template
            .render(|k| self.store.value(k).filter(|_| self.store.is_injectable(k)))
            .map(Zeroizing::new)
            .ok_or_else(|| NetError::Credential {
                detail: format!(
                    "a key of {template} is not set; the operator must export it before starting bulwark"
                ),
            })
    }
}

/// Hosts whose recent traffic is kept; the least recently used goes first.
const MAX_WINDOW_HOSTS: usize = 64;
/// Places (path, query, query values, body, each header) kept per host.
const MAX_STREAMS_PER_HOST: usize = 12;
/// Bytes of a value's start and end kept to find what the next value to
/// the same place shares with it.
const KEPT_EDGE: usize = 4096;

/// Per destination host, per place in the request, the end of what this
/// session's requests sent there: a secret split over two or more
/// consecutive requests to one host, in the same place (query parameter,
/// path, header, body) and with the same text around it, is seen whole.
/// What the parts share with the previous value at their start and end
/// (`{"data":"` and `"}`) is left out of the join, so the parts meet.
#[derive(Default)]
struct Window {
    /// Most recently used last.
    hosts: Vec<(String, Vec<Stream>)>,
}

impl Window {
    fn host(&mut self, host: &str) -> &mut Vec<Stream> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let entry = match self.hosts.iter().position(|(h, _)| *h == host) {
            Some(i) => self.hosts.remove(i),
            None => {
                if self.hosts.len() >= MAX_WINDOW_HOSTS {
                    self.hosts.remove(0);
                }
                (host, Vec::new())
            }
        };
        self.hosts.push(entry);
        let last = self.hosts.len() - 1;
        &mut self.hosts[last].1
    }
}

struct Stream {
    place: String,
    /// The start and end of the previous value, and its length.
    head: Zeroizing<Vec<u8>>,
    tail: Zeroizing<Vec<u8>>,
    len: usize,
    /// The last `window` bytes of the joined parts so far.
    joined: Zeroizing<Vec<u8>>,
    /// How many bytes at the end of `joined` came from the previous value.
    last_part: usize,
}

impl Stream {
    fn new(place: String) -> Stream {
        Stream {
            place,
            head: Zeroizing::new(Vec::new()),
            tail: Zeroizing::new(Vec::new()),
            len: 0,
            joined: Zeroizing::new(Vec::new()),
            last_part: 0,
        }
    }

    /// What of the joined parts stays before `value`'s new part (`keep`
    /// bytes: the end the previous value shares with `value` is dropped),
    /// and where in `value` the new part starts (after the start they
    /// share).
    fn split(&self, value: &[u8]) -> (usize, usize) {
        // What is shared must end (start) at a delimiter: parts of a
        // secret may share leading letters or digits by chance.
        let mut prefix = self
            .head
            .iter()
            .zip(value)
            .take_while(|(a, b)| a == b)
            .count();
        while prefix > 0 && value[prefix - 1].is_ascii_alphanumeric() {
            prefix -= 1;
        }
        let room = value.len().min(self.len).saturating_sub(prefix);
        let mut suffix = self
            .tail
            .iter()
            .rev()
            .zip(value.iter().rev())
            .take(room)
            .take_while(|(a, b)| a == b)
            .count();
        while suffix > 0 && value[value.len() - suffix].is_ascii_alphanumeric() {
            suffix -= 1;
        }
        let keep = self.joined.len().saturating_sub(suffix.min(self.last_part));
        (keep, prefix)
    }

    /// The kept parts followed by the first `window` bytes of the new part:
    /// where a secret that crosses into `value` would show.
    fn probe(&self, value: &[u8], keep: usize, prefix: usize, window: usize) -> Zeroizing<Vec<u8>> {
        let part = value.get(prefix..).unwrap_or_default();
        let mut probe = Zeroizing::new(Vec::with_capacity(keep + window));
        probe.extend_from_slice(&self.joined[..keep]);
        probe.extend_from_slice(&part[..part.len().min(window)]);
        probe
    }

    fn commit(&mut self, value: &[u8], keep: usize, prefix: usize, window: usize) {
        let part = value.get(prefix..).unwrap_or_default();
        let mut joined = Zeroizing::new(Vec::with_capacity(window));
        if part.len() < window {
            let from = (keep + part.len()).saturating_sub(window);
            joined.extend_from_slice(&self.joined[from.min(keep)..keep]);
        }
        joined.extend_from_slice(&part[part.len().saturating_sub(window)..]);
        self.last_part = part.len().min(window);
        self.joined = joined;
        self.head = Zeroizing::new(value[..value.len().min(KEPT_EDGE)].to_vec());
        self.tail = Zeroizing::new(value[value.len().saturating_sub(KEPT_EDGE)..].to_vec());
        self.len = value.len();
    }
}

/// The places of a request that the window follows, with their values.
fn window_parts(url: &Url, headers: &HeaderMap, body: &[u8]) -> Vec<(String, Zeroizing<Vec<u8>>)> {
    let mut parts = vec![(
        "the URL path".to_string(),
        Zeroizing::new(url.path().as_bytes().to_vec()),
    )];
    if let Some(q) = url.query() {
        parts.push((
            "the URL query".to_string(),
            Zeroizing::new(q.as_bytes().to_vec()),
        ));
        let mut values = Zeroizing::new(Vec::new());
        for (k, v) in url.query_pairs() {
            values.extend_from_slice(if v.is_empty() {
                k.as_bytes()
            } else {
                v.as_bytes()
            });
        }
        parts.push(("the URL query values".to_string(), values));
    }
    for name in headers.keys() {
        let mut joined = Zeroizing::new(Vec::new());
        for v in headers.get_all(name) {
            joined.extend_from_slice(v.as_bytes());
        }
        parts.push((format!("header {}", name.as_str()), joined));
    }
    if !body.is_empty() {
        parts.push(("the body".to_string(), Zeroizing::new(body.to_vec())));
    }
    parts
}

/// A header value holding a secret: validated (no CR/LF) and marked
/// sensitive so HTTP libraries keep it out of debug output.
fn sensitive(name: &HeaderName, value: &str) -> Result<HeaderValue, NetError> {
    let mut v = HeaderValue::from_str(value).map_err(|_| NetError::Credential {
        detail: format!(
            "the credential for header {name} contains characters a header cannot carry"
        ),
    })?;
    v.set_sensitive(true);
    Ok(v)
}
