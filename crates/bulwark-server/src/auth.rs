//! Who is asking: bearer tokens checked against the *current* access.toml.
//!
//! The access file and the server secret are re-read whenever they change
//! (a poll every [`Limits::access_poll`](crate::Limits)), and each version
//! is published as an [`AuthSnapshot`] on a watch channel. Every request
//! verifies its token against the newest snapshot, and every WebSocket
//! re-verifies its token when a new one is published, so a rotation or a
//! revocation ends live connections at the next poll.
//!
//! A file that does not parse, or a secret that cannot be read, gives a
//! snapshot with no users: the server fails closed until it is fixed.

use crate::secret::{ServerSecret, secret_path};
use crate::tokens::token_id;
use bulwark_kernel::Home;
use bulwark_policy::{AccessFile, UserEntry, UserRole, parse_access};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// Largest access file read.
const MAX_ACCESS_FILE: u64 = 4 << 20;

/// One version of who may do what.
#[derive(Debug, Default)]
pub struct AuthSnapshot {
    /// Increases with every change that was published.
    pub generation: u64,
    pub access: AccessFile,
    /// Token id → (user, HMAC of the token).
    tokens: HashMap<String, (String, [u8; 32])>,
    secret: Option<ServerSecret>,
    /// Why nobody can authenticate, when that is the operator's to fix.
    pub problem: Option<String>,
}

/// One stored token, as a snapshot held it: what a conversation records
/// about the token that opened it, so a revocation stops the conversations
/// of the tokens it removed and not those opened since with new ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRef {
    pub id: String,
    hash: [u8; 32],
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user: String,
    pub role: UserRole,
    /// The public id of the token used (never the token).
    pub token_id: String,
}

impl Principal {
    pub fn is_admin(&self) -> bool {
        self.role == UserRole::Admin
    }
}

/// Why a credential was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    Missing,
    /// More than one credential, or a header that is not `Bearer <token>`.
    Malformed,
    /// Not a token this server issued, or one revoked or rotated away.
    Invalid,
}

impl AuthFailure {
    pub fn message(self) -> &'static str {
        match self {
            AuthFailure::Missing => {
                "authentication required: send `Authorization: Bearer <token>` (WebSocket: the subprotocols `bulwark.v1, bearer.<token>`); an admin issues tokens with `bulwark access create USER`"
            }
            AuthFailure::Malformed => {
                "malformed credentials: send exactly one token, as `Authorization: Bearer <token>` or the subprotocol `bearer.<token>`"
            }
            AuthFailure::Invalid => {
                "the token is not valid (mistyped, revoked or rotated); ask an admin for a new one (`bulwark access rotate USER`)"
            }
        }
    }
}

impl AuthSnapshot {
    /// Builds a snapshot from the texts read (`None`: no file).
    pub fn build(
        generation: u64,
        access_text: Option<&str>,
        access_origin: &str,
        secret: Result<Option<ServerSecret>, String>,
    ) -> Self {
        let mut snap = AuthSnapshot {
            generation,
            ..Default::default()
        };
        let access = match access_text.map(|t| parse_access(t, access_origin)) {
            None => AccessFile::default(),
            Some(Ok(a)) => a,
            Some(Err(e)) => {
                snap.problem = Some(format!(
                    "access.toml is invalid, so nobody can sign in until it is fixed: {e}"
                ));
                return snap;
            }
        };
        match secret {
            Ok(Some(s)) => snap.secret = Some(s),
            Ok(None) => {
                if access.users.values().any(|u| !u.tokens.is_empty()) {
                    snap.problem = Some(
                        "keys/server.secret is missing, so no token can be checked; run `bulwark access rotate USER` to issue new tokens".into(),
                    );
                }
            }
            Err(e) => {
                snap.problem = Some(e);
                return snap;
            }
        }
        for (user, entry) in &access.users {
            for t in &entry.tokens {
                let mut mac = [0u8; 32];
                if hex::decode_to_slice(&t.hash, &mut mac).is_ok() {
                    snap.tokens.insert(t.id.clone(), (user.to_string(), mac));
                }
            }
        }
        snap.access = access;
        snap
    }

    /// The stored entry of the token with this public id, to tell later
    /// whether that same token is still accepted.
    pub fn token_ref(&self, id: &str) -> Option<TokenRef> {
        self.tokens.get(id).map(|(_, hash)| TokenRef {
            id: id.to_owned(),
            hash: *hash,
        })
    }

    /// Whether `user` still holds exactly this token (same id, same
    /// stored hash): false once it was removed, rotated or rehashed.
    pub fn still_accepts(&self, user: &str, token: &TokenRef) -> bool {
        self.tokens
            .get(&token.id)
            .is_some_and(|(owner, hash)| owner == user && *hash == token.hash)
    }

    /// The user a token belongs to, if it is valid now.
    pub fn verify(&self, token: &str) -> Result<Principal, AuthFailure> {
        let id = token_id(token).ok_or(AuthFailure::Malformed)?;
        let secret = self.secret.as_ref().ok_or(AuthFailure::Invalid)?;
        // The MAC is computed, and compared in constant time, whether or
        // not the id exists (the id is public; the secret part is not).
        let mac = secret.mac(token.as_bytes());
        let found = self.tokens.get(id);
        let stored = found.map_or([0u8; 32], |(_, m)| *m);
        let matches = bulwark_audit::constant_time_eq(&mac, &stored);
        let user = match found {
            Some((user, _)) if matches => user,
            _ => return Err(AuthFailure::Invalid),
        };
        let entry = self.access.users.get(user).ok_or(AuthFailure::Invalid)?;
        Ok(Principal {
            user: user.clone(),
            role: entry.role,
            token_id: id.to_owned(),
        })
    }

    pub fn user(&self, name: &str) -> Option<&UserEntry> {
        self.access.users.get(name)
    }

    /// Users with at least one token.
    pub fn users_with_tokens(&self) -> usize {
        self.access
            .users
            .values()
            .filter(|u| !u.tokens.is_empty())
            .count()
    }
}

/// The credential in a request's headers: `Authorization: Bearer <token>`
/// or (WebSocket handshakes) a `bearer.<token>` subprotocol. Query strings
/// are never read. More than one credential is refused.
pub fn credential(headers: &axum::http::HeaderMap) -> Result<&str, AuthFailure> {
    let mut found: Option<&str> = None;
    let mut take = |value| -> Result<(), AuthFailure> {
        if found.is_some() {
            return Err(AuthFailure::Malformed);
        }
        found = Some(value);
        Ok(())
    };
    let mut auth_values = Vec::new();
    for value in headers.get_all(axum::http::header::AUTHORIZATION) {
        auth_values.push(value.to_str().map_err(|_| AuthFailure::Malformed)?);
    }
    for v in auth_values {
        let (scheme, token) = v.trim().split_once(' ').ok_or(AuthFailure::Malformed)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthFailure::Malformed);
        }
        take(token.trim())?;
    }
    for value in headers.get_all(axum::http::header::SEC_WEBSOCKET_PROTOCOL) {
        let value = value.to_str().map_err(|_| AuthFailure::Malformed)?;
        for proto in value.split(',').map(str::trim) {
            if let Some(token) = proto.strip_prefix("bearer.") {
                take(token)?;
            }
        }
    }
    found.ok_or(AuthFailure::Missing)
}

/// Reads access.toml and the secret, and publishes a snapshot when they
/// changed.
pub struct AccessWatch {
    home: Home,
    tx: watch::Sender<Arc<AuthSnapshot>>,
    /// SHA-256 of (access text, secret text) last published.
    last: Mutex<Option<[u8; 32]>>,
}

impl AccessWatch {
    pub fn new(home: Home) -> Self {
        let (tx, _) = watch::channel(Arc::new(AuthSnapshot::default()));
        let w = Self {
            home,
            tx,
            last: Mutex::new(None),
        };
        w.reload();
        w
    }

    pub fn current(&self) -> Arc<AuthSnapshot> {
        self.tx.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<AuthSnapshot>> {
        self.tx.subscribe()
    }

    fn access_path(&self) -> PathBuf {
        self.home.access_path()
    }

    /// Re-reads both files; publishes and returns `true` when either changed.
    pub fn reload(&self) -> bool {
        use sha2::{Digest, Sha256};
        let access_path = self.access_path();
        let access = read_limited(&access_path);
        let secret_file = secret_path(self.home.root());
        let secret_raw = read_limited(&secret_file);
        let mut h = Sha256::new();
        for part in [&access, &secret_raw] {
            match part {
                Ok(Some(text)) => {
                    h.update([1]);
                    h.update((text.len() as u64).to_be_bytes());
                    h.update(text.as_bytes());
                }
                Ok(None) => h.update([0]),
                Err(e) => {
                    h.update([2]);
                    h.update(e.as_bytes());
                }
            }
        }
        // The secret's mode matters too (a chmod must take effect).
        if let Ok(meta) = std::fs::metadata(&secret_file) {
            use std::os::unix::fs::PermissionsExt;
            h.update(meta.permissions().mode().to_be_bytes());
        }
        let digest: [u8; 32] = h.finalize().into();
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if *last == Some(digest) {
            return false;
        }
        *last = Some(digest);
        let generation = self.tx.borrow().generation + 1;
        let origin = access_path.display().to_string();
        let snap = match access {
            Err(e) => AuthSnapshot {
                generation,
                problem: Some(e),
                ..Default::default()
            },
            Ok(text) => AuthSnapshot::build(
                generation,
                text.as_deref(),
                &origin,
                ServerSecret::load(&secret_file).map_err(|e| e.to_string()),
            ),
        };
        if let Some(problem) = &snap.problem {
            tracing::error!(%problem, "authentication is closed");
        } else {
            tracing::info!(
                generation,
                users = snap.access.users.len(),
                "access.toml loaded"
            );
        }
        self.tx.send_replace(Arc::new(snap));
        true
    }
}

/// A small file's text; `Ok(None)` when absent.
fn read_limited(path: &std::path::Path) -> Result<Option<String>, String> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut text = String::new();
    file.take(MAX_ACCESS_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if text.len() as u64 > MAX_ACCESS_FILE {
        return Err(format!("{} is larger than 4 MiB", path.display()));
    }
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderMap, HeaderValue};

    fn snapshot_with(token: &str, secret: &ServerSecret) -> AuthSnapshot {
        let id = token_id(token).unwrap();
        let hash = hex::encode(secret.mac(token.as_bytes()));
        let text = format!("[users.alice]\ntokens = [{{ id = \"{id}\", hash = \"{hash}\" }}]\n");
        AuthSnapshot::build(1, Some(&text), "access.toml", Ok(Some(secret.clone())))
    }

    #[test]
    fn verify_accepts_only_the_issued_token() {
        let secret = ServerSecret::from_bytes([1; 32]);
        let t = crate::tokens::issue(&secret).unwrap();
        let snap = snapshot_with(&t.token, &secret);
        assert_eq!(snap.verify(&t.token).unwrap().user, "alice");
        let other = crate::tokens::issue(&secret).unwrap();
        assert_eq!(snap.verify(&other.token), Err(AuthFailure::Invalid));
        // Same id, different secret part.
        let forged = format!("{}{}", &t.token[..t.token.len() - 1], "A");
        let forged = if forged == *t.token {
            format!("{}B", &t.token[..t.token.len() - 1])
        } else {
            forged
        };
        assert_eq!(snap.verify(&forged), Err(AuthFailure::Invalid));
        assert_eq!(snap.verify("nope"), Err(AuthFailure::Malformed));
        // Another server secret: nothing verifies.
        let other_secret = ServerSecret::from_bytes([2; 32]);
        let text = format!(
            "[users.alice]\ntokens = [{{ id = \"{}\", hash = \"{}\" }}]\n",
            t.id, t.hash_hex
        );
        let snap = AuthSnapshot::build(1, Some(&text), "a", Ok(Some(other_secret)));
        assert_eq!(snap.verify(&t.token), Err(AuthFailure::Invalid));
    }

    #[test]
    fn broken_file_closes_everything() {
        let snap = AuthSnapshot::build(1, Some("[users.alice]\nrole = 3\n"), "a", Ok(None));
        assert!(snap.problem.is_some());
        assert!(snap.access.users.is_empty());
    }

    #[test]
    fn credentials_come_from_one_header_only() {
        let mut h = HeaderMap::new();
        assert_eq!(credential(&h), Err(AuthFailure::Missing));
        h.insert("authorization", HeaderValue::from_static("Bearer abc"));
        assert_eq!(credential(&h), Ok("abc"));
        h.insert(
            "sec-websocket-protocol",
            HeaderValue::from_static("bulwark.v1, bearer.xyz"),
        );
        assert_eq!(credential(&h), Err(AuthFailure::Malformed));
        h.remove("authorization");
        assert_eq!(credential(&h), Ok("xyz"));
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Basic abc"));
        assert_eq!(credential(&h), Err(AuthFailure::Malformed));
        let mut h = HeaderMap::new();
        h.append("authorization", HeaderValue::from_static("Bearer a"));
        h.append("authorization", HeaderValue::from_static("Bearer a"));
        assert_eq!(credential(&h), Err(AuthFailure::Malformed));
    }
}
