//! Open TCP connections: how many, from where, and which may be closed to
//! make room (slowloris and connection floods).
//!
//! A connection is *pending* from accept until one of its requests
//! authenticated or asked for `/health`; then it is *promoted*. Pending
//! connections have their own cap ([`ConnectionLimits::max_pending`]),
//! below the global one, so the difference is headroom only signed-in
//! users and health checks can use. When the pending pool (or the whole
//! table) is full, the *oldest pending* connection is closed rather than
//! the newcomer refused: a flood of half-open connections then pushes out
//! its own oldest members, and a legitimate client that connects and sends
//! its request at once always gets a slot. Each address may hold at most
//! [`ConnectionLimits::per_address`] connections; beyond that a new one is
//! closed at once (a trusted proxy is exempt: it carries many clients).
//!
//! A pending connection that never completes its headers is closed after
//! [`ConnectionLimits::header_timeout`] by hyper; eviction only bounds how
//! many can be held in the meantime.

use crate::config::ConnectionLimits;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// Why a new connection was closed at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its address already holds [`ConnectionLimits::per_address`].
    PerAddress,
    /// The table is full of promoted connections: nothing may be evicted.
    Full,
}

#[derive(Default)]
struct Table {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
    /// Pending connections by age (ids increase), each with its eviction
    /// signal.
    pending: BTreeMap<u64, Arc<Notify>>,
    next_id: u64,
}

struct Shared {
    limits: ConnectionLimits,
    table: Mutex<Table>,
    evicted: AtomicU64,
    refused: AtomicU64,
}

/// Every open connection of one server. Cheap to clone.
#[derive(Clone)]
pub struct ConnTracker(Arc<Shared>);

/// Counts of the connection table, for tests and `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConnStats {
    pub open: usize,
    pub pending: usize,
    /// Pending connections closed to make room, since start.
    pub evicted: u64,
    /// New connections closed at once (per-address cap or full table).
    pub refused: u64,
}

fn lock(m: &Mutex<Table>) -> MutexGuard<'_, Table> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ConnTracker {
    pub fn new(limits: ConnectionLimits) -> Self {
        let max = limits.max.max(1);
        let limits = ConnectionLimits {
            max,
            // At least a quarter of the table stays headroom.
            max_pending: limits.max_pending.clamp(1, (max - max / 4).max(1)),
            per_address: limits.per_address.max(1),
            ..limits
        };
        ConnTracker(Arc::new(Shared {
            limits,
            table: Mutex::new(Table::default()),
            evicted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }))
    }

    /// Takes a slot for a new connection from `ip` (`exempt`: a trusted
    /// proxy, not held to the per-address cap), closing the oldest pending
    /// connection when the pending pool or the table is full.
    pub fn admit(&self, ip: IpAddr, exempt: bool) -> Result<Arc<ConnEntry>, Refused> {
        let limits = self.0.limits;
        let mut t = lock(&self.0.table);
        let from_ip = t.per_ip.get(&ip).copied().unwrap_or(0);
        if !exempt && from_ip >= limits.per_address {
            self.0.refused.fetch_add(1, Relaxed);
            return Err(Refused::PerAddress);
        }
        if t.pending.len() >= limits.max_pending || t.total >= limits.max {
            match t.pending.pop_first() {
                Some((_, victim)) => {
                    victim.notify_one();
                    self.0.evicted.fetch_add(1, Relaxed);
                }
                None => {
                    self.0.refused.fetch_add(1, Relaxed);
                    return Err(Refused::Full);
                }
            }
        }
        t.next_id += 1;
        let id = t.next_id;
        let evict = Arc::new(Notify::new());
        t.pending.insert(id, evict.clone());
        t.total += 1;
        *t.per_ip.entry(ip).or_insert(0) += 1;
        Ok(Arc::new(ConnEntry {
            id,
            ip,
            evict,
            shared: self.0.clone(),
        }))
    }

    pub fn stats(&self) -> ConnStats {
        let t = lock(&self.0.table);
        ConnStats {
            open: t.total,
            pending: t.pending.len(),
            evicted: self.0.evicted.load(Relaxed),
            refused: self.0.refused.load(Relaxed),
        }
    }
}

/// One open connection's slot, released when the last holder drops it
/// (the connection task, and a WebSocket for as long as it is open).
pub struct ConnEntry {
    id: u64,
    ip: IpAddr,
    evict: Arc<Notify>,
    shared: Arc<Shared>,
}

impl ConnEntry {
    /// The connection proved itself (a request authenticated, or asked
    /// for `/health`): it can no longer be evicted.
    pub fn promote(&self) {
        lock(&self.shared.table).pending.remove(&self.id);
    }

    pub fn is_pending(&self) -> bool {
        lock(&self.shared.table).pending.contains_key(&self.id)
    }

    /// Completes when the connection was chosen to make room.
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl Drop for ConnEntry {
    fn drop(&mut self) {
        let mut t = lock(&self.shared.table);
        t.pending.remove(&self.id);
        t.total = t.total.saturating_sub(1);
        if let Some(n) = t.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                t.per_ip.remove(&self.ip);
            }
        }
    }
}

/// The connection a request came on, in its extensions (absent when the
/// router is called without [`crate::serve_on`], as tests do).
#[derive(Clone)]
pub struct ConnHandle(pub Arc<ConnEntry>);

/// The request's connection, as an extractor (`None` without one).
pub struct Conn(pub Option<ConnHandle>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Conn {
    type Rejection = std::convert::Infallible;
    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Conn(parts.extensions.get::<ConnHandle>().cloned()))
    }
}

/// Promotes the request's connection, if it has one.
pub(crate) fn promote(extensions: &axum::http::Extensions) {
    if let Some(ConnHandle(c)) = extensions.get::<ConnHandle>() {
        c.promote();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(max: usize, max_pending: usize, per_address: usize) -> ConnectionLimits {
        ConnectionLimits {
            max,
            max_pending,
            per_address,
            header_timeout: Duration::from_secs(1),
            body_timeout: Duration::from_secs(1),
        }
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[tokio::test]
    async fn a_full_pending_pool_evicts_its_oldest_member() {
        let t = ConnTracker::new(limits(10, 3, 10));
        let a = t.admit(ip(1), false).unwrap();
        let b = t.admit(ip(1), false).unwrap();
        let c = t.admit(ip(1), false).unwrap();
        let d = t.admit(ip(2), false).unwrap();
        // `a` was the oldest: its signal fired, the others are still pending.
        tokio::time::timeout(Duration::from_secs(1), a.evicted())
            .await
            .expect("the oldest pending connection is evicted");
        assert!(!a.is_pending() && b.is_pending() && c.is_pending() && d.is_pending());
        drop(a);
        assert_eq!(t.stats().open, 3);
        assert_eq!(t.stats().evicted, 1);
    }

    #[tokio::test]
    async fn promoted_connections_are_never_evicted_and_keep_headroom() {
        let t = ConnTracker::new(limits(4, 2, 10));
        let users: Vec<_> = (0..2).map(|_| t.admit(ip(1), false).unwrap()).collect();
        for u in &users {
            u.promote();
        }
        let p1 = t.admit(ip(2), false).unwrap();
        let _p2 = t.admit(ip(2), false).unwrap();
        // Table full (2 promoted + 2 pending): a newcomer evicts a pending one.
        let _p3 = t.admit(ip(3), false).unwrap();
        tokio::time::timeout(Duration::from_secs(1), p1.evicted())
            .await
            .expect("a pending connection made room");
        assert!(users.iter().all(|u| !u.is_pending()));
        // Only promoted connections: nothing to evict, the newcomer is refused.
        let t = ConnTracker::new(limits(2, 2, 10));
        let x = t.admit(ip(1), false).unwrap();
        let y = t.admit(ip(1), false).unwrap();
        x.promote();
        y.promote();
        assert_eq!(t.admit(ip(2), false).err(), Some(Refused::Full));
    }

    #[test]
    fn the_per_address_cap_refuses_the_newcomer_but_not_other_addresses() {
        let t = ConnTracker::new(limits(100, 100, 2));
        let _a = t.admit(ip(1), false).unwrap();
        let b = t.admit(ip(1), false).unwrap();
        assert_eq!(t.admit(ip(1), false).err(), Some(Refused::PerAddress));
        assert!(t.admit(ip(2), false).is_ok(), "another address is served");
        assert!(t.admit(ip(1), true).is_ok(), "a trusted proxy is exempt");
        drop(b);
        assert!(t.admit(ip(1), false).is_ok(), "a closed slot is free again");
    }
}
