use super::super::csum::{frame_csum, seal_frame};
use super::super::frame::{encode_lnet, encode_noop};
use super::super::hello::V1Hello;
use super::super::ksock::ZcAcks;
use super::super::testutil::*;
use super::*;
use lnet::acceptor::AcceptorVersion;
use lnet::nid::PID_LUSTRE;
use lnet::{Message, MsgType, Nid, NidError, ProcessId, WireHandle, LNET_MTU};
use proptest::prelude::*;
use std::net::Ipv4Addr;

/// Polls until the deframer needs more bytes.
fn drain(d: &mut Deframer) -> Result<Vec<Event>, DeframeError> {
    let mut events = Vec::new();
    while let Some(e) = d.poll()? {
        events.push(e);
    }
    Ok(events)
}

/// Feeds `bytes` in chunks of the given sizes (cycled), polling after each; returns
/// the events and the error that stopped it, if any.
fn run(side: Side, bytes: &[u8], chunks: &[usize]) -> (Vec<Event>, Option<DeframeError>) {
    let mut d = Deframer::new(side);
    let mut events = Vec::new();
    let mut rest = bytes;
    let mut sizes = chunks.iter().copied().cycle();
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(rest.len()).clamp(1, rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        d.push(chunk);
        match drain(&mut d) {
            Ok(mut e) => events.append(&mut e),
            Err(err) => return (events, Some(err)),
        }
    }
    (events, None)
}

fn run_frames(bytes: &[u8]) -> Result<Vec<Event>, DeframeError> {
    let mut d = Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little);
    d.push(bytes);
    let events = drain(&mut d)?;
    assert_eq!(d.buffered(), 0);
    assert_eq!(d.stage(), Stage::KsockHeader);
    Ok(events)
}

/// Encodes an event (of a V2/V3 connection) back to bytes.
fn reencode(event: &Event) -> Vec<u8> {
    let mut out = Vec::new();
    match event {
        Event::Acceptor(req) => out = req.encode().unwrap(),
        Event::Hello { hello, order } => hello.encode_in(*order, &mut out).unwrap(),
        Event::Noop(k) => encode_noop(k, ByteOrder::Little, &mut out).unwrap(),
        Event::Lnet {
            ksock,
            header,
            payload,
        } => encode_lnet(
            ksock,
            header,
            HeaderForm::Nid4,
            payload,
            ByteOrder::Little,
            &mut out,
        )
        .unwrap(),
        Event::LnetHeader { .. } | Event::LnetPayload { .. } => {
            panic!("header-first events are not re-encoded: {event:?}")
        }
    }
    out
}

/// Runs a header-first deframer over `bytes` in chunks, reading payloads straight into
/// the sink when `direct`, discarding the payload of every frame whose index is in
/// `discard`, and turns the events back into whole-frame events (a discarded payload
/// comes back empty). Checks the buffer never holds more than what was asked for.
fn run_header_first(
    side: Side,
    bytes: &[u8],
    chunks: &[usize],
    discard: &dyn Fn(usize) -> bool,
    direct: bool,
) -> (Vec<Event>, Option<DeframeError>) {
    let mut d = Deframer::new(side).header_first();
    assert!(d.is_header_first());
    let mut events = Vec::new();
    let mut rest = bytes;
    let mut sizes = chunks.iter().copied().cycle();
    let mut frame = 0;
    loop {
        loop {
            match d.poll() {
                Err(e) => return (events, Some(e)),
                Ok(None) => break,
                Ok(Some(Event::LnetHeader { ksock, header })) => {
                    assert_eq!(d.stage(), Stage::PayloadDecision);
                    assert_eq!(d.wanted(), 0);
                    assert!(d.is_mid_message());
                    // Nothing of the payload was consumed.
                    assert!(d.poll().unwrap().is_none());
                    if discard(frame) {
                        d.discard_payload().unwrap();
                    } else {
                        d.receive_payload(BytesMut::from(&b"stale"[..])).unwrap();
                    }
                    assert!(d.discard_payload().is_err(), "decided twice");
                    let _ = (ksock, header);
                }
                Ok(Some(Event::LnetPayload {
                    ksock,
                    header,
                    payload,
                })) => {
                    assert_eq!(d.stage(), Stage::KsockHeader);
                    let payload = match payload {
                        Some(p) => {
                            assert!(!discard(frame));
                            assert_eq!(p.len(), header.payload_length as usize);
                            p.freeze()
                        }
                        None => {
                            assert!(discard(frame));
                            Bytes::new()
                        }
                    };
                    frame += 1;
                    events.push(Event::Lnet {
                        ksock,
                        header,
                        payload,
                    });
                }
                // A frame with no payload comes whole: nothing to decide.
                Ok(Some(Event::Lnet {
                    ksock,
                    header,
                    payload,
                })) => {
                    assert_eq!(header.payload_length, 0);
                    assert!(payload.is_empty());
                    assert_eq!(d.stage(), Stage::KsockHeader);
                    frame += 1;
                    events.push(Event::Lnet {
                        ksock,
                        header,
                        payload,
                    });
                }
                Ok(Some(e)) => events.push(e),
            }
        }
        if rest.is_empty() {
            return (events, None);
        }
        let n = sizes.next().unwrap_or(rest.len()).clamp(1, rest.len());
        if direct {
            if let Some((sink, left)) = d.payload_sink() {
                let n = n.min(left);
                let (chunk, tail) = rest.split_at(n);
                sink.extend_from_slice(chunk);
                rest = tail;
                continue;
            }
        }
        let wanted = d.wanted();
        let n = if wanted > 0 { n.min(wanted) } else { n };
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        d.push(chunk);
        assert!(d.buffered() <= super::super::frame::MAX_FRAME_BYTES);
    }
}

/// What a header-first run gives for `events`: the same, with discarded payloads empty.
fn with_discarded(events: &[Event], discard: &dyn Fn(usize) -> bool) -> Vec<Event> {
    let mut frame = 0;
    events
        .iter()
        .map(|e| match e {
            Event::Lnet {
                ksock,
                header,
                payload,
            } => {
                let payload = if discard(frame) {
                    Bytes::new()
                } else {
                    payload.clone()
                };
                frame += 1;
                Event::Lnet {
                    ksock: *ksock,
                    header: *header,
                    payload,
                }
            }
            other => other.clone(),
        })
        .collect()
}

#[test]
fn header_first_spec_session_and_errors() {
    let stream = [
        unhex(SPEC_7_1_ACCEPTOR),
        unhex(SPEC_7_1_PEER),
        unhex(SPEC_7_2_GET),
    ]
    .concat();
    let (full, err) = run(Side::Passive, &stream, &[stream.len()]);
    assert_eq!(err, None);
    for chunk in [1, 7, stream.len()] {
        for direct in [false, true] {
            let (got, err) = run_header_first(Side::Passive, &stream, &[chunk], &|_| false, direct);
            assert_eq!(err, None);
            assert_eq!(got, full);
        }
    }
    // Not awaited: a caller bug, reported, nothing changes.
    let mut d =
        Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little).header_first();
    assert_eq!(
        d.receive_payload(BytesMut::new()),
        Err(PayloadDecisionError::NotAwaited {
            stage: Stage::KsockHeader
        })
    );
    assert!(d.discard_payload().is_err());
    assert!(d.payload_sink().is_none());
    // Oversize payload_length fails at the header, before any payload.
    let mut frame = KsockHeader::lnet().encode().to_vec();
    frame.extend(put_header(LNET_MTU + 1));
    d.push(&frame);
    assert!(matches!(
        d.poll(),
        Err(DeframeError::Header(HeaderError::PayloadTooLarge { .. }))
    ));
    assert_eq!(d.stage(), Stage::LnetHeader);
    // A bad checksum is caught whether the payload is received or discarded.
    let mut bad = unhex(SPEC_7_3_REPLY);
    bad[4..8].copy_from_slice(&0x1234_5678u32.to_le_bytes());
    let computed = frame_csum(&bad);
    for discard in [false, true] {
        let mut d =
            Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little).header_first();
        d.push(&bad);
        assert!(matches!(d.poll(), Ok(Some(Event::LnetHeader { .. }))));
        if discard {
            d.discard_payload().unwrap();
        } else {
            d.receive_payload(BytesMut::new()).unwrap();
        }
        assert_eq!(
            d.poll(),
            Err(DeframeError::Csum(CsumError::Mismatch {
                received: 0x1234_5678,
                computed
            }))
        );
        assert_eq!(d.stage(), Stage::Payload);
    }
    // A sealed frame passes both ways.
    let mut sealed = unhex(SPEC_7_3_REPLY);
    let csum = seal_frame(&mut sealed, ByteOrder::Little);
    for discard in [false, true] {
        let mut d =
            Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little).header_first();
        d.push(&sealed[..100]);
        assert!(
            matches!(d.poll(), Ok(Some(Event::LnetHeader { ksock, .. })) if ksock.csum == csum)
        );
        if discard {
            d.discard_payload().unwrap();
        } else {
            d.receive_payload(BytesMut::new()).unwrap();
        }
        assert_eq!(d.poll(), Ok(None));
        d.push(&sealed[100..]);
        let Ok(Some(Event::LnetPayload { payload, .. })) = d.poll() else {
            panic!("no payload");
        };
        assert_eq!(payload.is_none(), discard);
        assert_eq!(d.finish(), Ok(()));
    }
    // EOF while the decision is awaited is a cut frame.
    let mut d =
        Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little).header_first();
    d.push(&sealed[..KSOCK_HEADER_BYTES + 72]);
    assert!(matches!(d.poll(), Ok(Some(Event::LnetHeader { .. }))));
    assert!(matches!(
        d.finish(),
        Err(DeframeError::UnexpectedEof {
            stage: Stage::PayloadDecision,
            buffered: 0
        })
    ));
}

#[test]
fn header_first_payload_sink_takes_only_its_payload() {
    // Two frames pushed through the sink in one go: the excess goes back to the
    // stream.
    let reply = unhex(SPEC_7_3_REPLY);
    let mut d =
        Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little).header_first();
    d.push(&reply[..96]);
    assert!(matches!(d.poll(), Ok(Some(Event::LnetHeader { .. }))));
    d.receive_payload(BytesMut::with_capacity(8)).unwrap();
    let (sink, left) = d.payload_sink().unwrap();
    assert_eq!(left, reply.len() - 96);
    sink.extend_from_slice(&reply[96..]);
    sink.extend_from_slice(&KsockHeader::keepalive().encode());
    let Ok(Some(Event::LnetPayload {
        payload: Some(p), ..
    })) = d.poll()
    else {
        panic!("no payload");
    };
    assert_eq!(&p[..], &reply[96..]);
    assert_eq!(d.poll(), Ok(Some(Event::Noop(KsockHeader::keepalive()))));
    assert_eq!(d.buffered(), 0);
}

fn lnet_event(e: &Event) -> (KsockHeader, Header, Bytes) {
    match e {
        Event::Lnet {
            ksock,
            header,
            payload,
        } => (*ksock, *header, payload.clone()),
        other => panic!("expected an LNET frame, got {other:?}"),
    }
}

const SPEC_WMD: WireHandle = WireHandle {
    interface_cookie: 0x17D6_F0A0_B1C2_D3E4,
    object_cookie: 0x405,
};

#[test]
fn spec_7_1_and_7_2_passive_session() {
    let acceptor = unhex(SPEC_7_1_ACCEPTOR);
    let hello = unhex(SPEC_7_1_PEER);
    let get = unhex(SPEC_7_2_GET);
    let stream = [acceptor.clone(), hello.clone(), get.clone()].concat();
    let (events, err) = run(Side::Passive, &stream, &[stream.len()]);
    assert_eq!(err, None);
    assert_eq!(events.len(), 3);
    assert_eq!(
        events[0],
        Event::Acceptor(AcceptorRequest {
            version: AcceptorVersion::V1,
            nid: nid("192.168.1.1@tcp"),
        })
    );
    let Event::Hello { hello: h, order } = &events[1] else {
        panic!("expected a HELLO, got {:?}", events[1]);
    };
    assert_eq!(*order, ByteOrder::Little);
    assert_eq!(h.src(), ProcessId::lustre(nid("192.168.1.2@tcp")));
    assert_eq!(h.ctype, ConnType::Control);
    let (ksock, header, payload) = lnet_event(&events[2]);
    assert_eq!(ksock, KsockHeader::lnet());
    assert_eq!(
        header,
        Header {
            dest_nid: nid("192.168.1.1@tcp"),
            src_nid: nid("192.168.1.2@tcp"),
            dest_pid: PID_LUSTRE,
            src_pid: PID_LUSTRE,
            payload_length: 0,
            msg: Message::Get {
                return_wmd: SPEC_WMD,
                match_bits: 1 << 63,
                ptl_index: 0,
                src_offset: 0,
                sink_length: 272,
            },
        }
    );
    assert!(payload.is_empty());
    assert_eq!(reencode(&events[0]), acceptor);
    assert_eq!(reencode(&events[1]), hello);
    assert_eq!(reencode(&events[2]), get);
}

#[test]
fn spec_7_3_reply_frame_both_ways() {
    let bytes = unhex(SPEC_7_3_REPLY);
    assert_eq!(bytes.len(), 160);
    let events = run_frames(&bytes).unwrap();
    assert_eq!(events.len(), 1);
    let (ksock, header, payload) = lnet_event(&events[0]);
    assert_eq!(ksock, KsockHeader::lnet());
    assert_eq!(
        header,
        Header {
            dest_nid: nid("192.168.1.2@tcp"),
            src_nid: nid("192.168.1.1@tcp"),
            dest_pid: PID_LUSTRE,
            src_pid: PID_LUSTRE,
            payload_length: 64,
            msg: Message::Reply { dst_wmd: SPEC_WMD },
        }
    );
    assert_eq!(&payload[..], &bytes[96..]);
    assert_eq!(&payload[..4], b"gnip");
    assert_eq!(reencode(&events[0]), bytes);
}

#[test]
fn spec_7_4_noops_both_ways() {
    let keepalive = unhex(SPEC_7_4_KEEPALIVE);
    let ack = unhex(SPEC_7_4_ZC_ACK);
    let events = run_frames(&[keepalive.clone(), ack.clone()].concat()).unwrap();
    assert_eq!(
        events,
        vec![
            Event::Noop(KsockHeader::keepalive()),
            Event::Noop(KsockHeader::zc_ack(0x2A))
        ]
    );
    let Event::Noop(k) = &events[1] else {
        unreachable!()
    };
    assert_eq!(k.acks(), ZcAcks::One(0x2A));
    assert_eq!(reencode(&events[0]), keepalive);
    assert_eq!(reencode(&events[1]), ack);
}

#[test]
fn kernel_captures_both_ways() {
    let wmd = |object_cookie| WireHandle {
        interface_cookie: 0x18EA_3A85_3E41_78AE,
        object_cookie,
    };
    let me = nid("10.0.0.2@tcp");
    let kernel = nid("10.0.0.1@tcp");

    // Active side: the kernel's HELLO reply, then its REPLY to our ping.
    let hello = unhex(KERNEL_HELLO_REPLY);
    let reply = unhex(KERNEL_REPLY_FRAME);
    let stream = [hello.clone(), reply.clone()].concat();
    let (events, err) = run(Side::Active, &stream, &[1]);
    assert_eq!(err, None);
    assert_eq!(events.len(), 2);
    assert_eq!(reencode(&events[0]), hello);
    let (_, header, payload) = lnet_event(&events[1]);
    assert_eq!(
        header,
        Header {
            dest_nid: me,
            src_nid: kernel,
            dest_pid: PID_LUSTRE,
            src_pid: PID_LUSTRE,
            payload_length: 48,
            msg: Message::Reply { dst_wmd: SPEC_WMD },
        }
    );
    assert_eq!(payload.len(), 48);
    assert_eq!(reencode(&events[1]), reply);

    // `lnetctl ping` GET and the discovery PUSH.
    let get = unhex(KERNEL_PING_GET_FRAME);
    let push = unhex(KERNEL_PUSH_FRAME);
    let events = run_frames(&[get.clone(), push.clone()].concat()).unwrap();
    assert_eq!(events.len(), 2);
    let (_, header, payload) = lnet_event(&events[0]);
    assert_eq!(
        header.msg,
        Message::Get {
            return_wmd: wmd(0xd),
            match_bits: 1 << 63,
            ptl_index: 0,
            src_offset: 0,
            sink_length: 3960,
        }
    );
    assert_eq!((header.dest_nid, header.src_nid), (me, kernel));
    assert!(payload.is_empty());
    assert_eq!(reencode(&events[0]), get);
    let (_, header, payload) = lnet_event(&events[1]);
    assert_eq!(
        header.msg,
        Message::Put {
            ack_wmd: wmd(0x19),
            match_bits: 1 << 63,
            hdr_data: 0,
            ptl_index: 0,
            offset: 0,
        }
    );
    assert_eq!(header.payload_length, 48);
    assert_eq!(&payload[..], &push[96..]);
    assert_eq!(reencode(&events[1]), push);
}

/// An acceptor request, a HELLO and a few frames of every kind.
fn session_bytes() -> Vec<u8> {
    let mut s = unhex(SPEC_7_1_ACCEPTOR);
    s.extend(unhex(SPEC_7_1_PEER));
    s.extend(unhex(SPEC_7_2_GET));
    s.extend(unhex(SPEC_7_4_KEEPALIVE));
    s.extend(unhex(SPEC_7_3_REPLY));
    s.extend(unhex(KERNEL_PUSH_FRAME));
    s.extend(unhex(SPEC_7_4_ZC_ACK));
    let mut zc_put = Vec::new();
    let put = Header {
        dest_nid: nid("10.0.0.9@tcp1"),
        src_nid: nid("192.168.1.2@tcp"),
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length: 3000,
        msg: Message::Put {
            ack_wmd: WireHandle::NONE,
            match_bits: 5,
            hdr_data: 6,
            ptl_index: 7,
            offset: 8,
        },
    };
    let payload: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let ksock = KsockHeader {
        zc_cookies: [2, 0],
        ..KsockHeader::lnet()
    };
    encode_lnet(
        &ksock,
        &put,
        HeaderForm::Nid4,
        &payload,
        ByteOrder::Little,
        &mut zc_put,
    )
    .unwrap();
    s.extend(zc_put);
    s
}

#[test]
fn session_one_byte_at_a_time_equals_all_at_once() {
    let bytes = session_bytes();
    let (all, err) = run(Side::Passive, &bytes, &[bytes.len()]);
    assert_eq!(err, None);
    assert_eq!(all.len(), 8);
    let (one, err) = run(Side::Passive, &bytes, &[1]);
    assert_eq!(err, None);
    assert_eq!(one, all);
    let (odd, err) = run(Side::Passive, &bytes, &[7, 1, 100, 23, 2]);
    assert_eq!(err, None);
    assert_eq!(odd, all);
    let (_, put, payload) = lnet_event(&all[7]);
    assert_eq!(put.payload_length, 3000);
    assert_eq!(payload.len(), 3000);
    let Event::Lnet { ksock, .. } = &all[7] else {
        unreachable!()
    };
    assert_eq!(ksock.zc_request(), Some(2));
}

#[test]
fn wanted_and_stage_follow_the_stream() {
    let bytes = session_bytes();
    let mut d = Deframer::new(Side::Passive);
    assert_eq!(d.side(), Side::Passive);
    assert_eq!((d.stage(), d.wanted()), (Stage::AcceptorRequest, 4));
    assert!(!d.is_mid_message());
    d.push(&bytes[..4]);
    assert_eq!(d.poll(), Ok(None));
    assert_eq!(d.wanted(), 4);
    assert!(d.is_mid_message());
    d.push(&bytes[4..16]);
    assert_eq!(d.wanted(), 0);
    assert!(matches!(d.poll(), Ok(Some(Event::Acceptor(_)))));
    assert_eq!((d.stage(), d.wanted()), (Stage::Hello, 4));
    d.push(&bytes[16..24]);
    assert_eq!(d.wanted(), 48);
    d.push(&bytes[24..72]);
    assert!(matches!(d.poll(), Ok(Some(Event::Hello { .. }))));
    assert_eq!(d.version(), Some(ProtoVersion::V3));
    assert_eq!((d.stage(), d.wanted()), (Stage::KsockHeader, 24));
    d.push(&bytes[72..96]);
    assert_eq!(d.wanted(), 72);
    assert_eq!(d.poll(), Ok(None));
    assert_eq!(d.stage(), Stage::LnetHeader);
    assert!(d.is_mid_message());
    d.push(&bytes[96..168]);
    assert!(matches!(d.poll(), Ok(Some(Event::Lnet { .. }))));
    // Keepalive NOOP.
    d.push(&bytes[168..180]);
    assert_eq!(d.wanted(), 12);
    d.push(&bytes[180..192]);
    assert_eq!(d.wanted(), 0);
    assert!(matches!(d.poll(), Ok(Some(Event::Noop(_)))));
    // REPLY with 64 bytes of payload.
    d.push(&bytes[192..192 + 96]);
    assert_eq!(d.poll(), Ok(None));
    assert_eq!((d.stage(), d.wanted()), (Stage::Payload, 64));
    assert_eq!(
        d.finish(),
        Err(DeframeError::UnexpectedEof {
            stage: Stage::Payload,
            buffered: 96
        })
    );
    assert_eq!(d.stage(), Stage::Payload);
    assert_eq!(d.wanted(), 0);
}

#[test]
fn finish_between_frames_is_clean() {
    let mut d = Deframer::for_frames(Side::Passive, ProtoVersion::V3, ByteOrder::Little);
    d.push(&unhex(SPEC_7_4_KEEPALIVE));
    assert!(matches!(d.poll(), Ok(Some(Event::Noop(_)))));
    assert_eq!(d.finish(), Ok(()));
    let mut d = Deframer::new(Side::Passive);
    assert_eq!(d.finish(), Ok(()));
    d.push(&[0x00, 0x71]);
    assert_eq!(
        d.finish(),
        Err(DeframeError::UnexpectedEof {
            stage: Stage::AcceptorRequest,
            buffered: 2
        })
    );
    assert!(d.error().is_some());
}

#[test]
fn payload_is_split_off_without_a_copy() {
    let bytes = unhex(SPEC_7_3_REPLY);
    let data = BytesMut::from(&bytes[..]);
    let base = data.as_ptr() as usize;
    let mut d = Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little);
    d.feed(data);
    let (_, _, payload) = lnet_event(&d.poll().unwrap().unwrap());
    assert_eq!(payload.as_ptr() as usize, base + 96);
    assert_eq!(&payload[..], &bytes[96..]);
    // feed() after push() keeps the order.
    let mut d = Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little);
    d.push(&bytes[..50]);
    d.feed(BytesMut::from(&bytes[50..]));
    let (_, _, again) = lnet_event(&d.poll().unwrap().unwrap());
    assert_eq!(again, payload);
}

#[test]
fn an_empty_buffer_gives_its_memory_back_and_a_partial_frame_is_kept() {
    let bytes = unhex(SPEC_7_3_REPLY);
    let mut d = Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little);
    let mut chunk = BytesMut::with_capacity(64 * 1024);
    chunk.extend_from_slice(&bytes);
    d.feed(chunk);
    let (_, _, payload) = lnet_event(&d.poll().unwrap().unwrap());
    assert_eq!(&payload[..], &bytes[96..]);
    d.release_empty_buffer();
    assert_eq!(d.buf.capacity(), 0);
    // Part of a frame stays where it is.
    d.push(&bytes[..50]);
    d.release_empty_buffer();
    assert_eq!(d.poll(), Ok(None));
    d.push(&bytes[50..]);
    let (_, _, again) = lnet_event(&d.poll().unwrap().unwrap());
    assert_eq!(again, payload);
}

#[test]
fn active_side_refused_with_none() {
    let mut d = Deframer::new(Side::Active);
    d.push(&unhex(SPEC_7_1_REPLY_NONE));
    let Ok(Some(Event::Hello { hello, .. })) = d.poll() else {
        panic!("expected the HELLO")
    };
    assert_eq!(hello.ctype, ConnType::None);
    assert_eq!((d.stage(), d.wanted()), (Stage::Refused, 0));
    assert_eq!(d.poll(), Ok(None));
    assert_eq!(d.finish(), Ok(()));
    d.push(&[0xC0]);
    assert_eq!(
        d.poll(),
        Err(DeframeError::DataAfterRefusal { buffered: 1 })
    );
    assert_eq!(
        d.poll(),
        Err(DeframeError::DataAfterRefusal { buffered: 1 })
    );
    assert_eq!(d.stage(), Stage::Refused);
}

#[test]
fn flipped_connection_swaps_ksock_headers_only() {
    let hello = Hello::new(
        ProtoVersion::V3,
        ProcessId::lustre(nid("10.0.0.1@tcp")),
        nid("10.0.0.2@tcp"),
        99,
        ConnType::BulkIn,
    );
    let mut stream = Vec::new();
    hello.encode_in(ByteOrder::Big, &mut stream).unwrap();
    encode_noop(
        &KsockHeader::zc_ack_range(3, 9),
        ByteOrder::Big,
        &mut stream,
    )
    .unwrap();
    let reply = unhex(SPEC_7_3_REPLY);
    let ksock = KsockHeader {
        zc_cookies: [0x1234, 5],
        ..KsockHeader::lnet()
    };
    stream.extend_from_slice(&ksock.encode_in(ByteOrder::Big));
    stream.extend_from_slice(&reply[24..]);
    let (events, err) = run(Side::Active, &stream, &[5]);
    assert_eq!(err, None);
    assert_eq!(
        events[0],
        Event::Hello {
            hello,
            order: ByteOrder::Big
        }
    );
    assert_eq!(events[1], Event::Noop(KsockHeader::zc_ack_range(3, 9)));
    let (k, header, _) = lnet_event(&events[2]);
    assert_eq!(k, ksock);
    assert_eq!(header.payload_length, 64);
    // The same frames read as little-endian are refused.
    let mut d = Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little);
    d.push(&stream[56..]);
    assert_eq!(
        d.poll(),
        Err(DeframeError::Ksock(KsockError::UnknownType {
            value: 0xC000_0000
        }))
    );
}

#[test]
fn v4_session_uses_96_byte_headers() {
    let router = nid("fe80::1@tcp");
    let peer = nid("fe80::2@tcp");
    let mut stream = AcceptorRequest::new(router).unwrap().encode().unwrap();
    Hello::new(
        ProtoVersion::V4,
        ProcessId::lustre(peer),
        router,
        1,
        ConnType::BulkOut,
    )
    .encode_in(ByteOrder::Little, &mut stream)
    .unwrap();
    let header = Header {
        dest_nid: nid("fe80::3@tcp1"),
        src_nid: peer,
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length: 5,
        msg: Message::Put {
            ack_wmd: WireHandle::NONE,
            match_bits: 0,
            hdr_data: 0,
            ptl_index: 4,
            offset: 0,
        },
    };
    let start = stream.len();
    encode_lnet(
        &KsockHeader::lnet(),
        &header,
        HeaderForm::Large,
        b"hello",
        ByteOrder::Little,
        &mut stream,
    )
    .unwrap();
    assert_eq!(stream.len() - start, 120 + 5);
    let (events, err) = run(Side::Passive, &stream, &[3]);
    assert_eq!(err, None);
    assert_eq!(events.len(), 3);
    assert_eq!(
        events[2],
        Event::Lnet {
            ksock: KsockHeader::lnet(),
            header,
            payload: Bytes::from_static(b"hello"),
        }
    );
}

#[test]
fn checksummed_frames_verify() {
    let mut reply = unhex(SPEC_7_3_REPLY);
    let csum = seal_frame(&mut reply, ByteOrder::Little);
    let mut noop = KsockHeader::zc_ack(7).encode();
    let noop_csum = seal_frame(&mut noop, ByteOrder::Little);
    let events = run_frames(&[reply, noop.to_vec()].concat()).unwrap();
    let (k, _, _) = lnet_event(&events[0]);
    assert_eq!(k.csum, csum);
    assert_eq!(
        events[1],
        Event::Noop(KsockHeader {
            csum: noop_csum,
            ..KsockHeader::zc_ack(7)
        })
    );
}

#[test]
fn oversize_payload_fails_before_any_payload_arrives() {
    let mut d = Deframer::for_frames(Side::Passive, ProtoVersion::V3, ByteOrder::Little);
    let mut frame = KsockHeader::lnet().encode().to_vec();
    frame.extend(put_header(LNET_MTU + 1));
    d.push(&frame);
    assert_eq!(
        d.poll(),
        Err(DeframeError::Header(HeaderError::PayloadTooLarge {
            msg_type: MsgType::Put,
            payload_length: LNET_MTU + 1,
            max: LNET_MTU
        }))
    );
    assert_eq!(d.stage(), Stage::LnetHeader);
    // Stays failed; pushed bytes are dropped.
    d.push(&[0; 1000]);
    assert_eq!(d.buffered(), 0);
    assert!(matches!(d.poll(), Err(DeframeError::Header(_))));
    assert!(matches!(d.finish(), Err(DeframeError::Header(_))));
    assert!(matches!(d.error(), Some(DeframeError::Header(_))));
    // LNET_MTU itself is fine.
    let mut d = Deframer::for_frames(Side::Passive, ProtoVersion::V3, ByteOrder::Little);
    let mut frame = KsockHeader::lnet().encode().to_vec();
    frame.extend(put_header(LNET_MTU));
    d.push(&frame);
    assert_eq!(d.poll(), Ok(None));
    assert_eq!(d.wanted(), LNET_MTU as usize);
    assert_eq!(
        d.wanted() + d.buffered(),
        super::super::frame::MAX_FRAME_BYTES - 24
    );
}

fn put_header(payload_length: u32) -> Vec<u8> {
    Header {
        dest_nid: nid("10.0.0.1@tcp"),
        src_nid: nid("10.0.0.2@tcp"),
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length,
        msg: Message::Put {
            ack_wmd: WireHandle::NONE,
            match_bits: 0,
            hdr_data: 0,
            ptl_index: 4,
            offset: 0,
        },
    }
    .encode_nid4()
    .unwrap()
    .to_vec()
}

#[test]
fn malformed_streams_get_specific_errors() {
    let handshake = [unhex(SPEC_7_1_ACCEPTOR), unhex(SPEC_7_1_PEER)].concat();
    let after_handshake = |frame: Vec<u8>| [handshake.clone(), frame].concat();
    let lnet = KsockHeader::lnet().encode().to_vec();
    let with_header = |mut header: Vec<u8>, edit: &dyn Fn(&mut Vec<u8>)| {
        edit(&mut header);
        after_handshake([lnet.clone(), header].concat())
    };
    let v1 = V1Hello::new(
        ProcessId::lustre(nid("192.168.1.2@tcp")),
        5,
        ConnType::Control,
    )
    .unwrap();
    let seventeen = Hello {
        ips: vec![Ipv4Addr::new(10, 0, 0, 1); 17],
        ..Hello::new(
            ProtoVersion::V3,
            ProcessId::lustre(nid("192.168.1.2@tcp")),
            nid("192.168.1.1@tcp"),
            5,
            ConnType::Control,
        )
    }
    .encode()
    .unwrap();
    let mut none_request = unhex(SPEC_7_1_PEER);
    none_request[48..52].copy_from_slice(&[0xFF; 4]);
    let mut bad_csum = unhex(SPEC_7_3_REPLY);
    bad_csum[4..8].copy_from_slice(&0x1234_5678u32.to_le_bytes());
    let bad_csum_computed = frame_csum(&bad_csum);
    let mut bad_noop_csum = KsockHeader::keepalive().encode();
    bad_noop_csum[4] = 1;
    let bad_noop_computed = frame_csum(&bad_noop_csum);
    let mut unknown_ksock = KsockHeader::lnet().encode();
    unknown_ksock[0] = 0xC2;
    let get_header = unhex(SPEC_7_2_GET)[24..].to_vec();

    let cases: Vec<(&str, Vec<u8>, DeframeError)> = vec![
        (
            "garbage before the acceptor request",
            b"GET / HTTP/1.1\r\n".to_vec(),
            DeframeError::Acceptor(AcceptorError::BadMagic { got: 0x2054_4547 }),
        ),
        (
            "HELLO without acceptor request",
            unhex(SPEC_7_1_PEER),
            DeframeError::Acceptor(AcceptorError::ProtoMagic { got: 0x4572_6963 }),
        ),
        (
            "acceptor version 3",
            unhex("00 71 ce ac 03 00 00 00"),
            DeframeError::Acceptor(AcceptorError::UnknownVersion { version: 3 }),
        ),
        (
            "bad HELLO magic",
            [unhex(SPEC_7_1_ACCEPTOR), unhex("de ad be ef 03 00 00 00")].concat(),
            DeframeError::Hello(HelloError::BadMagic { got: 0xEFBE_ADDE }),
        ),
        (
            "wrong HELLO version",
            [unhex(SPEC_7_1_ACCEPTOR), unhex("63 69 72 45 05 00 00 00")].concat(),
            DeframeError::Hello(HelloError::UnknownVersion {
                magic: 0x4572_6963,
                version: 5,
            }),
        ),
        (
            "V1 HELLO",
            [unhex(SPEC_7_1_ACCEPTOR), v1.encode()].concat(),
            DeframeError::Hello(HelloError::UnsupportedV1 {
                hello: Box::new(v1.clone()),
            }),
        ),
        (
            "nips 17",
            [unhex(SPEC_7_1_ACCEPTOR), seventeen[..56].to_vec()].concat(),
            DeframeError::Hello(HelloError::TooManyIps { nips: 17, max: 16 }),
        ),
        (
            "ctype NONE in a request",
            [unhex(SPEC_7_1_ACCEPTOR), none_request].concat(),
            DeframeError::Hello(HelloError::ConnTypeNoneInRequest),
        ),
        (
            "oversize payload_length",
            after_handshake([lnet.clone(), put_header(LNET_MTU + 1)].concat()),
            DeframeError::Header(HeaderError::PayloadTooLarge {
                msg_type: MsgType::Put,
                payload_length: LNET_MTU + 1,
                max: LNET_MTU,
            }),
        ),
        (
            "ACK with payload",
            with_header(put_header(8), &|h| h[24] = 0),
            DeframeError::Header(HeaderError::UnexpectedPayload {
                msg_type: MsgType::Ack,
                payload_length: 8,
            }),
        ),
        (
            "GET with payload",
            with_header(get_header.clone(), &|h| h[28] = 1),
            DeframeError::Header(HeaderError::UnexpectedPayload {
                msg_type: MsgType::Get,
                payload_length: 1,
            }),
        ),
        (
            "LNet HELLO in a frame",
            with_header(put_header(0), &|h| h[24] = 4),
            DeframeError::Header(HeaderError::HelloNotAllowed),
        ),
        (
            "unknown LNet type",
            with_header(put_header(0), &|h| h[24] = 7),
            DeframeError::Header(HeaderError::UnknownType { value: 7 }),
        ),
        (
            "source NID ANY",
            with_header(put_header(0), &|h| h[8..16].fill(0xFF)),
            DeframeError::Header(HeaderError::SourceIsAny),
        ),
        (
            "unknown ksock type",
            after_handshake(unknown_ksock.to_vec()),
            DeframeError::Ksock(KsockError::UnknownType { value: 0xC2 }),
        ),
        (
            "bad checksum",
            after_handshake(bad_csum),
            DeframeError::Csum(CsumError::Mismatch {
                received: 0x1234_5678,
                computed: bad_csum_computed,
            }),
        ),
        (
            "bad NOOP checksum",
            after_handshake(bad_noop_csum.to_vec()),
            DeframeError::Csum(CsumError::Mismatch {
                received: 1,
                computed: bad_noop_computed,
            }),
        ),
        (
            "NID with the top byte set",
            with_header(get_header, &|h| h[7] = 0x01),
            DeframeError::Header(HeaderError::BadNid {
                field: "dest_nid",
                source: NidError::TopByteSet {
                    raw: 0x0102_0000_C0A8_0101,
                },
            }),
        ),
    ];
    for (name, bytes, want) in cases {
        for chunk in [1, bytes.len()] {
            let (_, err) = run(Side::Passive, &bytes, &[chunk]);
            assert_eq!(err.as_ref(), Some(&want), "{name}, chunks of {chunk}");
        }
        let mut d = Deframer::new(Side::Passive);
        d.push(&bytes);
        let first = drain(&mut d).unwrap_err();
        assert_eq!(first, want, "{name}");
        assert_eq!(d.poll(), Err(want.clone()), "{name}: stays failed");
        d.push(&bytes);
        assert_eq!(d.poll(), Err(want), "{name}: still failed");
        assert_eq!(d.wanted(), 0);
    }
}

#[test]
fn hello_errors_on_the_active_side_too() {
    let (_, err) = run(Side::Active, &unhex("63 69 72 45 07 00 00 00"), &[8]);
    assert!(matches!(
        err,
        Some(DeframeError::Hello(ref e)) if e.wants_version_reply()
    ));
    let mut src_any = unhex(KERNEL_HELLO_REPLY);
    src_any[8..16].fill(0xFF);
    let (_, err) = run(Side::Active, &src_any, &[56]);
    assert_eq!(err, Some(DeframeError::Hello(HelloError::SrcNidAny)));
}

/// One frame of a generated stream.
#[derive(Debug, Clone)]
enum TestFrame {
    Noop([u64; 2]),
    Lnet([u64; 2], Header, Vec<u8>),
}

fn frame_strategy(large: bool) -> impl Strategy<Value = (TestFrame, bool)> {
    (
        prop_oneof![
            1 => any::<[u64; 2]>().prop_map(TestFrame::Noop),
            3 => (any::<[u64; 2]>(), header_strategy(large, 4096))
                .prop_map(|(c, (h, p))| TestFrame::Lnet(c, h, p)),
        ],
        proptest::bool::weighted(0.2),
    )
}

/// A whole connection: handshake for `side`, then frames, with the events it must give.
fn session_strategy() -> impl Strategy<Value = (Side, Vec<u8>, Vec<Event>)> {
    (
        prop_oneof![Just(Side::Passive), Just(Side::Active)],
        hello_strategy().prop_filter("not a refusal", |h| h.ctype != ConnType::None),
        order_strategy(),
    )
        .prop_flat_map(|(side, hello, order)| {
            let large = hello.version == ProtoVersion::V4;
            (
                Just(side),
                Just(hello),
                Just(order),
                proptest::collection::vec(frame_strategy(large), 0..8),
            )
        })
        .prop_map(|(side, hello, order, frames)| {
            let mut bytes = Vec::new();
            let mut events = Vec::new();
            if side == Side::Passive {
                let req = AcceptorRequest::new(hello.dst_nid)
                    .unwrap_or(AcceptorRequest::new(Nid::LO_0).unwrap());
                bytes.extend(req.encode().unwrap());
                events.push(Event::Acceptor(req));
            }
            hello.encode_in(order, &mut bytes).unwrap();
            let form = hello.version.header_form();
            events.push(Event::Hello { hello, order });
            for (frame, seal) in frames {
                let start = bytes.len();
                let mut ksock = match frame {
                    TestFrame::Noop(c) => KsockHeader {
                        msg_type: KsockType::Noop,
                        csum: 0,
                        zc_cookies: c,
                    },
                    TestFrame::Lnet(c, ..) => KsockHeader {
                        msg_type: KsockType::Lnet,
                        csum: 0,
                        zc_cookies: c,
                    },
                };
                match &frame {
                    TestFrame::Noop(_) => encode_noop(&ksock, order, &mut bytes).unwrap(),
                    TestFrame::Lnet(_, h, p) => {
                        encode_lnet(&ksock, h, form, p, order, &mut bytes).unwrap()
                    }
                }
                if seal {
                    ksock.csum = seal_frame(&mut bytes[start..], order);
                }
                events.push(match frame {
                    TestFrame::Noop(_) => Event::Noop(ksock),
                    TestFrame::Lnet(_, header, payload) => Event::Lnet {
                        ksock,
                        header,
                        payload: Bytes::from(payload),
                    },
                });
            }
            (side, bytes, events)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn header_first_gives_the_same_frames(
        (side, bytes, events) in session_strategy(),
        chunks in proptest::collection::vec(1usize..700, 1..20),
        discard_mask in any::<u8>(),
        direct in any::<bool>(),
    ) {
        let discard = |i: usize| discard_mask & (1 << (i % 8)) != 0;
        let (got, err) = run_header_first(side, &bytes, &chunks, &discard, direct);
        prop_assert_eq!(err, None);
        prop_assert_eq!(got, with_discarded(&events, &discard));
    }

    #[test]
    fn header_first_corrupted_streams_fail_like_whole_frames(
        (side, bytes, _) in session_strategy(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        chunks in proptest::collection::vec(1usize..300, 1..8),
    ) {
        let mut bytes = bytes;
        let len = bytes.len();
        for (at, x) in flips {
            bytes[at % len] ^= x;
        }
        let (full, full_err) = run(side, &bytes, &chunks);
        let (got, err) = run_header_first(side, &bytes, &chunks, &|_| false, false);
        // Same error; `run` drops the events of the batch that failed, so the whole-frame
        // events are a prefix of the header-first ones.
        prop_assert_eq!(&err, &full_err);
        if err.is_none() {
            prop_assert_eq!(got, full);
        } else {
            prop_assert!(got.len() >= full.len());
            prop_assert_eq!(&got[..full.len()], &full[..]);
        }
    }

    #[test]
    fn streams_in_random_chunks_give_the_same_events(
        (side, bytes, events) in session_strategy(),
        chunks in proptest::collection::vec(1usize..700, 1..20),
    ) {
        let (got, err) = run(side, &bytes, &chunks);
        prop_assert_eq!(err, None);
        prop_assert_eq!(&got, &events);
        let (all, err) = run(side, &bytes, &[bytes.len().max(1)]);
        prop_assert_eq!(err, None);
        prop_assert_eq!(&all, &events);
    }

    #[test]
    fn corrupted_streams_never_panic(
        (side, bytes, _) in session_strategy(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        chunks in proptest::collection::vec(1usize..300, 1..8),
    ) {
        let mut bytes = bytes;
        let len = bytes.len();
        for (at, x) in flips {
            bytes[at % len] ^= x;
        }
        let mut d = Deframer::new(side);
        let mut rest = &bytes[..];
        let mut sizes = chunks.iter().copied().cycle();
        while !rest.is_empty() {
            let n = sizes.next().unwrap().min(rest.len());
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            d.push(chunk);
            let _ = d.wanted();
            let _ = d.stage();
            if let Err(first) = drain(&mut d) {
                prop_assert_eq!(d.poll(), Err(first));
                prop_assert_eq!(d.wanted(), 0);
            }
            prop_assert!(d.buffered() <= len);
        }
        let _ = d.finish();
    }

    #[test]
    fn garbage_never_panics(
        side in prop_oneof![Just(Side::Passive), Just(Side::Active)],
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let (_, _) = run(side, &bytes, &[13]);
        let mut d = Deframer::for_frames(side, ProtoVersion::V3, ByteOrder::Little);
        d.push(&bytes);
        let _ = drain(&mut d);
        let _ = d.finish();
    }
}

#[test]
fn header_first_gives_a_frame_with_no_payload_whole_once_its_checksum_matches() {
    let get = unhex(SPEC_7_2_GET);
    let mut plain = Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little);
    plain.push(&get);
    let whole = plain.poll().unwrap().unwrap();
    let mut sealed = get.clone();
    seal_frame(&mut sealed, ByteOrder::Little);
    let mut bad = get.clone();
    bad[4..8].copy_from_slice(&0x1234_5678u32.to_le_bytes());
    for (bytes, ok) in [(&get, true), (&sealed, true), (&bad, false)] {
        let mut d =
            Deframer::for_frames(Side::Active, ProtoVersion::V3, ByteOrder::Little).header_first();
        // Cut short: nothing yet, and no decision is awaited.
        d.push(&bytes[..bytes.len() - 1]);
        assert_eq!(d.poll(), Ok(None));
        assert!(d.receive_payload(BytesMut::new()).is_err());
        d.push(&bytes[bytes.len() - 1..]);
        match d.poll() {
            Ok(Some(Event::Lnet {
                ksock,
                header,
                payload,
            })) => {
                assert!(ok, "a bad checksum passed");
                assert_eq!(header.payload_length, 0);
                assert!(payload.is_empty());
                let (_, want_header, _) = lnet_event(&whole);
                assert_eq!(header, want_header);
                assert_eq!(ksock.csum != 0, bytes == &sealed);
                assert_eq!(d.stage(), Stage::KsockHeader);
                assert!(!d.is_mid_message());
            }
            Err(DeframeError::Csum(_)) => assert!(!ok),
            other => panic!("unexpected {other:?}"),
        }
    }
}
