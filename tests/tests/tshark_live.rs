//! Real TCP on loopback: two endpoints speak socklnd to each other with our encoders and
//! our deframer (acceptor request, HELLO V3 and its reply, PUT of 1 MiB and its ACK, GET
//! and its REPLY), dumpcap captures the connection, and tshark's LNet dissector must
//! decode every frame as it was sent, with no byte left undecoded after the handshake.
//!
//! Needs root (dumpcap on `lo`) and tshark; scripts/install-test-deps installs tshark.
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use lnd::socklnd::wire::frame::encode_lnet;
use lnd::socklnd::wire::{
    ByteOrder, ConnType, Deframer, Event, Hello, KsockHeader, ProtoVersion, Side,
};
use lnet::nid::PID_LUSTRE;
use lnet::{AcceptorRequest, Header, HeaderForm, Message, Nid, ProcessId, WireHandle};
use lnet_router_tests::tshark::{self, Dir, LiveCapture};

/// A port of this test's own, so it can run beside the others.
const PORT: u16 = 29888;
const PORTAL: u32 = 42;

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn frame(header: &Header, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_lnet(
        &KsockHeader::lnet(),
        header,
        HeaderForm::Nid4,
        payload,
        ByteOrder::Little,
        &mut out,
    )
    .unwrap();
    out
}

/// Reads from `stream` into `deframer` until it yields an event.
fn next_event(stream: &mut TcpStream, deframer: &mut Deframer) -> Event {
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..10_000 {
        if let Some(ev) = deframer.poll().unwrap() {
            return ev;
        }
        let want = deframer.wanted().clamp(1, buf.len());
        let n = stream.read(&mut buf[..want]).unwrap();
        assert!(n > 0, "peer closed the connection");
        deframer.push(&buf[..n]);
    }
    panic!("no event after 10000 reads");
}

fn header(src: Nid, dest: Nid, msg: Message, payload_length: u32) -> Header {
    Header {
        dest_nid: dest,
        src_nid: src,
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length,
        msg,
    }
}

#[test]
fn tshark_decodes_a_real_socklnd_connection() {
    assert!(
        tshark::tools_present(),
        "tshark and text2pcap are needed: run scripts/install-test-deps"
    );
    let capture = LiveCapture::start(PORT).unwrap();
    let client_nid = nid("127.0.0.2@tcp");
    let server_nid = nid("127.0.0.1@tcp");
    let payload: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    let reply_data: Vec<u8> = (0..3000u32).map(|i| (i % 13) as u8).collect();
    let put_wmd = WireHandle {
        interface_cookie: 0x1111,
        object_cookie: 0x2222,
    };
    let get_wmd = WireHandle {
        interface_cookie: 0x3333,
        object_cookie: 0x4444,
    };

    let listener = TcpListener::bind(("127.0.0.1", PORT)).unwrap();
    let server = {
        let reply_data = reply_data.clone();
        let payload = payload.clone();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            s.set_nodelay(true).unwrap();
            let mut d = Deframer::new(Side::Passive);
            let Event::Acceptor(req) = next_event(&mut s, &mut d) else {
                panic!("expected the acceptor request");
            };
            assert_eq!(req.nid, server_nid);
            let Event::Hello { hello, .. } = next_event(&mut s, &mut d) else {
                panic!("expected a HELLO");
            };
            let reply = hello.reply(
                ProcessId::lustre(server_nid),
                0x17D4_B86A_06E6_1A08,
                hello.ctype.invert(),
            );
            s.write_all(&reply.encode().unwrap()).unwrap();
            // PUT in, ACK out.
            let Event::Lnet {
                header: put,
                payload: got,
                ..
            } = next_event(&mut s, &mut d)
            else {
                panic!("expected the PUT");
            };
            assert!(got == payload, "PUT payload differs");
            let Message::Put {
                ack_wmd,
                match_bits,
                ..
            } = put.msg
            else {
                panic!("expected a PUT, got {put:?}");
            };
            let ack = header(
                server_nid,
                client_nid,
                Message::Ack {
                    dst_wmd: ack_wmd,
                    match_bits,
                    mlength: put.payload_length,
                },
                0,
            );
            s.write_all(&frame(&ack, &[])).unwrap();
            // GET in, REPLY out.
            let Event::Lnet { header: get, .. } = next_event(&mut s, &mut d) else {
                panic!("expected the GET");
            };
            let Message::Get { return_wmd, .. } = get.msg else {
                panic!("expected a GET, got {get:?}");
            };
            let rep = header(
                server_nid,
                client_nid,
                Message::Reply {
                    dst_wmd: return_wmd,
                },
                reply_data.len() as u32,
            );
            s.write_all(&frame(&rep, &reply_data)).unwrap();
            // Wait for the client to close, so every byte is on the wire.
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            (ack, rep)
        })
    };

    let mut c = TcpStream::connect(("127.0.0.1", PORT)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.set_nodelay(true).unwrap();
    c.write_all(&AcceptorRequest::new(server_nid).unwrap().encode().unwrap())
        .unwrap();
    let hello = Hello::new(
        ProtoVersion::V3,
        ProcessId::lustre(client_nid),
        server_nid,
        0x17D4_B84D_484D_0000,
        ConnType::Control,
    );
    c.write_all(&hello.encode().unwrap()).unwrap();
    let mut d = Deframer::new(Side::Active);
    let Event::Hello { hello: reply, .. } = next_event(&mut c, &mut d) else {
        panic!("expected the HELLO reply");
    };
    assert_eq!(reply.src_nid, server_nid);
    assert_eq!(reply.ctype, ConnType::Control);

    let put = header(
        client_nid,
        server_nid,
        Message::Put {
            ack_wmd: put_wmd,
            match_bits: 0xABCD,
            hdr_data: 0x77,
            ptl_index: PORTAL,
            offset: 0,
        },
        payload.len() as u32,
    );
    c.write_all(&frame(&put, &payload)).unwrap();
    let Event::Lnet { header: ack, .. } = next_event(&mut c, &mut d) else {
        panic!("expected the ACK");
    };
    assert_eq!(
        ack.msg,
        Message::Ack {
            dst_wmd: put_wmd,
            match_bits: 0xABCD,
            mlength: 1 << 20
        }
    );
    let get = header(
        client_nid,
        server_nid,
        Message::Get {
            return_wmd: get_wmd,
            match_bits: 0xEF,
            ptl_index: PORTAL,
            src_offset: 0,
            sink_length: 8192,
        },
        0,
    );
    c.write_all(&frame(&get, &[])).unwrap();
    let Event::Lnet {
        header: rep,
        payload: rep_payload,
        ..
    } = next_event(&mut c, &mut d)
    else {
        panic!("expected the REPLY");
    };
    assert_eq!(rep.msg, Message::Reply { dst_wmd: get_wmd });
    assert!(rep_payload == reply_data);
    drop(c);
    let (sent_ack, sent_rep) = server.join().unwrap();

    // What tshark saw, in order: PUT, ACK, GET, REPLY, each exactly as encoded.
    let pdus = capture.stop().unwrap().pdus(&[PORTAL]).unwrap();
    let expected = [
        (Dir::ToServer, put, payload.len()),
        (Dir::ToClient, sent_ack, 0),
        (Dir::ToServer, get, 0),
        (Dir::ToClient, sent_rep, reply_data.len()),
    ];
    assert_eq!(pdus.len(), expected.len(), "PDUs: {pdus:#?}");
    for (pdu, (dir, h, len)) in pdus.iter().zip(&expected) {
        assert_eq!(pdu.dir, *dir);
        assert_eq!(pdu.le("lnet.ksm_type").unwrap(), 0xC1);
        let addrs: Vec<&str> = pdu
            .all("lnet.nid.addr")
            .iter()
            .map(|f| f.show.as_str())
            .collect();
        let ip = |n: &Nid| std::net::Ipv4Addr::from(n.addr_u32().unwrap()).to_string();
        assert_eq!(addrs, [ip(&h.dest_nid), ip(&h.src_nid)]);
        assert_eq!(pdu.le("lnet.msg_type").unwrap(), h.msg_type() as u64);
        assert_eq!(pdu.le("lnet.payload_length").unwrap(), *len as u64);
        // tshark labels the dest pid src_pid (spec tshark.md).
        assert_eq!(pdu.le("lnet.src_pid").unwrap(), u64::from(h.dest_pid));
    }
    assert!(
        pdus[0].one("data.data").unwrap().raw == payload,
        "tshark's PUT payload differs"
    );
}
