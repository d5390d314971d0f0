use super::*;
use proptest::prelude::*;

fn e(s: &str) -> NidExpr {
    NidExpr::parse(s).unwrap()
}

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn net(s: &str) -> Net {
    s.parse().unwrap()
}

#[test]
fn net_expressions_match_their_nets() {
    assert!(e("tcp").is_net_rule());
    assert!(e("tcp").matches_net(net("tcp")));
    assert!(!e("tcp").matches_net(net("tcp1")));
    assert!(!e("tcp").matches_net(net("o2ib")));
    assert!(e("o2ib1").matches_net(net("o2ib1")));
    let r = e("o2ib[1-3]");
    assert!(!r.matches_net(net("o2ib")));
    assert!(r.matches_net(net("o2ib2")) && r.matches_net(net("o2ib3")));
    assert!(!r.matches_net(net("o2ib4")) && !r.matches_net(net("tcp2")));
    assert!(e("tcp[0,2]").matches_net(net("tcp")));
    assert!(!e("tcp[0,2]").matches_net(net("tcp1")));
    assert!(e("tcp[0,2]").matches_net(net("tcp2")));
    assert!(e("tcp*").matches_net(net("tcp65535")));
    assert!(e("tcp[*]").matches_net(net("tcp7")));
    assert!(e("o2ib[0-10/5]").matches_net(net("o2ib5")));
    assert!(!e("o2ib[0-10/5]").matches_net(net("o2ib6")));
    assert!(e("lo").matches_nid(&Nid::LO_0));
    // A net expression names every NID of its nets.
    assert!(e("o2ib1").matches_nid(&nid("10.1.2.3@o2ib1")));
    assert!(!e("o2ib1").matches_nid(&nid("10.1.2.3@o2ib2")));
}

#[test]
fn nid_range_expressions_match_their_nids() {
    let r = e("10.0.0.[1-20]@o2ib1");
    assert!(!r.is_net_rule());
    assert!(r.matches_nid(&nid("10.0.0.1@o2ib1")));
    assert!(r.matches_nid(&nid("10.0.0.20@o2ib1")));
    assert!(!r.matches_nid(&nid("10.0.0.21@o2ib1")));
    assert!(!r.matches_nid(&nid("10.0.1.5@o2ib1")));
    assert!(!r.matches_nid(&nid("10.0.0.5@o2ib")));
    assert!(r.matches_net(net("o2ib1")));
    let stepped = e("192.168.[1,3].[2-10/4]@tcp");
    assert!(stepped.matches_nid(&nid("192.168.3.6@tcp")));
    assert!(stepped.matches_nid(&nid("192.168.1.10@tcp")));
    assert!(!stepped.matches_nid(&nid("192.168.3.7@tcp")));
    assert!(!stepped.matches_nid(&nid("192.168.2.6@tcp")));
    assert!(e("*.*.*.*@tcp").matches_nid(&nid("1.2.3.4@tcp")));
    assert!(e("*@tcp").matches_nid(&nid("1.2.3.4@tcp")));
    assert!(!e("*@tcp").matches_nid(&nid("1.2.3.4@tcp1")));
    assert!(e("10.*.0.[*]@tcp").matches_nid(&nid("10.77.0.200@tcp")));
    let numeric = e("[1-3]@gni");
    assert!(numeric.matches_nid(&nid("2@gni")));
    assert!(!numeric.matches_nid(&nid("4@gni")));
    assert!(e("5@kfi").matches_nid(&nid("5@kfi")));
    assert!(e("*@kfi2").matches_nid(&nid("4000000000@kfi2")));
    assert!(e("0@lo").matches_nid(&Nid::LO_0));
    // An IPv6 NID never matches an address part, but is on its net.
    let v6 = nid("fd00::1@tcp");
    assert!(!e("*@tcp").matches_nid(&v6));
    assert!(e("tcp").matches_nid(&v6));
}

#[test]
fn numbers_read_as_strtoul_with_base_0() {
    // Hex and octal, as lnetctl's parser reads them.
    assert!(e("0xa.0.0.010@tcp").matches_nid(&nid("10.0.0.8@tcp")));
    assert_eq!(e("0xa.0.0.010@tcp").to_string(), "10.0.0.8@tcp");
    assert!(e("o2ib0x10").matches_net(net("o2ib16")));
    assert!(matches!(
        NidExpr::parse("10.0.0.08@tcp"),
        Err(NidExprError::BadPart { .. })
    ));
}

#[test]
fn expressions_print_back_canonically() {
    for s in [
        "tcp",
        "tcp0",
        "o2ib1",
        "o2ib[1-3]",
        "tcp*",
        "10.0.0.[1-20]@o2ib1",
        "*.*.*.*@tcp",
        "192.168.[1,3].[2-10/4]@tcp5",
        "[1-3]@gni",
        "*@gni",
        "10.*.0.1@tcp",
        "0@lo",
    ] {
        assert_eq!(e(s).to_string(), s);
    }
    for (s, canonical) in [
        ("*@tcp", "*.*.*.*@tcp"),
        ("[5].[0-255].[*].1@o2ib", "5.*.*.1@o2ib"),
        ("tcp[*]", "tcp*"),
        ("[1-1/3]@gni", "1@gni"),
    ] {
        assert_eq!(e(s).to_string(), canonical, "{s}");
    }
    // `*` and the full range are the same expression; `tcp` and `tcp0` are not
    // (the kernel keeps an empty net number list apart from `[0]`).
    assert_eq!(e("*@tcp"), e("[0-255].*.*.[*]@tcp"));
    assert_ne!(e("tcp"), e("tcp0"));
}

#[test]
fn bad_expressions_are_refused_naming_the_part() {
    use NidExprError as E;
    assert_eq!(NidExpr::parse(""), Err(E::Empty));
    assert!(matches!(NidExpr::parse("eth0"), Err(E::UnknownNet { .. })));
    assert!(matches!(
        NidExpr::parse("10.0.0.1@foo"),
        Err(E::UnknownNet { net, .. }) if net == "foo"
    ));
    assert!(matches!(
        NidExpr::parse("@tcp"),
        Err(E::EmptyAddress { .. })
    ));
    assert!(matches!(
        NidExpr::parse("10.0.0.1@"),
        Err(E::UnknownNet { .. })
    ));
    assert!(matches!(
        NidExpr::parse("10.0.0.256@tcp"),
        Err(E::OutOfRange { what: "address part", max: 255, number, .. }) if number == "256"
    ));
    assert!(matches!(
        NidExpr::parse("10.0.0@tcp"),
        Err(E::AddressParts {
            found: 3,
            expected: 4,
            lnd: "tcp",
            ..
        })
    ));
    assert!(matches!(
        NidExpr::parse("1.2@gni"),
        Err(E::AddressParts {
            found: 2,
            expected: 1,
            ..
        })
    ));
    assert!(matches!(
        NidExpr::parse("10.0.0.[5-1]@tcp"),
        Err(E::Reversed { part, .. }) if part == "5-1"
    ));
    assert!(matches!(
        NidExpr::parse("10.0.0.[1-5/0]@tcp"),
        Err(E::BadPart {
            what: "step (0)",
            ..
        })
    ));
    assert!(matches!(
        NidExpr::parse("10.0.0.[1-5/300]@tcp"),
        Err(E::OutOfRange { what: "step", .. })
    ));
    assert!(matches!(
        NidExpr::parse("10.0.0.[1-5@tcp"),
        Err(E::BadPart { .. })
    ));
    assert!(matches!(
        NidExpr::parse("10.0.0.1-5@tcp"),
        Err(E::BadPart { .. })
    ));
    assert!(matches!(
        NidExpr::parse("10.0.0.[]@tcp"),
        Err(E::BadPart {
            what: "list item",
            ..
        })
    ));
    assert!(matches!(
        NidExpr::parse("10.0.0.[1,]@tcp"),
        Err(E::BadPart {
            what: "list item",
            ..
        })
    ));
    assert!(matches!(NidExpr::parse("tcp[1-2"), Err(E::BadPart { .. })));
    assert!(matches!(
        NidExpr::parse("tcpfoo[1]"),
        Err(E::BadPart { .. })
    ));
    assert!(matches!(NidExpr::parse("tcp 1"), Err(E::BadPart { .. })));
    assert!(matches!(
        NidExpr::parse("tcp70000"),
        Err(E::OutOfRange {
            what: "net number",
            max: 65535,
            ..
        })
    ));
    assert!(matches!(
        NidExpr::parse("99999999999@gni"),
        Err(E::OutOfRange {
            what: "address",
            ..
        })
    ));
    let long_list = format!("10.0.0.[{}]@tcp", vec!["1"; 65].join(","));
    assert!(matches!(
        NidExpr::parse(&long_list),
        Err(E::TooManyItems { max: 64, .. })
    ));
    let long = "1".repeat(300);
    assert!(matches!(
        NidExpr::parse(&long),
        Err(E::TooLong { len: 300, .. })
    ));
    // Errors name the expression.
    let err = NidExpr::parse("10.0.0.[9-3]@tcp").unwrap_err().to_string();
    assert!(err.contains("10.0.0.[9-3]@tcp"), "{err}");
}

/// A generator of valid number expressions for `max`.
fn num_expr(max: u32) -> impl Strategy<Value = String> {
    let item = (0..=max, 0..=max, 1..=max.min(9)).prop_map(|(a, b, s)| {
        let (lo, hi) = (a.min(b), a.max(b));
        match s % 3 {
            0 => format!("{lo}"),
            1 => format!("{lo}-{hi}"),
            _ => format!("{lo}-{hi}/{s}"),
        }
    });
    prop_oneof![
        Just("*".to_owned()),
        (0..=max).prop_map(|v| v.to_string()),
        proptest::collection::vec(item, 1..5).prop_map(|v| format!("[{}]", v.join(","))),
    ]
}

fn expr_text() -> impl Strategy<Value = String> {
    let ip = (
        num_expr(255),
        num_expr(255),
        num_expr(255),
        num_expr(255),
        prop_oneof![Just("tcp"), Just("o2ib"), Just("efa")],
    )
        .prop_map(|(a, b, c, d, n)| format!("{a}.{b}.{c}.{d}@{n}"));
    let numeric = (num_expr(100), prop_oneof![Just("gni"), Just("kfi")])
        .prop_map(|(a, n)| format!("{a}@{n}"));
    let net =
        (prop_oneof![Just("tcp"), Just("o2ib")], num_expr(20)).prop_map(|(n, x)| format!("{n}{x}"));
    prop_oneof![ip, numeric, net]
}

proptest! {
    #[test]
    fn any_text_parses_or_errs_without_panicking(s in ".{0,80}") {
        let _ = NidExpr::parse(&s);
    }

    #[test]
    fn expression_like_text_parses_or_errs_without_panicking(
        s in "[0-9xX*.,\\[\\]/@-]{0,20}(tcp|o2ib|gni|lo|kfi)?[0-9*\\[\\],/-]{0,8}"
    ) {
        if let Ok(x) = NidExpr::parse(&s) {
            prop_assert_eq!(NidExpr::parse(&x.to_string()), Ok(x));
        }
    }

    #[test]
    fn valid_expressions_print_to_text_that_parses_to_the_same(s in expr_text()) {
        let x = NidExpr::parse(&s).unwrap();
        let printed = x.to_string();
        prop_assert_eq!(NidExpr::parse(&printed), Ok(x), "{} printed as {}", s, printed);
    }

    #[test]
    fn a_nid_matches_its_own_expression(a in any::<u32>(), n in 0u16..100) {
        let nid = Nid::new(Net::new(LndType::SOCKLND, n), a);
        let text = nid.to_string();
        let expr = NidExpr::parse(&text).unwrap();
        prop_assert!(expr.matches_nid(&nid));
        prop_assert_eq!(expr.to_string(), text);
    }

    #[test]
    fn a_list_matches_exactly_its_values(
        lo in 0u32..256, len in 0u32..64, step in 1u32..8, v in 0u32..256
    ) {
        let hi = (lo + len).min(255);
        let x = NidExpr::parse(&format!("1.2.3.[{lo}-{hi}/{step}]@tcp")).unwrap();
        let nid = Nid::new(Net::new(LndType::SOCKLND, 0), 0x0102_0300 | v);
        let expected = v >= lo && v <= hi && (v - lo) % step == 0;
        prop_assert_eq!(x.matches_nid(&nid), expected);
    }
}
