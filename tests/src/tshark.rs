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
    /// tshark's TCP stream index (one per connection).
    pub stream: u32,
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
    decode_file(&pcap, LNET_PORT, data_portals)
}

/// Has tshark decode a capture whose socklnd server listens on `server_port`, and
/// returns every ksock PDU it found, in order. PUT payloads on `data_portals` are shown as
/// `data.data`.
pub fn decode_file(
    pcap: &Path,
    server_port: u16,
    data_portals: &[u32],
) -> Result<Vec<Pdu>, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let lua = dir.path().join("portals.lua");
    std::fs::write(
        &lua,
        "local t = DissectorTable.get(\"lnet.ptl_index\")\n\
         local data = Dissector.get(\"data\")\n\
         for _, p in ipairs({...}) do t:add(tonumber(p), data) end\n",
    )
    .map_err(|e| format!("write lua: {e}"))?;
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(pcap).args(["-T", "pdml"]);
    cmd.arg("-d").arg(format!("tcp.port=={server_port},lnet"));
    // A real capture under load can hold a TCP retransmission; without this tshark gives
    // up reassembling the PDU it belongs to.
    cmd.args(["-o", "tcp.reassemble_out_of_order:TRUE"]);
    cmd.arg("-X").arg(format!("lua_script:{}", lua.display()));
    for p in data_portals {
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
    parse_pdml(&xml, server_port)
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

fn parse_pdml(xml: &str, server_port: u16) -> Result<Vec<Pdu>, String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("PDML: {e}"))?;
    let mut pdus = Vec::new();
    for packet in doc.descendants().filter(|n| n.has_tag_name("packet")) {
        let fields: Vec<_> = packet
            .descendants()
            .filter(|n| n.has_tag_name("field"))
            .collect();
        let shown = |name: &str| {
            fields
                .iter()
                .find(|f| f.attribute("name") == Some(name))
                .and_then(|f| f.attribute("show"))
                .ok_or_else(|| format!("packet without {name}"))
        };
        // Knock markers (UDP) and anything else without TCP carry no socklnd bytes.
        if shown("tcp.srcport").is_err() {
            continue;
        }
        let dir = if shown("tcp.srcport")? == server_port.to_string() {
            Dir::ToClient
        } else {
            Dir::ToServer
        };
        let stream: u32 = shown("tcp.stream")?
            .parse()
            .map_err(|e| format!("tcp.stream: {e}"))?;
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
                    stream,
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
    if !bytes.len().is_multiple_of(2) {
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

/// A live capture of one TCP port on the loopback interface, with dumpcap.
pub struct LiveCapture {
    child: std::process::Child,
    file: std::path::PathBuf,
    port: u16,
    said: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl LiveCapture {
    /// Starts capturing TCP port `port` on `lo` and returns once dumpcap writes what it
    /// sees.
    pub fn start(port: u16) -> Result<LiveCapture, String> {
        use std::io::BufRead as _;
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let file = dir.path().join("live.pcapng");
        let mut child = Command::new("dumpcap")
            .args(["-q", "-i", "lo", "-B", "64", "-f"])
            .arg(format!("tcp port {port} or udp port {port}"))
            .arg("-w")
            .arg(&file)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("run dumpcap: {e}"))?;
        let stderr = child.stderr.take().ok_or("dumpcap has no stderr")?;
        let (tx, rx) = std::sync::mpsc::channel();
        let said = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lines = std::sync::Arc::clone(&said);
        std::thread::spawn(move || {
            // dumpcap names the file once it captures, and reports drops when it stops.
            // If it exits first the channel closes.
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if line.starts_with("File:") {
                    let _ = tx.send(());
                }
                if let Ok(mut l) = lines.lock() {
                    l.push(line);
                }
            }
        });
        let capture = LiveCapture {
            child,
            file,
            port,
            said,
            _dir: dir,
        };
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| format!("dumpcap did not start capturing: {e}"))?;
        capture.knock()?;
        Ok(capture)
    }

    /// Sends a UDP datagram with a unique marker to the captured port number and waits
    /// (at most 200 times 50 ms) until the marker is in the capture file: then everything
    /// captured before it is in the file too. dumpcap names its file a moment before its
    /// filter sees packets, and holds packets for a while before writing them, so this is
    /// both the start and the flush barrier.
    fn knock(&self) -> Result<(), String> {
        static KNOCKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = KNOCKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut marker = b"lnet-router-knock".to_vec();
        marker.extend_from_slice(&std::process::id().to_le_bytes());
        marker.extend_from_slice(&n.to_le_bytes());
        let socket = std::net::UdpSocket::bind(("127.0.0.1", 0))
            .map_err(|e| format!("knock socket: {e}"))?;
        let (_never, pause) = std::sync::mpsc::channel::<()>();
        for _ in 0..200 {
            let _ = socket.send_to(&marker, ("127.0.0.1", self.port));
            let _ = pause.recv_timeout(std::time::Duration::from_millis(50));
            let bytes = std::fs::read(&self.file).unwrap_or_default();
            if bytes.windows(marker.len()).any(|w| w == marker.as_slice()) {
                return Ok(());
            }
        }
        Err(format!(
            "dumpcap did not write the knock on port {} within 10 s",
            self.port
        ))
    }

    /// Stops the capture once everything sent so far is in the file.
    pub fn stop(mut self) -> Result<CaptureFile, String> {
        self.knock()?;
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .map_err(|e| format!("kill: {e}"))?;
        if !status.success() {
            return Err("could not stop dumpcap".into());
        }
        self.child
            .wait()
            .map_err(|e| format!("wait dumpcap: {e}"))?;
        self.check_no_drops()?;
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let path = dir.path().join("capture.pcapng");
        std::fs::copy(&self.file, &path).map_err(|e| format!("keep capture: {e}"))?;
        Ok(CaptureFile {
            path,
            port: self.port,
            _dir: dir,
        })
    }

    /// Fails if dumpcap reported dropped packets: such a capture cannot be decoded whole.
    fn check_no_drops(&self) -> Result<(), String> {
        let said = self.said.lock().map(|l| l.clone()).unwrap_or_default();
        // "Packets received/dropped on interface 'Loopback: lo': 1234/0 (...)"
        let counts = said
            .iter()
            .find_map(|l| l.strip_prefix("Packets received/dropped on interface "))
            .and_then(|l| l.rsplit_once("': "))
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|pair| pair.split_once('/'))
            .ok_or_else(|| format!("dumpcap reported no drop count: {said:?}"))?;
        match counts.1.parse::<u64>() {
            Ok(0) => Ok(()),
            _ => Err(format!(
                "dumpcap dropped packets (received/dropped {}/{}): the capture is incomplete",
                counts.0, counts.1
            )),
        }
    }
}

impl Drop for LiveCapture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A finished capture of one socklnd server port.
pub struct CaptureFile {
    path: std::path::PathBuf,
    port: u16,
    _dir: tempfile::TempDir,
}

/// The bytes of one TCP connection, each direction in order.
#[derive(Debug, Clone, Default)]
pub struct TcpBytes {
    /// tshark's stream index.
    pub stream: u32,
    /// The connecting side's port.
    pub client_port: u16,
    /// Everything the connecting side sent.
    pub to_server: Vec<u8>,
    /// Everything the server side sent.
    pub to_client: Vec<u8>,
}

impl CaptureFile {
    /// Every ksock PDU tshark decodes, in capture order. PUT payloads on `data_portals`
    /// are shown as `data.data`.
    pub fn pdus(&self, data_portals: &[u32]) -> Result<Vec<Pdu>, String> {
        decode_file(&self.path, self.port, data_portals)
    }

    /// The TCP payload bytes of every connection to the server port, by stream.
    pub fn streams(&self) -> Result<Vec<TcpBytes>, String> {
        let out = Command::new("tshark")
            .arg("-r")
            .arg(&self.path)
            .args(["-Y", "tcp.len > 0", "-T", "fields"])
            .args(["-e", "tcp.stream", "-e", "tcp.srcport", "-e", "tcp.dstport"])
            .args(["-e", "tcp.payload"])
            .output()
            .map_err(|e| format!("run tshark: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "tshark failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let text = String::from_utf8(out.stdout).map_err(|e| format!("tshark output: {e}"))?;
        let mut streams: Vec<TcpBytes> = Vec::new();
        for line in text.lines() {
            let cols: Vec<&str> = line.split('\t').collect();
            let [stream, src, dst, payload] = cols.as_slice() else {
                return Err(format!("unexpected tshark line {line:?}"));
            };
            let stream: u32 = stream.parse().map_err(|e| format!("stream: {e}"))?;
            let src: u16 = src.parse().map_err(|e| format!("srcport: {e}"))?;
            let dst: u16 = dst.parse().map_err(|e| format!("dstport: {e}"))?;
            let bytes = unhex(&payload.replace(':', ""))?;
            let client_port = if dst == self.port { src } else { dst };
            let entry = match streams.iter_mut().find(|s| s.stream == stream) {
                Some(e) => e,
                None => {
                    streams.push(TcpBytes {
                        stream,
                        client_port,
                        ..TcpBytes::default()
                    });
                    streams
                        .last_mut()
                        .ok_or("stream list is empty after a push")?
                }
            };
            if dst == self.port {
                entry.to_server.extend_from_slice(&bytes);
            } else {
                entry.to_client.extend_from_slice(&bytes);
            }
        }
        Ok(streams)
    }
}
