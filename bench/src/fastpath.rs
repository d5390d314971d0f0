//! The per-message work of forwarding, without tasks or sockets, for an instruction count:
//! what a router does between the bytes of a message arriving on one socklnd connection
//! and the bytes of it leaving on another.
//!
//! For each message: the socklnd deframer (header-first, as the connection reader runs it)
//! yields the ksock header and the decoded, checked LNet header, then the payload; the
//! forward decision the router's forwarding path makes
//! ([`lnet::forward::ForwardTable::next_hop`]: the best of the routes to the destination
//! net, then the Multi-Rail choice of the local NI and the gateway's peer NI, over the
//! table the LNet actor publishes, in which each route's state is already decided); a
//! router buffer is taken against the sending peer's router-buffer credits and given back
//! ([`lnet::rtrbuf::RouterBuffers`]); the frame for the next hop is encoded
//! ([`lnd::socklnd::wire::encode_lnet`]).
//!
//! What it leaves out, and what the instruction count therefore does not cover: the
//! lookups of the NI and peer NI cells and the credits charged in them, the hand-off to
//! the next hop's LND and its completion, and the system calls.

use bytes::BytesMut;
use lnd::socklnd::wire::{encode_lnet, Deframer, Event, KsockHeader, ProtoVersion, Side};
use lnet::forward::{ForwardMsg, ForwardNi, ForwardRoute, ForwardTable, Live, MrPeer, NextHop};
use lnet::nid::PID_LUSTRE;
use lnet::rtrbuf::{Requested, RouterBuffers};
use lnet::udsp::UdspPolicy;
use lnet::{ByteOrder, Header, HeaderForm, Message, Nid, WireHandle};

use crate::BenchError;

/// The state a router keeps across messages: the deframer of the incoming connection,
/// the forward table (its NIs and routes), and its router buffers.
#[derive(Debug)]
pub struct Forwarder {
    deframer: Deframer,
    table: ForwardTable,
    buffers: RouterBuffers<Nid, u64>,
    out: Vec<u8>,
}

/// What one message cost in bytes written (to keep the work observable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Forwarded {
    /// Messages forwarded.
    pub messages: u64,
    /// Bytes of the frames written for the next hop.
    pub bytes: u64,
}

fn parse(s: &str) -> Result<Nid, BenchError> {
    crate::topo::nid(s)
}

/// The sender's NID (on tcp), the destination's (on tcp2, two hops away), the gateways
/// (on tcp1).
pub struct Names {
    /// The end node that sent the message.
    pub src: Nid,
    /// The peer that handed it to this router.
    pub from: Nid,
    /// The final destination.
    pub dest: Nid,
    /// The two gateways toward the destination's net.
    pub gateways: [Nid; 2],
}

impl Names {
    /// The names the harness uses.
    pub fn new() -> Result<Names, BenchError> {
        Ok(Names {
            src: parse("10.0.0.2@tcp")?,
            from: parse("10.0.0.2@tcp")?,
            dest: parse("10.2.0.2@tcp2")?,
            gateways: [parse("10.1.0.1@tcp1")?, parse("10.1.0.3@tcp1")?],
        })
    }
}

/// One encoded frame: a PUT of `payload` bytes from `n.src` to `n.dest`.
pub fn frame(n: &Names, payload: usize, seq: u64) -> Result<Vec<u8>, BenchError> {
    let header = Header {
        dest_nid: n.dest,
        src_nid: n.src,
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length: u32::try_from(payload)
            .map_err(|_| BenchError::Usage("payload too large".to_owned()))?,
        msg: Message::Put {
            ack_wmd: WireHandle {
                interface_cookie: 7,
                object_cookie: seq,
            },
            match_bits: 0x77,
            hdr_data: seq,
            ptl_index: 9,
            offset: 0,
        },
    };
    let mut out = Vec::new();
    encode_lnet(
        &KsockHeader::lnet(),
        &header,
        HeaderForm::Nid4,
        &vec![0x5a; payload],
        ByteOrder::Little,
        &mut out,
    )
    .map_err(|e| BenchError::Setup(format!("encode: {e}")))?;
    Ok(out)
}

impl Forwarder {
    /// A router with an NI on tcp and `far_nis` (1 or more) on tcp1, and two live routes
    /// to `n.dest`'s net through `n.gateways`. With one NI on tcp1 the Multi-Rail choice
    /// has nothing to compare; with more it compares them.
    pub fn new(n: &Names, far_nis: u8) -> Result<Forwarder, BenchError> {
        let ni = |s: &str| {
            parse(s).map(|nid| ForwardNi {
                nid,
                link_down: false,
                numa_distance: 0,
            })
        };
        let routes = n
            .gateways
            .iter()
            .map(|gw| ForwardRoute {
                net: n.dest.net,
                gateway: *gw,
                up: true,
                priority: 0,
                hops: Some(1),
            })
            .collect();
        let mut nis = vec![ni("10.0.0.1@tcp")?];
        for i in 0..far_nis.max(1) {
            nis.push(ni(&format!("10.1.1.{}@tcp1", u32::from(i) + 1))?);
        }
        let table = ForwardTable {
            nis,
            routes,
            udsp: UdspPolicy::default(),
            numa_range: 0,
        };
        Ok(Forwarder {
            deframer: Deframer::for_frames(Side::Passive, ProtoVersion::V3, ByteOrder::Little)
                .header_first(),
            table,
            buffers: RouterBuffers::new(lnet::rtrbuf::per_cpt([0, 0, 0], 1), 8),
            out: Vec::with_capacity(1 << 16),
        })
    }

    /// Forwards every message in `bytes` (whole frames); the frames written for the next
    /// hop go to `sink`.
    pub fn forward(
        &mut self,
        from: Nid,
        bytes: &[u8],
        sink: &mut dyn FnMut(&[u8]),
    ) -> Result<Forwarded, BenchError> {
        let mut done = Forwarded::default();
        self.deframer.push(bytes);
        let bad = |e: String| BenchError::Setup(format!("deframe: {e}"));
        loop {
            let event = self.deframer.poll().map_err(|e| bad(e.to_string()))?;
            let (header, payload) = match event {
                None => break,
                Some(Event::LnetHeader { header, .. }) => {
                    let len = usize::try_from(header.payload_length).unwrap_or(0);
                    self.deframer
                        .receive_payload(BytesMut::with_capacity(len))
                        .map_err(|e| bad(e.to_string()))?;
                    continue;
                }
                Some(Event::LnetPayload {
                    header, payload, ..
                }) => (header, payload.map(BytesMut::freeze).unwrap_or_default()),
                Some(Event::Lnet {
                    header, payload, ..
                }) => (header, payload),
                Some(_) => continue,
            };
            let hop = self.next_hop(&header)?;
            let grant = match self
                .buffers
                .request(from, header.payload_length, done.messages)
            {
                Requested::Granted(g) => g,
                Requested::Waiting | Requested::Refused(..) => {
                    return Err(BenchError::Setup("no router buffer".to_owned()))
                }
            };
            self.out.clear();
            encode_lnet(
                &KsockHeader::lnet(),
                &header,
                HeaderForm::Nid4,
                &payload,
                ByteOrder::Little,
                &mut self.out,
            )
            .map_err(|e| BenchError::Setup(format!("encode: {e}")))?;
            sink(&self.out);
            std::hint::black_box(hop);
            let woken = self.buffers.release(grant);
            debug_assert!(woken.is_empty());
            done.messages = done.messages.saturating_add(1);
            done.bytes = done
                .bytes
                .saturating_add(u64::try_from(self.out.len()).unwrap_or(0));
        }
        Ok(done)
    }

    /// The next hop of `header`, which arrived on tcp: the best of the live routes, then
    /// the local NI and gateway NI, as the forwarding path decides (no Multi-Rail peer;
    /// every NI and peer NI at full health with its credits free).
    fn next_hop(&self, header: &Header) -> Result<NextHop, BenchError> {
        let msg = ForwardMsg {
            src: header.src_nid,
            dest: header.dest_nid,
            arrived_on: header.src_nid.net,
            msg_type: header.msg_type(),
        };
        let live = |_: &Nid| Live {
            tx_credits: 8,
            ..Live::UNKNOWN
        };
        self.table
            .next_hop(&msg, |_| None::<std::sync::Arc<MrPeer>>, live, live)
            .map_err(|e| BenchError::Setup(e.to_string()))
    }
}

/// Forwards `count` PUTs of `payload` bytes, fed to the deframer `batch` frames at a time,
/// through a router with `far_nis` NIs on the gateways' net; returns what was forwarded.
pub fn run(count: u64, payload: usize, batch: usize, far_nis: u8) -> Result<Forwarded, BenchError> {
    let names = Names::new()?;
    let mut fwd = Forwarder::new(&names, far_nis)?;
    let one = frame(&names, payload, 1)?;
    let batch = batch.max(1);
    let mut chunk = Vec::with_capacity(one.len().saturating_mul(batch));
    for _ in 0..batch {
        chunk.extend_from_slice(&one);
    }
    let mut total = Forwarded::default();
    let mut written = 0u64;
    let mut left = count;
    let mut sink = |b: &[u8]| {
        written = written.wrapping_add(u64::from(b.first().copied().unwrap_or(0)));
    };
    while left > 0 {
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(batch);
        let bytes = chunk
            .get(..one.len().saturating_mul(n))
            .ok_or_else(|| BenchError::Setup("chunk".to_owned()))?;
        let f = fwd.forward(names.from, std::hint::black_box(bytes), &mut sink)?;
        total.messages = total.messages.saturating_add(f.messages);
        total.bytes = total.bytes.saturating_add(f.bytes);
        left = left.saturating_sub(u64::try_from(n).unwrap_or(u64::MAX));
    }
    std::hint::black_box(written);
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_frame_is_forwarded_byte_for_byte() {
        let names = Names::new().unwrap();
        let mut fwd = Forwarder::new(&names, 2).unwrap();
        let mut input = Vec::new();
        for seq in 0..5 {
            input.extend(frame(&names, 100, seq).unwrap());
        }
        let mut out = Vec::new();
        let done = fwd
            .forward(names.from, &input, &mut |b| out.extend_from_slice(b))
            .unwrap();
        assert_eq!(done.messages, 5);
        let at = lnd::socklnd::wire::KSOCK_HEADER_BYTES;
        let header = Header::decode(input.get(at..).unwrap(), HeaderForm::Nid4).unwrap();
        let hop = fwd.next_hop(&header).unwrap();
        assert!(hop.via_gateway(), "{hop:?}");
        assert!(names.gateways.contains(&hop.peer));
        assert_eq!(hop.ni.net, hop.peer.net);
        assert_eq!(out, input, "the header goes on as it came");
        assert_eq!(run(1000, 0, 16, 2).unwrap().messages, 1000);
        assert_eq!(run(1000, 0, 16, 1).unwrap().messages, 1000);
    }
}
