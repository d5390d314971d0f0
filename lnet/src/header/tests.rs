use super::*;
use crate::nid::PID_LUSTRE;

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn unhex(s: &str) -> Vec<u8> {
    let clean: String = s.split_whitespace().collect();
    hex::decode(clean).unwrap()
}

const GET_WMD: WireHandle = WireHandle {
    interface_cookie: 0x17D6_F0A0_B1C2_D3E4,
    object_cookie: 0x405,
};

/// Spec 7.2: the ping GET, LNet header part (after the 24-byte ksock header).
#[test]
fn spec_7_2_ping_get() {
    let bytes = unhex(
        "01 01 a8 c0 00 00 02 00 02 01 a8 c0 00 00 02 00 39 30 00 00 39 30 00 00
             02 00 00 00 00 00 00 00 e4 d3 c2 b1 a0 f0 d6 17 05 04 00 00 00 00 00 00
             00 00 00 00 00 00 00 80 00 00 00 00 00 00 00 00 10 01 00 00 00 00 00 00",
    );
    let h = Header {
        dest_nid: nid("192.168.1.1@tcp"),
        src_nid: nid("192.168.1.2@tcp"),
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length: 0,
        msg: Message::Get {
            return_wmd: GET_WMD,
            match_bits: 0x8000_0000_0000_0000,
            ptl_index: 0,
            src_offset: 0,
            sink_length: 272,
        },
    };
    assert_eq!(Header::decode(&bytes, HeaderForm::Nid4).unwrap(), h);
    assert_eq!(h.encode_nid4().unwrap().to_vec(), bytes);
}

/// Spec 7.3: the REPLY carrying the router's ping info.
#[test]
fn spec_7_3_reply() {
    let bytes = unhex(
        "02 01 a8 c0 00 00 02 00 01 01 a8 c0 00 00 02 00 39 30 00 00 39 30 00 00
             03 00 00 00 40 00 00 00 e4 d3 c2 b1 a0 f0 d6 17 05 04 00 00 00 00 00 00
             00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
    );
    let h = Header {
        dest_nid: nid("192.168.1.2@tcp"),
        src_nid: nid("192.168.1.1@tcp"),
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length: 64,
        msg: Message::Reply { dst_wmd: GET_WMD },
    };
    assert_eq!(Header::decode(&bytes, HeaderForm::Nid4).unwrap(), h);
    assert_eq!(h.encode_nid4().unwrap().to_vec(), bytes);
}

/// Kernel capture: `lnetctl ping` GET with sink length 3960, and the discovery PUSH.
#[test]
fn kernel_ping_get_and_push() {
    let get = unhex(
        "02 00 00 0a 00 00 02 00 01 00 00 0a 00 00 02 00 39 30 00 00 39 30 00 00
             02 00 00 00 00 00 00 00 ae 78 41 3e 85 3a ea 18 0d 00 00 00 00 00 00 00
             00 00 00 00 00 00 00 80 00 00 00 00 00 00 00 00 78 0f 00 00 00 00 00 00",
    );
    let wmd = WireHandle {
        interface_cookie: 0x18EA_3A85_3E41_78AE,
        object_cookie: 0xd,
    };
    let h = Header::decode(&get, HeaderForm::Nid4).unwrap();
    assert_eq!(
        h,
        Header {
            dest_nid: nid("10.0.0.2@tcp"),
            src_nid: nid("10.0.0.1@tcp"),
            dest_pid: PID_LUSTRE,
            src_pid: PID_LUSTRE,
            payload_length: 0,
            msg: Message::Get {
                return_wmd: wmd,
                match_bits: 1 << 63,
                ptl_index: 0,
                src_offset: 0,
                sink_length: 3960,
            },
        }
    );
    assert_eq!(h.encode_nid4().unwrap().to_vec(), get);

    let push = unhex(
        "02 00 00 0a 00 00 02 00 01 00 00 0a 00 00 02 00 39 30 00 00 39 30 00 00
             01 00 00 00 30 00 00 00 ae 78 41 3e 85 3a ea 18 19 00 00 00 00 00 00 00
             00 00 00 00 00 00 00 80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
    );
    let p = Header::decode(&push, HeaderForm::Nid4).unwrap();
    assert_eq!(
        p.msg,
        Message::Put {
            ack_wmd: WireHandle {
                interface_cookie: 0x18EA_3A85_3E41_78AE,
                object_cookie: 0x19,
            },
            match_bits: 1 << 63,
            hdr_data: 0,
            ptl_index: 0,
            offset: 0,
        }
    );
    assert_eq!(p.payload_length, 48);
    assert_eq!(p.encode_nid4().unwrap().to_vec(), push);
}

#[test]
fn ack_layout() {
    let h = Header {
        dest_nid: nid("10.0.0.1@tcp"),
        src_nid: nid("10.0.0.2@tcp"),
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length: 0,
        msg: Message::Ack {
            dst_wmd: WireHandle {
                interface_cookie: 0xcccc,
                object_cookie: 0xdddd,
            },
            match_bits: 0x1122_3344_5566_7788,
            mlength: 4096,
        },
    };
    let b = h.encode_nid4().unwrap();
    assert_eq!(&b[24..28], &[0, 0, 0, 0]);
    assert_eq!(&b[32..40], &0xccccu64.to_le_bytes());
    assert_eq!(&b[48..56], &0x1122_3344_5566_7788u64.to_le_bytes());
    assert_eq!(&b[56..60], &4096u32.to_le_bytes());
    assert_eq!(&b[60..72], &[0u8; 12]);
}

#[test]
fn large_form_puts_union_24_bytes_later() {
    let h = Header {
        dest_nid: nid("fe80::2@tcp"),
        src_nid: nid("10.0.0.1@tcp"),
        dest_pid: PID_LUSTRE,
        src_pid: PID_LUSTRE,
        payload_length: 8,
        msg: Message::Put {
            ack_wmd: WireHandle::NONE,
            match_bits: 7,
            hdr_data: 9,
            ptl_index: 4,
            offset: 0,
        },
    };
    let b = h.encode_large();
    assert_eq!(b[0], 12);
    assert_eq!(&b[48..52], &1u32.to_le_bytes());
    assert_eq!(&b[72..80], &7u64.to_le_bytes());
    assert_eq!(Header::decode(&b, HeaderForm::Large).unwrap(), h);
    assert!(matches!(
        h.encode_nid4(),
        Err(HeaderError::BadNid {
            field: "dest_nid",
            ..
        })
    ));
    assert_eq!(h.check_nid4(), h.encode_nid4().map(drop));
    let mut src_large = put(0);
    src_large.src_nid = h.dest_nid;
    assert!(matches!(
        src_large.check_nid4(),
        Err(HeaderError::BadNid {
            field: "src_nid",
            ..
        })
    ));
    assert_eq!(src_large.check_nid4(), src_large.encode_nid4().map(drop));
    assert_eq!(put(0).check_nid4(), Ok(()));
}

fn put(payload_length: u32) -> Header {
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
}

#[test]
fn malformed_headers() {
    let good = put(0).encode_nid4().unwrap();
    assert_eq!(
        Header::decode(&good[..71], HeaderForm::Nid4),
        Err(HeaderError::Truncated {
            expected: 72,
            got: 71
        })
    );
    let mut t = good;
    t[24] = 5;
    assert_eq!(
        Header::decode(&t, HeaderForm::Nid4),
        Err(HeaderError::UnknownType { value: 5 })
    );
    let mut top = good;
    top[7] = 1;
    assert!(matches!(
        Header::decode(&top, HeaderForm::Nid4),
        Err(HeaderError::BadNid {
            field: "dest_nid",
            source: NidError::TopByteSet { .. }
        })
    ));
    let mut top = good;
    top[15] = 0x80;
    assert!(matches!(
        Header::decode(&top, HeaderForm::Nid4),
        Err(HeaderError::BadNid {
            field: "src_nid",
            ..
        })
    ));
    assert!(matches!(
        put(LNET_MTU + 1).check_lnet(),
        Err(HeaderError::PayloadTooLarge { .. })
    ));
    assert_eq!(put(LNET_MTU).check_lnet(), Ok(()));
    let mut get = put(0);
    get.msg = Message::Get {
        return_wmd: GET_WMD,
        match_bits: 0,
        ptl_index: 0,
        src_offset: 0,
        sink_length: 0,
    };
    get.payload_length = 1;
    assert!(matches!(
        get.check_lnet(),
        Err(HeaderError::UnexpectedPayload {
            msg_type: MsgType::Get,
            ..
        })
    ));
    let mut hello = put(0);
    hello.msg = Message::Hello {
        incarnation: 1,
        conn_type: 1,
    };
    assert_eq!(hello.check_lnet(), Err(HeaderError::HelloNotAllowed));
    let mut any = put(0);
    any.src_nid = Nid::ANY;
    assert_eq!(any.check_lnet(), Err(HeaderError::SourceIsAny));
}

#[test]
fn classify_follows_the_receive_rules() {
    let me_tcp = nid("10.0.0.1@tcp");
    let me_tcp1 = nid("192.168.0.1@tcp1");
    let local = |n: &Nid| *n == me_tcp || *n == me_tcp1;
    let mut h = put(0);
    h.dest_nid = me_tcp;
    assert_eq!(h.classify(me_tcp, local, true), Ok(Disposition::Local));
    h.dest_nid = nid("10.0.0.9@tcp");
    assert!(matches!(
        h.classify(me_tcp, local, true),
        Err(HeaderError::ShouldHaveBeenDirect { .. })
    ));
    h.dest_nid = me_tcp1;
    assert!(matches!(
        h.classify(me_tcp, local, true),
        Err(HeaderError::MyNidOnOtherNet { .. })
    ));
    h.dest_nid = nid("192.168.0.9@tcp1");
    assert_eq!(h.classify(me_tcp, local, true), Ok(Disposition::Forward));
    assert_eq!(
        h.classify(me_tcp, local, false),
        Ok(Disposition::DropRoutingDisabled)
    );
}
