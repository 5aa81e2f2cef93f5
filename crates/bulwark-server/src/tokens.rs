//! API tokens: `bwk_<id>_<secret>`.
//!
//! `id` (16 lowercase hex digits from 8 random bytes) is public: it names
//! the token in listings and finds its stored hash in one lookup. `secret`
//! is 32 random bytes in unpadded base64url. Only
//! `HMAC-SHA256(server secret, whole token)` is stored. Every character is
//! valid in an HTTP header and in a WebSocket subprotocol name, so the same
//! string works as `Authorization: Bearer ...` and as `bearer.<token>`.

use crate::secret::{SecretError, ServerSecret, random_bytes};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use zeroize::Zeroizing;

pub const TOKEN_PREFIX: &str = "bwk_";
const ID_LEN: usize = 16;
const SECRET_LEN: usize = 43;
/// Length of every well-formed token.
pub const TOKEN_LEN: usize = TOKEN_PREFIX.len() + ID_LEN + 1 + SECRET_LEN;

/// A freshly issued token. The raw token exists only here: show it once.
pub struct IssuedToken {
    pub id: String,
    /// The whole token; wiped when dropped.
    pub token: Zeroizing<String>,
    /// What access.toml stores: lowercase hex HMAC of the token.
    pub hash_hex: String,
}

impl std::fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedToken")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Issues a new token under `secret`.
pub fn issue(secret: &ServerSecret) -> Result<IssuedToken, SecretError> {
    let mut id = [0u8; ID_LEN / 2];
    random_bytes(&mut id)?;
    let mut raw = Zeroizing::new([0u8; 32]);
    random_bytes(raw.as_mut())?;
    let id = hex::encode(id);
    let encoded = Zeroizing::new(URL_SAFE_NO_PAD.encode(raw.as_ref()));
    let token = Zeroizing::new(format!("{TOKEN_PREFIX}{id}_{}", encoded.as_str()));
    let hash_hex = hex::encode(secret.mac(token.as_bytes()));
    Ok(IssuedToken {
        id,
        token,
        hash_hex,
    })
}

/// The token's id, when `token` has exactly the issued shape; `None` for
/// anything else (which is then never hashed or looked up).
pub fn token_id(token: &str) -> Option<&str> {
    if token.len() != TOKEN_LEN || !token.is_ascii() {
        return None;
    }
    let rest = token.strip_prefix(TOKEN_PREFIX)?;
    let (id, secret) = rest.split_at(ID_LEN);
    let secret = secret.strip_prefix('_')?;
    let id_ok = id
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let secret_ok = secret.len() == SECRET_LEN
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    (id_ok && secret_ok).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_tokens_parse_and_hash() {
        let secret = ServerSecret::from_bytes([7; 32]);
        let t = issue(&secret).unwrap();
        assert_eq!(t.token.len(), TOKEN_LEN);
        assert_eq!(token_id(&t.token), Some(t.id.as_str()));
        assert_eq!(t.hash_hex, hex::encode(secret.mac(t.token.as_bytes())));
        assert!(!format!("{t:?}").contains(t.token.as_str()));
        let other = issue(&secret).unwrap();
        assert_ne!(t.id, other.id);
        assert_ne!(t.token.as_str(), other.token.as_str());
    }

    #[test]
    fn other_shapes_are_not_tokens() {
        let secret = ServerSecret::from_bytes([7; 32]);
        let good = issue(&secret).unwrap().token.to_string();
        let mut bad = vec![
            String::new(),
            "bwk_".into(),
            good[..good.len() - 1].into(),
            format!("{good}A"),
            good.replacen("bwk_", "bwx_", 1),
            good.to_uppercase(),
            good.replacen('_', "-", 2),
        ];
        // A non-ASCII character of the same byte length.
        let mut chars: Vec<char> = good.chars().collect();
        chars.truncate(chars.len() - 2);
        chars.push('é');
        bad.push(chars.into_iter().collect());
        for b in bad {
            assert_eq!(token_id(&b), None, "{b:?}");
        }
    }
}
