use super::*;

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

#[test]
fn spec_examples_nid4_values() {
    assert_eq!(
        nid("192.168.1.2@tcp").to_nid4().unwrap(),
        0x00020000_C0A80102
    );
    assert_eq!(
        nid("10.0.0.1@o2ib1").to_nid4().unwrap(),
        0x00050001_0A000001
    );
    assert_eq!(nid("10.0.0.1@tcp1").to_nid4().unwrap(), 0x00020001_0A000001);
    assert_eq!(nid("0@lo").to_nid4().unwrap(), 0x0009_0000_0000_0000);
    assert_eq!(Nid::ANY.to_nid4().unwrap(), u64::MAX);
}

#[test]
fn tcp_is_tcp0_and_no_at_means_tcp() {
    assert_eq!(nid("10.0.0.1@tcp0"), nid("10.0.0.1@tcp"));
    assert_eq!(nid("10.0.0.1"), nid("10.0.0.1@tcp"));
    assert_eq!(nid("10.0.0.1@tcp0").to_string(), "10.0.0.1@tcp");
    assert_eq!("tcp0".parse::<Net>().unwrap().to_string(), "tcp");
}

#[test]
fn loopback_address_is_ignored_and_takes_no_number() {
    assert_eq!(nid("17@lo"), Nid::LO_0);
    assert_eq!(Nid::LO_0.to_string(), "0@lo");
    assert!(matches!(
        "0@lo1".parse::<Nid>(),
        Err(NidError::LoopbackNumber { .. })
    ));
}

#[test]
fn net_number_range_is_checked() {
    assert_eq!("tcp65535".parse::<Net>().unwrap().num, 65535);
    assert!(matches!(
        "tcp65536".parse::<Net>(),
        Err(NidError::NetNumberOutOfRange { value: 65536, .. })
    ));
    assert!(matches!(
        "o2ib99999999999999999999999".parse::<Net>(),
        Err(NidError::NetNumberOutOfRange { .. })
    ));
    assert!(matches!(
        "tcpx".parse::<Net>(),
        Err(NidError::BadNetNumber { .. })
    ));
    assert!(matches!(
        "tcp-1".parse::<Net>(),
        Err(NidError::BadNetNumber { .. })
    ));
}

#[test]
fn addresses_are_checked() {
    for bad in [
        "256.0.0.1@tcp",
        "1.2.3@tcp",
        "1.2.3.4.5@tcp",
        "a.b.c.d@tcp",
        "1..2.3@tcp",
        "host@o2ib",
        "@tcp",
    ] {
        assert!(
            matches!(bad.parse::<Nid>(), Err(NidError::BadAddress { .. })),
            "{bad}"
        );
    }
    assert!(matches!(
        "10.0.0.1@ib".parse::<Nid>(),
        Err(NidError::UnknownNet { .. })
    ));
}

#[test]
fn numeric_lnds_take_decimal_and_hex() {
    assert_eq!(nid("0x2a@gni").addr, NidAddr::V4(42));
    assert_eq!(nid("42@gni3"), nid("0X2A@gni3"));
    assert_eq!(nid("42@kfi").to_string(), "42@kfi");
    assert!("4294967296@kfi".parse::<Nid>().is_err());
}

#[test]
fn unnamed_types_print_and_parse_back() {
    let n = Nid::new(Net::new(LndType::TOFULND, 3), 0xabc);
    assert_eq!(n.to_string(), "abc@<17:3>");
    assert_eq!(nid("abc@<17:3>"), n);
    assert_eq!(Net::new(LndType(17), 0).to_string(), "<17:0>");
    // A named type is written by its name only (`<9:3>` would be `lo3`, which is
    // not a net).
    for named in ["<9:3>", "<2:0>", "<000000009:0>"] {
        assert!(
            matches!(named.parse::<Net>(), Err(NidError::UnknownNet { .. })),
            "{named}"
        );
    }
}

#[test]
fn any_prints_and_parses() {
    assert_eq!(Nid::ANY.to_string(), "<?>");
    assert_eq!(nid("<?>"), Nid::ANY);
    assert_eq!(nid("*"), Nid::ANY);
    assert_eq!(Nid::from_nid4(u64::MAX).unwrap(), Nid::ANY);
    assert_eq!(Nid::from_large_bytes(&[0xFF; 20]).unwrap(), Nid::ANY);
    assert_eq!(Nid::ANY.to_large_bytes(), [0xFF; 20]);
}

#[test]
fn top_byte_is_rejected() {
    assert_eq!(
        Nid::from_nid4(0x0102_0000_0a00_0001),
        Err(NidError::TopByteSet {
            raw: 0x0102_0000_0a00_0001
        })
    );
}

#[test]
fn wildcard_type_is_only_any() {
    assert_eq!(
        Nid::from_nid4(0x00FF_0001_0A00_0001),
        Err(NidError::WildcardType {
            raw: 0x00FF_0001_0A00_0001
        })
    );
}

#[test]
fn large_form_of_a_nid4_starts_with_the_nid4_big_endian() {
    let n = nid("10.0.0.1@o2ib1");
    let large = n.to_large_bytes();
    assert_eq!(&large[..8], &n.to_nid4().unwrap().to_be_bytes());
    assert_eq!(&large[8..], &[0u8; 12]);
    assert_eq!(Nid::from_large_bytes(&large).unwrap(), n);
}

#[test]
fn ipv6_nids() {
    let n = nid("fe80::1@tcp2");
    assert!(!n.is_nid4());
    assert!(matches!(n.to_nid4(), Err(NidError::NotNid4 { .. })));
    let large = n.to_large_bytes();
    assert_eq!(large[0], 12);
    assert_eq!(Nid::from_large_bytes(&large).unwrap(), n);
    assert_eq!(n.to_string(), "fe80::1@tcp2");
    let mut odd = large;
    odd[0] = 4;
    assert_eq!(
        Nid::from_large_bytes(&odd),
        Err(NidError::UnsupportedNidSize { size: 4 })
    );
    assert!(matches!(
        Nid::from_large_bytes(&large[..19]),
        Err(NidError::Truncated { .. })
    ));
}

#[test]
fn kernel_order_compares_large_bytes() {
    assert!(nid("10.0.0.1@tcp") < nid("10.0.0.2@tcp"));
    assert!(nid("10.0.0.9@tcp") < nid("10.0.0.1@tcp1"));
    assert!(nid("10.0.0.9@tcp9") < nid("10.0.0.1@o2ib"));
}

#[test]
fn nidhash_xors_raw_big_endian_words() {
    // 10.0.0.1@o2ib: net 0x50000; the address word 0x0a000001 stored big-endian reads
    // back as 0x0100000a on a little-endian host.
    assert_eq!(nid("10.0.0.1@o2ib").nidhash(), 0x0005_0000 ^ 0x0100_000a);
}

#[test]
fn cpts_by_the_kernels_hash_spread_neighbouring_addresses() {
    // A 4-byte address: the sum of the 64-bit form's bytes. 10.0.0.1@tcp: 0x02 (tcp)
    // + 10 + 1 = 13.
    for (ncpts, cpt) in [(1, 0), (2, 1), (3, 1), (4, 1)] {
        assert_eq!(nid("10.0.0.1@tcp").cpt(ncpts), cpt, "{ncpts} CPTs");
    }
    // 0x05 (o2ib) + 192 + 168 + 1 + 10 = 376.
    for (ncpts, cpt) in [(2, 0), (3, 1), (4, 0)] {
        assert_eq!(nid("192.168.1.10@o2ib").cpt(ncpts), cpt, "{ncpts} CPTs");
    }
    let four: Vec<u32> = (1..=4)
        .map(|i| nid(&format!("10.0.0.{i}@tcp")).cpt(4))
        .collect();
    assert_eq!(four, [1, 2, 3, 0]);
    // The gni LND's NIDs: the 64-bit multiplicative hash, spread when beyond the CPTs.
    for (ncpts, cpt) in [(2, 1), (3, 2), (4, 2), (5, 4)] {
        assert_eq!(nid("5@gni").cpt(ncpts), cpt, "{ncpts} CPTs");
    }
    // ANY, all bytes 0xFF: 2040.
    assert_eq!(Nid::ANY.cpt(3), 0);
    assert_eq!(Nid::ANY.cpt(7), 2040 % 7);
    // A 16-byte address: the 32-bit hash of its words, then of the net.
    for (ncpts, cpt) in [(2, 0), (3, 1), (4, 1), (5, 3)] {
        assert_eq!(nid("fe80::1@tcp").cpt(ncpts), cpt, "{ncpts} CPTs");
    }
}

#[test]
fn process_ids() {
    let p: ProcessId = "12345-10.0.0.1@tcp".parse().unwrap();
    assert_eq!(p, ProcessId::lustre(nid("10.0.0.1@tcp")));
    assert_eq!(p.to_string(), "12345-10.0.0.1@tcp");
    let u: ProcessId = "U7-10.0.0.1@tcp".parse().unwrap();
    assert_eq!(u.pid, 7 | PID_USERFLAG);
    assert_eq!(u.to_string(), "U7-10.0.0.1@tcp");
    let any: ProcessId = "LNET_PID_ANY-0@lo".parse().unwrap();
    assert_eq!(any.pid, PID_ANY);
    assert_eq!(any.to_string(), "LNET_PID_ANY-0@lo");
    let bare: ProcessId = "10.0.0.1@o2ib".parse().unwrap();
    assert_eq!(bare.pid, PID_LUSTRE);
    assert!(matches!(
        "x-10.0.0.1@tcp".parse::<ProcessId>(),
        Err(NidError::BadPid { .. })
    ));
}

proptest::proptest! {
    /// An IPv4 NID's CPT is the plain sum of its 64-bit form's bytes, for any address,
    /// net number and CPT count (the sum is taken in lanes: none may carry).
    #[test]
    fn an_ipv4_nids_cpt_is_the_sum_of_its_bytes(
        addr: u32,
        num: u16,
        lnd in proptest::sample::select(vec![LndType::SOCKLND, LndType::O2IBLND, LndType::EFALND]),
        ncpts in 2u32..=256,
    ) {
        let n = Nid::new(Net::new(lnd, num), addr);
        let nid4 = (u64::from(n.net.to_u32()) << 32) | u64::from(addr);
        let sum: u32 = nid4.to_be_bytes().iter().map(|b| u32::from(*b)).sum();
        proptest::prop_assert_eq!(n.cpt(ncpts), sum % ncpts);
    }
}

#[test]
fn the_largest_ipv4_nid_sums_without_carrying() {
    // Every byte of the 64-bit form but the top one at its largest: 0x02 (tcp), 0xFFFF,
    // 255.255.255.255: 2 + 6 * 255 = 1532.
    let n = Nid::new(Net::new(LndType::SOCKLND, u16::MAX), u32::MAX);
    assert_eq!(n.cpt(2000), 1532);
}

/// The words a hash is fed, in order.
#[derive(Default)]
struct Words(Vec<Vec<u8>>);

impl std::hash::Hasher for Words {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.push(bytes.to_vec());
    }
}

fn words(n: &Nid) -> Vec<Vec<u8>> {
    let mut w = Words::default();
    std::hash::Hash::hash(n, &mut w);
    w.0
}

#[test]
fn a_nid4_is_hashed_as_one_word_and_equal_nids_alike() {
    let a: Nid = "10.0.0.1@tcp1".parse().expect("nid");
    let nid4 = a.to_nid4().expect("nid4");
    assert_eq!(words(&a), vec![nid4.to_ne_bytes().to_vec()]);
    assert_eq!(words(&a), words(&"10.0.0.1@tcp1".parse().expect("nid")));
    assert_ne!(words(&a), words(&"10.0.0.1@tcp".parse().expect("nid")));
    assert_ne!(words(&a), words(&"10.0.0.2@tcp1".parse().expect("nid")));
    let v6 = |b| Nid {
        net: a.net,
        addr: NidAddr::V6([b; 16]),
    };
    assert_eq!(words(&v6(7)), words(&v6(7)));
    assert_ne!(words(&v6(7)), words(&v6(8)));
    assert_ne!(words(&v6(7)), words(&a));
}
