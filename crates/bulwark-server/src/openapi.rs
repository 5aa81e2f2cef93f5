//! The OpenAPI 3.1 description, generated from the handlers and types the
//! router is built from (`utoipa`): every route is added to the router and
//! to the document by the same `routes!` call, so they cannot drift.

use crate::app::AppState;
use crate::{credits, health, mcp, rest, ws};
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Bulwark",
        description = "Agents for many users. Every route except /health needs `Authorization: Bearer <token>` (MCP clients too, at /mcp/{agent}) (WebSocket: the subprotocols `bulwark.v1, bearer.<token>`). Tokens in URLs are refused."
    ),
    components(schemas(
        ws::frames::ClientFrame,
        ws::frames::ServerFrame,
        ws::frames::WsErrorCode
    )),
    modifiers(&Bearer)
)]
struct ApiDoc;

struct Bearer;

impl utoipa::Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("A token from `bulwark access create USER`"))
                    .build(),
            ),
        );
    }
}

/// Every route of the API, each with its description.
pub(crate) fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health::health))
        .routes(routes!(health::detail))
        .routes(routes!(health::metrics))
        .routes(routes!(rest::list_agents))
        .routes(routes!(rest::list_sessions))
        .routes(routes!(rest::session_messages))
        .routes(routes!(rest::usage))
        .routes(routes!(rest::openapi))
        .routes(routes!(credits::credits))
        .routes(routes!(credits::transfer))
        .routes(routes!(credits::history))
        .routes(routes!(ws::handshake))
        .routes(routes!(mcp::endpoint))
}
