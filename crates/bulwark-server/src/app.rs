//! The server's shared state, the router with its layers, and `serve`.
//!
//! Layers, outermost first: security headers (so every answer carries
//! them), the access log and counters, the gate (Host, query tokens, CORS
//! preflights, Origin, per-IP budget), the body limit, then the routes,
//! whose extractors authenticate.

use crate::auth::{AccessWatch, AuthFailure, Principal, TokenRef, credential};
use crate::backend::{Backend, Conversation};
use crate::config::{HostPolicy, ServerConfig};
use crate::conns::ConnTracker;
use crate::error::{ApiError, ServerError};
use crate::events::SecurityLog;
use crate::limits::Limiters;
use crate::metrics::Metrics;
use crate::ws::session::{Hub, LiveSession};
use axum::Router;
use axum::extract::{ConnectInfo, FromRequestParts, MatchedPath, Request, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use bulwark_kernel::Home;
use bulwark_store::{SessionRow, Store, StoreError};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How often rate-limiter state is swept.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// Everything the handlers share. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    config: ServerConfig,
    home: Home,
    store: Store,
    backend: Arc<dyn Backend>,
    auth: AccessWatch,
    /// The access snapshot this state was built with: what the first
    /// reload is compared with (see `watch_revocations`).
    first_auth: Arc<crate::auth::AuthSnapshot>,
    limiters: Arc<Limiters>,
    hub: Arc<Hub>,
    /// The tools-only workers behind `/mcp` (see [`crate::mcp`]).
    mcp: crate::mcp::McpWorkers,
    metrics: Metrics,
    conns: ConnTracker,
    events: SecurityLog,
    hosts: RwLock<Arc<HostPolicy>>,
    openapi: RwLock<Arc<String>>,
    started: Instant,
    shutdown: watch::Sender<bool>,
    tasks_started: AtomicBool,
}

impl AppState {
    /// State for a server over `home` (access.toml, agents) and `store`
    /// (`bulwark.db`), running conversations on `backend`. Reads
    /// access.toml and the server secret once now; [`serve`] keeps them
    /// current. Also caps the `log` crate's level at DEBUG: the WebSocket
    /// library logs frame payloads and handshakes at TRACE through it.
    pub fn new(config: ServerConfig, home: Home, store: Store, backend: Arc<dyn Backend>) -> Self {
        cap_frame_logging();
        let hosts = config.host_policy(config.bind);
        let limiters = Arc::new(Limiters::new(&config.limits));
        let (shutdown, _) = watch::channel(false);
        let conns = ConnTracker::new(config.limits.connections);
        let events = SecurityLog::new(
            Arc::new(store.audit_sink()),
            config.limits.auth_failure_window,
        );
        let auth = AccessWatch::new(home.clone());
        AppState(Arc::new(Inner {
            first_auth: auth.current(),
            auth,
            conns,
            events,
            config,
            home,
            store,
            backend,
            limiters,
            hub: Arc::new(Hub::default()),
            mcp: crate::mcp::McpWorkers::default(),
            metrics: Metrics::default(),
            hosts: RwLock::new(Arc::new(hosts)),
            openapi: RwLock::new(Arc::new(String::new())),
            started: Instant::now(),
            shutdown,
            tasks_started: AtomicBool::new(false),
        }))
    }

    pub fn config(&self) -> &ServerConfig {
        &self.0.config
    }

    pub fn home(&self) -> &Home {
        &self.0.home
    }

    pub fn store(&self) -> &Store {
        &self.0.store
    }

    pub(crate) fn backend(&self) -> &Arc<dyn Backend> {
        &self.0.backend
    }

    pub(crate) fn auth_watch(&self) -> &AccessWatch {
        &self.0.auth
    }

    pub(crate) fn limiters(&self) -> &Arc<Limiters> {
        &self.0.limiters
    }

    pub(crate) fn hub(&self) -> &Arc<Hub> {
        &self.0.hub
    }

    pub(crate) fn mcp_workers(&self) -> &crate::mcp::McpWorkers {
        &self.0.mcp
    }

    /// Tools-only workers (`/mcp`) registered now, all users.
    pub fn mcp_workers_open(&self) -> usize {
        self.0.mcp.len()
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }

    /// The open TCP connections (see [`crate::conns`]).
    pub fn conns(&self) -> &ConnTracker {
        &self.0.conns
    }

    /// Writes the aggregated failed sign-ins now, whether or not their
    /// window ended (the server does it every window, and at shutdown).
    /// Blocking.
    pub fn flush_security_events(&self) {
        self.0.events.flush_failures(true);
    }

    pub(crate) fn uptime(&self) -> Duration {
        self.0.started.elapsed()
    }

    pub(crate) fn host_policy(&self) -> Arc<HostPolicy> {
        self.0
            .hosts
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Recomputes the default Host/Origin allowlists for the address
    /// actually bound (its port may have been 0).
    pub fn set_bound_addr(&self, bound: SocketAddr) {
        let policy = Arc::new(self.0.config.host_policy(bound));
        *self.0.hosts.write().unwrap_or_else(|p| p.into_inner()) = policy;
    }

    pub(crate) fn openapi_json(&self) -> Arc<String> {
        self.0
            .openapi
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Re-reads access.toml and the server secret now; `true` when they
    /// changed. (The server also does this on its own every poll interval.)
    pub fn reload_access(&self) -> bool {
        self.0.auth.reload()
    }

    /// Tells every WebSocket and conversation to finish.
    pub fn shutdown(&self) {
        self.0.shutdown.send_replace(true);
    }

    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.0.shutdown.subscribe()
    }

    /// Starts the access.toml poll and the limiter sweep (once). Needs a
    /// Tokio runtime; [`serve`] calls it.
    pub fn start_background_tasks(&self) {
        if self.0.tasks_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak = Arc::downgrade(&self.0);
        let mut stop = self.shutdown_signal();
        let poll = self.0.config.limits.access_poll;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(poll);
            let mut last_sweep = Instant::now();
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped(&mut stop) => break,
                }
                let Some(inner) = weak.upgrade() else { break };
                let state = AppState(inner);
                let sweep = last_sweep.elapsed() >= SWEEP_EVERY;
                if sweep {
                    last_sweep = Instant::now();
                }
                let _ = tokio::task::spawn_blocking(move || {
                    state.reload_access();
                    state.0.events.flush_failures(false);
                    if sweep {
                        let snap = state.0.auth.current();
                        state.0.limiters.sweep(|u| snap.user(u).is_some());
                    }
                })
                .await;
            }
        });
        self.watch_revocations();
    }

    /// Audits every published access.toml version and, when one removes
    /// or replaces a user's tokens (revoke, rotate, the user deleted),
    /// stops that user's running conversations at once: their turns, the
    /// messages queued behind them and their tool processes end with the
    /// worker, instead of running on through the detach grace. Versions
    /// that do not parse are compared later: the next good version is
    /// compared with the last good one, so nothing revoked in between is
    /// missed.
    fn watch_revocations(&self) {
        let weak = Arc::downgrade(&self.0);
        let mut rx = self.0.auth.subscribe();
        let mut last_good = self.0.first_auth.clone();
        if rx.borrow().generation != last_good.generation {
            // Changed between `new` and now: handle it first.
            rx.mark_changed();
        }
        let mut stop = self.shutdown_signal();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = rx.changed() => if changed.is_err() { break },
                    _ = stopped(&mut stop) => break,
                }
                let Some(inner) = weak.upgrade() else { break };
                let state = AppState(inner);
                let snap = rx.borrow_and_update().clone();
                let mut stopped_by_user = Vec::new();
                if snap.problem.is_none() {
                    for (user, why) in crate::revoke::revoked_users(&last_good, &snap) {
                        // Dropped from the pool, their MCP workers are killed.
                        state.mcp_workers().stop_user(&user);
                        let sessions = crate::revoke::stop_user(state.hub(), &user, &snap);
                        if !sessions.is_empty() {
                            tracing::warn!(%user, why, conversations = sessions.len(), "tokens revoked: running conversations stopped");
                            stopped_by_user.push((user, why, sessions));
                        }
                    }
                    last_good = snap.clone();
                }
                let audit = state.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    let events = &audit.0.events;
                    events.config_reload(
                        snap.generation,
                        snap.access.users.len(),
                        snap.problem.as_deref(),
                    );
                    for (user, why, sessions) in stopped_by_user {
                        events.revocation(&user, why, &sessions);
                    }
                })
                .await;
            }
        });
    }

    /// The caller of a request, or why not. A token that verifies always
    /// authenticates: the failure throttle is not consulted for it (tokens
    /// are 256-bit, so what the throttle limits is guessing, and other
    /// clients' failures from a shared address or network must not lock a
    /// valid user out). Failed attempts count against the client's network
    /// and a global budget; once either is spent, every attempt that does
    /// not authenticate gets 429, a wrong token included, so the answer
    /// tells a throttled guesser nothing about a wrong guess.
    pub(crate) fn authenticate(
        &self,
        headers: &HeaderMap,
        ip: IpAddr,
    ) -> Result<Principal, ApiError> {
        let snap = self.0.auth.current();
        match credential(headers).and_then(|token| snap.verify(token)) {
            Ok(p) => Ok(p),
            Err(AuthFailure::Missing) => {
                if let Some(limited) = self.0.limiters.auth_blocked(ip) {
                    self.0.metrics.rate_limited();
                    return Err(too_many_failures(limited.retry_after_secs));
                }
                Err(ApiError::Unauthorized(
                    AuthFailure::Missing.message().into(),
                ))
            }
            Err(failure) => {
                self.0.metrics.auth_failures();
                self.0.events.auth_failed(ip);
                let blocked = self.0.limiters.auth_failed(ip);
                tracing::warn!(%ip, reason = ?failure, "authentication failed");
                if let Some(limited) = blocked {
                    self.0.metrics.rate_limited();
                    return Err(too_many_failures(limited.retry_after_secs));
                }
                Err(ApiError::Unauthorized(failure.message().into()))
            }
        }
    }

    /// `requests_per_minute` from the user's access.toml entry.
    fn user_rate(&self, user: &str) -> Option<u32> {
        self.0
            .auth
            .current()
            .user(user)
            .and_then(|u| u.limits)
            .and_then(|l| l.requests_per_minute)
    }

    /// `max_connections` from the user's access.toml entry.
    pub(crate) fn user_max_connections(&self, user: &str) -> Option<u32> {
        self.0
            .auth
            .current()
            .user(user)
            .and_then(|u| u.limits)
            .and_then(|l| l.max_connections)
    }

    pub(crate) fn charge_user(&self, p: &Principal, cost: u32) -> Result<(), ApiError> {
        self.0
            .limiters
            .charge_user(&p.user, self.user_rate(&p.user), cost)
            .map_err(|l| {
                self.0.metrics.rate_limited();
                ApiError::TooManyRequests {
                    message: "you are sending too many requests; slow down".into(),
                    retry_after_secs: l.retry_after_secs,
                }
            })
    }

    pub(crate) fn charge_ip(&self, ip: IpAddr, cost: u32) -> Result<(), ApiError> {
        self.0.limiters.charge_ip(ip, cost).map_err(|l| {
            self.0.metrics.rate_limited();
            ApiError::TooManyRequests {
                message: "too many requests from this address; slow down".into(),
                retry_after_secs: l.retry_after_secs,
            }
        })
    }

    /// Whether `user` may use `agent` now (access.toml, the agent's
    /// manifest). The refusal does not say whether the agent exists.
    pub(crate) async fn agent_allowed(&self, user: &str, agent: &str) -> Result<(), String> {
        let snap = self.0.auth.current();
        let refused = || format!("agent `{agent}` is not available to you");
        let entry = snap.user(user).cloned().ok_or_else(refused)?;
        let home = self.0.home.clone();
        let (u, a) = (user.to_owned(), agent.to_owned());
        let verdict = tokio::task::spawn_blocking(move || {
            let loaded = home.load_agent(&a).map_err(|e| e.to_string())?;
            bulwark_policy::user_may_use_agent(&loaded.manifest, &u, &entry)
        })
        .await
        .unwrap_or_else(|_| Err("agent check failed".into()));
        verdict.map_err(|why| {
            tracing::debug!(user, agent, %why, "agent refused");
            refused()
        })
    }

    /// A stored session, read off the async threads.
    pub(crate) async fn session_row(&self, id: &str) -> Result<Option<SessionRow>, StoreError> {
        let store = self.0.store.clone();
        let id = id.to_owned();
        tokio::task::spawn_blocking(move || store.session(&id))
            .await
            .unwrap_or(Err(StoreError::Poisoned))
    }

    /// Makes an opened conversation live and starts its pump; when the
    /// session turned out to be live already, ends the new one and returns
    /// the existing.
    pub(crate) fn register(
        &self,
        conversation: Conversation,
        user: &str,
        agent: &str,
        opened_with: Option<TokenRef>,
    ) -> Arc<LiveSession> {
        let limits = &self.0.config.limits;
        match self.0.hub.register(
            conversation,
            user,
            agent,
            opened_with,
            limits.replay_frames,
            limits.replay_bytes,
        ) {
            Ok((live, pump)) => {
                tokio::spawn(pump.run(
                    self.0.hub.clone(),
                    limits.ws_detached_grace,
                    self.shutdown_signal(),
                ));
                live
            }
            Err((existing, duplicate)) => {
                duplicate.control.kill();
                existing
            }
        }
    }
}

/// Completes once the shutdown flag is set (or its sender is gone).
pub(crate) async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// Caps the process-wide `log` crate level at DEBUG. The WebSocket library
/// logs every frame, payload included (message text), and handshake
/// requests (tokens) at TRACE through `log`; none of that may reach a log
/// whatever `BULWARK_LOG` says. Bulwark's own `tracing` events are not
/// affected. Called when server state is built and again when serving.
fn cap_frame_logging() {
    if log::max_level() > log::LevelFilter::Debug {
        log::set_max_level(log::LevelFilter::Debug);
    }
}

fn too_many_failures(retry_after_secs: u64) -> ApiError {
    ApiError::TooManyRequests {
        message: "too many failed sign-ins from this network; wait before trying again".into(),
        retry_after_secs,
    }
}

/// The client's address: the TCP peer, or what a trusted proxy says it
/// forwarded for (see [`crate::proxy`]). Unspecified when the server was
/// not started with connect info.
pub struct ClientIp(pub IpAddr);

fn ip_of(extensions: &axum::http::Extensions) -> IpAddr {
    if let Some(crate::listen::ClientAddr(ip)) = extensions.get() {
        return *ip;
    }
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

pub(crate) fn client_ip(request: &Request) -> IpAddr {
    ip_of(request.extensions())
}

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = Infallible;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        Ok(ClientIp(ip_of(&parts.extensions)))
    }
}

/// An authenticated caller, charged one REST read.
pub struct Authed(pub Principal);

impl FromRequestParts<AppState> for Authed {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let p = state.authenticate(&parts.headers, ip_of(&parts.extensions))?;
        crate::conns::promote(&parts.extensions);
        state.charge_user(&p, state.config().limits.costs.read)?;
        Ok(Authed(p))
    }
}

/// An authenticated admin.
pub struct Admin(pub Principal);

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Authed(p) = Authed::from_request_parts(parts, state).await?;
        if !p.is_admin() {
            return Err(ApiError::Forbidden(
                "admins only (role = \"admin\" in access.toml)".into(),
            ));
        }
        Ok(Admin(p))
    }
}

/// Counts responses and logs method, route template, status and time:
/// never the URI (a query may hold anything), headers or bodies.
async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "-".to_owned(), |m| m.as_str().to_owned());
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    state.0.metrics.response(status);
    tracing::info!(%method, route, status, ms = started.elapsed().as_millis() as u64, "request");
    response
}

async fn not_found() -> ApiError {
    ApiError::not_found()
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// The whole HTTP surface, for [`serve`] and for tests.
pub fn router(state: AppState) -> Router {
    let (routes, openapi) = crate::openapi::api_router().split_for_parts();
    let json = openapi.to_json().unwrap_or_else(|_| "{}".into());
    *state.0.openapi.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(json);
    let body_limit = state.config().limits.rest_body_bytes;
    routes
        .merge(crate::web::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(tower_http::limit::RequestBodyLimitLayer::new(body_limit))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            state.config().limits.connections.body_timeout,
        ))
        .layer(from_fn_with_state(state.clone(), crate::host::gate))
        .layer(from_fn_with_state(state.clone(), observe))
        .layer(from_fn_with_state(
            state.clone(),
            crate::headers::security_headers,
        ))
        .with_state(state)
}

/// Binds `config.bind` and serves until `shutdown` completes.
pub async fn serve(
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let addr = state.config().bind;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    serve_on(listener, state, shutdown).await
}

/// Serves on an already bound listener (tests bind port 0). When
/// `shutdown` completes: stop accepting, close WebSockets (1001), shut
/// every conversation down, and return once they ended (at most ~10 s).
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    cap_frame_logging();
    let bound = listener.local_addr()?;
    state.set_bound_addr(bound);
    state.start_background_tasks();
    tracing::info!(%bound, hosts = ?state.host_policy().hosts, "serving");
    let app = router(state.clone());
    crate::listen::accept_loop(listener, state.clone(), app, shutdown).await;
    state.shutdown();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !state.0.hub.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let events = state.clone();
    let _ = tokio::task::spawn_blocking(move || events.0.events.flush_failures(true)).await;
    Ok(())
}

impl IntoResponse for AuthFailure {
    fn into_response(self) -> Response {
        ApiError::Unauthorized(self.message().into()).into_response()
    }
}
