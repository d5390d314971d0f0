//! o2iblnd over real verbs: two NIs on the two soft-RoCE devices of the rdma-vm
//! (`scripts/o2ib-vm-test` builds these tests on the host and runs them inside the VM,
//! which sets RDMAVM_DEV0/1 and RDMAVM_IP0/1). Outside the VM every test says so and
//! returns. Each test listens on its own port, so tests can share the VM run.
#![cfg(feature = "o2ib-verbs")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::HashMap;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use lnd::lnd::PeerDown;
use lnd::o2iblnd::probe::{connect_raw, ProbeOutcome};
use lnd::o2iblnd::sys;
use lnd::o2iblnd::wire::{Body, ConnParams, KibMsg, RejWhy, Version};
use lnd::o2iblnd::{O2ibLnd, O2ibLndConfig, PeerConn};
use lnd::{Lnd, LndHandler, RxDecision, RxHeader, RxMessage, TxCompletion, TxId, TxRequest};
use lnet::health::HealthStatus;
use lnet::{Header, Message, Nid, WireHandle};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

const WAIT: Duration = Duration::from_secs(60);

struct Vm {
    dev: [String; 2],
    ip: [Ipv4Addr; 2],
}

fn vm(test: &str) -> Option<Vm> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("lnd=info")),
        )
        .with_test_writer()
        .try_init();
    let Ok(dev0) = std::env::var("RDMAVM_DEV0") else {
        // Written past the test harness's capture so that a skip is always visible.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: not inside the rdma-vm (RDMAVM_DEV0 is unset); \
             run scripts/o2ib-vm-test to run it on soft-RoCE"
        );
        return None;
    };
    let dev1 = std::env::var("RDMAVM_DEV1").unwrap();
    let ip0 = std::env::var("RDMAVM_IP0").unwrap().parse().unwrap();
    let ip1 = std::env::var("RDMAVM_IP1").unwrap().parse().unwrap();
    Some(Vm {
        dev: [dev0, dev1],
        ip: [ip0, ip1],
    })
}

fn counters(dev: &str) -> HashMap<String, u64> {
    let dir = format!("/sys/class/infiniband/{dev}/ports/1/hw_counters");
    let mut out = HashMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let v = std::fs::read_to_string(e.path()).unwrap_or_default();
        if let Ok(n) = v.trim().parse() {
            out.insert(e.file_name().to_string_lossy().into_owned(), n);
        }
    }
    out
}

/// The device counters, read after the counter cache (`lifespan`) has expired.
async fn counters_now(dev: &str) -> HashMap<String, u64> {
    tokio::time::sleep(Duration::from_millis(200)).await;
    counters(dev)
}

fn delta(before: &HashMap<String, u64>, after: &HashMap<String, u64>, key: &str) -> u64 {
    after.get(key).copied().unwrap_or(0) - before.get(key).copied().unwrap_or(0)
}

/// What the test handler does with a header.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Receive,
    /// Sleep this long in every `on_header` (a slow receiver).
    Slow(Duration),
    /// Wait in `on_header` of the n-th message (0-based) and of every one after it, until
    /// released: the peer stops answering (one parked header does not stop the others).
    HoldFrom(usize),
}

struct Handler {
    mode: Mode,
    seen: Mutex<usize>,
    release: Notify,
    msgs: mpsc::UnboundedSender<RxMessage>,
    done: mpsc::UnboundedSender<TxCompletion>,
    down: mpsc::UnboundedSender<PeerDown>,
}

impl LndHandler for Handler {
    async fn on_header(&self, _rx: RxHeader) -> RxDecision {
        let n = {
            let mut s = self.seen.lock().unwrap();
            *s += 1;
            *s - 1
        };
        match self.mode {
            Mode::Receive => {}
            Mode::Slow(d) => tokio::time::sleep(d).await,
            Mode::HoldFrom(k) if n >= k => self.release.notified().await,
            Mode::HoldFrom(_) => {}
        }
        RxDecision::Receive(BytesMut::new())
    }
    async fn on_message(&self, msg: RxMessage) {
        let _ = self.msgs.send(msg);
    }
    fn on_send_complete(&self, done: TxCompletion) {
        let _ = self.done.send(done);
    }
    fn on_peer_down(&self, down: PeerDown) {
        let _ = self.down.send(down);
    }
}

struct Node {
    lnd: O2ibLnd<Handler>,
    handler: Arc<Handler>,
    msgs: mpsc::UnboundedReceiver<RxMessage>,
    done: mpsc::UnboundedReceiver<TxCompletion>,
    down: mpsc::UnboundedReceiver<PeerDown>,
}

fn o2ib(ip: Ipv4Addr) -> Nid {
    format!("{ip}@o2ib").parse().unwrap()
}

fn config(ip: Ipv4Addr, port: u16) -> O2ibLndConfig {
    let mut c = O2ibLndConfig::new(o2ib(ip), 0x6000_0000 + u64::from(u32::from(ip)));
    c.listen_port = Some(port);
    c.peer_port = port;
    c
}

impl Node {
    async fn start(cfg: O2ibLndConfig, mode: Mode) -> Node {
        let (mt, msgs) = mpsc::unbounded_channel();
        let (dt, done) = mpsc::unbounded_channel();
        let (pt, down) = mpsc::unbounded_channel();
        let handler = Arc::new(Handler {
            mode,
            seen: Mutex::new(0),
            release: Notify::new(),
            msgs: mt,
            done: dt,
            down: pt,
        });
        let lnd = O2ibLnd::start(cfg, handler.clone()).await.unwrap();
        Node {
            lnd,
            handler,
            msgs,
            done,
            down,
        }
    }

    fn nid(&self) -> Nid {
        self.lnd.nid()
    }

    async fn send(&self, id: u64, to: Nid, header: Header, payload: Bytes) {
        self.lnd
            .send(TxRequest {
                id: TxId(id),
                peer: to,
                header,
                payload,
            })
            .await
            .unwrap();
    }

    async fn message(&mut self) -> RxMessage {
        tokio::time::timeout(WAIT, self.msgs.recv())
            .await
            .expect("timed out waiting for a message")
            .unwrap()
    }

    async fn completion(&mut self) -> TxCompletion {
        tokio::time::timeout(WAIT, self.done.recv())
            .await
            .expect("timed out waiting for a completion")
            .unwrap()
    }
}

fn pattern(len: usize, seed: u64) -> Bytes {
    (0..len)
        .map(|i| {
            ((i as u64)
                .wrapping_mul(31)
                .wrapping_add(seed.wrapping_mul(7))
                >> 1) as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

fn put(src: Nid, dst: Nid, payload: &[u8], seq: u64) -> Header {
    Header {
        dest_nid: dst,
        src_nid: src,
        dest_pid: 12345,
        src_pid: 12345,
        payload_length: payload.len() as u32,
        msg: Message::Put {
            ack_wmd: WireHandle::NONE,
            match_bits: seq,
            hdr_data: u64::from(crc32fast::hash(payload)),
            ptl_index: 4,
            offset: 0,
        },
    }
}

/// Sends a PUT from `an` to `bn` for each numbered payload, in order.
async fn send_puts(
    lnd: &O2ibLnd<Handler>,
    an: Nid,
    bn: Nid,
    payloads: impl IntoIterator<Item = (u64, Bytes)>,
) {
    for (seq, p) in payloads {
        lnd.send(TxRequest {
            id: TxId(seq),
            peer: bn,
            header: put(an, bn, &p, seq),
            payload: p,
        })
        .await
        .unwrap();
    }
}

fn seq_of(h: &Header) -> u64 {
    match h.msg {
        Message::Put { match_bits, .. } => match_bits,
        _ => panic!("not a PUT"),
    }
}

fn check_payload(m: &RxMessage) {
    let Message::Put { hdr_data, .. } = m.header.msg else {
        panic!("not a PUT")
    };
    assert_eq!(m.payload.len(), m.header.payload_length as usize);
    assert_eq!(
        u64::from(crc32fast::hash(&m.payload)),
        hdr_data,
        "payload corrupted"
    );
    assert_eq!(m.payload, pattern(m.payload.len(), seq_of(&m.header)));
}

async fn exchange(tx: &mut Node, rx: &mut Node, txdev: &str, rxdev: &str, dir: usize) {
    let (src, dst) = (tx.nid(), rx.nid());
    for (i, size) in [0usize, 3976, 4096, 1 << 20].into_iter().enumerate() {
        let seq = (dir * 100 + i) as u64;
        let payload = pattern(size, seq);
        let before = (counters_now(txdev).await, counters_now(rxdev).await);
        tx.send(seq, dst, put(src, dst, &payload, seq), payload.clone())
            .await;
        let m = rx.message().await;
        assert_eq!(seq_of(&m.header), seq);
        check_payload(&m);
        let done = tx.completion().await;
        assert_eq!((done.id, done.status), (TxId(seq), HealthStatus::Ok));
        let after = (counters_now(txdev).await, counters_now(rxdev).await);
        let sends = delta(&before.0, &after.0, "rdma_sends");
        let recvs = delta(&before.1, &after.1, "rdma_recvs");
        println!(
            "{src} -> {dst}: PUT of {size} B ok ({}); {txdev} rdma_sends +{sends}, {rxdev} rdma_recvs +{recvs}, sent_pkts +{}",
            if size <= 3976 { "IMMEDIATE" } else { "PUT_REQ/PUT_ACK/RDMA WRITE/PUT_DONE" },
            delta(&before.0, &after.0, "sent_pkts"),
        );
        if size > 3976 {
            assert!(sends > 0 && recvs > 0, "bulk PUT without RDMA traffic");
        }
    }
    // 16 MiB as 16 x 1 MiB, all queued at once.
    let before = (counters_now(txdev).await, counters_now(rxdev).await);
    for k in 0..16u64 {
        let seq = (dir as u64) * 100 + 10 + k;
        let payload = pattern(1 << 20, seq);
        tx.send(seq, dst, put(src, dst, &payload, seq), payload)
            .await;
    }
    let mut got = Vec::new();
    for _ in 0..16 {
        let m = rx.message().await;
        check_payload(&m);
        got.push(seq_of(&m.header));
    }
    for _ in 0..16 {
        assert_eq!(tx.completion().await.status, HealthStatus::Ok);
    }
    got.sort_unstable();
    assert_eq!(
        got,
        ((dir as u64) * 100 + 10..(dir as u64) * 100 + 26).collect::<Vec<_>>()
    );
    let after = (counters_now(txdev).await, counters_now(rxdev).await);
    println!(
        "{src} -> {dst}: 16 x 1 MiB PUT ok; {txdev} rdma_sends +{}, sent_pkts +{}; {rxdev} rdma_recvs +{}, rcvd_pkts +{}",
        delta(&before.0, &after.0, "rdma_sends"),
        delta(&before.0, &after.0, "sent_pkts"),
        delta(&before.1, &after.1, "rdma_recvs"),
        delta(&before.1, &after.1, "rcvd_pkts"),
    );
    assert!(delta(&before.1, &after.1, "rdma_recvs") >= 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immediate_and_bulk_puts_both_directions() {
    let Some(vm) = vm("immediate_and_bulk_puts_both_directions") else {
        return;
    };
    let mut a = Node::start(config(vm.ip[0], 20987), Mode::Receive).await;
    let mut b = Node::start(config(vm.ip[1], 20987), Mode::Receive).await;
    exchange(&mut a, &mut b, &vm.dev[0], &vm.dev[1], 0).await;
    exchange(&mut b, &mut a, &vm.dev[1], &vm.dev[0], 1).await;
    let sa = a.lnd.stats().await.unwrap();
    let sb = b.lnd.stats().await.unwrap();
    println!(
        "stats A: tx {:?} rx {:?} rdma_bytes {}",
        sa.tx_msgs, sa.rx_msgs, sa.rdma_bytes
    );
    println!(
        "stats B: tx {:?} rx {:?} rdma_bytes {}",
        sb.tx_msgs, sb.rx_msgs, sb.rdma_bytes
    );
    assert_eq!(sa.rdma_bytes, 4096 + (1 << 20) + 16 * (1 << 20));
    assert_eq!(sb.rdma_bytes, sa.rdma_bytes);
    // Each side received 18 PUTs by RDMA: handed up in their sink buffers (at most half
    // of them lent at once, the rest copied), and every one lent given back once the
    // message was dropped.
    for (name, node, s) in [("A", &a, &sa), ("B", &b, &sb)] {
        assert_eq!(s.sinks_lent + s.sinks_copied, 18, "{name}: {s:?}");
        assert!(s.sinks_lent >= 1, "{name}: {s:?}");
        let mut now = s.sinks_lent_now;
        for _ in 0..100 {
            if now == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            now = node.lnd.stats().await.unwrap().sinks_lent_now;
        }
        assert_eq!(now, 0, "{name}: every lent sink buffer given back");
    }
    let info = a.lnd.conn_info(b.nid()).await.unwrap();
    assert_eq!(
        (info.version, info.queue_depth, info.max_frags),
        (Version::V2, 8, 257)
    );
    a.lnd.stop().await;
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_connreqs_are_rejected_with_the_right_reason() {
    let Some(vm) = vm("bad_connreqs_are_rejected_with_the_right_reason") else {
        return;
    };
    let port = 21987;
    let b = Node::start(config(vm.ip[1], port), Mode::Receive).await;
    let dst = SocketAddrV4::new(vm.ip[1], port);
    let me = o2ib(vm.ip[0]);
    let req = |qd: u16| {
        KibMsg {
            version: Version::V2,
            credits: 0,
            srcnid: me,
            srcstamp: 0x5eed,
            dstnid: b.nid(),
            dststamp: 0,
            body: Body::ConnReq(ConnParams {
                queue_depth: qd,
                ..ConnParams::DEFAULT
            }),
        }
        .encode()
        .unwrap()
    };

    let mut bad_version = req(8);
    bad_version[4] = 0x13;
    let out = connect_raw(vm.ip[0], dst, &bad_version, WAIT)
        .await
        .unwrap();
    println!("CONNREQ version 0x13 -> {out:?}");
    let ProbeOutcome::Rejected { cm_status, rej } = out else {
        panic!("not rejected: {out:?}")
    };
    let rej = rej.unwrap();
    assert_eq!(cm_status, 28);
    assert_eq!((rej.why, rej.version), (RejWhy::Fatal, Version::V2));

    let out = connect_raw(vm.ip[0], dst, &req(16), WAIT).await.unwrap();
    println!("CONNREQ queue depth 16 -> {out:?}");
    let ProbeOutcome::Rejected { rej, .. } = out else {
        panic!("not rejected: {out:?}")
    };
    let rej = rej.unwrap();
    assert_eq!(rej.why, RejWhy::MsgQueueSize);
    assert_eq!(rej.params.unwrap().connparams.queue_depth, 8);

    let out = connect_raw(vm.ip[0], dst, &req(8), WAIT).await.unwrap();
    let ProbeOutcome::Accepted { private_data } = out else {
        panic!("a good CONNREQ was refused: {out:?}")
    };
    let ack = KibMsg::decode(&private_data).unwrap();
    assert_eq!((ack.dstnid, ack.dststamp), (me, 0x5eed));

    let stats = b.lnd.stats().await.unwrap();
    println!("passive side rejects sent by why: {:?}", stats.rejects_sent);
    assert_eq!(stats.rejects_sent.get(&3), Some(&1), "FATAL");
    assert_eq!(stats.rejects_sent.get(&7), Some(&1), "MSG_QUEUE_SIZE");
    b.lnd.stop().await;

    // An NI of ours that offers 16 adopts the 8 of the MSG_QUEUE_SIZE reject and connects.
    let port = 22987;
    let mut b = Node::start(config(vm.ip[1], port), Mode::Receive).await;
    let mut ca = config(vm.ip[0], port);
    ca.peer_credits = 16;
    let mut a = Node::start(ca, Mode::Receive).await;
    let payload = pattern(100, 1);
    a.send(1, b.nid(), put(a.nid(), b.nid(), &payload, 1), payload)
        .await;
    check_payload(&b.message().await);
    assert_eq!(a.completion().await.status, HealthStatus::Ok);
    let sa = a.lnd.stats().await.unwrap();
    let sb = b.lnd.stats().await.unwrap();
    println!(
        "queue depth 16 -> 8: active side rejects received {:?}, passive side sent {:?}",
        sa.rejects_received, sb.rejects_sent
    );
    assert_eq!(sa.rejects_received.get(&7), Some(&1));
    assert_eq!(sb.rejects_sent.get(&7), Some(&1));
    assert_eq!(a.lnd.conn_info(b.nid()).await.unwrap().queue_depth, 8);
    a.lnd.stop().await;
    b.lnd.stop().await;

    // A v1 (0x11) connection: the passive side adopts the requester's version.
    let port = 23987;
    let mut b = Node::start(config(vm.ip[1], port), Mode::Receive).await;
    let mut ca = config(vm.ip[0], port);
    ca.version = Version::V1;
    let mut a = Node::start(ca, Mode::Receive).await;
    for i in 0..40u64 {
        let payload = pattern(if i % 4 == 0 { 300_000 } else { 1000 }, i);
        a.send(i, b.nid(), put(a.nid(), b.nid(), &payload, i), payload)
            .await;
    }
    for _ in 0..40 {
        check_payload(&b.message().await);
        assert_eq!(a.completion().await.status, HealthStatus::Ok);
    }
    let info = b.lnd.conn_info(a.nid()).await.unwrap();
    println!("v1 connection: {info:?}, 40 messages ok");
    assert_eq!(info.version, Version::V1);
    a.lnd.stop().await;
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credits_keep_a_slow_receiver_from_overrun() {
    let Some(vm) = vm("credits_keep_a_slow_receiver_from_overrun") else {
        return;
    };
    let port = 24987;
    let mut b = Node::start(config(vm.ip[1], port), Mode::Slow(Duration::from_millis(2))).await;
    let mut a = Node::start(config(vm.ip[0], port), Mode::Receive).await;
    let before = (counters(&vm.dev[0]), counters(&vm.dev[1]));
    let n = 600u64;
    for i in 0..n {
        let payload = pattern(if i % 50 == 0 { 200_000 } else { 3976 }, i);
        a.send(i, b.nid(), put(a.nid(), b.nid(), &payload, i), payload)
            .await;
    }
    for i in 0..n {
        let m = b.message().await;
        check_payload(&m);
        if m.header.payload_length <= 3976 {
            // IMMEDIATEs arrive in order (RC ordering, one connection).
            assert!(seq_of(&m.header) >= i.saturating_sub(50));
        }
    }
    for _ in 0..n {
        assert_eq!(a.completion().await.status, HealthStatus::Ok);
    }
    let after = (
        counters_now(&vm.dev[0]).await,
        counters_now(&vm.dev[1]).await,
    );
    let sa = a.lnd.stats().await.unwrap();
    let sb = b.lnd.stats().await.unwrap();
    let rnr: u64 = ["rcvd_rnr_err", "send_rnr_err", "retry_rnr_exceeded_err"]
        .iter()
        .map(|k| delta(&before.0, &after.0, k) + delta(&before.1, &after.1, k))
        .sum();
    println!(
        "flood of {n} messages into a slow receiver: all delivered; peak credits in use {}, NOOPs sent by receiver {}, RNR counters +{rnr}, wc errors {}/{}",
        sa.peak_credits_in_use,
        sb.tx_msgs.get(&0xd0).copied().unwrap_or(0),
        sa.wc_errors,
        sb.wc_errors
    );
    assert!(sa.peak_credits_in_use <= 8);
    assert_eq!(rnr, 0, "receive queue overrun (RNR)");
    assert_eq!((sa.wc_errors, sb.wc_errors), (0, 0));
    a.lnd.stop().await;
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stops_answering_times_out_its_sends() {
    let Some(vm) = vm("a_peer_that_stops_answering_times_out_its_sends") else {
        return;
    };
    let port = 25987;
    let b = Node::start(config(vm.ip[1], port), Mode::HoldFrom(2)).await;
    let mut ca = config(vm.ip[0], port);
    ca.timeout = Duration::from_secs(4);
    let mut a = Node::start(ca, Mode::Receive).await;
    for i in 0..6u64 {
        let payload = pattern(1 << 20, i);
        a.send(i, b.nid(), put(a.nid(), b.nid(), &payload, i), payload)
            .await;
    }
    let mut statuses = HashMap::new();
    for _ in 0..6 {
        let d = a.completion().await;
        println!("tx {} -> {:?} {:?}", d.id.0, d.status, d.reason);
        statuses.insert(d.id.0, d.status);
    }
    assert_eq!(statuses[&0], HealthStatus::Ok);
    assert_eq!(statuses[&1], HealthStatus::Ok);
    // The PUT_REQ the peer never answers: waiting, not sending.
    assert_eq!(statuses[&2], HealthStatus::RemoteTimeout);
    for i in 3..6 {
        assert!(
            matches!(
                statuses[&i],
                HealthStatus::RemoteTimeout | HealthStatus::LocalTimeout
            ),
            "tx {i}: {:?}",
            statuses[&i]
        );
    }
    let down = tokio::time::timeout(WAIT, a.down.recv())
        .await
        .unwrap()
        .unwrap();
    println!("peer down: {down:?}");
    assert_eq!(down.status, HealthStatus::NetworkTimeout);
    b.handler.release.notify_one();
    a.lnd.stop().await;
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_changed_while_the_ni_runs_bounds_the_next_send() {
    let Some(vm) = vm("a_timeout_changed_while_the_ni_runs_bounds_the_next_send") else {
        return;
    };
    let port = 32987;
    let b = Node::start(config(vm.ip[1], port), Mode::HoldFrom(1)).await;
    // A starts with the default timeout (50 s) and is connected to B with it.
    let mut a = Node::start(config(vm.ip[0], port), Mode::Receive).await;
    let started_with = a.lnd.tunables().timeout();
    let p = pattern(64, 0);
    a.send(0, b.nid(), put(a.nid(), b.nid(), &p, 0), p).await;
    assert_eq!(a.completion().await.status, HealthStatus::Ok);
    // `net set --lnd-timeout 4` while it runs: the next PUT, whose PUT_REQ B never
    // answers, is cut off by the new timeout.
    let timeout = Duration::from_secs(4);
    a.lnd.tunables().set_timeout(timeout).unwrap();
    let p = pattern(1 << 20, 1);
    let t0 = Instant::now();
    a.send(1, b.nid(), put(a.nid(), b.nid(), &p, 1), p).await;
    let d = a.completion().await;
    let took = t0.elapsed();
    println!(
        "o2iblnd timeout {started_with:?} changed to {timeout:?} while running: the unanswered \
         PUT ended after {:.1} s with {:?}",
        took.as_secs_f64(),
        d.status
    );
    assert_eq!(d.id, TxId(1));
    assert_eq!(d.status, HealthStatus::RemoteTimeout);
    assert!(
        took < started_with / 2,
        "bounded by the new timeout, not the one the NI started with: {took:?}"
    );
    b.handler.release.notify_one();
    a.lnd.stop().await;
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_killed_mid_transfer_drops_the_sends() {
    let Some(vm) = vm("a_peer_killed_mid_transfer_drops_the_sends") else {
        return;
    };
    let port = 26987;
    // B takes the first PUT and leaves every later PUT_REQ unanswered: those sends are
    // on the wire or waiting for B's PUT_ACK when B goes away, whatever the timing.
    let mut b = Node::start(config(vm.ip[1], port), Mode::HoldFrom(1)).await;
    let mut a = Node::start(config(vm.ip[0], port), Mode::Receive).await;
    for i in 0..16u64 {
        let payload = pattern(1 << 20, i);
        a.send(i, b.nid(), put(a.nid(), b.nid(), &payload, i), payload)
            .await;
    }
    let _ = b.message().await;
    let t0 = Instant::now();
    while *b.handler.seen.lock().unwrap() < 2 {
        assert!(t0.elapsed() < WAIT, "the second PUT_REQ never reached B");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    b.lnd.stop().await;
    let mut count: HashMap<HealthStatus, usize> = HashMap::new();
    for _ in 0..16 {
        let d = a.completion().await;
        *count.entry(d.status).or_default() += 1;
        assert!(
            matches!(
                d.status,
                HealthStatus::Ok | HealthStatus::RemoteDropped | HealthStatus::LocalError
            ),
            "tx {}: {:?} {:?}",
            d.id.0,
            d.status,
            d.reason
        );
    }
    println!("16 x 1 MiB, peer stopped after the first arrived: {count:?}");
    assert_eq!(count.get(&HealthStatus::Ok).copied(), Some(1));
    assert!(
        count
            .get(&HealthStatus::RemoteDropped)
            .copied()
            .unwrap_or(0)
            > 0
    );
    let down = tokio::time::timeout(WAIT, a.down.recv())
        .await
        .unwrap()
        .unwrap();
    println!("peer down: {down:?}");
    assert_eq!(down.status, HealthStatus::RemoteDropped);
    a.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_throughput_1mib() {
    let Some(vm) = vm("put_throughput_1mib") else {
        return;
    };
    let port = 27987;
    let mut b = Node::start(config(vm.ip[1], port), Mode::Receive).await;
    let mut a = Node::start(config(vm.ip[0], port), Mode::Receive).await;
    // Warm up: connect.
    let p = pattern(1 << 20, 0);
    a.send(0, b.nid(), put(a.nid(), b.nid(), &p, 0), p.clone())
        .await;
    b.message().await;
    a.completion().await;
    let n = 64u64;
    let payloads: Vec<Bytes> = (1..=n).map(|i| pattern(1 << 20, i)).collect();
    let t0 = Instant::now();
    let (an, bn) = (a.nid(), b.nid());
    let numbered = payloads.into_iter().enumerate();
    let sender = send_puts(&a.lnd, an, bn, numbered.map(|(i, p)| (i as u64 + 1, p)));
    let receiver = async {
        for _ in 0..n {
            let m = b.message().await;
            assert_eq!(m.payload.len(), 1 << 20);
        }
    };
    tokio::join!(sender, receiver);
    let secs = t0.elapsed().as_secs_f64();
    for _ in 0..n {
        assert_eq!(a.completion().await.status, HealthStatus::Ok);
    }
    let mbps = (n as f64) * 1.048576 / secs;
    println!("o2iblnd 1 MiB PUT throughput: {n} MiB in {secs:.2} s = {mbps:.1} MB/s");
    if let Ok(out) = std::env::var("RDMAVM_OUT") {
        std::fs::write(format!("{out}/o2ib_put_mbps"), format!("{mbps:.1}\n")).unwrap();
    }
    a.lnd.stop().await;
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_noops_flow_on_an_idle_connection() {
    let Some(vm) = vm("keepalive_noops_flow_on_an_idle_connection") else {
        return;
    };
    let port = 28987;
    let mut cb = config(vm.ip[1], port);
    cb.keepalive = Some(Duration::from_secs(2));
    let mut b = Node::start(cb, Mode::Receive).await;
    let mut ca = config(vm.ip[0], port);
    ca.keepalive = Some(Duration::from_secs(2));
    let mut a = Node::start(ca, Mode::Receive).await;
    let p = pattern(10, 1);
    a.send(1, b.nid(), put(a.nid(), b.nid(), &p, 1), p).await;
    b.message().await;
    a.completion().await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    let sa = a.lnd.stats().await.unwrap();
    let sb = b.lnd.stats().await.unwrap();
    let noops = |s: &lnd::o2iblnd::O2ibStats| s.tx_msgs.get(&0xd0).copied().unwrap_or(0);
    println!(
        "idle 7 s with keepalive 2 s: NOOPs sent A {} B {}, received A {} B {}",
        noops(&sa),
        noops(&sb),
        sa.rx_msgs.get(&0xd0).copied().unwrap_or(0),
        sb.rx_msgs.get(&0xd0).copied().unwrap_or(0)
    );
    assert!(noops(&sa) >= 2 && noops(&sb) >= 2);
    assert!(a.lnd.conn_info(b.nid()).await.is_some());
    a.lnd.stop().await;
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_listener_is_a_network_timeout() {
    let Some(vm) = vm("no_listener_is_a_network_timeout") else {
        return;
    };
    let mut ca = config(vm.ip[0], 29987);
    ca.peer_port = 29988;
    let mut a = Node::start(ca, Mode::Receive).await;
    let b = o2ib(vm.ip[1]);
    let p = pattern(10, 1);
    a.send(1, b, put(a.nid(), b, &p, 1), p).await;
    let d = a.completion().await;
    println!(
        "send to a NID with no listener: {:?} {:?}",
        d.status, d.reason
    );
    assert_eq!(d.status, HealthStatus::NetworkTimeout);
    let down = tokio::time::timeout(WAIT, a.down.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(down.status, HealthStatus::NetworkTimeout);
    a.lnd.stop().await;
}

/// Two NIs started with `ca` and `cb` that send each other a PUT at the same moment
/// (each connects to the other at once); both PUTs arrive whole and complete.
async fn put_at_once(ca: O2ibLndConfig, cb: O2ibLndConfig) -> (Node, Node) {
    let mut a = Node::start(ca, Mode::Receive).await;
    let mut b = Node::start(cb, Mode::Receive).await;
    let (an, bn) = (a.nid(), b.nid());
    let (pa, pb) = (pattern(2000, 1), pattern(300_000, 2));
    tokio::join!(
        a.send(1, bn, put(an, bn, &pa, 1), pa.clone()),
        b.send(2, an, put(bn, an, &pb, 2), pb.clone())
    );
    check_payload(&b.message().await);
    check_payload(&a.message().await);
    assert_eq!(a.completion().await.status, HealthStatus::Ok);
    assert_eq!(b.completion().await.status, HealthStatus::Ok);
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sides_connecting_at_once_resolve_the_race() {
    let Some(vm) = vm("both_sides_connecting_at_once_resolve_the_race") else {
        return;
    };
    let port = 30987;
    let (mut a, mut b) = put_at_once(config(vm.ip[0], port), config(vm.ip[1], port)).await;
    let (an, bn) = (a.nid(), b.nid());
    let sa = a.lnd.stats().await.unwrap();
    let sb = b.lnd.stats().await.unwrap();
    println!(
        "simultaneous connects: CONN_RACE rejects sent by 10.0.0.2 {}, received by 10.0.0.1 {}; connections A {} B {}",
        sb.rejects_sent.get(&1).copied().unwrap_or(0),
        sa.rejects_received.get(&1).copied().unwrap_or(0),
        sa.conns_established,
        sb.conns_established
    );
    // 10.0.0.1 has the smaller nidhash: only its CONNREQ can lose a race.
    assert_eq!(sa.rejects_sent.get(&1), None);
    // Traffic keeps flowing both ways on what survived.
    let p = pattern(1 << 20, 3);
    a.send(3, bn, put(an, bn, &p, 3), p).await;
    check_payload(&b.message().await);
    assert_eq!(a.completion().await.status, HealthStatus::Ok);
    a.lnd.stop().await;
    b.lnd.stop().await;
}

/// A requester that does not play by the rules: CONNREQs on CM ids with no QP, so that an
/// accept comes back as CONNECT_RESPONSE, which it never answers (no RTU: the connection
/// stays half-open on the passive side). Every id it made stays open until it is dropped.
struct Hostile {
    // Drop order: the ids, then the descriptor, then their channel.
    ids: HashMap<usize, HostileId>,
    fd: tokio::io::unix::AsyncFd<sys::Fd>,
    ch: sys::EventChannel,
    src: Ipv4Addr,
    dst: SocketAddrV4,
    tally: HostileTally,
}

struct HostileId {
    id: sys::CmId,
    private_data: Vec<u8>,
    /// The QP number its CONNREQ announces: one of its own per request (the IB CM of the
    /// passive side rejects a second REQ naming a QP already connected as stale).
    qp_num: u32,
    /// Answered: accepted (stalled) or refused.
    answered: bool,
    stalled: bool,
}

/// What the requests of a [`Hostile`] came to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct HostileTally {
    /// Accepted and left half-open (CONNECT_RESPONSE, never answered).
    stalled: usize,
    /// Rejected with a `kib_rej` (IB CM status 28), by its `why`.
    rejected: HashMap<u8, usize>,
    /// Half-open ones the passive side later tore down (an event after the response).
    torn_down: usize,
    /// Anything else, by event kind.
    other: HashMap<String, usize>,
}

impl HostileTally {
    fn answered(&self) -> usize {
        self.stalled + self.rejected.values().sum::<usize>() + self.other.values().sum::<usize>()
    }
}

/// The QP number the next hostile CONNREQ announces: one of its own across every
/// [`Hostile`] of the run (requesters on the same device share its CA, and the passive
/// side's IB CM takes a QP number it has seen from that CA as a stale connection).
static NEXT_HOSTILE_QP: AtomicU32 = AtomicU32::new(0x80_0000);

impl Hostile {
    fn new(src: Ipv4Addr, dst: SocketAddrV4) -> Hostile {
        let ch = sys::EventChannel::new().unwrap();
        let fd = sys::async_fd(ch.fd()).unwrap();
        Hostile {
            ids: HashMap::new(),
            fd,
            ch,
            src,
            dst,
            tally: HostileTally::default(),
        }
    }

    /// Sends `n` CONNREQs carrying `private_data` (all started at once) and waits, within
    /// `WAIT`, until each is answered; returns what these `n` came to.
    async fn connect(&mut self, n: usize, private_data: &[u8]) -> HostileTally {
        let before = self.tally.clone();
        for _ in 0..n {
            let id = sys::CmId::new(&self.ch).unwrap();
            id.resolve_addr(SocketAddrV4::new(self.src, 0), self.dst, 5000)
                .unwrap();
            self.ids.insert(
                id.key(),
                HostileId {
                    id,
                    private_data: private_data.to_vec(),
                    qp_num: NEXT_HOSTILE_QP.fetch_add(1, Ordering::Relaxed),
                    answered: false,
                    stalled: false,
                },
            );
        }
        let want = before.answered() + n;
        let deadline = Instant::now() + WAIT;
        while self.tally.answered() < want {
            assert!(
                self.pump(deadline).await,
                "hostile requests: {} of {n} answered: {:?}",
                self.tally.answered() - before.answered(),
                self.tally
            );
        }
        HostileTally {
            stalled: self.tally.stalled - before.stalled,
            rejected: self
                .tally
                .rejected
                .iter()
                .map(|(k, v)| (*k, v - before.rejected.get(k).copied().unwrap_or(0)))
                .filter(|(_, v)| *v > 0)
                .collect(),
            torn_down: self.tally.torn_down - before.torn_down,
            other: self
                .tally
                .other
                .iter()
                .map(|(k, v)| (k.clone(), v - before.other.get(k).copied().unwrap_or(0)))
                .filter(|(_, v)| *v > 0)
                .collect(),
        }
    }

    /// Takes the events that come until `deadline`.
    async fn linger(&mut self, deadline: Instant) {
        while self.pump(deadline).await {}
    }

    /// Handles the events waiting, or waits for one until `deadline` (false: none came).
    async fn pump(&mut self, deadline: Instant) -> bool {
        let mut any = false;
        while let Some(ev) = self.ch.next_event().unwrap() {
            any = true;
            self.on_event(ev);
        }
        if any {
            return true;
        }
        match tokio::time::timeout_at(deadline, self.fd.readable()).await {
            Ok(guard) => {
                guard.unwrap().clear_ready();
                true
            }
            Err(_) => false,
        }
    }

    fn on_event(&mut self, ev: sys::CmEvent) {
        let Some(h) = self.ids.get_mut(&ev.id) else {
            return;
        };
        match ev.kind {
            sys::CmEventKind::AddrResolved => h.id.resolve_route(5000).unwrap(),
            sys::CmEventKind::RouteResolved => {
                let p = sys::ConnectParams {
                    responder_resources: 0,
                    initiator_depth: 0,
                    flow_control: 1,
                    retry_count: 5,
                    rnr_retry_count: 6,
                    qp_num: h.qp_num,
                };
                h.id.connect(&p, &h.private_data).unwrap();
            }
            sys::CmEventKind::ConnectResponse if !h.answered => {
                h.answered = true;
                h.stalled = true;
                self.tally.stalled += 1;
            }
            _ if h.stalled => self.tally.torn_down += 1,
            sys::CmEventKind::Rejected if !h.answered && ev.status == 28 => {
                h.answered = true;
                let why =
                    lnd::o2iblnd::wire::Rej::decode(&ev.private_data).map_or(0, |r| r.why.to_u8());
                *self.tally.rejected.entry(why).or_default() += 1;
            }
            kind if !h.answered => {
                h.answered = true;
                *self
                    .tally
                    .other
                    .entry(format!("{kind:?}/{}", ev.status))
                    .or_default() += 1;
            }
            _ => {}
        }
    }
}

/// The QPs and CM ids of RDMA device `dev` (`rdma resource show`), when the tool is there.
fn rdma_resources(dev: &str) -> Option<(u64, u64)> {
    let out = std::process::Command::new("rdma")
        .args(["resource", "show"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(&format!("{dev}:")))?;
    let field = |name: &str| {
        let words: Vec<&str> = line.split_whitespace().collect();
        words
            .iter()
            .position(|w| *w == name)
            .and_then(|i| words.get(i + 1))
            .and_then(|v| v.parse().ok())
    };
    Some((field("qp")?, field("cm_id")?))
}

/// `a` sends `n` PUTs of 1 MiB to `b`; returns the MB/s of payload (the payloads are made
/// before and checked after the clock runs), after checking that every one arrived once,
/// intact, and completed OK.
async fn timed_puts(a: &mut Node, b: &mut Node, first: u64, n: u64) -> f64 {
    let (an, bn) = (a.nid(), b.nid());
    let payloads: Vec<(u64, Bytes)> = (first..first + n)
        .map(|seq| (seq, pattern(1 << 20, seq)))
        .collect();
    let t0 = Instant::now();
    let sender = send_puts(&a.lnd, an, bn, payloads);
    let receiver = async {
        let mut got = Vec::new();
        for _ in 0..n {
            got.push(b.message().await);
        }
        got
    };
    let ((), got) = tokio::join!(sender, receiver);
    let secs = t0.elapsed().as_secs_f64();
    let mut seqs: Vec<u64> = got
        .iter()
        .map(|m| {
            check_payload(m);
            seq_of(&m.header)
        })
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (first..first + n).collect::<Vec<_>>());
    for _ in 0..n {
        assert_eq!(a.completion().await.status, HealthStatus::Ok);
    }
    (n as f64) * 1.048576 / secs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_cm_requesters_are_bounded_while_good_puts_flow() {
    let Some(vm) = vm("hostile_cm_requesters_are_bounded_while_good_puts_flow") else {
        return;
    };
    // The hostile requester needs an address of its own on device 0 (scripts/o2ib-vm-test
    // adds 10.0.0.3 to it), so that the per-address bound does not also hold the good peer.
    let Some(hostile_ip) = std::env::var("RDMAVM_IP2")
        .ok()
        .and_then(|v| v.parse::<Ipv4Addr>().ok())
    else {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED hostile_cm_requesters_are_bounded_while_good_puts_flow: RDMAVM_IP2 is unset"
        );
        return;
    };
    const FLOOD: usize = 300;
    const PUTS: u64 = 32;
    let port = 31987;
    let mut cb = config(vm.ip[1], port);
    // Connect timeout max(5 s, timeout / 4): 5 s.
    cb.timeout = Duration::from_secs(20);
    let limit = cb.max_handshakes_per_addr;
    let connect_timeout = cb.connreq_timeout();
    let mut b = Node::start(cb, Mode::Receive).await;
    let dst = SocketAddrV4::new(vm.ip[1], port);
    let connreq = KibMsg {
        version: Version::V2,
        credits: 0,
        srcnid: o2ib(hostile_ip),
        srcstamp: 0xbad,
        dstnid: b.nid(),
        dststamp: 0,
        body: Body::ConnReq(ConnParams::DEFAULT),
    }
    .encode()
    .unwrap();
    let mut bad = connreq.clone();
    bad[4] = 0x13;
    let res_before = rdma_resources(&vm.dev[1]);
    let mut h = Hostile::new(hostile_ip, dst);

    // 1. An invalid CONNREQ and `limit` valid ones, none ever completed.
    let t = h.connect(1, &bad).await;
    println!("hostile: invalid CONNREQ, then silence -> {t:?}");
    assert_eq!(t.rejected, HashMap::from([(3u8, 1usize)]), "FATAL at once");
    let t = h.connect(limit, &connreq).await;
    println!("hostile: {limit} CONNREQs, never completed -> {t:?}");
    assert_eq!(t.stalled, limit);
    let s = b.lnd.stats().await.unwrap();
    assert_eq!(s.handshakes, limit as u64);
    let res_stalled = rdma_resources(&vm.dev[1]);
    println!(
        "{} QPs, CM ids: before {res_before:?}, with {limit} half-open {res_stalled:?}",
        vm.dev[1]
    );

    // 2. A good peer on another address connects and sends while they are held.
    let mut a = Node::start(config(vm.ip[0], port), Mode::Receive).await;
    let mbps_stalled = timed_puts(&mut a, &mut b, 1, PUTS).await;

    // 3. A flood of CONNREQs from the hostile address while the good peer sends.
    let flood_t0 = Instant::now();
    let (flood, mbps_flood) = tokio::join!(
        h.connect(FLOOD, &connreq),
        timed_puts(&mut a, &mut b, 1001, PUTS)
    );
    let flood_secs = flood_t0.elapsed().as_secs_f64();
    println!("hostile: flood of {FLOOD} CONNREQs in {flood_secs:.1} s -> {flood:?}");
    let no_resources = flood.rejected.get(&2).copied().unwrap_or(0);
    assert_eq!(flood.stalled + no_resources, FLOOD, "{flood:?}");
    // At most `limit` in handshake at once, each for one connect timeout (plus the 1 s
    // tick that finds it): the flood got at most that many slots as they were freed.
    let slots = limit * (2 + (flood_secs / connect_timeout.as_secs_f64()) as usize);
    assert!(
        flood.stalled <= slots,
        "{} accepted, at most {slots}",
        flood.stalled
    );
    assert!(no_resources > 0);

    // 4. Every half-open connection is torn down after the connect timeout and freed.
    let accepted = (limit + flood.stalled) as u64;
    let deadline = Instant::now() + WAIT;
    let s = loop {
        let s = b.lnd.stats().await.unwrap();
        if s.handshake_timeouts >= accepted && s.handshakes == 0 {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "half-open connections left: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    h.linger(Instant::now() + Duration::from_secs(2)).await;
    let res_after = rdma_resources(&vm.dev[1]);
    println!(
        "passive side: handshake_timeouts {} handshake_limit_rejects {} handshakes {} conns {} rejects_sent {:?}; \
         the hostile side saw {} of its {accepted} half-open connections torn down; {} QPs, CM ids after {res_after:?}",
        s.handshake_timeouts,
        s.handshake_limit_rejects,
        s.handshakes,
        s.conns,
        s.rejects_sent,
        h.tally.torn_down,
        vm.dev[1],
    );
    assert_eq!(s.handshake_timeouts, accepted);
    assert_eq!(s.handshake_limit_rejects, no_resources as u64);
    assert_eq!(s.rejects_sent.get(&2).copied(), Some(no_resources as u64));
    assert_eq!(s.rejects_sent.get(&3).copied(), Some(1));
    // Only the good peer's connection is left, with its QP and CM id.
    assert_eq!(s.conns, 1);
    if let (Some(before), Some(stalled), Some(after)) = (res_before, res_stalled, res_after) {
        assert_eq!(
            stalled.0,
            before.0 + limit as u64,
            "QPs of the half-open connections"
        );
        assert_eq!(after, (before.0 + 1, before.1 + 1), "QPs and CM ids left");
    }

    // 5. And the good peer goes on.
    let mbps_after = timed_puts(&mut a, &mut b, 2001, PUTS).await;
    println!(
        "good peer, {PUTS} x 1 MiB PUT: {mbps_stalled:.1} MB/s with {limit} half-open handshakes held \
         (includes its connect), {mbps_flood:.1} MB/s during the flood, {mbps_after:.1} MB/s after"
    );
    drop(h);
    a.lnd.stop().await;
    b.lnd.stop().await;
}

/// Requesters on two addresses, each within `max_handshakes_per_addr`, together meet
/// `max_handshakes`: the CONNREQs over it are rejected (`IBLND_REJECT_NO_RESOURCES`), a peer
/// connected before keeps sending, and once the half-open connections are torn down new
/// handshakes are taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incoming_handshakes_are_bounded_across_addresses() {
    let Some(vm) = vm("incoming_handshakes_are_bounded_across_addresses") else {
        return;
    };
    let Some(second_ip) = std::env::var("RDMAVM_IP2")
        .ok()
        .and_then(|v| v.parse::<Ipv4Addr>().ok())
    else {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED incoming_handshakes_are_bounded_across_addresses: RDMAVM_IP2 is unset"
        );
        return;
    };
    let port = 31988;
    let mut cb = config(vm.ip[1], port);
    // Connect timeout max(5 s, timeout / 4): 5 s.
    cb.timeout = Duration::from_secs(20);
    cb.max_handshakes_per_addr = 4;
    cb.max_handshakes = 6;
    let mut b = Node::start(cb, Mode::Receive).await;
    // A peer connected before the requesters come.
    let mut a = Node::start(config(vm.ip[0], port), Mode::Receive).await;
    let mbps_before = timed_puts(&mut a, &mut b, 1, 8).await;
    let dst = SocketAddrV4::new(vm.ip[1], port);
    let b_nid = b.nid();
    let connreq = |from: Ipv4Addr| {
        KibMsg {
            version: Version::V2,
            credits: 0,
            srcnid: o2ib(from),
            srcstamp: 0xbad,
            dstnid: b_nid,
            dststamp: 0,
            body: Body::ConnReq(ConnParams::DEFAULT),
        }
        .encode()
        .unwrap()
    };
    let mut first = Hostile::new(second_ip, dst);
    let t = first.connect(4, &connreq(second_ip)).await;
    println!("requester on {second_ip}: 4 CONNREQs -> {t:?}");
    assert_eq!(t.stalled, 4, "within both bounds");
    // The second requester shares the connected peer's address: 4 more would be within
    // that address's bound, but only 2 fit under the bound of all.
    // (It claims a NID of no peer: one naming the connected peer's would be that peer
    // reconnecting.)
    let mut second = Hostile::new(vm.ip[0], dst);
    let t = second
        .connect(4, &connreq(Ipv4Addr::new(10, 0, 0, 99)))
        .await;
    println!("requester on {}: 4 CONNREQs -> {t:?}", vm.ip[0]);
    assert_eq!(t.stalled, 2);
    assert_eq!(t.rejected, HashMap::from([(2u8, 2usize)]), "NO_RESOURCES");
    let s = b.lnd.stats().await.unwrap();
    assert_eq!((s.handshakes, s.handshake_limit_rejects), (6, 2), "{s:?}");
    // The connected peer is not held up by them.
    let mbps_held = timed_puts(&mut a, &mut b, 1001, 8).await;

    // Torn down after the connect timeout; then a handshake is taken again.
    let deadline = Instant::now() + WAIT;
    let s = loop {
        let s = b.lnd.stats().await.unwrap();
        if s.handshakes == 0 {
            break s;
        }
        assert!(Instant::now() < deadline, "half-open left: {s:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(s.handshake_timeouts, 6);
    let t = first.connect(1, &connreq(second_ip)).await;
    assert_eq!(t.stalled, 1, "taken again: {t:?}");
    println!(
        "connected peer, 8 x 1 MiB PUT: {mbps_before:.1} MB/s before, {mbps_held:.1} MB/s with 6 half-open \
         handshakes held and 2 CONNREQs refused"
    );
    drop(first);
    drop(second);
    a.lnd.stop().await;
    b.lnd.stop().await;
}

/// Polls `lnd`'s connections to `peer` until `want` says they are as expected; bounded by
/// [`WAIT`].
async fn wait_conns(
    lnd: &O2ibLnd<Handler>,
    peer: Nid,
    what: &str,
    want: impl Fn(&[PeerConn]) -> bool,
) -> Vec<PeerConn> {
    let t0 = Instant::now();
    loop {
        let conns = lnd.peer_conns(peer).await;
        if want(&conns) {
            return conns;
        }
        assert!(
            t0.elapsed() < WAIT,
            "{what}: not within {WAIT:?}: {conns:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn established(conns: &[PeerConn]) -> usize {
    conns.iter().filter(|c| c.established).count()
}

/// Sends `n` PUTs from `tx` to `rx` numbered from `first` (IMMEDIATE and 1 MiB in turn),
/// and checks that each arrives intact and completes OK.
async fn puts_ok(tx: &mut Node, rx: &mut Node, first: u64, n: u64) {
    let (src, dst) = (tx.nid(), rx.nid());
    for seq in first..first + n {
        let len = if seq % 2 == 0 { 1000 } else { 1 << 20 };
        let p = pattern(len, seq);
        tx.send(seq, dst, put(src, dst, &p, seq), p).await;
    }
    let mut got = Vec::new();
    for _ in 0..n {
        let m = rx.message().await;
        check_payload(&m);
        got.push(seq_of(&m.header));
    }
    got.sort_unstable();
    assert_eq!(got, (first..first + n).collect::<Vec<_>>());
    for _ in 0..n {
        let d = tx.completion().await;
        assert_eq!(d.status, HealthStatus::Ok, "{d:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conns_per_peer_opens_several_connections_and_sends_go_round_them() {
    let Some(vm) = vm("conns_per_peer_opens_several_connections_and_sends_go_round_them") else {
        return;
    };
    let port = 33987;
    let mut b = Node::start(config(vm.ip[1], port), Mode::Receive).await;
    let mut ca = config(vm.ip[0], port);
    ca.conns_per_peer = 4;
    let mut a = Node::start(ca, Mode::Receive).await;
    let (an, bn) = (a.nid(), b.nid());

    // The first send opens four connections; A's side and B's both see them.
    puts_ok(&mut a, &mut b, 0, 1).await;
    let on_a = wait_conns(&a.lnd, bn, "A's 4 connections up", |c| {
        c.len() == 4 && established(c) == 4
    })
    .await;
    assert!(on_a.iter().all(|c| c.active), "{on_a:?}");
    let on_b = wait_conns(&b.lnd, an, "B's 4 accepted connections up", |c| {
        c.len() == 4 && established(c) == 4
    })
    .await;
    assert!(on_b.iter().all(|c| !c.active), "{on_b:?}");
    let sa = a.lnd.stats().await.unwrap();
    assert_eq!(sa.conns_established, 4);
    println!(
        "conns_per_peer 4: A opened {} connections to B, B accepted {}",
        on_a.len(),
        on_b.len()
    );

    // Sends go round all four: each carries LNet messages, on both sides.
    puts_ok(&mut a, &mut b, 1, 16).await;
    let on_a = a.lnd.peer_conns(bn).await;
    let on_b = b.lnd.peer_conns(an).await;
    let sent: Vec<u64> = on_a.iter().map(|c| c.tx_msgs).collect();
    let received: Vec<u64> = on_b.iter().map(|c| c.rx_msgs).collect();
    println!("17 PUTs A -> B: messages posted per connection on A {sent:?}, received per connection on B {received:?}");
    assert!(sent.iter().all(|n| *n >= 4), "{sent:?}");
    assert!(received.iter().all(|n| *n >= 4), "{received:?}");
    // B answers on what it accepted, round them too.
    puts_ok(&mut b, &mut a, 100, 8).await;
    let back: Vec<u64> = a
        .lnd
        .peer_conns(bn)
        .await
        .iter()
        .map(|c| c.rx_msgs)
        .collect();
    println!("8 PUTs B -> A: received per connection on A {back:?}");
    assert!(back.iter().filter(|n| **n > 0).count() >= 2, "{back:?}");

    // B closes one: A sees it go, opens none in its place, and its sends go on the others.
    let closed = on_b[0].id;
    assert!(b.lnd.close_conn(closed).await);
    let on_a = wait_conns(&a.lnd, bn, "A down to 3 connections", |c| c.len() == 3).await;
    assert_eq!(established(&on_a), 3);
    puts_ok(&mut a, &mut b, 200, 12).await;
    puts_ok(&mut b, &mut a, 300, 6).await;
    let on_a = a.lnd.peer_conns(bn).await;
    assert_eq!(
        on_a.len(),
        3,
        "no connection reopened while others are up: {on_a:?}"
    );
    assert!(
        a.down.try_recv().is_err(),
        "the peer is not down while it has connections"
    );
    let sent: Vec<u64> = on_a.iter().map(|c| c.tx_msgs).collect();
    println!(
        "one of B's connections closed: A keeps 3, 18 more PUTs ok, posted per connection {sent:?}"
    );

    // All closed: the next send opens four again.
    for c in b.lnd.peer_conns(an).await {
        assert!(b.lnd.close_conn(c.id).await);
    }
    wait_conns(&a.lnd, bn, "A without connections", |c| c.is_empty()).await;
    puts_ok(&mut a, &mut b, 400, 4).await;
    let on_a = wait_conns(&a.lnd, bn, "A's 4 connections up again", |c| {
        c.len() == 4 && established(c) == 4
    })
    .await;
    assert!(on_a.iter().all(|c| c.active), "{on_a:?}");
    let sa = a.lnd.stats().await.unwrap();
    println!(
        "all closed, then a send: A opened {} again (established {} in all, closed {})",
        on_a.len(),
        sa.conns_established,
        sa.conns_closed
    );
    assert_eq!(sa.conns_established, 8);
    a.lnd.stop().await;
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sides_opening_several_connections_at_once_resolve_the_race() {
    let Some(vm) = vm("both_sides_opening_several_connections_at_once_resolve_the_race") else {
        return;
    };
    let port = 33988;
    let mut ca = config(vm.ip[0], port);
    ca.conns_per_peer = 2;
    let mut cb = config(vm.ip[1], port);
    cb.conns_per_peer = 2;
    let (mut a, mut b) = put_at_once(ca, cb).await;
    let bn = b.nid();
    let on_a = wait_conns(&a.lnd, bn, "at least 2 connections up", |c| {
        established(c) >= 2 && established(c) == c.len()
    })
    .await;
    let sa = a.lnd.stats().await.unwrap();
    let sb = b.lnd.stats().await.unwrap();
    println!(
        "both sides with conns_per_peer 2 at once: CONN_RACE rejects sent by B {}, received by A {}; A has {} connections ({} opened by A)",
        sb.rejects_sent.get(&1).copied().unwrap_or(0),
        sa.rejects_received.get(&1).copied().unwrap_or(0),
        on_a.len(),
        on_a.iter().filter(|c| c.active).count(),
    );
    // 10.0.0.1 has the smaller nidhash: only its CONNREQs can lose a race.
    assert_eq!(sa.rejects_sent.get(&1), None);
    puts_ok(&mut a, &mut b, 10, 8).await;
    puts_ok(&mut b, &mut a, 20, 8).await;
    a.lnd.stop().await;
    b.lnd.stop().await;
}
