//! The MCP client's own overhead: one `tools/call` round trip to an
//! in-process rmcp server over a duplex pipe (no process, no sandbox), and
//! the per-tool work of pinning (`tool_digest`, `vet_tool`).

#[path = "../tests/client/echo_server.rs"]
mod echo_server;

use bulwark_mcp::pins::tool_digest;
use bulwark_mcp::vet::vet_tool;
use criterion::{Criterion, criterion_group, criterion_main};

fn typical_tool() -> (String, String, serde_json::Value) {
    (
        "read_file".into(),
        "Read the complete contents of a file from the file system. Handles various text encodings and provides detailed error messages if the file cannot be read. Use this tool when you need to examine the contents of a single file. Only works within allowed directories.".into(),
        serde_json::json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path of the file to read"},
                "head": {"type": "number", "description": "If provided, returns only the first N lines of the file"},
                "tail": {"type": "number", "description": "If provided, returns only the last N lines of the file"}
            },
            "required": ["path"],
            "additionalProperties": false,
            "$schema": "http://json-schema.org/draft-07/schema#"
        }),
    )
}

fn bench_call(c: &mut Criterion) {
    let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        return;
    };
    let Ok(client) = runtime.block_on(echo_server::connect_echo()) else {
        return;
    };
    let mut arguments = serde_json::Map::new();
    arguments.insert("text".into(), "hello".into());
    c.bench_function("mcp tools/call round trip (in-process, duplex)", |b| {
        b.iter(|| {
            runtime
                .block_on(client.call_tool("echo", arguments.clone()))
                .map(|o| o.text.len())
        })
    });
    runtime.block_on(client.close());
}

fn bench_pin_work(c: &mut Criterion) {
    let (name, description, schema) = typical_tool();
    c.bench_function("tool_digest (typical tool)", |b| {
        b.iter(|| tool_digest(&name, &description, &schema))
    });
    c.bench_function("vet_tool (typical tool)", |b| {
        b.iter(|| vet_tool(&name, &description, &schema).len())
    });
}

criterion_group!(benches, bench_call, bench_pin_work);
criterion_main!(benches);
