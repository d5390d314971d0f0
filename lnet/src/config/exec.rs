//! The commands `lnetctl import --exec` runs: the `ping:` and `discover:` sections of a
//! YAML document. Every other top-level key is passed over, as lnetctl's exec table does.
//!
//! Each section is a mapping in one of lnetctl's two forms:
//!
//! ```text
//! ping:                          # as lnetctl ping sends it
//!     source: 10.0.0.1@tcp       #   optional
//!     timeout: 2000              #   milliseconds, optional (1000)
//!     nids: [10.0.0.2@tcp, 10.0.0.3@tcp]
//! discover:
//!     force: 1                   #   optional
//!     nids: [10.0.0.2@tcp]
//! ping:                          # the older form: one NID
//!     primary nid: 10.0.0.2@tcp
//!     source_nid: 10.0.0.1@tcp
//!     timeout: 1000
//! ```
//!
//! [`parse_exec`] gives them in the order of the document, each NID checked.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::error::ConfigError;
use super::raw::{at, from_yaml};
use crate::nid::Nid;

/// The timeout of a ping that names none, milliseconds (lnetctl's default).
pub const DEFAULT_PING_TIMEOUT_MS: u64 = 1000;

/// One command of an `import --exec` document.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExecCommand {
    /// `ping:`: ping each NID.
    Ping {
        /// The NIDs, in the order given.
        nids: Vec<Nid>,
        /// Milliseconds to wait for each reply.
        timeout_ms: u64,
        /// The local NI to send from.
        source: Option<Nid>,
    },
    /// `discover:`: discover each NID.
    Discover {
        /// The NIDs, in the order given.
        nids: Vec<Nid>,
        /// `force`: discover again a peer that is known.
        force: bool,
    },
}

#[derive(Deserialize)]
struct RawExec {
    ping: Option<Spanned<RawPing>>,
    discover: Option<Spanned<RawDiscover>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPing {
    nids: Option<Vec<Spanned<String>>>,
    #[serde(rename = "primary nid")]
    primary_nid: Option<Spanned<String>>,
    timeout: Option<u64>,
    source: Option<Spanned<String>>,
    source_nid: Option<Spanned<String>>,
    /// lnetctl's sequence number of the older form: accepted, not used.
    #[serde(rename = "seq_no")]
    _seq_no: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDiscover {
    nids: Option<Vec<Spanned<String>>>,
    #[serde(rename = "primary nid")]
    primary_nid: Option<Spanned<String>>,
    force: Option<u8>,
    /// lnetctl's sequence number of the older form: accepted, not used.
    #[serde(rename = "seq_no")]
    _seq_no: Option<serde::de::IgnoredAny>,
}

fn nid(field: &str, s: &Spanned<String>) -> Result<Nid, ConfigError> {
    s.value.trim().parse().map_err(|e| ConfigError::InvalidNid {
        field: field.to_owned(),
        value: s.value.clone(),
        source: Box::new(e),
        at: at(s),
    })
}

/// The NIDs of a section: its `nids` list, then its `primary nid`; at least one.
fn nids(
    section: &'static str,
    list: Option<&[Spanned<String>]>,
    primary: Option<&Spanned<String>>,
    whole: &Spanned<impl Sized>,
) -> Result<Vec<Nid>, ConfigError> {
    let mut out = Vec::new();
    for (i, s) in list.unwrap_or_default().iter().enumerate() {
        out.push(nid(&format!("{section}.nids[{i}]"), s)?);
    }
    if let Some(p) = primary {
        out.push(nid(&format!("{section}.primary nid"), p)?);
    }
    if out.is_empty() {
        return Err(ConfigError::MissingKey {
            key: "nids".to_owned(),
            at: at(whole),
        });
    }
    Ok(out)
}

/// Reads the `ping:` and `discover:` sections of `text`, in the order they appear.
pub fn parse_exec(text: &str) -> Result<Vec<ExecCommand>, ConfigError> {
    let raw: RawExec = serde_saphyr::from_str(text).map_err(|e| from_yaml(&e))?;
    let mut out = Vec::new();
    if let Some(p) = &raw.ping {
        let source = match (&p.value.source, &p.value.source_nid) {
            (Some(s), _) => Some(nid("ping.source", s)?),
            (None, Some(s)) => Some(nid("ping.source_nid", s)?),
            (None, None) => None,
        };
        let cmd = ExecCommand::Ping {
            nids: nids(
                "ping",
                p.value.nids.as_deref(),
                p.value.primary_nid.as_ref(),
                p,
            )?,
            timeout_ms: p.value.timeout.unwrap_or(DEFAULT_PING_TIMEOUT_MS),
            source,
        };
        out.push((at(p), cmd));
    }
    if let Some(d) = &raw.discover {
        let cmd = ExecCommand::Discover {
            nids: nids(
                "discover",
                d.value.nids.as_deref(),
                d.value.primary_nid.as_ref(),
                d,
            )?,
            force: d.value.force.unwrap_or(0) != 0,
        };
        out.push((at(d), cmd));
    }
    out.sort_by_key(|(pos, _)| (pos.line, pos.column));
    Ok(out.into_iter().map(|(_, c)| c).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    fn n(s: &str) -> Nid {
        s.parse().unwrap()
    }

    #[test]
    fn lnetctls_ping_and_discover_sections_are_read_in_document_order() {
        let cmds = parse_exec(
            "discover:\n    force: 1\n    nids: [10.0.0.2@tcp]\n\
             net:\n    - net type: tcp\n\
             ping:\n    source: 10.0.0.1@tcp\n    timeout: 2500\n    nids:\n      - 10.0.0.2@tcp\n      - 10.0.0.3@tcp\n",
        )
        .unwrap();
        assert_eq!(
            cmds,
            [
                ExecCommand::Discover {
                    nids: vec![n("10.0.0.2@tcp")],
                    force: true
                },
                ExecCommand::Ping {
                    nids: vec![n("10.0.0.2@tcp"), n("10.0.0.3@tcp")],
                    timeout_ms: 2500,
                    source: Some(n("10.0.0.1@tcp")),
                },
            ]
        );
    }

    #[test]
    fn the_older_form_names_one_primary_nid_and_the_timeout_defaults_to_a_second() {
        let cmds = parse_exec("ping:\n    primary nid: 10.0.0.2@tcp\n    seq_no: 3\n").unwrap();
        assert_eq!(
            cmds,
            [ExecCommand::Ping {
                nids: vec![n("10.0.0.2@tcp")],
                timeout_ms: DEFAULT_PING_TIMEOUT_MS,
                source: None,
            }]
        );
    }

    #[test]
    fn a_document_with_no_command_runs_nothing() {
        assert_eq!(parse_exec("route:\n    - net: tcp1\n").unwrap(), []);
    }

    #[test]
    fn a_bad_nid_a_section_without_nids_and_an_unknown_key_are_named() {
        let e = parse_exec("ping:\n    nids: [10.0.0.2@tcp, bogus]\n").unwrap_err();
        assert!(
            matches!(&e, ConfigError::InvalidNid { field, .. } if field == "ping.nids[1]"),
            "{e}"
        );
        let e = parse_exec("discover:\n    force: 1\n").unwrap_err();
        assert!(
            matches!(&e, ConfigError::MissingKey { key, .. } if key == "nids"),
            "{e}"
        );
        let e = parse_exec("ping:\n    nid: 10.0.0.2@tcp\n").unwrap_err();
        assert!(
            matches!(&e, ConfigError::UnknownKey { key, .. } if key == "nid"),
            "{e}"
        );
    }
}
