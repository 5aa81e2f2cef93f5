//! Name resolution for SafeHttp: one lookup per hop, every answer checked.
//!
//! The client never lets an HTTP stack resolve on its own: it asks a
//! [`Resolver`] once, checks *every* address of the answer against the
//! special-purpose table, and then dials exactly those addresses. There is
//! no second lookup between the check and the connect, so a rebinding DNS
//! server (public answer first, private answer second) has nothing to race.
//!
//! Production uses [`SystemResolver`] (hickory, with the system's
//! `resolv.conf` and hosts file); tests and `bulwark net check --resolve`
//! use [`StaticResolver`], which answers from a table and can play back a
//! sequence of answers per name to model rebinding.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Mutex, OnceLock};

use futures_util::future::BoxFuture;

/// Answers a host name with the addresses it resolves to. An error or an
/// empty answer fails the request closed.
pub trait Resolver: Send + Sync + std::fmt::Debug {
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, Result<Vec<IpAddr>, String>>;
}

/// The system's DNS configuration through hickory's stub resolver. Built on
/// first use so that constructing a client costs nothing when no name is
/// ever resolved (for instance `net check` with only IP literals).
#[derive(Debug, Default)]
pub struct SystemResolver {
    inner: OnceLock<Result<hickory_resolver::TokioResolver, String>>,
}

impl SystemResolver {
    pub fn new() -> Self {
        Self::default()
    }

    fn resolver(&self) -> Result<&hickory_resolver::TokioResolver, String> {
        self.inner
            .get_or_init(|| {
                hickory_resolver::TokioResolver::builder_tokio()
                    .map(|b| b.build())
                    .map_err(|e| {
                        format!(
                            "the system DNS configuration could not be read ({e}); \
                             check /etc/resolv.conf"
                        )
                    })
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl Resolver for SystemResolver {
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, Result<Vec<IpAddr>, String>> {
        Box::pin(async move {
            let resolver = self.resolver()?;
            let answer = resolver
                .lookup_ip(host)
                .await
                .map_err(|e| format!("DNS lookup failed: {e}"))?;
            Ok(answer.iter().collect())
        })
    }
}

/// The answers queued for one name, and how many lookups it has had.
type Queued = (Vec<Vec<IpAddr>>, usize);

/// Answers from a fixed table, for tests and offline what-if checks. A name
/// may have several answers queued: each lookup takes the next, and the last
/// one repeats. Unknown names fail to resolve.
#[derive(Debug, Default)]
pub struct StaticResolver {
    answers: Mutex<BTreeMap<String, Queued>>,
    lookups: Mutex<Vec<String>>,
}

impl StaticResolver {
    pub fn new() -> Self {
        Self::default()
    }

    /// `host` resolves to `addrs` (after any answers already queued).
    pub fn answer(&self, host: &str, addrs: Vec<IpAddr>) -> &Self {
        let key = normalize(host);
        if let Ok(mut map) = self.answers.lock() {
            map.entry(key).or_default().0.push(addrs);
        }
        self
    }

    /// Every name looked up so far, in order.
    pub fn lookups(&self) -> Vec<String> {
        self.lookups.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

fn normalize(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

impl Resolver for StaticResolver {
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, Result<Vec<IpAddr>, String>> {
        let key = normalize(host);
        if let Ok(mut l) = self.lookups.lock() {
            l.push(key.clone());
        }
        let answer = self.answers.lock().ok().and_then(|mut map| {
            let (queue, next) = map.get_mut(&key)?;
            let i = (*next).min(queue.len().checked_sub(1)?);
            *next += 1;
            queue.get(i).cloned()
        });
        Box::pin(async move { answer.ok_or_else(|| format!("{key} has no answer (NXDOMAIN)")) })
    }
}
