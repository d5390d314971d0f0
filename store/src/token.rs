//! API bearer tokens: a name, a role, the SHA-256 hash of the secret and (from schema 4)
//! when the token was made. The secret itself is never stored; a presented secret is
//! hashed and compared with every stored hash in constant time.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::engine::{decode_entry, TreeId, WriteSet};
use crate::error::{DecodeError, StoreError};
use crate::keys;
use crate::Store;

/// Fewest bytes in a token secret.
pub const MIN_SECRET_BYTES: usize = 16;

/// What a token may do through the REST API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// GET requests only.
    Reader,
    /// Every request, mutations included.
    Admin,
}

/// A token as listed: never its secret nor its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenInfo {
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// When it was made, in milliseconds since the Unix epoch (wall-clock time, as the
    /// caller gave it); `None` for a token made without one (a token of the tokens file,
    /// or one stored before schema 4).
    pub created_ms: Option<u64>,
}

/// The stored form (the key is the name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenRecord {
    role: Role,
    /// Lowercase hex of the SHA-256 of the secret.
    sha256: String,
    /// When the token was made (milliseconds since the Unix epoch), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_ms: Option<u64>,
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

fn unhex(text: &str) -> Result<[u8; 32], DecodeError> {
    let bytes = text.as_bytes();
    let mut out = [0u8; 32];
    if bytes.len() != 64 {
        return Err(DecodeError::Length {
            expected: 64,
            found: bytes.len(),
        });
    }
    for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let s = std::str::from_utf8(pair).ok();
        *o = s
            .and_then(|s| u8::from_str_radix(s, 16).ok())
            .ok_or_else(|| DecodeError::Record {
                message: "sha256 is not hex".to_owned(),
            })?;
    }
    Ok(out)
}

/// A key and value of the tokens tree, decoded as a read decodes them: the token and the
/// SHA-256 of its secret.
pub(crate) fn decode_token_entry(k: &[u8], v: &[u8]) -> Result<(TokenInfo, [u8; 32]), StoreError> {
    let (name, r): (String, TokenRecord) =
        decode_entry(TreeId::Tokens, k, v, keys::decode_token_name)?;
    let hash = unhex(&r.sha256).map_err(|source| StoreError::CorruptValue {
        tree: TreeId::Tokens.name(),
        key: name.clone(),
        source,
    })?;
    Ok((
        TokenInfo {
            name,
            role: r.role,
            created_ms: r.created_ms,
        },
        hash,
    ))
}

impl Store {
    fn read_tokens(&self) -> Result<Vec<(TokenInfo, [u8; 32])>, StoreError> {
        self.trees
            .scan_raw(TreeId::Tokens)?
            .iter()
            .map(|(k, v)| decode_token_entry(k, v))
            .collect()
    }

    /// Creates a token named `name` (1 to 64 ASCII letters, digits, `.`, `_`, `-`) with
    /// `role`, for `secret` (at least [`MIN_SECRET_BYTES`] bytes, which the caller draws
    /// from a secure random source), without a creation time. Only the secret's SHA-256
    /// is stored. Refuses a name in use and a secret another token has.
    pub fn create_token(&self, name: &str, role: Role, secret: &str) -> Result<(), StoreError> {
        self.put_token(name, role, secret, None)
    }

    /// [`Store::create_token`], recording that the token was made at `created_ms`
    /// (milliseconds since the Unix epoch), which [`Store::tokens`] lists.
    pub fn create_token_at(
        &self,
        name: &str,
        role: Role,
        secret: &str,
        created_ms: u64,
    ) -> Result<(), StoreError> {
        self.put_token(name, role, secret, Some(created_ms))
    }

    fn put_token(
        &self,
        name: &str,
        role: Role,
        secret: &str,
        created_ms: Option<u64>,
    ) -> Result<(), StoreError> {
        keys::check_token_name(name).map_err(|reason| StoreError::InvalidArgument {
            what: "token name",
            reason: reason.to_owned(),
        })?;
        if secret.len() < MIN_SECRET_BYTES {
            return Err(StoreError::InvalidArgument {
                what: "token secret",
                reason: format!("a secret has at least {MIN_SECRET_BYTES} bytes"),
            });
        }
        let hash = digest(secret);
        let _guard = self.lock();
        let existing = self.read_tokens()?;
        if existing.iter().any(|(t, _)| t.name == name) {
            return Err(StoreError::AlreadyExists {
                what: "token",
                key: name.to_owned(),
            });
        }
        if let Some((other, _)) = existing.iter().find(|(_, h)| bool::from(h.ct_eq(&hash))) {
            return Err(StoreError::AlreadyExists {
                what: "token secret, held by token",
                key: other.name.clone(),
            });
        }
        let mut set = WriteSet::new();
        set.put(
            TreeId::Tokens,
            name.as_bytes(),
            &TokenRecord {
                role,
                sha256: keys::hex(&hash),
                created_ms,
            },
        )?;
        self.trees.commit(set)
    }

    /// Revokes (deletes) the token `name`.
    pub fn revoke_token(&self, name: &str) -> Result<(), StoreError> {
        let _guard = self.lock();
        if self
            .trees
            .get_raw(TreeId::Tokens, name.as_bytes())?
            .is_none()
        {
            return Err(StoreError::NotFound {
                what: "token",
                key: name.to_owned(),
            });
        }
        let mut set = WriteSet::new();
        set.remove(TreeId::Tokens, name.as_bytes());
        self.trees.commit(set)
    }

    /// Every token, by name.
    pub fn tokens(&self) -> Result<Vec<TokenInfo>, StoreError> {
        let _guard = self.lock();
        Ok(self.read_tokens()?.into_iter().map(|(t, _)| t).collect())
    }

    /// The token whose secret is `secret`, if any. The secret's hash is compared with
    /// every stored hash, each in constant time and without stopping at a match, so the
    /// time taken does not tell which token (or how much of a hash) matched.
    pub fn verify_token(&self, secret: &str) -> Result<Option<TokenInfo>, StoreError> {
        let hash = digest(secret);
        let _guard = self.lock();
        let mut found = None;
        for (info, stored) in self.read_tokens()? {
            let equal = bool::from(stored.ct_eq(&hash));
            if equal && found.is_none() {
                found = Some(info);
            }
        }
        Ok(found)
    }
}
