//! Rate limits (GCRA, `governor`), failed-authentication throttling and
//! WebSocket connection counts.
//!
//! Memory stays bounded: per-user limiters exist only for users in
//! access.toml (others never authenticate) and are dropped when a user
//! leaves it; the per-IP limiters forget every IP whose budget is full
//! again on each [`Limiters::sweep`] (the server runs it every 30 s); the
//! blocked-network table holds at most [`MAX_BLOCKED_IPS`] entries.
//!
//! Failed authentications count per network ([`failure_network`]: the /24
//! of an IPv4 address, the /64 of an IPv6 one), so an attacker cannot get
//! a fresh budget from each address of a block, and against one global
//! budget, so spreading failures over many networks does not help either.

use crate::config::{Limits, Rate};
use governor::clock::Clock;
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Most networks remembered as blocked for failed authentication at once.
pub const MAX_BLOCKED_IPS: usize = 65_536;

/// Over a limit: try again in this many seconds (at least 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    pub retry_after_secs: u64,
}

fn quota(rate: Rate) -> Quota {
    let per_minute = NonZeroU32::new(rate.per_minute.max(1)).unwrap_or(NonZeroU32::MIN);
    let burst = NonZeroU32::new(rate.burst.max(1)).unwrap_or(NonZeroU32::MIN);
    Quota::per_minute(per_minute).allow_burst(burst)
}

fn secs(wait: Duration) -> u64 {
    // Round up: "retry after 0 s" would invite an immediate retry.
    (wait.as_millis().div_ceil(1000) as u64).max(1)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere cannot leave these maps inconsistent (each update
    // is one insert or remove), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

type UserLimiter = (Quota, Arc<DefaultDirectRateLimiter>);

pub struct Limiters {
    limits: Limits,
    ip: DefaultKeyedRateLimiter<IpAddr>,
    users: Mutex<HashMap<String, UserLimiter>>,
    /// Failed authentications per [`failure_network`].
    auth_failures: DefaultKeyedRateLimiter<IpAddr>,
    /// Failed authentications from everywhere.
    auth_failures_global: DefaultDirectRateLimiter,
    /// Networks blocked, until when.
    blocked: Mutex<HashMap<IpAddr, Instant>>,
    /// Every failing attempt is refused until then.
    globally_blocked: Mutex<Option<Instant>>,
    connections: Mutex<HashMap<String, u32>>,
}

impl Limiters {
    pub fn new(limits: &Limits) -> Self {
        Self {
            limits: limits.clone(),
            ip: DefaultKeyedRateLimiter::dashmap(quota(limits.ip_rate)),
            users: Mutex::new(HashMap::new()),
            auth_failures: DefaultKeyedRateLimiter::dashmap(quota(limits.auth_failures)),
            auth_failures_global: DefaultDirectRateLimiter::direct(quota(
                limits.auth_failures_global,
            )),
            blocked: Mutex::new(HashMap::new()),
            globally_blocked: Mutex::new(None),
            connections: Mutex::new(HashMap::new()),
        }
    }

    /// Charges `cost` to the client address.
    pub fn charge_ip(&self, ip: IpAddr, cost: u32) -> Result<(), Limited> {
        let Some(n) = NonZeroU32::new(cost) else {
            return Ok(());
        };
        match self.ip.check_key_n(&ip, n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => Err(Limited {
                retry_after_secs: secs(not_until.wait_time_from(self.ip.clock().now())),
            }),
            Err(_) => Err(Limited {
                retry_after_secs: 60,
            }),
        }
    }

    /// Charges `cost` to `user`, whose budget is `per_minute` when
    /// access.toml sets one.
    pub fn charge_user(
        &self,
        user: &str,
        per_minute: Option<u32>,
        cost: u32,
    ) -> Result<(), Limited> {
        let Some(n) = NonZeroU32::new(cost) else {
            return Ok(());
        };
        let mut rate = self.limits.user_rate;
        if let Some(pm) = per_minute {
            rate.per_minute = pm;
            rate.burst = rate.burst.min(pm).max(1);
        }
        let q = quota(rate);
        let limiter = {
            let mut users = lock(&self.users);
            match users.get(user) {
                Some((existing, limiter)) if *existing == q => limiter.clone(),
                _ => {
                    let limiter = Arc::new(DefaultDirectRateLimiter::direct(q));
                    users.insert(user.to_owned(), (q, limiter.clone()));
                    limiter
                }
            }
        };
        match limiter.check_n(n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => Err(Limited {
                retry_after_secs: secs(not_until.wait_time_from(limiter.clock().now())),
            }),
            Err(_) => Err(Limited {
                retry_after_secs: 60,
            }),
        }
    }

    /// Whether attempts from `ip` that fail are refused (429): its
    /// network, or everyone, spent the failure budget. Consulted only for
    /// attempts that did not authenticate: a valid token always does.
    pub fn auth_blocked(&self, ip: IpAddr) -> Option<Limited> {
        let now = Instant::now();
        let net = failure_network(ip);
        let network_until = {
            let mut blocked = lock(&self.blocked);
            match blocked.get(&net) {
                Some(until) if *until > now => Some(*until),
                Some(_) => {
                    blocked.remove(&net);
                    None
                }
                None => None,
            }
        };
        let global_until = {
            let mut global = lock(&self.globally_blocked);
            match *global {
                Some(until) if until > now => Some(until),
                Some(_) => {
                    *global = None;
                    None
                }
                None => None,
            }
        };
        let until = network_until.max(global_until)?;
        Some(Limited {
            retry_after_secs: secs(until - now),
        })
    }

    /// Records a failed authentication from `ip` against its network's
    /// budget and, while that lasts, the global one; once either is spent,
    /// failing attempts are refused until it allows one more. Whether this
    /// attempt is refused (the same answer as [`Limiters::auth_blocked`]).
    pub fn auth_failed(&self, ip: IpAddr) -> Option<Limited> {
        let net = failure_network(ip);
        match self.auth_failures.check_key(&net) {
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.auth_failures.clock().now());
                let mut blocked = lock(&self.blocked);
                if blocked.len() >= MAX_BLOCKED_IPS {
                    let now = Instant::now();
                    blocked.retain(|_, until| *until > now);
                }
                if blocked.len() < MAX_BLOCKED_IPS {
                    blocked.insert(net, Instant::now() + wait.max(Duration::from_secs(1)));
                }
            }
            Ok(()) => {
                if let Err(not_until) = self.auth_failures_global.check() {
                    let wait = not_until.wait_time_from(self.auth_failures_global.clock().now());
                    let until = Instant::now() + wait.max(Duration::from_secs(1));
                    let mut global = lock(&self.globally_blocked);
                    *global = Some(global.map_or(until, |g| g.max(until)));
                }
            }
        }
        self.auth_blocked(ip)
    }

    /// Takes one of `user`'s WebSocket connection slots (`max` of them);
    /// `None` when all are in use. The slot is returned when the guard drops.
    pub fn acquire_connection(self: &Arc<Self>, user: &str, max: u32) -> Option<ConnectionSlot> {
        let mut conns = lock(&self.connections);
        let n = conns.entry(user.to_owned()).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(ConnectionSlot {
            limiters: self.clone(),
            user: user.to_owned(),
        })
    }

    /// Open WebSocket connections, per user.
    pub fn connections(&self) -> u64 {
        lock(&self.connections)
            .values()
            .map(|n| u64::from(*n))
            .sum()
    }

    /// Forgets state that no longer limits anything: IPs whose budgets are
    /// full again, expired blocks, users no longer in access.toml.
    pub fn sweep(&self, user_exists: impl Fn(&str) -> bool) {
        self.ip.retain_recent();
        self.ip.shrink_to_fit();
        self.auth_failures.retain_recent();
        self.auth_failures.shrink_to_fit();
        let now = Instant::now();
        lock(&self.blocked).retain(|_, until| *until > now);
        lock(&self.users).retain(|user, _| user_exists(user));
    }

    /// Sizes of the tracked state: (IPs, users, blocked IPs).
    pub fn tracked(&self) -> (usize, usize, usize) {
        (
            self.ip.len(),
            lock(&self.users).len(),
            lock(&self.blocked).len(),
        )
    }
}

/// The network an address's failed authentications count against: the /24
/// of an IPv4 address (an IPv4-mapped IPv6 address counts as IPv4), the /64
/// of an IPv6 one.
pub fn failure_network(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4_network(v4)),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4_network(v4)),
            None => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & !((1u128 << 64) - 1))),
        },
    }
}

fn v4_network(ip: Ipv4Addr) -> Ipv4Addr {
    Ipv4Addr::from_bits(ip.to_bits() & 0xffff_ff00)
}

/// One WebSocket connection slot of a user.
pub struct ConnectionSlot {
    limiters: Arc<Limiters>,
    user: String,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut conns = lock(&self.limiters.connections);
        if let Some(n) = conns.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                conns.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            ip_rate: Rate {
                per_minute: 60,
                burst: 5,
            },
            user_rate: Rate {
                per_minute: 60,
                burst: 10,
            },
            ..Limits::default()
        }
    }

    #[test]
    fn budgets_run_out_with_a_retry_time() {
        let l = Limiters::new(&limits());
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        for _ in 0..5 {
            l.charge_ip(ip, 1).unwrap();
        }
        let limited = l.charge_ip(ip, 1).unwrap_err();
        assert!(limited.retry_after_secs >= 1);
        // Another address has its own budget.
        l.charge_ip("127.0.0.2".parse().unwrap(), 1).unwrap();
        // A cost above the burst can never pass.
        assert!(l.charge_user("u", None, 11).is_err());
        l.charge_user("u", None, 10).unwrap();
        assert!(l.charge_user("u", None, 1).is_err());
        // A per-user override replaces the limiter.
        assert!(l.charge_user("u", Some(2), 2).is_ok());
    }

    #[test]
    fn failed_auth_blocks_after_budget_and_sweep_forgets() {
        let l = Limiters::new(&limits());
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..10 {
            assert!(l.auth_blocked(ip).is_none());
            l.auth_failed(ip);
        }
        assert!(l.auth_blocked(ip).is_none(), "ten failures are allowed");
        l.auth_failed(ip);
        assert!(l.auth_blocked(ip).is_some());
        l.charge_user("gone", None, 1).unwrap();
        l.sweep(|u| u != "gone");
        assert_eq!(l.tracked().1, 0);
    }

    #[test]
    fn failures_count_per_network() {
        let net = |s: &str| failure_network(s.parse().unwrap()).to_string();
        assert_eq!(net("192.0.2.77"), "192.0.2.0");
        assert_eq!(net("::ffff:192.0.2.77"), "192.0.2.0");
        assert_eq!(net("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::");
        let l = Limiters::new(&limits());
        for i in 1..=10 {
            assert!(
                l.auth_failed(format!("10.0.0.{i}").parse().unwrap())
                    .is_none()
            );
        }
        assert!(l.auth_failed("10.0.0.200".parse().unwrap()).is_some());
        assert!(l.auth_blocked("::ffff:10.0.0.9".parse().unwrap()).is_some());
        assert!(l.auth_blocked("10.0.1.1".parse().unwrap()).is_none());
    }

    #[test]
    fn connection_slots_are_returned() {
        let l = Arc::new(Limiters::new(&limits()));
        let a = l.acquire_connection("u", 2).unwrap();
        let _b = l.acquire_connection("u", 2).unwrap();
        assert!(l.acquire_connection("u", 2).is_none());
        drop(a);
        assert!(l.acquire_connection("u", 2).is_some());
        assert_eq!(l.connections(), 1);
    }
}
