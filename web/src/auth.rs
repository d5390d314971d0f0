//! Bearer tokens and the event log the daemon plugs in.
//!
//! The server asks a [`TokenVerifier`] who a presented secret belongs to: a token has a
//! name and a [`Role`]. A `reader` may read every document; an `admin` may also change the
//! node (reset health, set tunables, add peers, fault rules, ping, discovery). Every change
//! is recorded as an admin event naming the token, in the server's event ring and in the
//! [`EventSink`](crate::EventSink) the daemon gives (the store's event log).
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

/// Tells who a presented bearer secret belongs to. The store implements it over its token
/// table (name, role, SHA-256 of the secret).
pub trait TokenVerifier: Send + Sync + 'static {
    /// The token whose secret this is, or `None` when no token has it (revoked or never
    /// made). Must not reveal through its timing which token came close.
    fn verify(&self, secret: &str) -> Option<TokenIdentity>;
}

/// Why [`MemoryTokens`] refused a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
}

/// The shortest secret [`MemoryTokens`] accepts.
pub const MIN_SECRET_LEN: usize = 16;
/// The longest token name.
pub const MAX_TOKEN_NAME: usize = 64;

/// The SHA-256 of a secret, as tokens are kept.
pub fn secret_hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

#[derive(Debug, Clone)]
struct Entry {
    role: Role,
    hash: [u8; 32],
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
        check_name(name)?;
        let mut map = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        if map.contains_key(name) {
            return Err(TokenError::Exists {
                name: name.to_owned(),
            });
        }
        map.insert(name.to_owned(), Entry { role, hash });
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
}
