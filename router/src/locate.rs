//! Finds the line of a field path such as `route[0].gateway` or `net[1].local NI(s)[0].nid`
//! in the YAML text it was parsed from, for errors found after parsing (the typed model
//! keeps no positions).
//!
//! This reads the block layout `lnetctl export` writes (one key per line, list items
//! introduced by `- `), which is what the configuration file holds; flow collections
//! (`{...}`, `[...]`) are not followed. When a path cannot be followed to its end, the line
//! of the deepest key found is returned.

/// One meaningful line: its number (from 1), where its first key starts (after the
/// indentation and any `- ` markers), the key, and whether it starts a list item.
#[derive(Debug)]
struct Line<'a> {
    number: u64,
    indent: usize,
    key_col: usize,
    key: Option<&'a str>,
    item: bool,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed == "---" {
            continue;
        }
        let indent = raw.len() - trimmed.len();
        let mut rest = trimmed;
        let mut col = indent;
        let mut item = false;
        while rest == "-" || rest.starts_with("- ") {
            item = true;
            let after = rest.get(1..).unwrap_or("");
            let next = after.trim_start();
            col += 1 + (after.len() - next.len());
            rest = next;
        }
        let key = rest
            .find(':')
            .filter(|&i| {
                rest.get(i + 1..)
                    .is_some_and(|s| s.is_empty() || s.starts_with(' '))
            })
            .and_then(|i| rest.get(..i))
            .map(str::trim_end)
            .filter(|k| !k.is_empty());
        out.push(Line {
            number: u64::try_from(i + 1).unwrap_or(u64::MAX),
            indent,
            key_col: col,
            key,
            item,
        });
    }
    out
}

/// One step of a path: a key, and an optional list index after it.
fn segments(path: &str) -> Vec<(&str, Option<usize>)> {
    path.split('.')
        .map(|seg| {
            if let Some(open) = seg.rfind('[') {
                if let Some(idx) = seg
                    .strip_suffix(']')
                    .and_then(|s| s.get(open + 1..))
                    .and_then(|n| n.parse().ok())
                {
                    return (seg.get(..open).unwrap_or(seg), Some(idx));
                }
            }
            (seg, None)
        })
        .collect()
}

/// The line (from 1) of `path` in `text`, or of the deepest part of it that was found;
/// `None` when not even its first key is in the text.
pub fn line_of(text: &str, path: &str) -> Option<u64> {
    let all = lines(text);
    // The lines of the mapping being searched, by index into `all`.
    let mut scope = 0..all.len();
    let mut found = None;
    for (key, index) in segments(path) {
        let col = all.get(scope.start)?.key_col;
        let at = scope.clone().find(|&i| {
            all.get(i)
                .is_some_and(|l| l.key_col == col && l.key == Some(key))
        });
        let Some(at) = at else { break };
        let line = all.get(at)?;
        found = Some(line.number);
        // The value's lines: deeper than the key, or list items at the key's own indent.
        let base = line.key_col;
        let mut end = at + 1;
        while end < scope.end {
            let Some(l) = all.get(end) else { break };
            if l.indent > base || (l.item && l.indent == base) {
                end += 1;
            } else {
                break;
            }
        }
        scope = at + 1..end;
        if let Some(index) = index {
            let Some(first) = all.get(scope.start) else {
                break;
            };
            let item_indent = first.indent;
            let starts: Vec<usize> = scope
                .clone()
                .filter(|&i| {
                    all.get(i)
                        .is_some_and(|l| l.item && l.indent == item_indent)
                })
                .collect();
            let Some(&start) = starts.get(index) else {
                break;
            };
            let stop = starts.get(index + 1).copied().unwrap_or(scope.end);
            found = all.get(start).map(|l| l.number);
            scope = start..stop;
        }
        if scope.is_empty() {
            break;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
# comment
net:
    - net type: tcp
      local NI(s):
        - nid: 10.0.0.1@tcp
          interfaces:
              0: eth0
        - nid: 10.0.0.2@tcp
    - net type: tcp1
      local NI(s):
        - nid: 10.0.1.1@tcp1
route:
- net: o2ib
  gateway: 10.0.0.9@tcp
routing:
    enable: 1
global:
    retry_count: 3
lnet-router:
    acceptor_port: 988
";

    #[test]
    fn finds_keys_and_list_items() {
        assert_eq!(line_of(DOC, "net"), Some(2));
        assert_eq!(line_of(DOC, "net[0].net type"), Some(3));
        assert_eq!(line_of(DOC, "net[0].local NI(s)[1].nid"), Some(8));
        assert_eq!(line_of(DOC, "net[1].local NI(s)[0].nid"), Some(11));
        assert_eq!(line_of(DOC, "net[0].local NI(s)[0].interfaces"), Some(6));
        assert_eq!(line_of(DOC, "route[0].gateway"), Some(14));
        assert_eq!(line_of(DOC, "route"), Some(12));
        assert_eq!(line_of(DOC, "routing.enable"), Some(16));
        assert_eq!(line_of(DOC, "global.retry_count"), Some(18));
        assert_eq!(line_of(DOC, "lnet-router.acceptor_port"), Some(20));
    }

    #[test]
    fn reads_the_libyaml_layout_of_lnetctl_export() {
        let doc = "peer:\n-     primary nid: 1.2.3.4@tcp\n      Multi-Rail: true\n      peer ni:\n      -     nid: 1.2.3.4@tcp\n      -     nid: 1.2.3.5@tcp\n-     primary nid: 1.2.3.9@tcp\n";
        assert_eq!(line_of(doc, "peer[0].peer ni[1].nid"), Some(6));
        assert_eq!(line_of(doc, "peer[1].primary nid"), Some(7));
    }

    #[test]
    fn falls_back_to_the_deepest_key_found() {
        assert_eq!(line_of(DOC, "net[0].local NI(s)[5].nid"), Some(4));
        assert_eq!(line_of(DOC, "global.numa_range"), Some(17));
        assert_eq!(line_of(DOC, "peer[0].primary nid"), None);
    }
}
