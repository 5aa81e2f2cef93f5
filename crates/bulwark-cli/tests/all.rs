//! The crate's one integration-test binary: each file beside this one is a
//! module of it (a binary per file linked the whole dependency tree again).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mock_provider;

mod access_cli;
mod anthropic_e2e;
mod approval_tty;
mod audit_cli;
mod chat;
mod config_errors;
mod credentials_check;
mod credits_cli;
mod credits_run;
mod eval_cli;
mod hardening;
mod mcp;
mod mcp_peers;
mod mcp_serve;
mod model_cli;
mod net_check;
mod offline_agent;
mod openai_e2e;
mod policy_explain;
mod run;
mod sandbox_e2e;
mod secret_leak;
mod secrets;
mod serve_e2e;
mod served_credits;
mod shell_credentials;
mod signed_agents;
mod surface;
mod web_e2e;
mod web_ui;
mod worker_confinement;
mod worker_process;
