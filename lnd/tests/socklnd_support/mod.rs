//! Shared pieces of the socklnd tests over real loopback sockets: a recording handler,
//! message builders, and a hand-driven "fake" kernel peer built from the wire codecs.
#![allow(dead_code, unreachable_pub)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use lnd::lnd::PeerDown;
use lnd::socklnd::handshake::{self, Established};
use lnd::socklnd::wire::{
    ConnType, Hello, HelloDecoded, KsockHeader, KsockType, ProtoVersion, KSOCK_HEADER_BYTES,
};
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnd::{Lnd, LndHandler, RxDecision, RxHeader, RxMessage, TxCompletion, TxId, TxRequest};
use lnet::acceptor::{AcceptorRequest, Decoded};
use lnet::nid::PID_LUSTRE;
use lnet::{Header, HeaderForm, Message, Nid, ProcessId, WireHandle};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Upper bound of every wait in these tests.
pub const WAIT: Duration = Duration::from_secs(30);

pub fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

pub fn ip_of(n: Nid) -> Ipv4Addr {
    Ipv4Addr::from(n.addr_u32().unwrap())
}

/// An NI on `ip`@tcp listening on `ip:port` and dialling peers on `port`.
pub fn config(ip: &str, port: u16) -> SockLndConfig {
    let n = nid(&format!("{ip}@tcp"));
    let mut c = SockLndConfig::new(n, 0x17D4_B84D_0000_0000 | u64::from(port));
    c.listen = Some(SocketAddr::new(ip_of(n).into(), port));
    c.peer_port = port;
    c
}

/// A PUT with these match bits makes the [`Recorder`] close the connection it came on.
pub const REFUSED_MATCH_BITS: u64 = 0xDEAD;

/// Records what an NI hands up.
pub struct Recorder {
    msgs: mpsc::Sender<RxMessage>,
    done: mpsc::Sender<TxCompletion>,
    downs: mpsc::Sender<PeerDown>,
}

impl LndHandler for Recorder {
    async fn on_header(&self, rx: RxHeader) -> RxDecision {
        match rx.header.msg {
            Message::Put { match_bits, .. } if match_bits == REFUSED_MATCH_BITS => {
                RxDecision::Close
            }
            _ => RxDecision::Receive(BytesMut::with_capacity(rx.header.payload_length as usize)),
        }
    }

    async fn on_message(&self, msg: RxMessage) {
        let _ = self.msgs.send(msg).await;
    }

    fn on_send_complete(&self, done: TxCompletion) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.done.try_send(done) {
            panic!("completion channel full");
        }
    }

    fn on_peer_down(&self, down: PeerDown) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.downs.try_send(down) {
            panic!("peer-down channel full");
        }
    }
}

pub struct Node {
    pub lnd: SockLnd<Recorder>,
    pub msgs: mpsc::Receiver<RxMessage>,
    pub done: mpsc::Receiver<TxCompletion>,
    pub downs: mpsc::Receiver<PeerDown>,
}

impl Node {
    pub async fn start(cfg: SockLndConfig) -> Node {
        let (msgs_tx, msgs) = mpsc::channel(64);
        let (done_tx, done) = mpsc::channel(4096);
        let (downs_tx, downs) = mpsc::channel(64);
        let handler = Arc::new(Recorder {
            msgs: msgs_tx,
            done: done_tx,
            downs: downs_tx,
        });
        let lnd = SockLnd::start(cfg, handler).await.unwrap();
        Node {
            lnd,
            msgs,
            done,
            downs,
        }
    }

    pub fn nid(&self) -> Nid {
        self.lnd.nid()
    }

    pub async fn send(&self, id: u64, peer: Nid, header: Header, payload: Bytes) {
        let tx = TxRequest {
            id: TxId(id),
            peer,
            header,
            payload,
        };
        tokio::time::timeout(WAIT, self.lnd.send(tx))
            .await
            .expect("send waited too long")
            .unwrap();
    }

    pub async fn message(&mut self) -> RxMessage {
        next(&mut self.msgs).await
    }

    pub async fn completion(&mut self) -> TxCompletion {
        next(&mut self.done).await
    }
}

pub async fn next<T>(rx: &mut mpsc::Receiver<T>) -> T {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("timed out waiting")
        .expect("channel closed")
}

/// A payload whose bytes depend on `seed`.
pub fn pattern(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

/// A PUT from `src` to `dst` carrying the CRC-32 of its payload in `hdr_data`.
pub fn put(src: Nid, dst: Nid, payload: &[u8], want_ack: bool) -> Header {
    Header {
        dest_nid: dst,
        src_nid: src,
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length: payload.len() as u32,
        msg: Message::Put {
            ack_wmd: if want_ack {
                WireHandle {
                    interface_cookie: 0x17D6_F0A0_B1C2_D3E4,
                    object_cookie: 0x405 + payload.len() as u64,
                }
            } else {
                WireHandle::NONE
            },
            match_bits: 0x1234_5678,
            hdr_data: u64::from(crc32fast::hash(payload)),
            ptl_index: 4,
            offset: 0,
        },
    }
}

pub fn get(src: Nid, dst: Nid, sink_length: u32) -> Header {
    Header {
        dest_nid: dst,
        src_nid: src,
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length: 0,
        msg: Message::Get {
            return_wmd: WireHandle {
                interface_cookie: 0x17D6_F0A0_B1C2_D3E4,
                object_cookie: 0x999,
            },
            match_bits: 1 << 63,
            ptl_index: 0,
            src_offset: 0,
            sink_length,
        },
    }
}

/// The ACK the target of `put` sends back.
pub fn ack_for(put: &Header) -> Header {
    let Message::Put {
        ack_wmd,
        match_bits,
        ..
    } = put.msg
    else {
        panic!("not a PUT");
    };
    Header {
        dest_nid: put.src_nid,
        src_nid: put.dest_nid,
        dest_pid: put.src_pid,
        src_pid: put.dest_pid,
        payload_length: 0,
        msg: Message::Ack {
            dst_wmd: ack_wmd,
            match_bits,
            mlength: put.payload_length,
        },
    }
}

/// The REPLY the target of `get` sends back with `len` bytes.
pub fn reply_for(get: &Header, len: u32) -> Header {
    let Message::Get { return_wmd, .. } = get.msg else {
        panic!("not a GET");
    };
    Header {
        dest_nid: get.src_nid,
        src_nid: get.dest_nid,
        dest_pid: get.src_pid,
        src_pid: get.dest_pid,
        payload_length: len,
        msg: Message::Reply {
            dst_wmd: return_wmd,
        },
    }
}

/// One frame read off a socket by a fake peer.
#[derive(Debug)]
pub enum Frame {
    Noop(KsockHeader),
    Lnet(KsockHeader, Header, Vec<u8>),
}

pub async fn read_frame<S: AsyncRead + Unpin>(s: &mut S) -> std::io::Result<Frame> {
    let mut kb = [0u8; KSOCK_HEADER_BYTES];
    s.read_exact(&mut kb).await?;
    let k = KsockHeader::decode(&kb, Default::default()).unwrap();
    if k.msg_type == KsockType::Noop {
        return Ok(Frame::Noop(k));
    }
    let mut hb = [0u8; 72];
    s.read_exact(&mut hb).await?;
    let h = Header::decode(&hb, HeaderForm::Nid4).unwrap();
    let mut payload = vec![0u8; h.payload_length as usize];
    s.read_exact(&mut payload).await?;
    Ok(Frame::Lnet(k, h, payload))
}

pub async fn read_frame_within<S: AsyncRead + Unpin>(s: &mut S) -> Frame {
    tokio::time::timeout(WAIT, read_frame(s))
        .await
        .expect("no frame in time")
        .expect("read failed")
}

/// A frame as a kernel would send it: `ksock` then the header and payload.
pub fn lnet_frame(ksock: KsockHeader, header: &Header, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    lnd::socklnd::wire::encode_lnet(
        &ksock,
        header,
        HeaderForm::Nid4,
        payload,
        Default::default(),
        &mut out,
    )
    .unwrap();
    out
}

/// A fake kernel peer that dials `ni` (listening on `addr`) from a reserved port, with the
/// library's own connector.
pub async fn dial(me: Nid, ni: Nid, addr: SocketAddr, ctype: ConnType) -> Established {
    handshake::connect(
        ProcessId::lustre(me),
        77,
        ProcessId::lustre(ni),
        addr,
        ctype,
        ProtoVersion::V3,
        WAIT,
    )
    .await
    .unwrap()
}

/// What a fake passive peer read from a connection it accepted.
pub struct Accepted {
    pub stream: TcpStream,
    pub from: SocketAddr,
    pub request: AcceptorRequest,
    pub hello: Hello,
}

/// Accepts one connection and reads its acceptor request and HELLO (no reply yet).
pub async fn accept_request(listener: &TcpListener) -> Accepted {
    let (mut stream, from) = tokio::time::timeout(WAIT, listener.accept())
        .await
        .expect("no connection in time")
        .unwrap();
    let mut buf = vec![0u8; 16];
    stream.read_exact(&mut buf).await.unwrap();
    let Decoded::Complete { request, .. } = AcceptorRequest::decode(&buf).unwrap() else {
        panic!("short acceptor request");
    };
    let mut hb = vec![0u8; 56];
    stream.read_exact(&mut hb).await.unwrap();
    let HelloDecoded::Complete { hello, .. } = Hello::decode(&hb).unwrap() else {
        panic!("short HELLO");
    };
    Accepted {
        stream,
        from,
        request,
        hello,
    }
}

/// Answers an accepted request as a kernel would: our HELLO with `ctype`.
pub async fn answer(a: &mut Accepted, me: Nid, ctype: ConnType) {
    let reply = a.hello.reply(ProcessId::lustre(me), 88, ctype);
    a.stream.write_all(&reply.encode().unwrap()).await.unwrap();
}

/// Accepts and accepts `n` connections (the usual set), answering each with the
/// inverted type.
pub async fn accept_set(listener: &TcpListener, me: Nid, n: usize) -> Vec<Accepted> {
    let mut set = Vec::new();
    for _ in 0..n {
        let mut a = accept_request(listener).await;
        let ctype = a.hello.ctype.invert();
        answer(&mut a, me, ctype).await;
        set.push(a);
    }
    set
}

pub async fn listen(addr: &str) -> TcpListener {
    TcpListener::bind(addr).await.unwrap()
}

/// Waits until `peer` of `lnd` has `n` connections.
pub async fn wait_conns<H: LndHandler>(lnd: &SockLnd<H>, peer: Nid, n: usize) {
    tokio::time::timeout(WAIT, async {
        loop {
            if let Some(s) = lnd.peer_stats(peer).await {
                if s.conns.len() >= n {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("connections did not come up");
}

/// Whether the other end closed `s` (EOF or reset) within the test bound, having sent
/// nothing more than `max_bytes`.
pub async fn closed_by_peer(s: &mut TcpStream, max_bytes: usize) -> bool {
    let mut got = Vec::new();
    let r = tokio::time::timeout(WAIT, s.read_to_end(&mut got)).await;
    matches!(r, Ok(Ok(_)) | Ok(Err(_))) && got.len() <= max_bytes
}
