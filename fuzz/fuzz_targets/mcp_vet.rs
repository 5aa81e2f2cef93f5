//! What an MCP server says about its tools is vetted before a model sees
//! it. The oracle (in `bulwark-fuzz-oracles`, also run as a seeded test in
//! CI): never panic; deterministic; every problem's detail bounded; naming
//! sibling tools only removes tool-call findings that point to them.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bulwark_fuzz_oracles::mcp_vet::vet_description(data);
});
