//! socklnd over real TCP on loopback addresses. Every test has its own acceptor port so
//! the tests run in parallel; every wait is bounded ([`socklnd_support::WAIT`]).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod socklnd_support;

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use lnd::socklnd::wire::{ConnType, KsockHeader, KsockType, ProtoVersion};
use lnd::{Lnd, TxId};
use lnet::acceptor::{AcceptorRequest, RESERVED_PORTS};
use lnet::health::HealthStatus;
use lnet::{Message, ProcessId};
use socklnd_support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_get_reply_ack_between_two_nis() {
    let mut a = Node::start(config("127.0.0.1", 20001)).await;
    let mut b = Node::start(config("127.0.0.2", 20001)).await;
    let (an, bn) = (a.nid(), b.nid());

    for (i, size) in [0usize, 4096, 1 << 20].into_iter().enumerate() {
        let payload = pattern(size, i as u8);
        let header = put(an, bn, &payload, true);
        a.send(i as u64, bn, header, payload.clone()).await;
        let m = b.message().await;
        assert_eq!(m.header, header);
        assert_eq!(m.from, ProcessId::lustre(an));
        assert_eq!(m.ni, bn);
        let Message::Put { hdr_data, .. } = m.header.msg else {
            panic!("not a PUT")
        };
        assert_eq!(u64::from(crc32fast::hash(&m.payload)), hdr_data);
        assert_eq!(m.payload, payload);
        let done = a.completion().await;
        assert_eq!(done.id, TxId(i as u64));
        assert_eq!(done.status, HealthStatus::Ok);
        assert_eq!((done.ni, done.peer), (an, bn));

        // The target answers with an ACK it builds itself.
        let ack = ack_for(&m.header);
        b.send(100 + i as u64, an, ack, Bytes::new()).await;
        let got = a.message().await;
        assert_eq!(got.header, ack);
        assert!(got.payload.is_empty());
        assert_eq!(b.completion().await.status, HealthStatus::Ok);
    }

    // GET, then the REPLY the target builds.
    let g = get(an, bn, 8192);
    a.send(10, bn, g, Bytes::new()).await;
    let m = b.message().await;
    assert_eq!(m.header, g);
    let data = pattern(5000, 9);
    let reply = reply_for(&m.header, 5000);
    b.send(11, an, reply, data.clone()).await;
    let got = a.message().await;
    assert_eq!(got.header, reply);
    assert_eq!(got.payload, data);
    assert_eq!(a.completion().await.status, HealthStatus::Ok);
    assert_eq!(b.completion().await.status, HealthStatus::Ok);

    a.lnd.stop().await;
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_side_opens_the_typed_set_from_reserved_ports_and_places_traffic() {
    let fake = nid("127.0.0.3@tcp");
    let listener = listen("127.0.0.3:20002").await;
    let mut cfg = config("127.0.0.1", 20002);
    cfg.listen = None;
    let mut a = Node::start(cfg).await;
    let an = a.nid();

    // A first message makes the NI open its connection set: 1 CONTROL, 1 BULK_IN,
    // 1 BULK_OUT (conns_per_peer 1), each from a reserved port.
    a.send(
        1,
        fake,
        put(an, fake, b"warm-up", false),
        Bytes::from_static(b"warm-up"),
    )
    .await;
    let mut set = accept_set(&listener, fake, 3).await;
    let types: HashSet<ConnType> = set.iter().map(|c| c.hello.ctype).collect();
    assert_eq!(
        types,
        HashSet::from([ConnType::Control, ConnType::BulkIn, ConnType::BulkOut])
    );
    for c in &set {
        assert!(
            RESERVED_PORTS.contains(&c.from.port()),
            "port {}",
            c.from.port()
        );
        assert_eq!(c.from.ip(), std::net::IpAddr::from(ip_of(an)));
        assert_eq!(c.request, AcceptorRequest::new(fake).unwrap());
        assert_eq!(c.hello.version, ProtoVersion::V3);
        assert_eq!(c.hello.src(), ProcessId::lustre(an));
        assert_eq!(c.hello.dst_nid, fake);
    }
    wait_conns(&a.lnd, fake, 3).await;
    assert_eq!(a.completion().await.status, HealthStatus::Ok);

    // Read every connection; report (A's type of the connection, frame).
    let (tx, mut frames) = tokio::sync::mpsc::channel(16);
    for c in set.drain(..) {
        let tx = tx.clone();
        let mut s = c.stream;
        let ctype = c.hello.ctype;
        tokio::spawn(async move {
            while let Ok(f) = read_frame(&mut s).await {
                if tx.send((ctype, f)).await.is_err() {
                    break;
                }
            }
        });
    }
    let (ctype, f) = next(&mut frames).await;
    assert!(
        matches!(f, Frame::Lnet(_, h, _) if h.payload_length == 7),
        "warm-up"
    );
    let _ = ctype;

    // Small frames go on CONTROL, frames of min_bulk (1024) bytes and more on BULK_OUT.
    let small = pattern(927, 1);
    a.send(2, fake, put(an, fake, &small, false), small.clone())
        .await;
    let (ctype, f) = next(&mut frames).await;
    assert_eq!(ctype, ConnType::Control);
    assert!(matches!(f, Frame::Lnet(k, _, p) if p == small && k == KsockHeader::lnet()));
    let big = pattern(1 << 20, 2);
    a.send(3, fake, put(an, fake, &big, false), big.clone())
        .await;
    let (ctype, f) = next(&mut frames).await;
    assert_eq!(ctype, ConnType::BulkOut);
    assert!(matches!(f, Frame::Lnet(_, _, p) if p == big));
    let at_threshold = pattern(928, 3);
    a.send(
        4,
        fake,
        put(an, fake, &at_threshold, false),
        at_threshold.clone(),
    )
    .await;
    let (ctype, _) = next(&mut frames).await;
    assert_eq!(ctype, ConnType::BulkOut);
    for _ in 0..3 {
        assert_eq!(a.completion().await.status, HealthStatus::Ok);
    }
    a.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passive_side_acks_a_zero_copy_request_after_the_payload() {
    let mut b = Node::start(config("127.0.0.5", 20003)).await;
    let bn = b.nid();
    let fake = nid("127.0.0.6@tcp");
    let addr = b.lnd.local_addr().unwrap();
    // The fake kernel sends bulk on its BULK_OUT connection: our BULK_IN.
    let mut c = dial(fake, bn, addr, ConnType::BulkOut).await;
    assert_eq!(c.reply.ctype, ConnType::BulkIn);
    assert_eq!(c.reply.src(), ProcessId::lustre(bn));

    // A 1 MiB PUT, as a kernel sends bulk: with a zero-copy request it waits on.
    let payload = pattern(1 << 20, 5);
    let header = put(fake, bn, &payload, false);
    let zc = KsockHeader {
        msg_type: KsockType::Lnet,
        csum: 0,
        zc_cookies: [0x2A, 0],
    };
    c.stream
        .write_all(&lnet_frame(zc, &header, &payload))
        .await
        .unwrap();
    let m = b.message().await;
    assert_eq!(m.payload, payload);
    match read_frame_within(&mut c.stream).await {
        Frame::Noop(k) => assert_eq!(k, KsockHeader::zc_ack(0x2A)),
        other => panic!("expected the ZC-ACK NOOP, got {other:?}"),
    }
    // A frame without a request gets no ACK; the connection keeps working.
    let header2 = put(fake, bn, b"x", false);
    c.stream
        .write_all(&lnet_frame(KsockHeader::lnet(), &header2, b"x"))
        .await
        .unwrap();
    assert_eq!(b.message().await.header, header2);
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_noops_on_an_idle_connection() {
    let mut cfg = config("127.0.0.7", 20004);
    cfg.keepalive = Some(Duration::from_millis(200));
    cfg.keepalive_retry = Duration::from_millis(200);
    let b = Node::start(cfg).await;
    let fake = nid("127.0.0.8@tcp");
    let mut c = dial(
        fake,
        b.nid(),
        b.lnd.local_addr().unwrap(),
        ConnType::BulkOut,
    )
    .await;
    // Nothing is sent to the NI: after its keepalive time it pings us on BULK_IN (our
    // BULK_OUT), twice.
    for _ in 0..2 {
        match read_frame_within(&mut c.stream).await {
            Frame::Noop(k) => assert!(k.is_keepalive(), "{k:?}"),
            other => panic!("expected a keepalive NOOP, got {other:?}"),
        }
    }
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_to_a_port_with_no_listener_completes_remote_dropped() {
    let mut cfg = config("127.0.0.9", 20005);
    cfg.listen = None;
    let mut a = Node::start(cfg).await;
    let (an, nobody) = (a.nid(), nid("127.0.0.10@tcp"));
    a.send(7, nobody, get(an, nobody, 272), Bytes::new()).await;
    let done = a.completion().await;
    assert_eq!(done.id, TxId(7));
    assert_eq!(done.status, HealthStatus::RemoteDropped);
    assert_eq!((done.ni, done.peer), (an, nobody));
    assert!(done.reason.is_some());
    a.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_peers_close_only_their_connection() {
    let mut a = Node::start(config("127.0.0.11", 20006)).await;
    let mut b = Node::start(config("127.0.0.12", 20006)).await;
    let (an, bn) = (a.nid(), b.nid());
    let b_addr = b.lnd.local_addr().unwrap();
    a.send(
        1,
        bn,
        put(an, bn, b"one", false),
        Bytes::from_static(b"one"),
    )
    .await;
    assert_eq!(b.message().await.payload, Bytes::from_static(b"one"));

    // Garbage instead of the acceptor request.
    let garbage_ip = std::net::Ipv4Addr::new(127, 0, 0, 13);
    let mut s = lnd::socklnd::handshake::connect_reserved(garbage_ip, b_addr, WAIT)
        .await
        .unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").await.unwrap();
    assert!(closed_by_peer(&mut s, 0).await);

    // A good acceptor request, then a HELLO with a bad magic.
    let mut s = lnd::socklnd::handshake::connect_reserved(garbage_ip, b_addr, WAIT)
        .await
        .unwrap();
    let mut bytes = AcceptorRequest::new(bn).unwrap().encode().unwrap();
    bytes.extend([0xde, 0xad, 0xbe, 0xef, 3, 0, 0, 0]);
    bytes.extend([0u8; 48]);
    s.write_all(&bytes).await.unwrap();
    assert!(closed_by_peer(&mut s, 0).await);

    // A connection from an unreserved port (accept=secure).
    let mut s = TcpStream::connect(b_addr).await.unwrap();
    s.write_all(&AcceptorRequest::new(bn).unwrap().encode().unwrap())
        .await
        .unwrap();
    assert!(closed_by_peer(&mut s, 0).await);

    // The healthy peer's connections are untouched, both ways.
    a.send(
        2,
        bn,
        put(an, bn, b"two", false),
        Bytes::from_static(b"two"),
    )
    .await;
    assert_eq!(b.message().await.payload, Bytes::from_static(b"two"));
    b.send(
        3,
        an,
        put(bn, an, b"three", false),
        Bytes::from_static(b"three"),
    )
    .await;
    assert_eq!(a.message().await.payload, Bytes::from_static(b"three"));
    for _ in 0..2 {
        assert_eq!(a.completion().await.status, HealthStatus::Ok);
    }
    assert_eq!(b.completion().await.status, HealthStatus::Ok);
    a.lnd.stop().await;
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_negotiates_down_to_v2() {
    let fake = nid("127.0.0.14@tcp");
    let listener = listen("127.0.0.14:20007").await;
    let mut cfg = config("127.0.0.15", 20007);
    cfg.listen = None;
    let mut a = Node::start(cfg).await;
    let an = a.nid();
    a.send(
        1,
        fake,
        put(an, fake, b"v2", false),
        Bytes::from_static(b"v2"),
    )
    .await;
    // A V2-only peer answers each V3 HELLO with its own V2 HELLO of ctype NONE; the
    // connector comes back with V2 on a new connection.
    let mut v2 = Vec::new();
    while v2.len() < 3 {
        let mut c = accept_request(&listener).await;
        if c.hello.version == ProtoVersion::V3 {
            let refusal = lnd::socklnd::wire::Hello::new(
                ProtoVersion::V2,
                ProcessId::lustre(fake),
                an,
                88,
                ConnType::None,
            );
            c.stream
                .write_all(&refusal.encode().unwrap())
                .await
                .unwrap();
        } else {
            assert_eq!(c.hello.version, ProtoVersion::V2);
            let ctype = c.hello.ctype.invert();
            answer(&mut c, fake, ctype).await;
            v2.push(c);
        }
    }
    wait_conns(&a.lnd, fake, 3).await;
    let stats = a.lnd.peer_stats(fake).await.unwrap();
    assert!(stats.conns.iter().all(|(_, v)| *v == ProtoVersion::V2));
    // Under V2 any of the set may carry it (CONTROL preferred, the others as fallback).
    let (tx, mut frames) = tokio::sync::mpsc::channel(4);
    for c in v2 {
        let tx = tx.clone();
        let mut s = c.stream;
        tokio::spawn(async move {
            if let Ok(f) = read_frame(&mut s).await {
                let _ = tx.send(f).await;
            }
        });
    }
    match next(&mut frames).await {
        Frame::Lnet(_, _, p) => assert_eq!(p, b"v2"),
        other => panic!("{other:?}"),
    }
    assert_eq!(a.completion().await.status, HealthStatus::Ok);
    a.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conns_per_peer_two_opens_five_connections() {
    let fake = nid("127.0.0.22@tcp");
    let listener = listen("127.0.0.22:20011").await;
    let mut cfg = config("127.0.0.23", 20011);
    cfg.listen = None;
    cfg.conns_per_peer = 2;
    let mut a = Node::start(cfg).await;
    let an = a.nid();
    a.send(
        1,
        fake,
        put(an, fake, b"x", false),
        Bytes::from_static(b"x"),
    )
    .await;
    let set = accept_set(&listener, fake, 5).await;
    let count = |t| set.iter().filter(|c| c.hello.ctype == t).count();
    assert_eq!(count(ConnType::Control), 1);
    assert_eq!(count(ConnType::BulkIn), 2);
    assert_eq!(count(ConnType::BulkOut), 2);
    let ports: HashSet<u16> = set.iter().map(|c| c.from.port()).collect();
    assert_eq!(ports.len(), 5);
    assert!(ports.iter().all(|p| RESERVED_PORTS.contains(p)));
    wait_conns(&a.lnd, fake, 5).await;
    assert_eq!(a.completion().await.status, HealthStatus::Ok);
    a.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_left_incomplete_for_the_socklnd_timeout_closes_its_connection() {
    let mut cfg = config("127.0.0.24", 20012);
    cfg.timeout = Duration::from_millis(500);
    let mut b = Node::start(cfg).await;
    let bn = b.nid();
    let addr = b.lnd.local_addr().unwrap();
    let fake = nid("127.0.0.25@tcp");
    let mut stuck = dial(fake, bn, addr, ConnType::Control).await;
    // Half a ksock header, then nothing.
    stuck
        .stream
        .write_all(&[0xC1, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    assert!(closed_by_peer(&mut stuck.stream, 0).await);
    // A new connection from the same peer works.
    let mut fresh = dial(fake, bn, addr, ConnType::Control).await;
    let h = put(fake, bn, b"after", false);
    fresh
        .stream
        .write_all(&lnet_frame(KsockHeader::lnet(), &h, b"after"))
        .await
        .unwrap();
    assert_eq!(b.message().await.header, h);
    b.lnd.stop().await;
}

/// A sender kept apart from its NI (`Lnd::sender`) sends as the NI does while it runs,
/// and refuses as stopped once the NI has stopped, though it outlives the NI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_sender_sends_while_its_ni_runs_and_refuses_once_it_stopped() {
    let mut a = Node::start(config("127.0.0.60", 20022)).await;
    let mut b = Node::start(config("127.0.0.61", 20022)).await;
    let (an, bn) = (a.nid(), b.nid());
    let sender = a.lnd.sender().expect("socklnd has a sender");
    let header = put(an, bn, b"", false);
    let tx = move |id| lnd::TxRequest {
        id: TxId(id),
        peer: bn,
        header,
        payload: Bytes::new(),
    };
    // The first starts the peer (and this thread keeps its send side); the second finds it.
    for id in [1, 2] {
        sender.try_send(tx(id)).unwrap();
        let m = b.message().await;
        assert_eq!((m.header, m.from), (header, ProcessId::lustre(an)));
        let done = a.completion().await;
        assert_eq!((done.id, done.status), (TxId(id), HealthStatus::Ok));
    }
    let Node { lnd, mut done, .. } = a;
    lnd.stop().await;
    assert!(matches!(
        sender.try_send(tx(3)),
        Err(lnd::TryRefused::Refused(lnd::SendError::Stopped { ni })) if ni == an
    ));
    // From a thread that keeps nothing of the NI: refused by its peer table.
    let other = std::thread::spawn(move || {
        matches!(
            sender.try_send(tx(4)),
            Err(lnd::TryRefused::Refused(lnd::SendError::Stopped { .. }))
        )
    });
    assert!(other.join().expect("thread"), "refused as stopped");
    assert!(done.try_recv().is_err(), "no completion of a refused send");
    b.lnd.stop().await;
}

#[tokio::test]
async fn send_refuses_what_it_cannot_carry() {
    let mut cfg = config("127.0.0.26", 20013);
    cfg.listen = None;
    let a = Node::start(cfg).await;
    let an = a.nid();
    let tx = |peer, header, payload: &'static [u8]| lnd::TxRequest {
        id: TxId(1),
        peer,
        header,
        payload: Bytes::from_static(payload),
    };
    let other_net = nid("127.0.0.27@tcp1");
    let peer = nid("127.0.0.27@tcp");
    assert!(matches!(
        a.lnd
            .send(tx(other_net, put(an, other_net, b"", false), b""))
            .await,
        Err(lnd::SendError::WrongNet { .. })
    ));
    assert!(matches!(
        a.lnd.send(tx(an, put(an, an, b"", false), b"")).await,
        Err(lnd::SendError::SelfSend { .. })
    ));
    assert!(matches!(
        a.lnd
            .send(tx(peer, put(an, peer, b"abc", false), b"ab"))
            .await,
        Err(lnd::SendError::PayloadLength { .. })
    ));
    let mut get_with_payload = get(an, peer, 10);
    get_with_payload.payload_length = 2;
    assert!(matches!(
        a.lnd.send(tx(peer, get_with_payload, b"ab")).await,
        Err(lnd::SendError::BadHeader { .. })
    ));
    a.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upper_layer_refusal_closes_only_that_connection() {
    let mut b = Node::start(config("127.0.0.33", 20016)).await;
    let bn = b.nid();
    let addr = b.lnd.local_addr().unwrap();
    let (good, bad) = (nid("127.0.0.34@tcp"), nid("127.0.0.35@tcp"));
    let mut g = dial(good, bn, addr, ConnType::Control).await;
    let mut x = dial(bad, bn, addr, ConnType::Control).await;
    let mut refused = put(bad, bn, b"no", false);
    if let Message::Put { match_bits, .. } = &mut refused.msg {
        *match_bits = REFUSED_MATCH_BITS;
    }
    x.stream
        .write_all(&lnet_frame(KsockHeader::lnet(), &refused, b"no"))
        .await
        .unwrap();
    assert!(closed_by_peer(&mut x.stream, 0).await);
    let fine = put(good, bn, b"yes", false);
    g.stream
        .write_all(&lnet_frame(KsockHeader::lnet(), &fine, b"yes"))
        .await
        .unwrap();
    assert_eq!(b.message().await.header, fine);
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_peer_is_refused_once_and_its_old_connections_closed() {
    let mut b = Node::start(config("127.0.0.36", 20017)).await;
    let bn = b.nid();
    let addr = b.lnd.local_addr().unwrap();
    let fake = ProcessId::lustre(nid("127.0.0.37@tcp"));
    let connect = |incarnation| {
        lnd::socklnd::handshake::connect(
            fake,
            incarnation,
            ProcessId::lustre(bn),
            addr,
            ConnType::Control,
            ProtoVersion::V3,
            WAIT,
        )
    };
    let mut old = connect(1).await.unwrap();
    wait_conns(&b.lnd, fake.nid, 1).await;
    // Same NID, new incarnation: refused (ctype NONE), and the old connection closed.
    assert!(matches!(
        connect(2).await,
        Err(lnd::socklnd::handshake::ConnectError::Refused)
    ));
    assert!(closed_by_peer(&mut old.stream, 0).await);
    // The next attempt succeeds, and traffic flows on the new connection.
    let mut again = connect(2).await.unwrap();
    assert_eq!(again.reply.ctype, ConnType::Control);
    let payload = pattern(4096, 7);
    let header = put(fake.nid, bn, &payload, false);
    again
        .stream
        .write_all(&lnet_frame(KsockHeader::lnet(), &header, &payload))
        .await
        .unwrap();
    let m = b.message().await;
    assert_eq!(m.header, header);
    assert_eq!(m.payload, payload);
    b.lnd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nis_sending_to_each_other_at_once_deliver_everything() {
    let mut a = Node::start(config("127.0.0.38", 20018)).await;
    let mut b = Node::start(config("127.0.0.39", 20018)).await;
    let (an, bn) = (a.nid(), b.nid());
    let n = 20u64;
    tokio::join!(send_all(&a, bn, n), send_all(&b, an, n));
    for node in [&mut a, &mut b] {
        let mut got = 0;
        while got < n {
            let m = node.message().await;
            let Message::Put { hdr_data, .. } = m.header.msg else {
                panic!("not a PUT")
            };
            assert_eq!(u64::from(crc32fast::hash(&m.payload)), hdr_data);
            got += 1;
        }
        for _ in 0..n {
            assert_eq!(node.completion().await.status, HealthStatus::Ok);
        }
    }
    a.lnd.stop().await;
    b.lnd.stop().await;
}

async fn send_all(from: &Node, to: lnet::Nid, n: u64) {
    let sizes = [0usize, 100, 5000, 200_000];
    for i in 0..n {
        let payload = pattern(sizes[i as usize % sizes.len()], i as u8);
        let tx = lnd::TxRequest {
            id: TxId(i),
            peer: to,
            header: put(from.nid(), to, &payload, false),
            payload,
        };
        tokio::time::timeout(WAIT, from.lnd.send(tx))
            .await
            .unwrap()
            .unwrap();
    }
}
