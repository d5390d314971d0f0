//! tshark's own LNet dissector as an independent check of the bytes we encode.
//!
//! A socklnd session is written as TCP segments with exact boundaries (text2pcap builds
//! the TCP/IP headers and sequence numbers), tshark decodes the capture, and its PDML
//! output is read back in document order: every `lnet.*` field with its position, raw
//! bytes and shown value, grouped into one [`Pdu`] per ksock message.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// The socklnd port tshark attaches its LNet dissector to.
pub const LNET_PORT: u16 = 988;
/// The port of the connecting side in the generated capture.
pub const CLIENT_PORT: u16 = 40000;

/// Which way a segment goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// From the connecting side to port 988.
    ToServer,
    /// From port 988 back to the connecting side.
    ToClient,
}

/// One TCP segment of the session.
#[derive(Debug, Clone)]
pub struct Segment {
    /// Its direction.
    pub dir: Dir,
    /// Its TCP payload.
    pub bytes: Vec<u8>,
}

/// One decoded field.
#[derive(Debug, Clone)]
pub struct Field {
    /// tshark's field name, e.g. `lnet.msg_type`.
    pub name: String,
    /// The value as tshark shows it.
    pub show: String,
    /// The raw bytes the field covers (empty for fields tshark gives no value, such as a
    /// REPLY's `lnet.payload`).
    pub raw: Vec<u8>,
    /// How many bytes tshark says the field covers.
    pub size: usize,
}

/// The fields of one ksock message as tshark decoded it, in order.
#[derive(Debug, Clone)]
pub struct Pdu {
    /// The direction of the segment it was decoded in.
    pub dir: Dir,
    /// Its fields, starting with `lnet.ksm_type`.
    pub fields: Vec<Field>,
}

impl Pdu {
    /// Every field of that name, in order.
    pub fn all(&self, name: &str) -> Vec<&Field> {
        self.fields.iter().filter(|f| f.name == name).collect()
    }

    /// The one field of that name.
    pub fn one(&self, name: &str) -> Result<&Field, String> {
        match self.all(name).as_slice() {
            [f] => Ok(f),
            other => Err(format!(
                "expected one {name} in PDU, found {}: {:?}",
                other.len(),
                self.fields.iter().map(|f| &f.name).collect::<Vec<_>>()
            )),
        }
    }

    /// The raw bytes of the one field of that name, read as a little-endian integer.
    pub fn le(&self, name: &str) -> Result<u64, String> {
        let f = self.one(name)?;
        if f.raw.len() > 8 {
            return Err(format!("{name} has {} bytes", f.raw.len()));
        }
        let mut b = [0u8; 8];
        b.get_mut(..f.raw.len())
            .ok_or_else(|| format!("{name} too long"))?
            .copy_from_slice(&f.raw);
        Ok(u64::from_le_bytes(b))
    }
}

/// Whether tshark and text2pcap are installed.
pub fn tools_present() -> bool {
    ["tshark", "text2pcap"].iter().all(|tool| {
        Command::new(tool)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}

/// Writes `segments` as a capture, has tshark decode it, and returns every ksock PDU it
/// found, in order. PUT payloads on `data_portals` are shown as `data.data`.
pub fn decode_session(segments: &[Segment], data_portals: &[u32]) -> Result<Vec<Pdu>, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let pcap = write_capture(dir.path(), segments)?;
    let lua = dir.path().join("portals.lua");
    std::fs::write(
        &lua,
        "local t = DissectorTable.get(\"lnet.ptl_index\")\n\
         local data = Dissector.get(\"data\")\n\
         for _, p in ipairs({...}) do t:add(tonumber(p), data) end\n",
    )
    .map_err(|e| format!("write lua: {e}"))?;
    let portals: Vec<String> = data_portals.iter().map(u32::to_string).collect();
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(&pcap).args(["-T", "pdml"]);
    cmd.arg("-X").arg(format!("lua_script:{}", lua.display()));
    for p in &portals {
        cmd.arg("-X").arg(format!("lua_script1:{p}"));
    }
    let out = cmd.output().map_err(|e| format!("run tshark: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "tshark failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let xml = String::from_utf8(out.stdout).map_err(|e| format!("tshark output: {e}"))?;
    parse_pdml(&xml)
}

fn write_capture(dir: &Path, segments: &[Segment]) -> Result<std::path::PathBuf, String> {
    let mut text = String::new();
    for s in segments {
        // text2pcap: '<' goes from the first -T port to the second, '>' the other way.
        let d = match s.dir {
            Dir::ToServer => '<',
            Dir::ToClient => '>',
        };
        let mut hex = String::with_capacity(s.bytes.len() * 2);
        for b in &s.bytes {
            let _ = write!(hex, "{b:02x}");
        }
        let _ = writeln!(text, "{d} {hex}");
    }
    let input = dir.join("session.txt");
    let pcap = dir.join("session.pcapng");
    std::fs::write(&input, text).map_err(|e| format!("write dump: {e}"))?;
    let out = Command::new("text2pcap")
        .args(["-q", "-D", "-r", r"^(?<dir>[<>])\s(?<data>[0-9a-f]+)$"])
        .args(["-T", &format!("{CLIENT_PORT},{LNET_PORT}")])
        .args(["-4", "10.0.0.2,10.0.0.1"])
        .arg(&input)
        .arg(&pcap)
        .output()
        .map_err(|e| format!("run text2pcap: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "text2pcap failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(pcap)
}

fn parse_pdml(xml: &str) -> Result<Vec<Pdu>, String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("PDML: {e}"))?;
    let mut pdus = Vec::new();
    for packet in doc.descendants().filter(|n| n.has_tag_name("packet")) {
        let fields: Vec<_> = packet
            .descendants()
            .filter(|n| n.has_tag_name("field"))
            .collect();
        let src_port = fields
            .iter()
            .find(|f| f.attribute("name") == Some("tcp.srcport"))
            .and_then(|f| f.attribute("show"))
            .ok_or("packet without tcp.srcport")?;
        let dir = if src_port == CLIENT_PORT.to_string() {
            Dir::ToServer
        } else {
            Dir::ToClient
        };
        for f in fields {
            let name = f.attribute("name").unwrap_or_default();
            if !(name.starts_with("lnet.") || name == "data.data") {
                continue;
            }
            let field = Field {
                name: name.to_owned(),
                show: f.attribute("show").unwrap_or_default().to_owned(),
                raw: unhex(f.attribute("value").unwrap_or_default())?,
                size: f
                    .attribute("size")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_default(),
            };
            if name == "lnet.ksm_type" {
                pdus.push(Pdu {
                    dir,
                    fields: Vec::new(),
                });
            }
            match pdus.last_mut() {
                Some(pdu) => pdu.fields.push(field),
                None => return Err(format!("{name} before any ksm_type")),
            }
        }
    }
    Ok(pdus)
}

fn unhex(text: &str) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    if bytes.len() % 2 != 0 {
        return Err(format!("odd hex {text:?}"));
    }
    bytes
        .chunks_exact(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
                .ok_or_else(|| format!("bad hex {text:?}"))
        })
        .collect()
}
