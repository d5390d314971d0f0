use super::*;
use lnet::nid::PID_LUSTRE;

fn pid(s: &str) -> ProcessId {
    ProcessId::lustre(s.parse().unwrap())
}

#[test]
fn a_put_head_decodes_as_the_put_it_was_built_from() {
    let (src, dst) = (pid("127.0.58.1@tcp"), pid("127.0.59.1@tcp1"));
    let mut head = put_head(src, dst, 1 << 20).unwrap();
    set_put_cookie(&mut head, 0xABCD);
    let h = decode_head(&head).unwrap();
    assert_eq!((h.src_nid, h.dest_nid), (src.nid, dst.nid));
    assert_eq!((h.src_pid, h.dest_pid), (PID_LUSTRE, PID_LUSTRE));
    assert_eq!(h.payload_length, 1 << 20);
    let Message::Put {
        ack_wmd,
        match_bits,
        ptl_index,
        ..
    } = h.msg
    else {
        panic!("not a PUT: {h:?}");
    };
    assert_eq!(ack_wmd.object_cookie, 0xABCD);
    assert!(!ack_wmd.is_none());
    assert_eq!((match_bits, ptl_index), (MATCH_BITS, PORTAL));
}

#[test]
fn the_ack_carries_back_the_puts_handle_and_match_bits() {
    let (src, dst) = (pid("127.0.56.1@tcp"), pid("127.0.56.2@tcp"));
    let mut put = put_head(src, dst, 0).unwrap();
    set_put_cookie(&mut put, 77);
    let ack = ack_head(dst, src).unwrap();
    let mut out = vec![1, 2, 3];
    answer_put(&ack, &put, &mut out);
    assert_eq!(out.len(), 3 + FRAME_HEAD);
    let h = decode_head(&out[3..]).unwrap();
    assert_eq!((h.src_nid, h.dest_nid), (dst.nid, src.nid));
    let Message::Ack {
        dst_wmd,
        match_bits,
        ..
    } = h.msg
    else {
        panic!("not an ACK: {h:?}");
    };
    assert_eq!(dst_wmd.object_cookie, 77);
    assert_eq!(match_bits, MATCH_BITS);
    assert_eq!(ack_cookie(&out[3..]), 77);
}

#[test]
fn the_scanner_finds_frames_across_any_split_and_skips_payloads() {
    let (src, dst) = (pid("127.0.56.1@tcp"), pid("127.0.56.2@tcp"));
    let mut stream = Vec::new();
    stream.extend_from_slice(&KsockHeader::keepalive().encode());
    stream.extend_from_slice(&put_head(src, dst, 5).unwrap());
    stream.extend_from_slice(&[9u8; 5]);
    stream.extend_from_slice(&ack_head(dst, src).unwrap());
    for chunk in 1..stream.len() {
        let mut scanner = Scanner::default();
        let mut found = Vec::new();
        let mut held: Vec<u8> = Vec::new();
        for piece in stream.chunks(chunk) {
            held.extend_from_slice(piece);
            let used = scanner
                .scan(&held, |f, buf| match f {
                    Found::Noop => found.push(None),
                    Found::Lnet { msg_type, at } => {
                        assert_eq!(decode_head(&buf[at..]).unwrap().msg_type(), msg_type);
                        found.push(Some(msg_type));
                    }
                })
                .unwrap();
            held.drain(..used);
        }
        assert!(held.is_empty(), "chunk {chunk}");
        assert_eq!(
            found,
            vec![None, Some(MsgType::Put), Some(MsgType::Ack)],
            "chunk {chunk}"
        );
    }
}

#[test]
fn a_ping_is_answered_with_the_nodes_ping_info_and_other_gets_are_not() {
    let (me, router) = (pid("127.0.59.1@tcp1"), pid("127.0.59.2@tcp1"));
    let handle = WireHandle {
        interface_cookie: 5,
        object_cookie: 6,
    };
    let get = |match_bits| {
        let h = Header {
            dest_nid: me.nid,
            src_nid: router.nid,
            dest_pid: me.pid,
            src_pid: router.pid,
            payload_length: 0,
            msg: Message::Get {
                return_wmd: handle,
                match_bits,
                ptl_index: RESERVED_PORTAL,
                src_offset: 0,
                sink_length: 4096,
            },
        };
        let mut f = Vec::new();
        encode_lnet(
            &KsockHeader::lnet(),
            &h,
            HeaderForm::Nid4,
            &[],
            ByteOrder::Little,
            &mut f,
        )
        .unwrap();
        f
    };
    let mut out = Vec::new();
    assert!(!answer_ping(me, &get(7), &mut out).unwrap());
    assert!(out.is_empty());
    assert!(answer_ping(me, &get(PING_MATCHBITS), &mut out).unwrap());
    let h = decode_head(&out).unwrap();
    assert_eq!((h.src_nid, h.dest_nid), (me.nid, router.nid));
    assert_eq!(h.msg, Message::Reply { dst_wmd: handle });
    assert_eq!(out.len(), FRAME_HEAD + h.payload_length as usize);
    let info = PingInfo::decode(&out[FRAME_HEAD..]).unwrap();
    assert!(info.status_of(&me.nid).unwrap().is_up());
}
