//! Outgoing request bytes are agent-controlled. The exfiltration guard must
//! never panic on them, and must find a stored secret placed anywhere in
//! them in any of the forms it claims to catch. Credential templates (from
//! manifests) must parse or fail cleanly.
#![no_main]

use base64::Engine as _;
use bulwark_net::SecretStore;
use bulwark_policy::Template;
use libfuzzer_sys::fuzz_target;
use secrecy::SecretString;
use std::sync::LazyLock;

const SECRET: &str = "fz-Secret+Value/42==";

static STORE: LazyLock<SecretStore> = LazyLock::new(|| {
    let mut s = SecretStore::new();
    s.insert("FUZZ_KEY", SecretString::from(SECRET), true);
    s
});

fn disguise(which: u8) -> String {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    let b = SECRET.as_bytes();
    match which % 6 {
        0 => SECRET.to_string(),
        1 => STANDARD.encode(b),
        2 => URL_SAFE_NO_PAD.encode(b),
        3 => hex::encode(b),
        4 => hex::encode_upper(b),
        _ => b.iter().map(|c| format!("%{c:02X}")).collect(),
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = STORE.find_in(data);
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(t) = Template::parse(text) {
            let _ = t.render(|k| Some(k.to_string()));
        }
    }
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let cut = rest.len() / 2;
    let mut hay = rest[..cut].to_vec();
    hay.extend_from_slice(disguise(which).as_bytes());
    hay.extend_from_slice(&rest[cut..]);
    assert_eq!(STORE.find_in(&hay), Some("FUZZ_KEY"), "missed form {} in {:?}", which % 6, String::from_utf8_lossy(&hay));
});
