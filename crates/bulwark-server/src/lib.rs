//! `bulwark serve`: agents for many users over HTTP and WebSocket.
//!
//! Each conversation runs behind a [`Backend`] (in production one
//! `bulwark worker` process per conversation); this crate is the surface in
//! front of it: who may connect ([`auth`], tokens from `access.toml`), from
//! where ([`host`]: Host and Origin allowlists), how much ([`limits`]),
//! with which response headers ([`headers`]), the REST and WebSocket
//! vocabulary ([`rest`], [`ws`]), MCP over Streamable HTTP at
//! `/mcp/{agent}` (`mcp`), the credits API ([`credits`]), and the
//! web page served at `/` (`web`). [`workers`] is the production backend's
//! engine: the supervisor of worker processes and the store broker that
//! answers them.
//!
//! To run it: build an [`AppState`] from a [`ServerConfig`], the home, the
//! store and a backend, then [`serve`] it with a shutdown future.
#![forbid(unsafe_code)]

pub mod access_edit;
mod app;
pub mod auth;
pub mod backend;
pub mod config;
pub mod conns;
pub mod credits;
pub mod error;
pub mod events;
pub mod headers;
mod health;
pub mod host;
pub mod limits;
pub mod listen;
mod mcp;
pub mod metrics;
mod openapi;
pub mod proxy;
pub mod rest;
pub mod revoke;
pub mod secret;
pub mod tokens;
mod web;
pub mod workers;
pub mod ws;

pub use access_edit::{AccessEditError, AccessEditor, Created, UserSummary};
pub use app::{Admin, AppState, Authed, ClientIp, router, serve, serve_on};
pub use auth::Principal;
pub use backend::{
    Backend, BackendError, BackendStats, Conversation, ConversationControl, OpenRequest,
};
pub use config::{ConnectionLimits, Costs, DEFAULT_BIND, HostPolicy, Limits, Rate, ServerConfig};
pub use error::{ApiError, ServerError};
pub use listen::{FdLimitError, check_fd_limit, raise_fd_limit};
pub use secret::{SECRET_FILE, SecretError, ServerSecret, secret_path};
pub use tokens::IssuedToken;
