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
use std::sync::Arc;

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
        })
    }

    /// Only the exfiltration guard: no grants, nothing injectable (for
    /// clients whose callers must never carry credentials).
    pub fn guard_only(store: Arc<SecretStore>) -> Credentials {
        Credentials {
            grants: Vec::new(),
            store,
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
    /// any injection) carries a known secret value.
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
