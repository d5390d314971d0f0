//! The store behind the API, as the daemon plugs it in: its token table verifies bearer
//! tokens and keeps the tokens made at run time, and its bounded event log records the events (admin changes as
//! `ConfigChanged`).

use std::sync::Arc;

use lnet::health::HealthStatus;
use lnet::{Net, Nid};
use store::{Event, RecoveryQueue, Store};
use web::{
    ApiEvent, EventBody, EventSink, NiKindDoc, Role, SinkError, TokenEntry, TokenError,
    TokenIdentity, TokenVerifier,
};

/// The store's tokens as a [`TokenVerifier`].
#[derive(Clone)]
pub struct StoreTokens(pub Arc<Store>);

impl TokenVerifier for StoreTokens {
    fn verify(&self, secret: &str) -> Option<TokenIdentity> {
        match self.0.verify_token(secret) {
            Ok(Some(t)) => Some(TokenIdentity {
                name: t.name,
                role: match t.role {
                    store::Role::Admin => Role::Admin,
                    store::Role::Reader => Role::Reader,
                },
            }),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(%e, "token table unreadable");
                None
            }
        }
    }

    fn create_token(
        &self,
        name: &str,
        role: Role,
        secret: &str,
        created_ms: u64,
    ) -> Result<(), TokenError> {
        let role = match role {
            Role::Admin => store::Role::Admin,
            Role::Reader => store::Role::Reader,
        };
        self.0
            .create_token_at(name, role, secret, created_ms)
            .map_err(|e| match e {
                store::StoreError::InvalidArgument {
                    what: "token name", ..
                } => TokenError::BadName {
                    name: name.to_owned(),
                },
                store::StoreError::AlreadyExists { what: "token", .. } => TokenError::Exists {
                    name: name.to_owned(),
                },
                other => TokenError::Failed {
                    source: Box::new(other),
                },
            })
    }

    fn tokens(&self) -> Result<Vec<TokenEntry>, TokenError> {
        let tokens = self.0.tokens().map_err(|e| TokenError::Failed {
            source: Box::new(e),
        })?;
        Ok(tokens
            .into_iter()
            .map(|t| TokenEntry {
                name: t.name,
                role: match t.role {
                    store::Role::Admin => Role::Admin,
                    store::Role::Reader => Role::Reader,
                },
                created_ms: t.created_ms,
            })
            .collect())
    }

    fn revoke_token(&self, name: &str) -> Result<(), TokenError> {
        self.0.revoke_token(name).map_err(|e| match e {
            store::StoreError::NotFound { .. } => TokenError::NotFound {
                name: name.to_owned(),
            },
            other => TokenError::Failed {
                source: Box::new(other),
            },
        })
    }
}

/// The store's event log as an [`EventSink`].
#[derive(Clone)]
pub struct StoreLog(pub Arc<Store>);

fn bad(what: &str, text: &str) -> SinkError {
    SinkError::Refused {
        reason: format!("{what} {text:?} does not parse"),
        source: None,
    }
}

fn nid(text: &str) -> Result<Nid, SinkError> {
    text.parse().map_err(|_| bad("NID", text))
}

fn net(text: &str) -> Result<Net, SinkError> {
    text.parse().map_err(|_| bad("net", text))
}

fn status(name: &str) -> Result<HealthStatus, SinkError> {
    HealthStatus::ALL
        .into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| bad("health status", name))
}

fn queue(k: NiKindDoc) -> RecoveryQueue {
    match k {
        NiKindDoc::Local => RecoveryQueue::LocalNi,
        NiKindDoc::Peer => RecoveryQueue::PeerNi,
    }
}

/// The log entry of an admin change: `ACTION TARGET (DETAIL) by token NAME`.
pub fn change_text(token: &str, action: &str, target: Option<&str>, detail: &str) -> String {
    format!(
        "{action} {} ({detail}) by token {token}",
        target.unwrap_or("-")
    )
}

/// The token and action of a `ConfigChanged` entry.
pub fn parse_change(change: &str) -> Option<(String, String)> {
    let action = change.split_whitespace().next()?;
    let token = change.rsplit_once(" by token ")?.1;
    Some((token.to_owned(), action.to_owned()))
}

impl StoreLog {
    fn event(body: &EventBody) -> Result<Option<Event>, SinkError> {
        Ok(Some(match body {
            EventBody::Health {
                ni_kind,
                nid: n,
                before,
                after,
                cause,
            } => {
                let nid = nid(n)?;
                let cause = cause.as_deref().map(status).transpose()?;
                match ni_kind {
                    NiKindDoc::Local => Event::NiHealth {
                        nid,
                        before: *before,
                        after: *after,
                        cause,
                    },
                    NiKindDoc::Peer => Event::PeerNiHealth {
                        nid,
                        before: *before,
                        after: *after,
                        cause,
                    },
                }
            }
            EventBody::NiStatus { nid: n, status } => Event::NiState {
                nid: nid(n)?,
                up: status == "up",
            },
            EventBody::RecoveryQueued { queue: q, nid: n } => Event::RecoveryQueued {
                queue: queue(*q),
                nid: nid(n)?,
            },
            EventBody::RecoveryPing {
                queue: q,
                nid: n,
                ping_count,
                next_ping_ms,
            } => Event::RecoveryPing {
                queue: queue(*q),
                nid: nid(n)?,
                ping_count: *ping_count,
                next_ping_ms: *next_ping_ms,
            },
            EventBody::RecoveryLeft { queue: q, nid: n } => Event::RecoveryLeft {
                queue: queue(*q),
                nid: nid(n)?,
            },
            EventBody::Resend {
                status: s,
                from_ni,
                to_peer_ni,
                retry,
            } => Event::Resend {
                status: status(s)?,
                from_ni: nid(from_ni)?,
                to_peer_ni: nid(to_peer_ni)?,
                retry: *retry,
            },
            EventBody::Route {
                net: n,
                gateway,
                down,
                ..
            } => Event::RouteState {
                net: net(n)?,
                gateway: nid(gateway)?,
                up: down.is_none(),
                reason: down.clone(),
            },
            EventBody::Admin {
                token,
                action,
                target,
                detail,
            } => Event::ConfigChanged {
                change: change_text(token, action, target.as_deref(), detail),
            },
            // The store's log has no entry for these.
            _ => return Ok(None),
        }))
    }
}

impl EventSink for StoreLog {
    fn record(&self, event: &ApiEvent) -> Result<(), SinkError> {
        if let Some(e) = StoreLog::event(&event.event)? {
            self.0
                .append_event(event.at_ms, &e)
                .map_err(|e| SinkError::Failed {
                    source: Box::new(e),
                })?;
        }
        Ok(())
    }
}
