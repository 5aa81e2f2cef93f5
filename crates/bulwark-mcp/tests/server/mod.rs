//! `BulwarkMcpServer` driven by rmcp's own client over an in-memory duplex,
//! with a fake `ToolHost` that counts what actually ran.

mod approvals;
mod calls;
mod hostile;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bulwark_mcp::server::{
    ApprovalQuestion, ApprovalReply, Approvals, BulwarkMcpServer, HostedResult, HostedTool,
    ServerLimits, ToolHost, serve_io,
};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::json;

/// A tool host whose tools say what happened: `echo` returns its
/// arguments, `guarded` asks for approval and runs only when approved,
/// `slow` sleeps (for floods).
#[derive(Default)]
pub struct FakeHost {
    /// How many times `guarded`'s effect ran.
    pub ran: AtomicUsize,
    /// Replies `guarded` got, by kind.
    pub denied: AtomicUsize,
    pub unavailable: AtomicUsize,
    active: AtomicUsize,
    pub max_active: AtomicUsize,
    /// Extra tools listed (pagination).
    pub extra_tools: usize,
}

impl FakeHost {
    pub fn with_extra_tools(extra_tools: usize) -> Self {
        Self {
            extra_tools,
            ..Self::default()
        }
    }
}

fn tool(name: &str) -> HostedTool {
    HostedTool {
        name: name.into(),
        description: format!("the {name} tool"),
        input_schema: json!({"type": "object"}),
    }
}

#[async_trait::async_trait]
impl ToolHost for FakeHost {
    async fn tools(&self) -> Vec<HostedTool> {
        let mut tools = vec![tool("echo"), tool("guarded"), tool("slow")];
        tools.extend((0..self.extra_tools).map(|i| tool(&format!("extra_{i:04}"))));
        tools
    }

    async fn call(
        &self,
        name: &str,
        arguments: serde_json::Value,
        approvals: Arc<dyn Approvals>,
    ) -> HostedResult {
        match name {
            "echo" => HostedResult {
                content: arguments.to_string(),
                is_error: false,
            },
            "guarded" => {
                let question = ApprovalQuestion {
                    tool: "guarded".into(),
                    why: "policy: [approval] guarded".into(),
                    args_preview: arguments.to_string(),
                };
                match approvals.ask(question).await {
                    ApprovalReply::Approve => {
                        self.ran.fetch_add(1, Ordering::SeqCst);
                        HostedResult {
                            content: "ran".into(),
                            is_error: false,
                        }
                    }
                    ApprovalReply::Deny => {
                        self.denied.fetch_add(1, Ordering::SeqCst);
                        HostedResult {
                            content: "denied by the person asked".into(),
                            is_error: true,
                        }
                    }
                    ApprovalReply::Unavailable => {
                        self.unavailable.fetch_add(1, Ordering::SeqCst);
                        HostedResult {
                            content: "refused: approval unavailable".into(),
                            is_error: true,
                        }
                    }
                }
            }
            "slow" => {
                let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
                self.max_active.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                self.active.fetch_sub(1, Ordering::SeqCst);
                HostedResult {
                    content: "slept".into(),
                    is_error: false,
                }
            }
            other => HostedResult {
                content: format!("no tool `{other}`"),
                is_error: true,
            },
        }
    }
}

/// How the test client answers an approval form.
#[derive(Clone, Copy)]
pub enum Answer {
    Approve,
    /// Accepts the form with `approve: false`.
    False,
    Decline,
    Cancel,
}

/// An MCP client: with `answer`, it declares form elicitation and answers
/// every form so; without, it declares nothing.
pub struct TestClient {
    pub answer: Option<Answer>,
    pub asked: Arc<AtomicUsize>,
}

impl TestClient {
    pub fn answering(answer: Answer) -> Self {
        Self {
            answer: Some(answer),
            asked: Arc::default(),
        }
    }
    pub fn mute() -> Self {
        Self {
            answer: None,
            asked: Arc::default(),
        }
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.answer.is_some() {
            ClientCapabilities::builder().enable_elicitation().build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(capabilities, Implementation::new("bulwark-test", "0"))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            assert!(
                message.contains("guarded"),
                "the form names the tool: {message}"
            );
            assert!(message.contains("Why:"), "the form says why: {message}");
        }
        Ok(match self.answer {
            Some(Answer::Approve) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true}))
            }
            Some(Answer::False) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": false}))
            }
            Some(Answer::Decline) => ElicitResult::new(ElicitationAction::Decline),
            Some(Answer::Cancel) | None => ElicitResult::new(ElicitationAction::Cancel),
        })
    }
}

/// Which lifecycle the client speaks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `initialize`, server-initiated elicitation.
    Legacy,
    /// `server/discover`, per-request `_meta`, MRTR.
    Modern,
}

pub type Client = RunningService<RoleClient, TestClient>;

/// Starts a server over `host` and connects `client` to it.
pub async fn connect(
    host: Arc<FakeHost>,
    client: TestClient,
    version: Version,
    limits: ServerLimits,
) -> (Client, BulwarkMcpServer) {
    let (server_end, client_end) = tokio::io::duplex(256 * 1024);
    let (read, write) = tokio::io::split(server_end);
    let server = BulwarkMcpServer::with_limits(host, limits);
    tokio::spawn(serve_io(server.clone(), read, write, limits));
    let client = match version {
        Version::Legacy => client
            .serve(client_end)
            .await
            .expect("legacy client connects"),
        Version::Modern => client
            .serve_with_lifecycle(
                client_end,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .expect("2026-07-28 client connects"),
    };
    (client, server)
}

/// The text of a call's first content block.
pub fn text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}
