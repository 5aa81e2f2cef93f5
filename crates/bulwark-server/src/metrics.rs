//! Counters for `/metrics` (Prometheus text format) and `/health/detail`.
//!
//! A handful of atomics, formatted by hand: no label carries anything a
//! client chose (no paths, users or agents), so the output cannot grow
//! with traffic or leak who uses what.

use crate::backend::BackendStats;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Debug, Default)]
pub struct Metrics {
    /// Responses by status class, 1xx..5xx.
    responses: [AtomicU64; 5],
    auth_failures: AtomicU64,
    rate_limited: AtomicU64,
    refused_host: AtomicU64,
    refused_origin: AtomicU64,
    ws_connections_total: AtomicU64,
    ws_frames_in: AtomicU64,
    ws_frame_errors: AtomicU64,
    ws_disconnected_revoked: AtomicU64,
    conversations_opened: AtomicU64,
    conversation_open_failures: AtomicU64,
    internal_errors: AtomicU64,
}

macro_rules! bump {
    ($($name:ident),*) => {
        $(pub fn $name(&self) { self.$name.fetch_add(1, Relaxed); })*
    };
}

impl Metrics {
    bump!(
        auth_failures,
        rate_limited,
        refused_host,
        refused_origin,
        ws_connections_total,
        ws_frames_in,
        ws_frame_errors,
        ws_disconnected_revoked,
        conversations_opened,
        conversation_open_failures,
        internal_errors
    );

    pub fn response(&self, status: u16) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.responses[class].fetch_add(1, Relaxed);
    }

    /// Server-side errors (5xx answers and internal failures) so far.
    pub fn errors(&self) -> u64 {
        self.responses[4].load(Relaxed) + self.internal_errors.load(Relaxed)
    }

    pub fn auth_failure_count(&self) -> u64 {
        self.auth_failures.load(Relaxed)
    }

    /// The Prometheus text exposition.
    pub fn render(
        &self,
        backend: &BackendStats,
        ws_open: u64,
        live_sessions: usize,
        uptime_secs: u64,
    ) -> String {
        let mut out = String::new();
        let mut counter = |name: &str, help: &str, value: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        };
        counter(
            "bulwark_auth_failures_total",
            "Refused credentials.",
            self.auth_failures.load(Relaxed),
        );
        counter(
            "bulwark_rate_limited_total",
            "Requests and frames refused by a rate limit.",
            self.rate_limited.load(Relaxed),
        );
        counter(
            "bulwark_refused_host_total",
            "Requests refused for their Host header.",
            self.refused_host.load(Relaxed),
        );
        counter(
            "bulwark_refused_origin_total",
            "Requests refused for their Origin header.",
            self.refused_origin.load(Relaxed),
        );
        counter(
            "bulwark_ws_connections_total",
            "WebSocket connections accepted.",
            self.ws_connections_total.load(Relaxed),
        );
        counter(
            "bulwark_ws_frames_total",
            "WebSocket frames received.",
            self.ws_frames_in.load(Relaxed),
        );
        counter(
            "bulwark_ws_frame_errors_total",
            "WebSocket frames answered with an error.",
            self.ws_frame_errors.load(Relaxed),
        );
        counter(
            "bulwark_ws_revoked_total",
            "WebSocket connections closed because their token stopped being valid.",
            self.ws_disconnected_revoked.load(Relaxed),
        );
        counter(
            "bulwark_conversations_opened_total",
            "Conversations opened or resumed.",
            self.conversations_opened.load(Relaxed),
        );
        counter(
            "bulwark_conversation_open_failures_total",
            "Conversations that could not be opened.",
            self.conversation_open_failures.load(Relaxed),
        );
        counter(
            "bulwark_worker_crashes_total",
            "Workers that died or broke the protocol.",
            backend.crashes,
        );
        let _ = writeln!(
            out,
            "# HELP bulwark_http_responses_total HTTP responses by status class.\n# TYPE bulwark_http_responses_total counter"
        );
        for (i, n) in self.responses.iter().enumerate() {
            let _ = writeln!(
                out,
                "bulwark_http_responses_total{{class=\"{}xx\"}} {}",
                i + 1,
                n.load(Relaxed)
            );
        }
        let mut gauge = |name: &str, help: &str, value: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
            );
        };
        gauge(
            "bulwark_workers",
            "Conversations running now.",
            backend.workers,
        );
        gauge(
            "bulwark_ws_connections",
            "Open WebSocket connections.",
            ws_open,
        );
        gauge(
            "bulwark_live_sessions",
            "Sessions with a live conversation in this server.",
            live_sessions as u64,
        );
        gauge(
            "bulwark_uptime_seconds",
            "Seconds since the server started.",
            uptime_secs,
        );
        out
    }
}
