//! The YAML tree the `lnetctl` printers build (keys in lnetctl's order, scalars already in
//! their printed form) and the writers of lnetctl's layouts (reference 4.0):
//!
//! - netlink/libyaml ([`NETLINK`]): indent 6, a sequence's dash at its parent's column
//!   padded to 6 (`-     net type: tcp`);
//! - cYAML ([`CYAML`]): indent 4, items as `    - key` with continuation keys at +2;
//! - the nested cYAML of the ioctl-era `net show` ([`write_cyaml`]).
//!
//! Shared by the configuration printer and the `show` documents.

use std::borrow::Cow;
use std::fmt::{Display, Write};

/// A YAML value: a scalar already in its printed form, a map with ordered keys, or a list.
pub(crate) enum Node {
    Scalar(String),
    Map(Vec<(Key, Node)>),
    Seq(Vec<Node>),
}

/// A map key.
pub(crate) type Key = Cow<'static, str>;

/// A map under construction.
#[derive(Default)]
pub(crate) struct MapB(pub(crate) Vec<(Key, Node)>);

impl MapB {
    pub(crate) fn scalar(mut self, key: &'static str, v: impl Display) -> MapB {
        self.0
            .push((key.into(), Node::Scalar(plain(&v.to_string()))));
        self
    }

    pub(crate) fn opt(self, key: &'static str, v: Option<impl Display>) -> MapB {
        match v {
            Some(v) => self.scalar(key, v),
            None => self,
        }
    }

    /// A flag: `true` / `false`, unquoted.
    pub(crate) fn flag(self, key: &'static str, v: Option<bool>) -> MapB {
        match v {
            Some(v) => self.raw(key, v.to_string()),
            None => self,
        }
    }

    pub(crate) fn raw(mut self, key: &'static str, printed: String) -> MapB {
        self.0.push((key.into(), Node::Scalar(printed)));
        self
    }

    pub(crate) fn node(mut self, key: &'static str, n: Option<Node>) -> MapB {
        if let Some(n) = n {
            self.0.push((key.into(), n));
        }
        self
    }

    pub(crate) fn done(self) -> Node {
        Node::Map(self.0)
    }
}

/// A scalar as a plain YAML scalar when it reads back as the same string, else
/// double-quoted.
pub(crate) fn plain(s: &str) -> String {
    let needs_quotes = s.is_empty()
        || s != s.trim()
        || (s.starts_with([
            '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%',
            '@', '`', '~',
        ]) && !looks_like_number(s))
        || s.contains(": ")
        || s.contains(" #")
        || s.ends_with(':')
        || s.chars().any(|c| c.is_control())
        || matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n" | "null"
        );
    if needs_quotes {
        let mut q = String::with_capacity(s.len() + 2);
        q.push('"');
        for c in s.chars() {
            match c {
                '"' => q.push_str("\\\""),
                '\\' => q.push_str("\\\\"),
                '\n' => q.push_str("\\n"),
                '\t' => q.push_str("\\t"),
                c if c.is_control() => {
                    let _ = write!(q, "\\u{:04x}", u32::from(c));
                }
                c => q.push(c),
            }
        }
        q.push('"');
        q
    } else {
        s.to_owned()
    }
}

/// Integers (possibly negative) print plain; everything else starting with `-` is quoted.
fn looks_like_number(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Layout parameters of one renderer.
#[derive(Clone, Copy)]
pub(crate) struct Style {
    /// Indent of a nested map.
    pub(crate) map_step: usize,
    /// Column of a sequence's dash, relative to its parent key.
    pub(crate) seq_offset: usize,
    /// The dash and its padding; the item's keys start after it.
    pub(crate) dash: &'static str,
}

pub(crate) const NETLINK: Style = Style {
    map_step: 6,
    seq_offset: 0,
    dash: "-     ",
};

pub(crate) const CYAML: Style = Style {
    map_step: 4,
    seq_offset: 4,
    dash: "- ",
};

/// Writes the entries of a map whose keys sit at `indent`. `first` is the prefix of the
/// first line (a sequence dash) if the map is a sequence item.
pub(crate) fn write_map(
    out: &mut String,
    entries: &[(Key, Node)],
    indent: usize,
    first: Option<&str>,
    style: Style,
) {
    for (i, (key, value)) in entries.iter().enumerate() {
        match (i, first) {
            (0, Some(dash)) => {
                push_spaces(out, indent.saturating_sub(dash.len()));
                out.push_str(dash);
            }
            _ => push_spaces(out, indent),
        }
        out.push_str(key);
        out.push(':');
        match value {
            Node::Scalar(s) => {
                out.push(' ');
                out.push_str(s);
                out.push('\n');
            }
            Node::Map(m) if m.is_empty() => out.push_str(" {}\n"),
            Node::Seq(s) if s.is_empty() => out.push_str(" []\n"),
            Node::Map(m) => {
                out.push('\n');
                write_map(out, m, indent + style.map_step, None, style);
            }
            Node::Seq(items) => {
                out.push('\n');
                write_seq(out, items, indent + style.seq_offset, style);
            }
        }
    }
}

/// Writes sequence items with their dash at `dash_col`.
fn write_seq(out: &mut String, items: &[Node], dash_col: usize, style: Style) {
    let key_col = dash_col + style.dash.len();
    for item in items {
        match item {
            Node::Map(m) if !m.is_empty() => write_map(out, m, key_col, Some(style.dash), style),
            Node::Map(_) => {
                push_spaces(out, dash_col);
                out.push_str(style.dash);
                out.push_str("{}\n");
            }
            Node::Seq(_) => {
                // Not produced by this module; written as an empty item rather than lost.
                push_spaces(out, dash_col);
                out.push_str(style.dash);
                out.push_str("[]\n");
            }
            Node::Scalar(s) => {
                push_spaces(out, dash_col);
                out.push_str(style.dash);
                out.push_str(s);
                out.push('\n');
            }
        }
    }
}

fn push_spaces(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// Writes map entries in the cYAML layout with nesting, as the ioctl-era (2.14) `net show`
/// prints it: each level is 4 columns deeper than its parent, keys inside a sequence item
/// sit 2 past the item's dash (so a nested sequence's dash is 2 past its parent key), and
/// an empty map or list prints as the bare key. `depth` is the nesting level of the keys,
/// `in_seq` whether they lie inside a sequence item, and `dash` whether the first key
/// starts a sequence item.
pub(crate) fn write_cyaml(
    out: &mut String,
    entries: &[(Key, Node)],
    depth: usize,
    in_seq: bool,
    dash: bool,
) {
    let base = 4 * depth;
    for (i, (key, value)) in entries.iter().enumerate() {
        if i == 0 && dash {
            push_spaces(out, base);
            out.push_str("- ");
        } else {
            push_spaces(out, base + if in_seq { 2 } else { 0 });
        }
        out.push_str(key);
        out.push(':');
        match value {
            Node::Scalar(s) => {
                out.push(' ');
                out.push_str(s);
                out.push('\n');
            }
            Node::Map(m) => {
                out.push('\n');
                write_cyaml(out, m, depth + 1, in_seq, false);
            }
            Node::Seq(items) => {
                out.push('\n');
                for item in items {
                    match item {
                        Node::Map(m) if !m.is_empty() => {
                            write_cyaml(out, m, depth + 1, true, true);
                        }
                        Node::Scalar(s) => {
                            push_spaces(out, 4 * (depth + 1));
                            out.push_str("- ");
                            out.push_str(s);
                            out.push('\n');
                        }
                        Node::Map(_) | Node::Seq(_) => {
                            push_spaces(out, 4 * (depth + 1));
                            out.push_str("-\n");
                        }
                    }
                }
            }
        }
    }
}
