//! The tokens file (`lnet-router run --tokens-file`): one token a line, `NAME ROLE
//! SECRET` separated by blanks, `ROLE` `admin` or `reader`; blank lines and lines whose
//! first non-blank character is `#` are skipped. The whole file is checked before any
//! token of it is imported, so a bad line imports nothing.

use crate::keys;
use crate::token::{Role, MIN_SECRET_BYTES};

/// One token line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenLine {
    /// The line number, from 1.
    pub line: usize,
    /// The token's name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// Its secret, as written.
    pub secret: String,
}

/// Why a tokens file is refused: each names the line, from 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokensFileError {
    /// A line without exactly three fields.
    #[error("line {line}: expected `NAME ROLE SECRET`, found {found} fields")]
    Fields {
        /// The line.
        line: usize,
        /// Fields found.
        found: usize,
    },
    /// A role other than `admin` or `reader`.
    #[error("line {line}: role `{role}`: expected admin or reader")]
    Role {
        /// The line.
        line: usize,
        /// The role as written (at most 64 characters of it).
        role: String,
    },
    /// A name the store does not take.
    #[error("line {line}: token name: {reason}")]
    Name {
        /// The line.
        line: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A secret shorter than [`MIN_SECRET_BYTES`].
    #[error("line {line}: a secret has at least {MIN_SECRET_BYTES} bytes, found {found}")]
    ShortSecret {
        /// The line.
        line: usize,
        /// Bytes found.
        found: usize,
    },
    /// A name given twice.
    #[error("line {line}: token `{name}` is named again (first on line {first})")]
    DuplicateName {
        /// The line.
        line: usize,
        /// The name.
        name: String,
        /// The line that named it first.
        first: usize,
    },
}

impl TokensFileError {
    /// The line the error is on, from 1.
    pub fn line(&self) -> usize {
        match self {
            TokensFileError::Fields { line, .. }
            | TokensFileError::Role { line, .. }
            | TokensFileError::Name { line, .. }
            | TokensFileError::ShortSecret { line, .. }
            | TokensFileError::DuplicateName { line, .. } => *line,
        }
    }
}

/// Longest role text kept in an error.
const MAX_ROLE_SHOWN: usize = 64;

/// Parses a tokens file: every token line in order, or the first line that is wrong.
pub fn parse_tokens_file(text: &str) -> Result<Vec<TokenLine>, TokensFileError> {
    let mut out: Vec<TokenLine> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut fields = trimmed.split_whitespace();
        let (Some(name), Some(role), Some(secret), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(TokensFileError::Fields {
                line,
                found: trimmed.split_whitespace().count(),
            });
        };
        let role = match role {
            "admin" => Role::Admin,
            "reader" => Role::Reader,
            other => {
                return Err(TokensFileError::Role {
                    line,
                    role: other.chars().take(MAX_ROLE_SHOWN).collect(),
                })
            }
        };
        keys::check_token_name(name).map_err(|reason| TokensFileError::Name { line, reason })?;
        if secret.len() < MIN_SECRET_BYTES {
            return Err(TokensFileError::ShortSecret {
                line,
                found: secret.len(),
            });
        }
        if let Some(first) = out.iter().find(|t| t.name == name) {
            return Err(TokensFileError::DuplicateName {
                line,
                name: name.to_owned(),
                first: first.line,
            });
        }
        out.push(TokenLine {
            line,
            name: name.to_owned(),
            role,
            secret: secret.to_owned(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn token_lines_comments_and_each_refusal_name_their_line() {
        let ok = parse_tokens_file(
            "# name role secret\n\n  ops admin 0123456789abcdef0123\nview\treader fedcba9876543210fedc\n",
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!((ok[0].line, ok[0].role), (3, Role::Admin));
        assert_eq!((ok[1].name.as_str(), ok[1].role), ("view", Role::Reader));
        let cases = [
            ("a admin\n", 1, "2 fields"),
            ("\na root 0123456789abcdef0123\n", 2, "root"),
            ("a/b admin 0123456789abcdef0123\n", 1, "token name"),
            ("a admin short\n", 1, "found 5"),
            (
                "a admin 0123456789abcdef0123\na reader 0123456789abcdef0124\n",
                2,
                "first on line 1",
            ),
        ];
        for (text, line, says) in cases {
            let e = parse_tokens_file(text).unwrap_err();
            assert_eq!(e.line(), line, "{text:?}");
            assert!(e.to_string().contains(says), "{e} for {text:?}");
        }
    }
}
