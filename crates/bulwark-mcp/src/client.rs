//! A bounded MCP client for one server.
//!
//! The protocol (versions, discovery, JSON-RPC correlation, cancellation)
//! is rmcp's; this module adds what Bulwark needs around it: the server
//! process (sandboxed or not) and its lifetime, a stdio transport that
//! fails on an oversized or malformed message instead of skipping it
//! ([`stdio`]), Streamable HTTP through `SafeHttp` ([`crate::http_transport`]),
//! timeouts on every wait, a bound on tool lists and results, and a client
//! that declares no capabilities and refuses every server-initiated request
//! (a server never drives the model or the user).

mod outcome;
mod process;
pub(crate) mod stdio;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    ClientResult, ErrorCode, ErrorData, Implementation, ListToolsRequest, PaginatedRequestParams,
    ProtocolVersion, ServerNotification, ServerRequest, ServerResult,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestContext, RunningService, ServiceError,
};
use rmcp::transport::Transport;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient, Service};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::McpError;
use process::{ServerProcess, UnconfinedChild};
use stdio::{Fault, FaultKind, StdioTransport};

/// Most `tools/list` pages followed, whatever the cursors say.
pub const MAX_LIST_PAGES: usize = 64;
/// Characters of a server's error message kept.
const SERVER_DETAIL_CHARS: usize = 300;

/// How to reach a server.
#[expect(
    clippy::large_enum_variant,
    reason = "built once per connection and consumed by it; boxing the spec would only change the contract"
)]
pub enum Launch {
    /// A stdio server in the process sandbox: the helper binary and the
    /// spec (argv, workspace, cleared environment with only granted keys,
    /// limits, `egress_proxy` socket when the server has hosts).
    Sandboxed {
        helper: PathBuf,
        spec: bulwark_sandbox::SandboxSpec,
    },
    /// A stdio server without the process sandbox (config.toml turned it
    /// off): still a cleared environment, its own process group, killed
    /// with the connection.
    Unconfined {
        argv: Vec<String>,
        cwd: PathBuf,
        env: Vec<(String, String)>,
    },
    /// A Streamable HTTP server, reached only through `http` (allowlist,
    /// address checks, credential injection, exfiltration guard).
    Http {
        url: String,
        http: Arc<bulwark_net::SafeHttp>,
        /// Who the requests are for (`mcp:<name>`), for credential grants.
        context: bulwark_net::CallContext,
    },
}

/// Bounds on one connection.
#[derive(Debug, Clone, Copy)]
pub struct ClientLimits {
    /// Start-up (process start, discovery or initialize).
    pub connect_timeout: Duration,
    /// One request.
    pub call_timeout: Duration,
    /// Largest JSON-RPC message accepted from the server, and largest
    /// [`CallOutcome::text`].
    pub max_message_bytes: usize,
    /// Most tools a server may list.
    pub max_tools: usize,
}

impl Default for ClientLimits {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            max_message_bytes: 4 * 1024 * 1024,
            max_tools: 256,
        }
    }
}

/// A tool as the server lists it now.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveTool {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// What one call returned.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// The result's content as text: text blocks joined, other blocks
    /// summarized (`[image: image/png, 1234 bytes]`), structured content as
    /// JSON. Bounded by the connection's message limit.
    pub text: String,
    /// The server marked the result as a tool error.
    pub is_error: bool,
}

/// The client side of the session: declares no capabilities (no sampling,
/// elicitation or roots) and refuses every request a server sends, so a
/// server can neither prompt the model nor ask the user anything.
#[derive(Debug, Clone, Copy, Default)]
struct RefusingClient;

impl Service<RoleClient> for RefusingClient {
    async fn handle_request(
        &self,
        request: ServerRequest,
        _context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        match request {
            ServerRequest::PingRequest(_) => Ok(ClientResult::empty(())),
            _ => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "this client answers no server-initiated requests",
                None,
            )),
        }
    }

    async fn handle_notification(
        &self,
        _notification: ServerNotification,
        _context: NotificationContext<RoleClient>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("bulwark", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// One live connection. Dropping it closes the transport and, for stdio,
/// kills the server's process group.
pub struct McpClient {
    server: String,
    limits: ClientLimits,
    protocol_version: String,
    service: RunningService<RoleClient, RefusingClient>,
    fault: Arc<Fault>,
    process: ServerProcess,
}

impl McpClient {
    /// Starts or reaches server `server` and negotiates a version:
    /// 2026-07-28 (`server/discover`), falling back to 2025-11-25
    /// (`initialize`).
    pub async fn connect(
        server: &str,
        launch: Launch,
        limits: ClientLimits,
    ) -> Result<McpClient, McpError> {
        let launch_error = |detail: String| McpError::Launch {
            server: server.to_string(),
            detail,
        };
        match launch {
            Launch::Unconfined { argv, cwd, env } => {
                let (child, stdin, stdout) =
                    UnconfinedChild::spawn(&argv, &cwd, &env).map_err(|e| {
                        launch_error(format!(
                            "`{}` could not be run: {e}",
                            argv.first().map(String::as_str).unwrap_or_default()
                        ))
                    })?;
                let fault = Arc::new(Fault::default());
                let transport =
                    StdioTransport::new(stdout, stdin, limits.max_message_bytes, fault.clone());
                Self::start(
                    server,
                    transport,
                    limits,
                    fault,
                    ServerProcess::Unconfined(child),
                )
                .await
            }
            Launch::Sandboxed { helper, spec } => {
                let mut child = bulwark_sandbox::spawn_sandboxed(&helper, &spec)
                    .await
                    .map_err(|e| launch_error(format!("the sandbox refused to start it: {e}")))?;
                for warning in &child.warnings {
                    tracing::warn!(server, warning, "MCP server sandbox is incomplete");
                }
                let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                    return Err(launch_error(
                        "the sandbox did not hand over the server's stdin and stdout".into(),
                    ));
                };
                let fault = Arc::new(Fault::default());
                let transport =
                    StdioTransport::new(stdout, stdin, limits.max_message_bytes, fault.clone());
                Self::start(
                    server,
                    transport,
                    limits,
                    fault,
                    ServerProcess::Sandboxed(Box::new(child)),
                )
                .await
            }
            Launch::Http { url, http, context } => {
                let fault = Arc::new(Fault::default());
                let transport = crate::http_transport::transport(
                    &url,
                    http,
                    context,
                    limits.max_message_bytes,
                    fault.clone(),
                )
                .map_err(launch_error)?;
                Self::start(server, transport, limits, fault, ServerProcess::None).await
            }
        }
    }

    /// Connects over an already open byte stream: a server in this process
    /// (tests, benchmarks, a server the caller started itself). Same bounds
    /// and version negotiation as [`McpClient::connect`].
    pub async fn connect_stream<R, W>(
        server: &str,
        read: R,
        write: W,
        limits: ClientLimits,
    ) -> Result<McpClient, McpError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let fault = Arc::new(Fault::default());
        let transport = StdioTransport::new(read, write, limits.max_message_bytes, fault.clone());
        Self::start(server, transport, limits, fault, ServerProcess::None).await
    }

    async fn start<T>(
        server: &str,
        transport: T,
        limits: ClientLimits,
        fault: Arc<Fault>,
        process: ServerProcess,
    ) -> Result<McpClient, McpError>
    where
        T: Transport<RoleClient> + 'static,
    {
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        let started = tokio::time::timeout(
            limits.connect_timeout,
            RefusingClient.serve_with_lifecycle(transport, lifecycle),
        )
        .await;
        let failure = match started {
            Ok(Ok(service)) => {
                let protocol_version = service
                    .peer_info()
                    .map(|info| info.protocol_version.as_str().to_string())
                    .unwrap_or_default();
                return Ok(McpClient {
                    server: server.to_string(),
                    limits,
                    protocol_version,
                    service,
                    fault,
                    process,
                });
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => {
                process.shutdown().await;
                return Err(McpError::Timeout {
                    server: server.to_string(),
                    seconds: limits.connect_timeout.as_secs(),
                });
            }
        };
        let tail = process.stderr_tail().await;
        process.shutdown().await;
        Err(match fault.get() {
            // Refused by the egress policy before the server said anything.
            Some(FaultKind::Http(detail)) => McpError::Launch {
                server: server.to_string(),
                detail,
            },
            Some(kind) => fault_error(server, kind, limits.max_message_bytes),
            None => McpError::Launch {
                server: server.to_string(),
                detail: with_tail(
                    format!(
                        "neither 2026-07-28 nor 2025-11-25 could be negotiated: {}",
                        clip(&failure)
                    ),
                    &tail,
                ),
            },
        })
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    /// The negotiated protocol version (`2026-07-28` or `2025-11-25`).
    pub fn protocol_version(&self) -> &str {
        &self.protocol_version
    }

    /// For a sandboxed stdio server in permissive mode, each confinement
    /// layer it started without (for the audit log); empty otherwise.
    pub fn sandbox_warnings(&self) -> &[String] {
        self.process.sandbox_warnings()
    }

    /// Every tool, following pagination up to `max_tools` and
    /// [`MAX_LIST_PAGES`] pages; a server that lists more, or a name twice,
    /// is an error (the operator learns of it instead of a silent cut).
    pub async fn list_tools(&self) -> Result<Vec<LiveTool>, McpError> {
        let mut tools: Vec<LiveTool> = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_LIST_PAGES {
            let params = PaginatedRequestParams::default().with_cursor(cursor.take());
            let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
            let page = match self.request(request).await? {
                ServerResult::ListToolsResult(page) => page,
                _ => return Err(self.protocol("tools/list was answered with another result")),
            };
            for tool in page.tools {
                if tools.len() >= self.limits.max_tools {
                    return Err(self.protocol(&format!(
                        "the server lists more than {} tools, the limit",
                        self.limits.max_tools
                    )));
                }
                if !names.insert(tool.name.to_string()) {
                    return Err(self.protocol(&format!(
                        "the server lists tool {:?} twice",
                        clip(&tool.name)
                    )));
                }
                tools.push(LiveTool {
                    name: tool.name.into_owned(),
                    description: tool.description.map(|d| d.into_owned()).unwrap_or_default(),
                    input_schema: serde_json::Value::Object(Arc::unwrap_or_clone(
                        tool.input_schema,
                    )),
                });
            }
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(tools),
            }
        }
        Err(self.protocol(&format!(
            "tools/list did not end within {MAX_LIST_PAGES} pages"
        )))
    }

    /// Calls `tool` with `arguments` (a JSON object) under the call timeout.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallOutcome, McpError> {
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        match self.request(request).await? {
            ServerResult::CallToolResult(result) => {
                Ok(outcome::render(result, self.limits.max_message_bytes))
            }
            ServerResult::EmptyResult(_) => Ok(CallOutcome {
                text: String::new(),
                is_error: false,
            }),
            ServerResult::InputRequiredResult(_) => Err(McpError::Server {
                server: self.server.clone(),
                detail: format!(
                    "tool {:?} asked for more input (input_required); MCP servers may not prompt through Bulwark",
                    clip(tool)
                ),
            }),
            ServerResult::CreateTaskResult(_) => Err(McpError::Server {
                server: self.server.clone(),
                detail: format!(
                    "tool {:?} answered with a task; Bulwark does not poll MCP tasks",
                    clip(tool)
                ),
            }),
            _ => Err(self.protocol("tools/call was answered with another result")),
        }
    }

    /// Closes the connection and stops the server.
    pub async fn close(self) {
        let McpClient {
            mut service,
            process,
            ..
        } = self;
        let _ = service.close_with_timeout(Duration::from_secs(2)).await;
        process.shutdown().await;
    }

    async fn request(&self, request: ClientRequest) -> Result<ServerResult, McpError> {
        let options = PeerRequestOptions::with_timeout(self.limits.call_timeout);
        let handle = self
            .service
            .peer()
            .send_cancellable_request(request, options)
            .await;
        let response = match handle {
            Ok(handle) => handle.await_response().await,
            Err(e) => Err(e),
        };
        match response {
            Ok(result) => Ok(result),
            Err(e) => Err(self.service_error(e).await),
        }
    }

    fn protocol(&self, detail: &str) -> McpError {
        McpError::Protocol {
            server: self.server.clone(),
            detail: detail.to_string(),
        }
    }

    /// What a failed request means, the transport's recorded fault first
    /// (a closed stream is the symptom, the oversized line the cause).
    async fn service_error(&self, error: ServiceError) -> McpError {
        let server = self.server.clone();
        if let Some(kind) = self.fault.get() {
            return fault_error(&server, kind, self.limits.max_message_bytes);
        }
        match error {
            ServiceError::McpError(data) => McpError::Server {
                server,
                detail: format!("{} (code {})", clip(&data.message), data.code.0),
            },
            ServiceError::Timeout { timeout } => McpError::Timeout {
                server,
                seconds: timeout.as_secs(),
            },
            ServiceError::UnexpectedResponse => McpError::Protocol {
                server,
                detail: "the answer does not fit the request".into(),
            },
            ServiceError::TransportClosed => McpError::Closed {
                server,
                detail: with_tail(String::new(), &self.process.stderr_tail().await),
            },
            ServiceError::TransportSend(e) => McpError::Closed {
                server,
                detail: with_tail(
                    format!(": {}", clip(&e.to_string())),
                    &self.process.stderr_tail().await,
                ),
            },
            other => McpError::Protocol {
                server,
                detail: clip(&other.to_string()),
            },
        }
    }
}

fn fault_error(server: &str, kind: FaultKind, limit: usize) -> McpError {
    let server = server.to_string();
    match kind {
        FaultKind::TooLarge => McpError::TooLarge { server, limit },
        FaultKind::Malformed(detail) => McpError::Protocol { server, detail },
        FaultKind::Http(detail) => McpError::Closed {
            server,
            detail: format!(": {detail}"),
        },
    }
}

/// `detail` and, when the server wrote any, its stderr's last lines.
fn with_tail(detail: String, tail: &str) -> String {
    match (detail.is_empty(), tail.is_empty()) {
        (_, true) => detail,
        (true, false) => format!("; its stderr ended with: {tail}"),
        (false, false) => format!("{detail}; its stderr ended with: {tail}"),
    }
}

/// At most [`SERVER_DETAIL_CHARS`] characters of server-supplied text.
fn clip(text: &str) -> String {
    match text.char_indices().nth(SERVER_DETAIL_CHARS) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}
