//! Bearer tokens and the event log the daemon plugs in.
//!
//! The server asks a [`TokenVerifier`] who a presented secret belongs to: a token has a
//! name and a [`Role`]. A `reader` may read every document; an `admin` may also change the
//! node (reset health, set tunables, add peers, fault rules, ping, discovery). Every change
//! is recorded as an admin event naming the token, in the server's event ring and in the
//! [`EventSink`](crate::EventSink) the daemon gives (the store's event log).
//!
//! The same [`TokenVerifier`] keeps the tokens an admin makes and revokes at run time
//! (`POST /api/v1/tokens`, `DELETE /api/v1/tokens/{name}`): a new token's secret is drawn
//! here ([`new_secret`]), shown once in the answer, and handed over to be kept hashed.
//!
//! [`MemoryTokens`] is a verifier that keeps SHA-256 hashes of the secrets in memory and
//! compares them in constant time: for a daemon without a store, and for tests.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use utoipa::ToSchema;

/// What a token may do.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read every document and the event stream.
    Reader,
    /// Read, and change the node.
    Admin,
}

impl Role {
    /// Whether this role may change the node.
    pub const fn may_mutate(self) -> bool {
        matches!(self, Role::Admin)
    }

    /// `reader` or `admin`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Admin => "admin",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who presented a token: its name and role.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenIdentity {
    /// The token's name (what admin events record).
    pub name: String,
    /// Its role.
    pub role: Role,
}

/// A token as the API lists it: never its secret nor its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// When it was made, in milliseconds since the Unix epoch; `null` when not known (a
    /// token of the daemon's tokens file, or one made before creation times were kept).
    pub created_ms: Option<u64>,
}

/// The API's tokens: tells who a presented bearer secret belongs to, and makes, lists and
/// revokes tokens at run time. The store implements it over its token table (name, role,
/// SHA-256 of the secret, creation time). A secret is never kept, only its hash.
pub trait TokenVerifier: Send + Sync + 'static {
    /// The token whose secret this is, or `None` when no token has it (revoked or never
    /// made). Must not reveal through its timing which token came close.
    fn verify(&self, secret: &str) -> Option<TokenIdentity>;

    /// Makes a token named `name` with `role` for `secret` (only its hash is kept), made
    /// at `created_ms` (milliseconds since the Unix epoch). Refuses a bad name
    /// ([`TokenError::BadName`]), a short secret, and a name in use
    /// ([`TokenError::Exists`]); once it returns, [`TokenVerifier::verify`] knows it.
    fn create_token(
        &self,
        name: &str,
        role: Role,
        secret: &str,
        created_ms: u64,
    ) -> Result<(), TokenError>;

    /// Every token, by name.
    fn tokens(&self) -> Result<Vec<TokenEntry>, TokenError>;

    /// Revokes token `name` ([`TokenError::NotFound`] when there is none); once it
    /// returns, [`TokenVerifier::verify`] no longer knows its secret.
    fn revoke_token(&self, name: &str) -> Result<(), TokenError>;
}

/// Why a token could not be made, listed or revoked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The name is empty, too long, or has characters other than ASCII letters, digits,
    /// `.`, `_` and `-`.
    #[error("bad token name {name:?}: 1 to 64 of ASCII letters, digits, '.', '_', '-'")]
    BadName {
        /// The name given.
        name: String,
    },
    /// The secret is shorter than [`MIN_SECRET_LEN`] bytes.
    #[error("a token secret has at least {min} bytes")]
    ShortSecret {
        /// The least length.
        min: usize,
    },
    /// A token with this name exists.
    #[error("token {name:?} exists already")]
    Exists {
        /// The name.
        name: String,
    },
    /// No token has this name.
    #[error("no token {name:?}")]
    NotFound {
        /// The name.
        name: String,
    },
    /// No secret could be drawn: the system's random source failed.
    #[error("no random secret: {source}")]
    Random {
        /// What the random source said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The tokens' keeper (the store) failed.
    #[error("the tokens could not be read or kept: {source}")]
    Failed {
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The shortest secret [`MemoryTokens`] accepts.
pub const MIN_SECRET_LEN: usize = 16;
/// The longest token name.
pub const MAX_TOKEN_NAME: usize = 64;

/// The SHA-256 of a secret, as tokens are kept.
pub fn secret_hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Random bytes in a secret [`new_secret`] draws.
pub const SECRET_BYTES: usize = 32;

/// A new token secret: [`SECRET_BYTES`] bytes from the operating system's random source,
/// as lowercase hex.
pub fn new_secret() -> Result<String, TokenError> {
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::getrandom(&mut bytes).map_err(|e| TokenError::Random {
        source: Box::new(e),
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[derive(Debug, Clone)]
struct Entry {
    role: Role,
    hash: [u8; 32],
    created_ms: Option<u64>,
}

/// Tokens kept in memory as SHA-256 hashes of their secrets. [`TokenVerifier::verify`]
/// hashes the presented secret and compares it with every token's hash in constant time,
/// looking at all of them whatever matches, so the answer's timing tells nothing about
/// which token was near. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct MemoryTokens {
    inner: Arc<RwLock<BTreeMap<String, Entry>>>,
}

fn check_name(name: &str) -> Result<(), TokenError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_TOKEN_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(TokenError::BadName {
            name: name.to_owned(),
        })
    }
}

impl MemoryTokens {
    /// No tokens.
    pub fn new() -> MemoryTokens {
        MemoryTokens::default()
    }

    /// Adds a token named `name` with `role` whose secret is `secret` (only its hash is
    /// kept).
    pub fn create(&self, name: &str, role: Role, secret: &str) -> Result<(), TokenError> {
        if secret.len() < MIN_SECRET_LEN {
            return Err(TokenError::ShortSecret {
                min: MIN_SECRET_LEN,
            });
        }
        self.create_hashed(name, role, secret_hash(secret))
    }

    /// Adds a token from the SHA-256 hash of its secret.
    pub fn create_hashed(&self, name: &str, role: Role, hash: [u8; 32]) -> Result<(), TokenError> {
        self.insert(name, role, hash, None)
    }

    fn insert(
        &self,
        name: &str,
        role: Role,
        hash: [u8; 32],
        created_ms: Option<u64>,
    ) -> Result<(), TokenError> {
        check_name(name)?;
        let mut map = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        if map.contains_key(name) {
            return Err(TokenError::Exists {
                name: name.to_owned(),
            });
        }
        map.insert(
            name.to_owned(),
            Entry {
                role,
                hash,
                created_ms,
            },
        );
        Ok(())
    }

    /// Removes a token; whether it was there.
    pub fn revoke(&self, name: &str) -> bool {
        self.inner
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name)
            .is_some()
    }

    /// The tokens' names and roles, by name.
    pub fn list(&self) -> Vec<(String, Role)> {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(n, e)| (n.clone(), e.role))
            .collect()
    }
}

impl TokenVerifier for MemoryTokens {
    fn verify(&self, secret: &str) -> Option<TokenIdentity> {
        let presented = secret_hash(secret);
        let map = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        let mut found: Option<TokenIdentity> = None;
        for (name, entry) in map.iter() {
            let equal: bool = entry.hash.ct_eq(&presented).into();
            if equal && found.is_none() {
                found = Some(TokenIdentity {
                    name: name.clone(),
                    role: entry.role,
                });
            }
        }
        found
    }

    fn create_token(
        &self,
        name: &str,
        role: Role,
        secret: &str,
        created_ms: u64,
    ) -> Result<(), TokenError> {
        if secret.len() < MIN_SECRET_LEN {
            return Err(TokenError::ShortSecret {
                min: MIN_SECRET_LEN,
            });
        }
        self.insert(name, role, secret_hash(secret), Some(created_ms))
    }

    fn tokens(&self) -> Result<Vec<TokenEntry>, TokenError> {
        Ok(self
            .inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(name, e)| TokenEntry {
                name: name.clone(),
                role: e.role,
                created_ms: e.created_ms,
            })
            .collect())
    }

    fn revoke_token(&self, name: &str) -> Result<(), TokenError> {
        if self.revoke(name) {
            Ok(())
        } else {
            Err(TokenError::NotFound {
                name: name.to_owned(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_maps_to_its_token_and_nothing_else_does() {
        let t = MemoryTokens::new();
        t.create("ops", Role::Admin, "0123456789abcdef-admin")
            .unwrap();
        t.create("grafana", Role::Reader, "0123456789abcdef-reader")
            .unwrap();
        assert_eq!(
            t.verify("0123456789abcdef-admin"),
            Some(TokenIdentity {
                name: "ops".into(),
                role: Role::Admin
            })
        );
        assert_eq!(
            t.verify("0123456789abcdef-reader").map(|i| i.role),
            Some(Role::Reader)
        );
        assert_eq!(t.verify("0123456789abcdef-admim"), None);
        assert_eq!(t.verify(""), None);
        assert!(t.revoke("ops"));
        assert_eq!(t.verify("0123456789abcdef-admin"), None);
        assert_eq!(t.list(), vec![("grafana".to_owned(), Role::Reader)]);
    }

    #[test]
    fn names_secrets_and_duplicates_are_checked() {
        let t = MemoryTokens::new();
        assert!(matches!(
            t.create("a b", Role::Admin, "0123456789abcdef"),
            Err(TokenError::BadName { .. })
        ));
        assert!(matches!(
            t.create("ok", Role::Admin, "short"),
            Err(TokenError::ShortSecret { .. })
        ));
        t.create("ok", Role::Admin, "0123456789abcdef").unwrap();
        assert!(matches!(
            t.create("ok", Role::Reader, "0123456789abcdefgh"),
            Err(TokenError::Exists { .. })
        ));
        // Only the hash is kept: the hash of the secret verifies the same way.
        let u = MemoryTokens::new();
        u.create_hashed("h", Role::Reader, secret_hash("0123456789abcdef"))
            .unwrap();
        assert_eq!(
            u.verify("0123456789abcdef").map(|i| i.name),
            Some("h".into())
        );
    }

    #[test]
    fn tokens_made_at_run_time_are_listed_with_their_time_and_revoked() {
        let t = MemoryTokens::new();
        t.create("file", Role::Admin, "0123456789abcdef-file")
            .unwrap();
        let secret = new_secret().unwrap();
        assert_eq!(secret.len(), 2 * SECRET_BYTES);
        assert!(secret.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(secret, new_secret().unwrap());
        t.create_token("ci", Role::Reader, &secret, 42).unwrap();
        assert!(matches!(
            t.create_token("ci", Role::Reader, &new_secret().unwrap(), 43),
            Err(TokenError::Exists { .. })
        ));
        assert_eq!(
            t.tokens().unwrap(),
            vec![
                TokenEntry {
                    name: "ci".into(),
                    role: Role::Reader,
                    created_ms: Some(42)
                },
                TokenEntry {
                    name: "file".into(),
                    role: Role::Admin,
                    created_ms: None
                },
            ]
        );
        assert_eq!(t.verify(&secret).map(|i| i.name), Some("ci".into()));
        t.revoke_token("ci").unwrap();
        assert_eq!(t.verify(&secret), None);
        assert!(matches!(
            t.revoke_token("ci"),
            Err(TokenError::NotFound { .. })
        ));
    }
}
