//! Two [`Exchanges`] driven against each other in memory: messages move from one side's
//! posted sends to the other's receives, and an RDMA WRITE is a copy from one side's
//! source buffers into the other side's sink buffers (or a test buffer standing for a
//! kernel peer's memory). Time is passed in.

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use lnet::health::HealthStatus;
use lnet::{Header, LndType, Message, Net, Nid, ProcessId, WireHandle};
use tokio::time::Instant;

use super::*;
use crate::lnd::{RxDecision, TxCompletion, TxId, TxRequest};
use crate::o2iblnd::credits::{clamp_concurrent_sends, ConnCredits};
use crate::o2iblnd::wire::{
    Body, Completion, KibMsg, RdmaDesc, Version, IBLND_MAX_IMMEDIATE, IBLND_MAX_RDMA_FRAGS,
    IBLND_MSG_GET_DONE, IBLND_MSG_IMMEDIATE, IBLND_MSG_NOOP, IBLND_MSG_PUT_ACK, IBLND_MSG_PUT_DONE,
    IBLND_MSG_PUT_NAK, IBLND_MSG_PUT_REQ,
};

const BULK: usize = 2;
const STAMP_A: u64 = 0x1111;
const STAMP_B: u64 = 0x2222;
/// Each side's connection id for the other: different, so a mix-up shows.
const CONN_A: u32 = 7;
const CONN_B: u32 = 9;
/// The remote key of the test buffer that stands for a kernel peer's GET sink.
const KERNEL_RKEY: u32 = 0x77;
const KERNEL_ADDR: u64 = 0x7000_0000;

fn o2ib(last: u8) -> Nid {
    Nid::from_ipv4(Net::new(LndType::O2IBLND, 0), Ipv4Addr::new(10, 0, 0, last))
}

fn put_header(from: Nid, to: Nid, len: usize) -> Header {
    Header {
        dest_nid: to,
        src_nid: from,
        dest_pid: 12345,
        src_pid: 12345,
        payload_length: u32::try_from(len).unwrap(),
        msg: Message::Put {
            ack_wmd: WireHandle::NONE,
            match_bits: 42,
            hdr_data: 0,
            ptl_index: 4,
            offset: 0,
        },
    }
}

fn pattern(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

/// What a side's layer above answers to an LNet header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Policy {
    Receive,
    Discard,
    Close,
}

struct Side {
    nid: Nid,
    stamp: u64,
    conn: u32,
    ex: Exchanges,
    src: Vec<u8>,
    sink: Vec<u8>,
    sink_region: SinkRegion,
    policy: Policy,
    /// Messages sent to this side, not yet received.
    inbox: VecDeque<Bytes>,
    /// Posted sends whose completion has not been reported, oldest first.
    in_flight: VecDeque<(u32, u32)>,
    delivered: Vec<(ProcessId, Header, Bytes)>,
    completed: Vec<TxCompletion>,
    closed: Vec<(u32, CloseWhy)>,
    connects: Vec<Nid>,
    timed_out: Vec<Nid>,
    /// Type codes of the messages this side posted, in order.
    sent_types: Vec<u8>,
    /// Sink buffers lent to this side's layer above and still held: the slot, where the
    /// payload lies in the sink buffers, and the payload handed up.
    lent: Vec<(usize, usize, Bytes)>,
    /// Whether this side's layer above keeps what it is lent (else it lets go at once).
    keep_lent: bool,
    /// Its other connections to the peer (several per peer), besides `conn`.
    extra: Vec<u32>,
    /// The connection of each message posted, in order.
    posted_on: Vec<u32>,
}

impl Side {
    fn new(last: u8, stamp: u64, conn: u32, sink_addr: u64, rkey: u32) -> Side {
        let nid = o2ib(last);
        let mut cfg = O2ibLndConfig::new(nid, stamp);
        cfg.ntx = 16;
        cfg.bulk_buffers = BULK;
        let sink_region = SinkRegion {
            addr: sink_addr,
            rkey,
        };
        Side {
            nid,
            stamp,
            conn,
            ex: Exchanges::new(&cfg, sink_region),
            src: vec![0; BULK * BULK_BUFFER_BYTES],
            sink: vec![0; BULK * BULK_BUFFER_BYTES],
            sink_region,
            policy: Policy::Receive,
            inbox: VecDeque::new(),
            in_flight: VecDeque::new(),
            delivered: Vec::new(),
            completed: Vec::new(),
            closed: Vec::new(),
            connects: Vec::new(),
            timed_out: Vec::new(),
            sent_types: Vec::new(),
            lent: Vec::new(),
            keep_lent: false,
            extra: Vec::new(),
            posted_on: Vec::new(),
        }
    }

    /// Lets go of every sink buffer lent to this side's layer above, checking that no
    /// RDMA wrote over it meanwhile.
    fn return_lent(&mut self, now: Instant) {
        for (slot, offset, payload) in std::mem::take(&mut self.lent) {
            assert_eq!(
                &self.sink[offset..offset + payload.len()],
                &payload[..],
                "sink buffer {slot} was written while lent"
            );
            self.ex.sink_returned(now, slot);
        }
    }

    fn link_to(&mut self, now: Instant, peer: &Side, queue_depth: u16) {
        let conn = self.conn;
        self.link_on(now, conn, peer, queue_depth);
    }

    /// Connection `conn` to `peer` comes up.
    fn link_on(&mut self, now: Instant, conn: u32, peer: &Side, queue_depth: u16) {
        if conn != self.conn && !self.extra.contains(&conn) {
            self.extra.push(conn);
        }
        let credits = ConnCredits::new(
            Version::V2,
            queue_depth,
            queue_depth,
            0,
            clamp_concurrent_sends(Version::V2, 0, queue_depth),
        );
        self.ex.add_conn(
            now,
            conn,
            LinkParams {
                peer: peer.nid,
                version: Version::V2,
                peer_stamp: peer.stamp,
                max_frags: IBLND_MAX_RDMA_FRAGS,
                credits,
            },
        );
        self.ex.flush(now, conn);
    }

    fn send(&mut self, now: Instant, id: u64, to: Nid, payload: Bytes) {
        let header = put_header(self.nid, to, payload.len());
        self.ex.send(
            now,
            TxRequest {
                id: TxId(id),
                peer: to,
                header,
                payload,
            },
        );
    }

    /// A message to this side as `from` would send it.
    fn msg_from(&self, from: &Side, body: Body) -> Bytes {
        KibMsg {
            version: Version::V2,
            credits: 0,
            srcnid: from.nid,
            srcstamp: from.stamp,
            dstnid: self.nid,
            dststamp: self.stamp,
            body,
        }
        .encode()
        .unwrap()
        .into()
    }

    fn status_of(&self, id: u64) -> Option<HealthStatus> {
        self.completed
            .iter()
            .find(|c| c.id == TxId(id))
            .map(|c| c.status)
    }
}

/// Carries out `side`'s actions: posted messages go to `out` (the other side's inbox),
/// RDMA writes into `remote_sink` (the other side's sink) or `kernel` (a test buffer).
fn run_actions(side: &mut Side, out: &mut VecDeque<Bytes>, remote: &mut RemoteMem<'_>) {
    while let Some(action) = side.ex.poll_action() {
        match action {
            Action::Post(p) => {
                assert!(
                    p.conn == side.conn || side.extra.contains(&p.conn),
                    "posted on the wrong connection"
                );
                side.posted_on.push(p.conn);
                if let Some(fill) = &p.fill {
                    let off = fill.slot * BULK_BUFFER_BYTES;
                    side.src[off..off + fill.payload.len()].copy_from_slice(&fill.payload);
                }
                for w in &p.rdma {
                    let data = &side.src[w.src_offset..w.src_offset + w.len as usize];
                    remote.write(w.rkey, w.remote_addr, data);
                }
                let m = KibMsg::unpack_bytes(&p.msg).unwrap().msg;
                side.sent_types.push(m.msg_type().code());
                side.in_flight.push_back((p.conn, p.tx));
                out.push_back(p.msg);
            }
            Action::Deliver {
                from,
                header,
                payload,
            } => side.delivered.push((from, header, payload)),
            Action::DeliverSink {
                from,
                header,
                offset,
                len,
                mut buf,
                lend,
            } => {
                let payload = match lend {
                    // The sink memory itself: a copy here, checked when let go.
                    Some(slot) => {
                        assert_eq!(offset / BULK_BUFFER_BYTES, slot, "lent the wrong slot");
                        let payload = Bytes::copy_from_slice(&side.sink[offset..offset + len]);
                        side.lent.push((slot, offset, payload.clone()));
                        payload
                    }
                    None => {
                        buf.clear();
                        buf.extend_from_slice(&side.sink[offset..offset + len]);
                        buf.freeze()
                    }
                };
                side.delivered.push((from, header, payload));
            }
            Action::Complete(c) => side.completed.push(c),
            Action::Close { conn, why } => side.closed.push((conn, why)),
            Action::Connect { peer } => side.connects.push(peer),
            Action::ConnectTimedOut { peer } => side.timed_out.push(peer),
        }
    }
}

/// Memory an RDMA WRITE may land in: the peer's sink buffers, or a kernel peer's buffer.
struct RemoteMem<'a> {
    sink: Option<(&'a mut Vec<u8>, SinkRegion)>,
    kernel: Option<&'a mut Vec<u8>>,
}

impl RemoteMem<'_> {
    fn write(&mut self, rkey: u32, addr: u64, data: &[u8]) {
        if let Some((sink, region)) = &mut self.sink {
            if region.rkey == rkey {
                let off = usize::try_from(addr - region.addr).unwrap();
                sink[off..off + data.len()].copy_from_slice(data);
                return;
            }
        }
        if let Some(k) = &mut self.kernel {
            assert_eq!(rkey, KERNEL_RKEY, "RDMA WRITE with an unknown key");
            let off = usize::try_from(addr - KERNEL_ADDR).unwrap();
            k[off..off + data.len()].copy_from_slice(data);
            return;
        }
        panic!("RDMA WRITE with an unknown key {rkey:#x}");
    }
}

/// Carries out the actions of a side without a peer of its kind: RDMA writes may only
/// land in `kernel`.
fn run_alone(side: &mut Side, out: &mut VecDeque<Bytes>, kernel: Option<&mut Vec<u8>>) {
    run_actions(side, out, &mut RemoteMem { sink: None, kernel });
}

fn decide(policy: Policy) -> RxDecision {
    match policy {
        Policy::Receive => RxDecision::Receive(BytesMut::new()),
        Policy::Discard => RxDecision::Discard,
        Policy::Close => RxDecision::Close,
    }
}

/// Feeds one message to `side`, asking its policy about any LNet header.
fn receive(side: &mut Side, now: Instant, raw: &Bytes) {
    if let Some(q) = side.ex.on_receive(now, side.conn, raw) {
        assert_eq!(q.conn(), side.conn);
        side.ex.on_header_decision(now, q, decide(side.policy));
    }
}

struct Pair {
    a: Side,
    b: Side,
    now: Instant,
    /// Whether B receives what A sends.
    b_listens: bool,
    /// Whether A receives what B sends.
    a_listens: bool,
    /// Whether posted sends complete.
    sends_complete: bool,
}

impl Pair {
    fn new(queue_depth: u16) -> Pair {
        Pair::with_sinks(queue_depth, BULK)
    }

    /// A pair whose B has `b_sinks` sink buffers.
    fn with_sinks(queue_depth: u16, b_sinks: usize) -> Pair {
        let now = Instant::now();
        let mut a = Side::new(1, STAMP_A, CONN_A, 0x1000_0000, 0xa);
        let mut b = Side::new(2, STAMP_B, CONN_B, 0x2000_0000, 0xb);
        if b_sinks != BULK {
            let mut cfg = O2ibLndConfig::new(b.nid, STAMP_B);
            cfg.ntx = 16;
            cfg.bulk_buffers = b_sinks;
            b.ex = Exchanges::new(&cfg, b.sink_region);
            b.sink = vec![0; b_sinks * BULK_BUFFER_BYTES];
        }
        a.link_to(now, &b, queue_depth);
        b.link_to(now, &a, queue_depth);
        Pair {
            a,
            b,
            now,
            b_listens: true,
            a_listens: true,
            sends_complete: true,
        }
    }

    /// One round: actions of both sides, then receives, then send completions.
    fn step(&mut self) -> bool {
        let Pair { a, b, now, .. } = self;
        let mut to_b = VecDeque::new();
        let mut to_a = VecDeque::new();
        run_actions(
            a,
            &mut to_b,
            &mut RemoteMem {
                sink: Some((&mut b.sink, b.sink_region)),
                kernel: None,
            },
        );
        run_actions(
            b,
            &mut to_a,
            &mut RemoteMem {
                sink: Some((&mut a.sink, a.sink_region)),
                kernel: None,
            },
        );
        let moved = !to_a.is_empty() || !to_b.is_empty();
        b.inbox.extend(to_b);
        a.inbox.extend(to_a);
        let mut progress = moved;
        if self.b_listens {
            while let Some(m) = self.b.inbox.pop_front() {
                receive(&mut self.b, *now, &m);
                progress = true;
            }
        }
        if self.a_listens {
            while let Some(m) = self.a.inbox.pop_front() {
                receive(&mut self.a, *now, &m);
                progress = true;
            }
        }
        end_round([&mut self.a, &mut self.b], *now, self.sends_complete) || progress
    }

    fn run(&mut self) {
        settle(|| self.step());
    }
}

/// The end of a round for both sides: each side's layer above lets go of what it was
/// lent (unless it keeps it), and with `sends_complete` the posted sends complete.
/// Whether anything happened.
fn end_round(sides: [&mut Side; 2], now: Instant, sends_complete: bool) -> bool {
    let mut progress = false;
    for side in sides {
        if !side.keep_lent && !side.lent.is_empty() {
            side.return_lent(now);
            progress = true;
        }
        if sends_complete {
            while let Some((c, tx)) = side.in_flight.pop_front() {
                side.ex.on_send_complete(now, c, tx);
                progress = true;
            }
        }
    }
    progress
}

/// Takes rounds until nothing moves.
fn settle(mut step: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if !step() {
            return;
        }
    }
    panic!("the exchanges never settle");
}

#[test]
fn immediate_small_and_largest() {
    let mut p = Pair::new(8);
    let (a, b) = (p.a.nid, p.b.nid);
    p.a.send(p.now, 1, b, pattern(100, 1));
    p.a.send(p.now, 2, b, pattern(IBLND_MAX_IMMEDIATE, 2));
    p.a.send(p.now, 3, b, Bytes::new());
    p.run();
    assert_eq!(p.b.delivered.len(), 3);
    assert_eq!(p.b.delivered[0].0, ProcessId::lustre(a));
    assert_eq!(p.b.delivered[0].2, pattern(100, 1));
    assert_eq!(p.b.delivered[1].2, pattern(IBLND_MAX_IMMEDIATE, 2));
    assert!(p.b.delivered[2].2.is_empty());
    assert_eq!(p.b.delivered[1].1, put_header(a, b, IBLND_MAX_IMMEDIATE));
    for id in 1..=3 {
        assert_eq!(p.a.status_of(id), Some(HealthStatus::Ok));
    }
    assert_eq!(p.a.sent_types, vec![IBLND_MSG_IMMEDIATE; 3]);
    assert_eq!(p.a.ex.stats().rdma_bytes, 0);
    assert!(p.a.closed.is_empty() && p.b.closed.is_empty());
}

#[test]
fn put_just_above_immediate_and_one_mib() {
    for len in [IBLND_MAX_IMMEDIATE + 1, 64 * 1024, BULK_BUFFER_BYTES] {
        let mut p = Pair::new(8);
        let b = p.b.nid;
        p.a.send(p.now, 10, b, pattern(len, 7));
        p.run();
        assert_eq!(p.b.delivered.len(), 1, "{len}");
        assert_eq!(p.b.delivered[0].2, pattern(len, 7), "{len}");
        assert_eq!(p.a.status_of(10), Some(HealthStatus::Ok));
        assert_eq!(p.a.sent_types, vec![IBLND_MSG_PUT_REQ, IBLND_MSG_PUT_DONE]);
        assert!(p.b.sent_types.starts_with(&[IBLND_MSG_PUT_ACK]));
        assert_eq!(p.a.ex.stats().rdma_bytes, len as u64);
    }
}

#[test]
fn more_puts_than_bulk_buffers_wait_for_one() {
    let mut p = Pair::new(8);
    let b = p.b.nid;
    for id in 0..5 {
        p.a.send(p.now, id, b, pattern(10_000 + id as usize, id as u8));
    }
    p.run();
    assert_eq!(p.b.delivered.len(), 5);
    for id in 0..5u64 {
        assert_eq!(p.a.status_of(id), Some(HealthStatus::Ok));
        assert!(p
            .b
            .delivered
            .iter()
            .any(|d| d.2 == pattern(10_000 + id as usize, id as u8)));
    }
}

#[test]
fn a_put_is_handed_up_in_its_sink_buffer_which_waits_for_its_return() {
    const SINKS: usize = 4;
    let mut p = Pair::with_sinks(8, SINKS);
    p.b.keep_lent = true;
    let b_nid = p.b.nid;
    let puts = SINKS + 2;
    for id in 0..puts as u64 {
        p.a.send(p.now, id, b_nid, pattern(100_000, id as u8));
    }
    p.run();
    // Half the sink buffers are lent and held; the other PUTs were copied out of the
    // other half, one after another.
    assert_eq!(p.b.delivered.len(), puts);
    for id in 0..puts as u64 {
        assert_eq!(p.a.status_of(id), Some(HealthStatus::Ok));
        assert_eq!(p.b.delivered[id as usize].2, pattern(100_000, id as u8));
    }
    assert_eq!(p.b.lent.len(), SINKS / 2);
    assert_eq!(p.b.ex.sinks_lent_now(), SINKS / 2);
    assert_eq!(p.b.ex.stats().sinks_lent, (SINKS / 2) as u64);
    assert_eq!(p.b.ex.stats().sinks_copied, (puts - SINKS / 2) as u64);
    // Given back, they are lent again.
    p.b.return_lent(p.now);
    assert_eq!(p.b.ex.sinks_lent_now(), 0);
    p.a.send(p.now, 99, b_nid, pattern(200_000, 9));
    p.run();
    assert_eq!(p.a.status_of(99), Some(HealthStatus::Ok));
    assert_eq!(
        p.b.delivered.last().map(|d| d.2.clone()),
        Some(pattern(200_000, 9))
    );
    assert_eq!(p.b.ex.stats().sinks_lent, (SINKS / 2 + 1) as u64);
    p.b.return_lent(p.now);
}

#[test]
fn a_put_waiting_for_a_sink_gets_the_one_given_back() {
    // Two sink buffers: one is lent, and a PUT that finds the other busy waits for the
    // lent one to come back.
    let mut p = Pair::new(8);
    p.b.keep_lent = true;
    let b_nid = p.b.nid;
    p.a.send(p.now, 1, b_nid, pattern(50_000, 1));
    p.run();
    assert_eq!(p.b.ex.sinks_lent_now(), 1);
    // The other sink is taken by a PUT whose PUT_DONE has not come: a third PUT waits.
    p.sends_complete = false;
    p.a.send(p.now, 2, b_nid, pattern(50_000, 2));
    p.a.send(p.now, 3, b_nid, pattern(50_000, 3));
    for _ in 0..3 {
        p.step();
    }
    let acks = |p: &Pair| {
        p.b.sent_types
            .iter()
            .filter(|t| **t == IBLND_MSG_PUT_ACK)
            .count()
    };
    assert_eq!(acks(&p), 2, "a PUT_ACK for the first two PUTs only");
    p.sends_complete = true;
    p.run();
    assert_eq!(acks(&p), 2, "the third PUT still waits for a sink");
    p.b.return_lent(p.now);
    p.run();
    assert_eq!(acks(&p), 3);
    for id in 1..=3 {
        assert_eq!(p.a.status_of(id), Some(HealthStatus::Ok));
    }
    assert_eq!(p.b.delivered.len(), 3);
    assert_eq!(p.b.delivered[2].2, pattern(50_000, 3));
}

#[test]
fn put_the_receiver_discards_is_naked_and_ends_ok() {
    let mut p = Pair::new(8);
    let b = p.b.nid;
    p.b.policy = Policy::Discard;
    p.a.send(p.now, 1, b, pattern(50_000, 3));
    p.run();
    assert!(p.b.delivered.is_empty());
    assert!(p.b.sent_types.contains(&IBLND_MSG_PUT_NAK));
    assert_eq!(p.a.sent_types, vec![IBLND_MSG_PUT_REQ]);
    assert_eq!(p.a.status_of(1), Some(HealthStatus::Ok));
}

/// A sends a PUT_REQ that B never sees; returns its cookie.
fn put_req_unanswered(p: &mut Pair) -> Cookie {
    let b = p.b.nid;
    p.b_listens = false;
    p.a.send(p.now, 1, b, pattern(20_000, 9));
    p.run();
    let raw = p.b.inbox.pop_front().unwrap();
    match KibMsg::unpack_bytes(&raw).unwrap().msg.body {
        Body::PutReq { cookie, .. } => cookie,
        other => panic!("not a PUT_REQ: {other:?}"),
    }
}

#[test]
fn put_nak_with_an_error_fails_the_send_as_the_peers() {
    let mut p = Pair::new(8);
    let cookie = put_req_unanswered(&mut p);
    assert_eq!(p.a.status_of(1), None, "waiting for the answer");
    let nak =
        p.a.msg_from(&p.b, Body::PutNak(Completion { cookie, status: -5 }));
    receive(&mut p.a, p.now, &nak);
    p.run();
    assert_eq!(p.a.status_of(1), Some(HealthStatus::RemoteError));
    assert!(p.a.closed.is_empty());
}

#[test]
fn put_ack_with_a_wrong_cookie_closes_the_connection() {
    let mut p = Pair::new(8);
    let cookie = put_req_unanswered(&mut p);
    let ack = p.a.msg_from(
        &p.b,
        Body::PutAck {
            src_cookie: Cookie(cookie.0 ^ 1),
            dst_cookie: Cookie(5),
            rd: RdmaDesc::single(0xb, 0x2000_0000, 20_000),
        },
    );
    receive(&mut p.a, p.now, &ack);
    p.run();
    assert_eq!(p.a.closed, vec![(CONN_A, CloseWhy::Local)]);
    // Waiting for the peer's answer when this side closed: a local error.
    assert_eq!(p.a.status_of(1), Some(HealthStatus::LocalError));
    // The connection is gone: a new send waits for a new one.
    let b = p.b.nid;
    p.a.send(p.now, 2, b, pattern(10, 1));
    p.run();
    assert_eq!(p.a.connects, vec![b]);
}

#[test]
fn put_done_with_a_wrong_cookie_closes_the_connection() {
    let mut p = Pair::new(8);
    let done = p.b.msg_from(
        &p.a,
        Body::PutDone(Completion {
            cookie: Cookie(99),
            status: 0,
        }),
    );
    receive(&mut p.b, p.now, &done);
    p.run();
    assert_eq!(p.b.closed, vec![(CONN_B, CloseWhy::Local)]);
}

#[test]
fn stale_message_closes_the_connection() {
    let mut p = Pair::new(8);
    let mut old_a = Side::new(1, STAMP_A - 1, CONN_A, 0, 0);
    old_a.nid = p.a.nid;
    let m = p.b.msg_from(&old_a, Body::Noop);
    receive(&mut p.b, p.now, &m);
    p.run();
    assert_eq!(p.b.closed, vec![(CONN_B, CloseWhy::Local)]);
}

#[test]
fn header_close_decision_closes_the_connection() {
    let mut p = Pair::new(8);
    let b = p.b.nid;
    p.b.policy = Policy::Close;
    p.a.send(p.now, 1, b, pattern(10, 1));
    p.run();
    assert_eq!(p.b.closed, vec![(CONN_B, CloseWhy::Local)]);
    assert!(p.b.delivered.is_empty());
}

fn get_req(p: &Pair, cookie: Cookie, sink_len: u32, return_wmd: WireHandle) -> Bytes {
    let hdr = Header {
        dest_nid: p.b.nid,
        src_nid: p.a.nid,
        dest_pid: 12345,
        src_pid: 12345,
        payload_length: 0,
        msg: Message::Get {
            return_wmd,
            match_bits: 7,
            ptl_index: 4,
            src_offset: 0,
            sink_length: sink_len,
        },
    };
    p.b.msg_from(
        &p.a,
        Body::GetReq {
            hdr,
            cookie,
            rd: RdmaDesc::single(KERNEL_RKEY, KERNEL_ADDR, sink_len),
        },
    )
}

/// B answers a kernel peer's optimised GET: the REPLY is written into the GET's sink and
/// GET_DONE carries its length.
#[test]
fn get_reply_is_written_into_the_requesters_buffer() {
    for len in [100usize, 300_000] {
        let mut p = Pair::new(8);
        let wmd = WireHandle {
            interface_cookie: 3,
            object_cookie: 4,
        };
        let req = get_req(&p, Cookie(0xc0de), 1 << 20, wmd);
        receive(&mut p.b, p.now, &req);
        let mut out = VecDeque::new();
        let mut kernel = vec![0u8; 1 << 20];
        run_alone(&mut p.b, &mut out, Some(&mut kernel));
        assert_eq!(p.b.delivered.len(), 1);
        assert!(matches!(p.b.delivered[0].1.msg, Message::Get { .. }));
        // The layer above answers with a REPLY naming the GET's handle.
        let reply = Header {
            dest_nid: p.a.nid,
            src_nid: p.b.nid,
            dest_pid: 12345,
            src_pid: 12345,
            payload_length: u32::try_from(len).unwrap(),
            msg: Message::Reply { dst_wmd: wmd },
        };
        p.b.ex.send(
            p.now,
            TxRequest {
                id: TxId(77),
                peer: p.a.nid,
                header: reply,
                payload: pattern(len, 5),
            },
        );
        run_alone(&mut p.b, &mut out, Some(&mut kernel));
        assert_eq!(&kernel[..len], &pattern(len, 5)[..]);
        let done = KibMsg::unpack_bytes(&out.pop_back().unwrap()).unwrap().msg;
        assert_eq!(
            done.body,
            Body::GetDone(Completion {
                cookie: Cookie(0xc0de),
                status: i32::try_from(len).unwrap(),
            })
        );
        assert_eq!(p.b.status_of(77), None, "the send has not completed yet");
        let (c, tx) = p.b.in_flight.pop_front().unwrap();
        p.b.ex.on_send_complete(p.now, c, tx);
        run_alone(&mut p.b, &mut out, None);
        assert_eq!(p.b.status_of(77), Some(HealthStatus::Ok));
    }
}

#[test]
fn get_the_receiver_discards_is_answered_enodata() {
    let mut p = Pair::new(8);
    p.b.policy = Policy::Discard;
    let req = get_req(&p, Cookie(5), 4096, WireHandle::NONE);
    receive(&mut p.b, p.now, &req);
    let mut out = VecDeque::new();
    run_alone(&mut p.b, &mut out, None);
    assert!(p.b.delivered.is_empty());
    let done = KibMsg::unpack_bytes(&out.pop_back().unwrap()).unwrap().msg;
    assert_eq!(
        done.body,
        Body::GetDone(Completion {
            cookie: Cookie(5),
            status: -61,
        })
    );
    assert_eq!(p.b.sent_types, vec![IBLND_MSG_GET_DONE]);
}

#[test]
fn credits_hold_sends_back_until_the_peer_returns_them() {
    let mut p = Pair::new(2);
    let b = p.b.nid;
    p.b_listens = false;
    for id in 0..5 {
        p.a.send(p.now, id, b, pattern(64, id as u8));
    }
    p.run();
    // Two credits: two IMMEDIATEs out, three held.
    assert_eq!(p.b.inbox.len(), 2);
    assert_eq!(p.a.sent_types.len(), 2);
    p.b_listens = true;
    p.run();
    assert_eq!(p.b.delivered.len(), 5);
    for (i, d) in p.b.delivered.iter().enumerate() {
        assert_eq!(d.2, pattern(64, i as u8), "in order");
    }
    // B returned the credits with NOOPs (nothing else goes back to A).
    assert!(p.b.sent_types.iter().all(|t| *t == IBLND_MSG_NOOP));
    assert!(!p.b.sent_types.is_empty());
    assert_eq!(p.a.ex.stats().peak_credits_in_use, 2);
}

#[test]
fn credit_overflow_closes_the_connection() {
    let mut p = Pair::new(2);
    let mut m = KibMsg::unpack_bytes(&p.b.msg_from(&p.a, Body::Noop))
        .unwrap()
        .msg;
    m.credits = 1;
    let raw: Bytes = m.encode().unwrap().into();
    receive(&mut p.b, p.now, &raw);
    p.run();
    assert_eq!(p.b.closed, vec![(CONN_B, CloseWhy::Local)]);
}

#[test]
fn a_peer_that_never_answers_times_the_send_out() {
    let mut p = Pair::new(8);
    put_req_unanswered(&mut p);
    assert_eq!(p.a.status_of(1), None);
    let deadline = p.a.ex.poll_timeout().unwrap();
    assert!(deadline > p.now);
    p.a.ex.on_timer(deadline - Duration::from_millis(1));
    p.run();
    assert!(p.a.closed.is_empty(), "not yet");
    p.a.ex.on_timer(deadline);
    p.run();
    assert_eq!(p.a.closed, vec![(CONN_A, CloseWhy::Timeout)]);
    // Posted and waiting for the peer's answer: the peer is charged.
    assert_eq!(p.a.status_of(1), Some(HealthStatus::RemoteTimeout));
}

#[test]
fn a_send_without_a_connection_waits_then_fails() {
    let now = Instant::now();
    let mut a = Side::new(1, STAMP_A, CONN_A, 0x1000_0000, 0xa);
    let c = o2ib(3);
    a.send(now, 1, c, pattern(10, 1));
    let mut out = VecDeque::new();
    run_alone(&mut a, &mut out, None);
    assert_eq!(a.connects, vec![c]);
    assert!(a.ex.has_waiting(c));
    let deadline = a.ex.poll_timeout().unwrap();
    a.ex.on_timer(deadline);
    run_alone(&mut a, &mut out, None);
    assert_eq!(a.status_of(1), Some(HealthStatus::NetworkTimeout));
    assert_eq!(a.timed_out, vec![c]);
    assert!(!a.ex.has_waiting(c));
    assert!(out.is_empty());
}

#[test]
fn a_new_timeout_bounds_the_sends_started_after_it() {
    // Queued on a connection: the PUT_REQ's deadline is the new timeout.
    let mut p = Pair::new(8);
    p.a.ex.set_timeout(Duration::from_secs(4));
    assert_eq!(p.a.ex.timeout(), Duration::from_secs(4));
    put_req_unanswered(&mut p);
    let deadline = p.a.ex.poll_timeout().unwrap();
    assert_eq!(deadline, p.now + Duration::from_secs(4));
    p.a.ex.on_timer(deadline);
    p.run();
    assert_eq!(p.a.status_of(1), Some(HealthStatus::RemoteTimeout));

    // Waiting for a connection: a send started before the change keeps its bound (the
    // default's 22.5 s), one started after it waits the new one's (200 s: 50 + 2 x 5 s).
    let now = Instant::now();
    let mut a = Side::new(1, STAMP_A, CONN_A, 0x1000_0000, 0xa);
    let c = o2ib(3);
    a.send(now, 1, c, pattern(10, 1));
    a.ex.set_timeout(Duration::from_secs(200));
    a.send(now, 2, c, pattern(10, 2));
    let mut out = VecDeque::new();
    run_alone(&mut a, &mut out, None);
    let first = a.ex.poll_timeout().unwrap();
    assert_eq!(first, now + Duration::from_millis(22_500));
    a.ex.on_timer(first);
    run_alone(&mut a, &mut out, None);
    assert_eq!(a.status_of(1), Some(HealthStatus::NetworkTimeout));
    assert_eq!(a.status_of(2), None, "still waiting");
    assert_eq!(a.ex.poll_timeout(), Some(now + Duration::from_secs(60)));
}

#[test]
fn waiting_sends_go_once_the_connection_is_up() {
    let now = Instant::now();
    let mut a = Side::new(1, STAMP_A, CONN_A, 0x1000_0000, 0xa);
    let b = Side::new(2, STAMP_B, CONN_B, 0x2000_0000, 0xb);
    a.send(now, 1, b.nid, pattern(10, 1));
    a.send(now, 2, b.nid, pattern(10, 2));
    a.link_to(now, &b, 8);
    let mut out = VecDeque::new();
    run_alone(&mut a, &mut out, None);
    assert_eq!(a.connects, vec![b.nid, b.nid]);
    assert_eq!(out.len(), 2);
    assert!(!a.ex.has_waiting(b.nid));
}

#[test]
fn completions_out_of_order_and_twice_change_nothing_more() {
    let mut p = Pair::new(8);
    let b = p.b.nid;
    p.sends_complete = false;
    p.a.send(p.now, 1, b, pattern(10, 1));
    p.a.send(p.now, 2, b, pattern(10, 2));
    p.run();
    let first = p.a.in_flight.pop_front().unwrap();
    let second = p.a.in_flight.pop_front().unwrap();
    // The second completes first, then both again, then one of a tx that never was.
    for (c, tx) in [second, first, second, first, (CONN_A, 999), (55, first.1)] {
        p.a.ex.on_send_complete(p.now, c, tx);
    }
    p.sends_complete = true;
    p.run();
    assert_eq!(p.a.completed.len(), 2);
    assert_eq!(p.a.status_of(1), Some(HealthStatus::Ok));
    assert_eq!(p.a.status_of(2), Some(HealthStatus::Ok));
    // Credits and send slots are still right: B still holds the two credits it owes (below
    // its high-water mark), so six more go out at once and the rest wait.
    p.b_listens = false;
    for id in 10..18 {
        p.a.send(p.now, id, b, pattern(10, 3));
    }
    p.run();
    assert_eq!(p.b.inbox.len(), 6);
    assert_eq!(p.a.in_flight.len(), 0);
}

#[test]
fn closing_fails_every_tx_of_the_connection() {
    let mut p = Pair::new(8);
    let b = p.b.nid;
    p.sends_complete = false;
    p.b_listens = false;
    p.a.send(p.now, 1, b, pattern(10, 1));
    p.run();
    p.a.ex.close_conn(p.now, CONN_A, CloseWhy::PeerGone);
    p.run();
    assert!(
        p.a.closed.is_empty(),
        "the driver closed it: no Close action"
    );
    // Posted, send not completed, peer gone: the peer is charged.
    assert_eq!(p.a.status_of(1), Some(HealthStatus::RemoteDropped));
    // A late completion of the closed connection's send changes nothing.
    let (c, tx) = p.a.in_flight.pop_front().unwrap();
    p.a.ex.on_send_complete(p.now, c, tx);
    assert_eq!(p.a.completed.len(), 1);
}

#[test]
fn shutdown_fails_what_is_left() {
    let mut p = Pair::new(8);
    let b = p.b.nid;
    p.b_listens = false;
    p.a.send(p.now, 1, b, pattern(10, 1));
    p.a.send(p.now, 2, o2ib(9), pattern(10, 1));
    p.a.ex.shutdown(p.now);
    p.run();
    assert_eq!(p.a.status_of(1), Some(HealthStatus::LocalAborted));
    assert_eq!(p.a.status_of(2), Some(HealthStatus::LocalAborted));
}

/// Two sides with several connections to each other: A's `CONN_A + i` is B's
/// `CONN_B + 10 + i`. Messages move on the connection they were posted on.
struct MultiPair {
    a: Side,
    b: Side,
    now: Instant,
    /// Whether B receives what A sends.
    b_listens: bool,
    /// Whether posted sends complete.
    sends_complete: bool,
    /// Messages on their way, with the receiver's connection: to B, to A.
    to_b: VecDeque<(u32, Bytes)>,
    to_a: VecDeque<(u32, Bytes)>,
    /// The connection of each message A posted, in order (beside `a.sent_types`).
    a_log: Vec<u32>,
}

fn b_conn(a_conn: u32) -> u32 {
    a_conn - CONN_A + CONN_B + 10
}

fn a_conn(b_conn: u32) -> u32 {
    b_conn - CONN_B - 10 + CONN_A
}

impl MultiPair {
    /// `n` connections, each of `queue_depth` credits, coming up in order of their ids.
    fn new(n: u32, queue_depth: u16) -> MultiPair {
        let now = Instant::now();
        let mut a = Side::new(1, STAMP_A, CONN_A, 0x1000_0000, 0xa);
        let mut b = Side::new(2, STAMP_B, b_conn(CONN_A), 0x2000_0000, 0xb);
        for i in 0..n {
            a.link_on(now, CONN_A + i, &b, queue_depth);
            b.link_on(now, b_conn(CONN_A + i), &a, queue_depth);
        }
        MultiPair {
            a,
            b,
            now,
            b_listens: true,
            sends_complete: true,
            to_b: VecDeque::new(),
            to_a: VecDeque::new(),
            a_log: Vec::new(),
        }
    }

    fn step(&mut self) -> bool {
        let mut out = VecDeque::new();
        run_actions(
            &mut self.a,
            &mut out,
            &mut RemoteMem {
                sink: Some((&mut self.b.sink, self.b.sink_region)),
                kernel: None,
            },
        );
        let on: Vec<u32> = self.a.posted_on.drain(..).collect();
        self.a_log.extend(&on);
        let mut progress = !out.is_empty();
        self.to_b
            .extend(on.into_iter().map(b_conn).zip(out.drain(..)));
        run_actions(
            &mut self.b,
            &mut out,
            &mut RemoteMem {
                sink: Some((&mut self.a.sink, self.a.sink_region)),
                kernel: None,
            },
        );
        let on: Vec<u32> = self.b.posted_on.drain(..).collect();
        progress |= !out.is_empty();
        self.to_a
            .extend(on.into_iter().map(a_conn).zip(out.drain(..)));
        if self.b_listens {
            while let Some((c, m)) = self.to_b.pop_front() {
                if let Some(q) = self.b.ex.on_receive(self.now, c, &m) {
                    assert_eq!(q.conn(), c);
                    self.b
                        .ex
                        .on_header_decision(self.now, q, decide(Policy::Receive));
                }
                progress = true;
            }
        }
        while let Some((c, m)) = self.to_a.pop_front() {
            if let Some(q) = self.a.ex.on_receive(self.now, c, &m) {
                self.a
                    .ex
                    .on_header_decision(self.now, q, decide(Policy::Receive));
            }
            progress = true;
        }
        end_round([&mut self.a, &mut self.b], self.now, self.sends_complete) || progress
    }

    fn run(&mut self) {
        settle(|| self.step());
    }

    /// The connections A's IMMEDIATEs and PUT_REQs went on, in order.
    fn a_lnet_sends_on(&self, from: usize) -> Vec<u32> {
        self.a.sent_types[from..]
            .iter()
            .zip(&self.a_log[from..])
            .filter(|(t, _)| **t == IBLND_MSG_IMMEDIATE || **t == IBLND_MSG_PUT_REQ)
            .map(|(_, c)| *c)
            .collect()
    }
}

#[test]
fn sends_go_round_the_established_connections_newest_first() {
    let mut p = MultiPair::new(3, 8);
    let b = p.b.nid;
    for id in 0..6 {
        p.a.send(p.now, id, b, pattern(64, id as u8));
    }
    p.run();
    // The kernel's list has the newest connection first; each send takes the next one.
    assert_eq!(p.a_lnet_sends_on(0), [9, 8, 7, 9, 8, 7]);
    assert_eq!(p.b.delivered.len(), 6);
    for id in 0..6 {
        assert_eq!(p.a.status_of(id), Some(HealthStatus::Ok));
    }
    for c in [7, 8, 9] {
        let (tx, _) = p.a.ex.conn_msgs(c).unwrap();
        let (_, rx) = p.b.ex.conn_msgs(b_conn(c)).unwrap();
        assert!(
            tx >= 2 && rx >= 2,
            "connection {c}: {tx} sent, {rx} received"
        );
    }
    // A PUT goes round too, and its PUT_ACK comes back on the connection it went on.
    p.a.send(p.now, 6, b, pattern(IBLND_MAX_IMMEDIATE + 1, 6));
    p.run();
    assert_eq!(p.a.status_of(6), Some(HealthStatus::Ok));
    assert_eq!(p.b.delivered[6].2, pattern(IBLND_MAX_IMMEDIATE + 1, 6));
    assert_eq!(p.a_lnet_sends_on(0)[6], 9);
}

#[test]
fn the_first_connection_up_takes_the_sends_that_waited() {
    let now = Instant::now();
    let mut a = Side::new(1, STAMP_A, CONN_A, 0x1000_0000, 0xa);
    let b = Side::new(2, STAMP_B, CONN_B, 0x2000_0000, 0xb);
    for id in 0..3 {
        a.send(now, id, b.nid, pattern(10, id as u8));
    }
    let mut out = VecDeque::new();
    run_alone(&mut a, &mut out, None);
    assert!(out.is_empty());
    a.link_on(now, 7, &b, 8);
    run_alone(&mut a, &mut out, None);
    assert_eq!(a.posted_on, [7, 7, 7], "all on the first connection up");
    // The second one heads the list: the next sends start there and go round.
    a.link_on(now, 8, &b, 8);
    for id in 3..6 {
        a.send(now, id, b.nid, pattern(10, id as u8));
    }
    run_alone(&mut a, &mut out, None);
    assert_eq!(a.posted_on[3..], [8, 7, 8]);
    assert_eq!(out.len(), 6);
}

#[test]
fn closing_one_connection_fails_its_sends_and_the_others_carry_on() {
    let mut p = MultiPair::new(2, 8);
    let b = p.b.nid;
    p.sends_complete = false;
    p.b_listens = false;
    p.a.send(p.now, 1, b, pattern(10, 1));
    p.a.send(p.now, 2, b, pattern(10, 2));
    p.run();
    assert_eq!(p.a_lnet_sends_on(0), [8, 7]);
    // The peer drops connection 8: its send fails, the one on 7 is not touched.
    p.a.ex.close_conn(p.now, 8, CloseWhy::PeerGone);
    p.b.ex.close_conn(p.now, b_conn(8), CloseWhy::PeerGone);
    p.to_b.retain(|(c, _)| *c != b_conn(8));
    p.a.in_flight.retain(|(c, _)| *c != 8);
    p.step();
    assert_eq!(p.a.status_of(1), Some(HealthStatus::RemoteDropped));
    assert_eq!(p.a.status_of(2), None);
    p.sends_complete = true;
    p.b_listens = true;
    p.run();
    assert_eq!(p.a.status_of(2), Some(HealthStatus::Ok));
    // No connection replaces it: the next sends all go on 7.
    let sent = p.a_lnet_sends_on(0).len();
    for id in 3..6 {
        p.a.send(p.now, id, b, pattern(10, id as u8));
    }
    p.run();
    assert_eq!(p.a_lnet_sends_on(0)[sent..], [7, 7, 7]);
    for id in 3..6 {
        assert_eq!(p.a.status_of(id), Some(HealthStatus::Ok));
    }
    assert!(p.a.connects.is_empty());
    assert_eq!(p.a.ex.conn_msgs(8), None);
    // The last one closed: a send waits for a connection and asks for one.
    p.a.ex.close_conn(p.now, 7, CloseWhy::PeerGone);
    p.a.send(p.now, 6, b, pattern(10, 6));
    p.run();
    assert_eq!(p.a.connects, [b]);
    assert!(p.a.ex.has_waiting(b));
}

#[test]
fn each_connection_has_its_own_credits() {
    let mut p = MultiPair::new(2, 2);
    let b = p.b.nid;
    p.b_listens = false;
    for id in 0..6 {
        p.a.send(p.now, id, b, pattern(64, id as u8));
    }
    p.run();
    // Two credits on each of the two connections: four IMMEDIATEs out, two held.
    assert_eq!(p.to_b.len(), 4);
    assert_eq!(p.a_lnet_sends_on(0), [8, 7, 8, 7]);
    assert_eq!(p.a.ex.stats().peak_credits_in_use, 2);
    p.b_listens = true;
    p.run();
    assert_eq!(p.b.delivered.len(), 6);
    for id in 0..6 {
        assert_eq!(p.a.status_of(id), Some(HealthStatus::Ok));
    }
}
