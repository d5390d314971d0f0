//! The Prometheus text format (0.0.4): metric families with their samples, written out.

use std::fmt::Write as _;

/// A sample's value: a count, a signed gauge (credits go negative while messages wait) or
/// a fraction (seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value {
    /// A count or a non-negative gauge.
    Unsigned(u64),
    /// A gauge that may be negative.
    Signed(i64),
    /// A real number.
    Real(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Unsigned(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Signed(v)
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Value {
        Value::Signed(i64::from(v))
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Value {
        Value::Unsigned(u64::from(v))
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Unsigned(u64::from(v))
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Value {
        Value::Unsigned(u64::try_from(v).unwrap_or(u64::MAX))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Real(v)
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Unsigned(v) => write!(f, "{v}"),
            Value::Signed(v) => write!(f, "{v}"),
            Value::Real(v) if v.is_nan() => f.write_str("NaN"),
            Value::Real(v) if v.is_infinite() => {
                f.write_str(if *v > 0.0 { "+Inf" } else { "-Inf" })
            }
            Value::Real(v) => write!(f, "{v}"),
        }
    }
}

/// Labels of a sample: name and value, in order.
pub(crate) type Labels = Vec<(&'static str, String)>;

/// Escapes a label value (`\`, `"` and newlines).
fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// A metric family: its samples, each with its labels.
pub(crate) struct Family<'a> {
    name: &'a str,
    help: &'a str,
    kind: &'a str,
    samples: Vec<(Labels, Value)>,
}

impl<'a> Family<'a> {
    /// A counter (its name ends in `_total`).
    pub(crate) fn counter(name: &'a str, help: &'a str) -> Family<'a> {
        Family {
            name,
            help,
            kind: "counter",
            samples: Vec::new(),
        }
    }

    /// A gauge.
    pub(crate) fn gauge(name: &'a str, help: &'a str) -> Family<'a> {
        Family {
            name,
            help,
            kind: "gauge",
            samples: Vec::new(),
        }
    }

    /// Adds a sample.
    pub(crate) fn add(&mut self, labels: Labels, value: impl Into<Value>) {
        self.samples.push((labels, value.into()));
    }

    /// Adds a sample (builder form).
    pub(crate) fn with(mut self, labels: Labels, value: impl Into<Value>) -> Self {
        self.add(labels, value);
        self
    }
}

/// A Prometheus text exposition being written.
#[derive(Debug, Default)]
pub(crate) struct Exposition {
    out: String,
    /// Labels added to every `lustre_*` sample (the HPE/GSI exporters' `component` and
    /// `target`), when asked for.
    lustre_labels: Labels,
}

impl Exposition {
    /// An exposition whose `lustre_*` samples also carry `lustre_labels`.
    pub(crate) fn new(lustre_labels: Labels) -> Exposition {
        Exposition {
            out: String::new(),
            lustre_labels,
        }
    }

    /// Writes a family (nothing when it has no sample).
    pub(crate) fn family(&mut self, f: Family<'_>) {
        if f.samples.is_empty() {
            return;
        }
        let extra: &[(&str, String)] = if f.name.starts_with("lustre_") {
            &self.lustre_labels
        } else {
            &[]
        };
        let _ = writeln!(self.out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(self.out, "# TYPE {} {}", f.name, f.kind);
        for (labels, value) in f.samples {
            let l: Vec<String> = extra
                .iter()
                .chain(labels.iter())
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            if l.is_empty() {
                let _ = writeln!(self.out, "{} {value}", f.name);
            } else {
                let _ = writeln!(self.out, "{}{{{}}} {value}", f.name, l.join(","));
            }
        }
    }

    /// The text.
    pub(crate) fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_written_with_escaped_labels_and_signed_values() {
        let mut x = Exposition::new(vec![("component", "lnet".into())]);
        x.family(
            Family::gauge("lnet_router_peer_rtr_credits", "Credits.")
                .with(vec![("nid", "a\"b\\c\nd".into())], -3),
        );
        x.family(Family::counter("lustre_errors_total", "Errors.").with(vec![], 7u64));
        x.family(Family::gauge("empty", "Nothing."));
        x.family(Family::gauge("process_cpu", "CPU.").with(vec![], 1.5));
        assert_eq!(
            x.finish(),
            "# HELP lnet_router_peer_rtr_credits Credits.\n\
             # TYPE lnet_router_peer_rtr_credits gauge\n\
             lnet_router_peer_rtr_credits{nid=\"a\\\"b\\\\c\\nd\"} -3\n\
             # HELP lustre_errors_total Errors.\n\
             # TYPE lustre_errors_total counter\n\
             lustre_errors_total{component=\"lnet\"} 7\n\
             # HELP process_cpu CPU.\n\
             # TYPE process_cpu gauge\n\
             process_cpu 1.5\n"
        );
    }
}
