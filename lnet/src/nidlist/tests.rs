use super::mask::ntop6;
use super::*;
use proptest::prelude::*;

fn run(args: &[&str]) -> DebugReport {
    debug_nidlist(args)
}

fn parsed(list: &str) -> String {
    run(&[list]).stdout
}

fn normalized(list: &str) -> String {
    NidList::parse(list).unwrap().normalized().unwrap()
}

fn failure(list: &str, lines: &str) {
    let r = run(&[list]);
    assert!(!r.ok, "{list:?}");
    assert_eq!(r.stdout, "", "{list:?}");
    assert_eq!(
        r.stderr,
        format!("{lines}Unable to parse nidlist from: {list}\n"),
        "{list:?}"
    );
}

fn match_line(list: &str, nid: &str) -> String {
    let r = run(&[list, nid]);
    assert!(r.ok, "{list:?} {nid:?}: {r:?}");
    r.stdout.lines().nth(1).unwrap().to_owned()
}

#[test]
fn an_address_range_prints_back_as_given() {
    let r = run(&["192.168.0.[1-10/2]@tcp"]);
    assert!(r.ok);
    assert_eq!(r.stdout, "nidlist parsed to: 192.168.0.[1-10/2]@tcp\n");
    assert_eq!(r.stderr, "");
}

#[test]
fn entries_gather_per_net_in_the_order_nets_first_appear() {
    assert_eq!(
        parsed("10.0.0.1@tcp 10.0.0.[2-3]@o2ib1 10.0.0.4@tcp"),
        "nidlist parsed to: 10.0.0.1@tcp 10.0.0.4@tcp 10.0.0.[2-3]@o2ib1\n"
    );
    assert_eq!(
        parsed("10.0.0.[1-2]@tcp 192.168.0.0/16@tcp 10.0.0.9@tcp"),
        "nidlist parsed to: 192.168.0.0/16@tcp 10.0.0.[1-2]@tcp 10.0.0.9@tcp\n"
    );
}

#[test]
fn only_spaces_separate_entries_and_runs_of_them_collapse() {
    assert_eq!(
        parsed("  1.2.3.4@tcp   5@gni  "),
        "nidlist parsed to: 1.2.3.4@tcp 5@gni\n"
    );
    // A tab is part of an entry: trimmed around the net, skipped before a number.
    assert_eq!(parsed("1.2.3.4@tcp\t"), "nidlist parsed to: 1.2.3.4@tcp\n");
    assert_eq!(parsed("\t1.2.3.4@tcp"), "nidlist parsed to: 1.2.3.4@tcp\n");
}

#[test]
fn star_is_every_address_of_a_net_and_repeats_merge() {
    assert_eq!(
        parsed("*@tcp *@o2ib2"),
        "nidlist parsed to: *@tcp *@o2ib2\n"
    );
    assert_eq!(parsed("*@tcp *@tcp0"), "nidlist parsed to: *@tcp\n");
    // Repeated address ranges are kept.
    assert_eq!(
        parsed("1.2.3.4@tcp 1.2.3.4@tcp"),
        "nidlist parsed to: 1.2.3.4@tcp 1.2.3.4@tcp\n"
    );
}

#[test]
fn numbers_are_read_as_strtoul_with_base_0_and_printed_decimal() {
    assert_eq!(
        parsed("0x0a.010.[1-1].[5-5,7-9/1]@tcp0"),
        "nidlist parsed to: 10.8.1.[5,7-9]@tcp\n"
    );
    assert_eq!(
        parsed("[1-100/10]@gni 0x20@kfi 5@lo"),
        "nidlist parsed to: [1-100/10]@gni 32@kfi 5@lo\n"
    );
    // strtoul's value cut to 32 bits: 2^32 is 0.
    assert_eq!(
        parsed("4294967296.1.1.1@tcp"),
        "nidlist parsed to: 0.1.1.1@tcp\n"
    );
    assert_eq!(
        parsed("1.2.3.4@tcp0x10"),
        "nidlist parsed to: 1.2.3.4@tcp16\n"
    );
    assert_eq!(parsed("5@lo3"), "nidlist parsed to: 5@lo3\n");
    assert_eq!(
        parsed("[1,3,5-7]@ptlf"),
        "nidlist parsed to: [1,3,5-7]@ptlf\n"
    );
    assert_eq!(
        parsed("1.2.3.[\t4\t,6\t-\t8]@efa"),
        "nidlist parsed to: 1.2.3.[4,6-8]@efa\n"
    );
}

#[test]
fn the_printed_list_is_cut_to_the_length_of_the_text_given() {
    assert_eq!(
        normalized("*.*.*.*@tcp"),
        "[0-255].[0-255].[0-255].[0-255]@tcp"
    );
    assert_eq!(parsed("*.*.*.*@tcp"), "nidlist parsed to: [0-255].[0-\n");
    assert_eq!(normalized("-1@gni"), "4294967295@gni");
    assert_eq!(parsed("-1@gni"), "nidlist parsed to: 429496\n");
    assert_eq!(normalized("1.2.3.4@tcp-1"), "1.2.3.4@tcp4294967295");
    assert_eq!(normalized("::a:b@tcp"), "::0.10.0.11@tcp");
    assert_eq!(parsed("::a:b@tcp"), "nidlist parsed to: ::0.10.0.\n");
}

#[test]
fn netmasks_print_their_address_as_given_and_a_prefix_below_the_full_length() {
    assert_eq!(
        parsed("192.168.1.5/24@tcp 10.0.0.1/32@tcp"),
        "nidlist parsed to: 192.168.1.5/24@tcp 10.0.0.1@tcp\n"
    );
    assert_eq!(
        parsed("2001:db8::/32@tcp"),
        "nidlist parsed to: 2001:db8::/32@tcp\n"
    );
    assert_eq!(
        parsed("2001:0db8:0:0::1@tcp"),
        "nidlist parsed to: 2001:db8::1@tcp\n"
    );
    assert_eq!(
        parsed("10.0.0.0/0x8@efa"),
        "nidlist parsed to: 10.0.0.0/8@efa\n"
    );
}

#[test]
fn ipv6_addresses_print_as_glibc_inet_ntop() {
    let text = |s: &str| {
        let mut out = String::new();
        ntop6(&mut out, &s.parse::<Ipv6Addr>().unwrap().octets());
        out
    };
    assert_eq!(text("::1:2"), "::0.1.0.2");
    assert_eq!(text("::2"), "::2");
    assert_eq!(text("::"), "::");
    assert_eq!(text("1::"), "1::");
    assert_eq!(text("::ffff:1.2.3.4"), "::ffff:1.2.3.4");
    assert_eq!(text("::ffff:0:1.2.3.4"), "::ffff:0:102:304");
    assert_eq!(text("::fffe:1.2.3.4"), "::fffe:102:304");
    assert_eq!(text("0:0:0:0:0:1:0:0"), "::1:0:0");
    assert_eq!(text("1:0:0:2:0:0:0:3"), "1:0:0:2::3");
    assert_eq!(text("1:0:2:3:4:5:6:7"), "1:0:2:3:4:5:6:7");
    assert_eq!(text("::1:0:0:0"), "::1:0:0:0");
    assert_eq!(text("1:2:3:4:5:6:7:8"), "1:2:3:4:5:6:7:8");
}

#[test]
fn an_entry_without_at_or_with_a_bad_net_is_refused_naming_it() {
    failure("1.2.3.4", "nidrange \"1.2.3.4\" doesn't contain '@'\n");
    failure("1.2.3.4@tcp bad", "nidrange \"bad\" doesn't contain '@'\n");
    failure("1.2.3.4@", "net \"\" is malformed\n");
    failure("1.2.3.4@tcp@o2ib", "net \"tcp@o2ib\" is malformed\n");
    failure(
        "1.2.3.4@foo",
        "failed to add nidrange for network \"foo\"\n",
    );
    failure(
        "1.2.3.4@tcpx",
        "failed to add nidrange for network \"tcpx\"\n",
    );
}

#[test]
fn a_bad_address_range_is_refused_naming_it() {
    for addr in [
        "1.2.3",
        "1.2.3.4.5",
        "1.2.3.256",
        "1.2.3.",
        "1.2.3.4-5",
        "1.2.3.[5-4]",
        "1.2.3.[]",
        "1.2.3.[1,]",
        "08.1.1.1",
        "",
    ] {
        failure(
            &format!("{addr}@tcp"),
            &format!("Failed to parse addrrange \"{addr}\" rc = -22\n"),
        );
    }
    failure("x@gni", "Failed to parse addrrange \"x\" rc = -22\n");
    failure("@gni", "Failed to parse addrrange \"\" rc = -22\n");
}

#[test]
fn a_bad_netmask_is_refused_naming_what_is_wrong() {
    failure(
        "192.168.0.0/24@o2ib",
        "Network type doesn't support nidmasks\n\
         Failed to parse addrrange \"192.168.0.0/24\" rc = -22\n",
    );
    failure(
        "192.168.0.0/33@tcp",
        "Failed to parse prefix length from \"192.168.0.0/33\"\n\
         Failed to parse addrrange \"192.168.0.0/33\" rc = -22\n",
    );
    failure(
        "192.168.0.0/0@tcp",
        "Failed to parse prefix length from \"192.168.0.0/0\"\n\
         Failed to parse addrrange \"192.168.0.0/0\" rc = -22\n",
    );
    // The address part before the '/' is what is named (libcfs cuts the text there).
    failure(
        "127.0.0.1/8@tcp",
        "Failed to convert \"127.0.0.1\" to address\n\
         Failed to parse addrrange \"127.0.0.1\" rc = -22\n",
    );
    failure(
        "fe80::1@tcp",
        "Failed to convert \"fe80::1\" to address\n\
         Failed to parse addrrange \"fe80::1\" rc = -22\n",
    );
    failure(
        "010.0.0.0/8@tcp",
        "Failed to convert \"010.0.0.0\" to address\n\
         Failed to parse addrrange \"010.0.0.0\" rc = -22\n",
    );
}

#[test]
fn an_empty_list_names_only_the_text() {
    failure("", "");
    failure("   ", "");
}

#[test]
fn arguments_missing_or_too_many_are_refused() {
    let r = run(&[]);
    assert!(!r.ok);
    assert_eq!(
        (r.stdout.as_str(), r.stderr.as_str()),
        ("", "Missing nidlist argument\n")
    );
    let r = run(&["*@tcp", "1.2.3.4@tcp", "x"]);
    assert!(!r.ok);
    assert_eq!(
        (r.stdout.as_str(), r.stderr.as_str()),
        ("", "Too many arguments\n")
    );
}

#[test]
fn a_nid_in_an_address_range_matches() {
    let list = "192.168.0.[1-10/2]@tcp";
    let r = run(&[list, "192.168.0.5@tcp"]);
    assert!(r.ok);
    assert_eq!(
        r.stdout,
        "nidlist parsed to: 192.168.0.[1-10/2]@tcp\n\
         192.168.0.5@tcp matches nidlist 192.168.0.[1-10/2]@tcp\n"
    );
    assert_eq!(r.stderr, "");
    assert_eq!(
        match_line(list, "192.168.0.4@tcp"),
        "192.168.0.4@tcp does not match nidlist 192.168.0.[1-10/2]@tcp"
    );
    assert_eq!(
        match_line(list, "192.168.0.5@tcp1"),
        "192.168.0.5@tcp1 does not match nidlist 192.168.0.[1-10/2]@tcp"
    );
    // No '@': an address on tcp.
    assert_eq!(
        match_line(list, "192.168.0.5"),
        "192.168.0.5 matches nidlist 192.168.0.[1-10/2]@tcp"
    );
    assert_eq!(
        match_line("[1-3,7]@gni", "0x7@gni"),
        "0x7@gni matches nidlist [1-3,7]@gni"
    );
    assert_eq!(
        match_line("[1-3,7]@gni", "4@gni"),
        "4@gni does not match nidlist [1-3,7]@gni"
    );
}

#[test]
fn star_matches_every_nid_of_its_net_only() {
    assert_eq!(
        match_line("*@o2ib", "10.0.0.1@o2ib"),
        "10.0.0.1@o2ib matches nidlist *@o2ib"
    );
    assert_eq!(
        match_line("*@o2ib", "10.0.0.1@o2ib1"),
        "10.0.0.1@o2ib1 does not match nidlist *@o2ib"
    );
    // Any address on lo is 0@lo.
    assert_eq!(
        match_line("0@lo", "anything@lo"),
        "anything@lo matches nidlist 0@lo"
    );
}

#[test]
fn netmasks_match_on_tcp_and_never_on_efa() {
    let list = "192.168.0.0/16@tcp";
    assert_eq!(
        match_line(list, "192.168.44.3@tcp"),
        "192.168.44.3@tcp matches nidlist 192.168.0.0/16@tcp"
    );
    assert_eq!(
        match_line(list, "192.169.0.1@tcp"),
        "192.169.0.1@tcp does not match nidlist 192.168.0.0/16@tcp"
    );
    assert_eq!(
        match_line("2001:db8::/32@tcp", "2001:db8:1::5@tcp"),
        "2001:db8:1::5@tcp matches nidlist 2001:db8::/32@tcp"
    );
    assert_eq!(
        match_line("2001:db8::/32@tcp", "192.168.0.1@tcp"),
        "192.168.0.1@tcp does not match nidlist 2001:db8::/32@tcp"
    );
    assert_eq!(
        match_line("10.0.0.0/8@efa", "10.1.1.1@efa"),
        "10.1.1.1@efa does not match nidlist 10.0.0.0/8@efa"
    );
}

#[test]
fn an_ipv6_nid_is_matched_against_address_ranges_by_its_first_32_bits() {
    assert_eq!(
        match_line("192.168.0.1@tcp", "c0a8:1::5@tcp"),
        "c0a8:1::5@tcp matches nidlist 192.168.0.1@tcp"
    );
}

#[test]
fn a_net_number_above_65535_spills_into_the_lnd_type() {
    // tcp (2) with 12 << 16 is type 14, gip, net 0.
    assert_eq!(
        match_line("*@gip", "1.2.3.4@tcp786432"),
        "1.2.3.4@tcp786432 matches nidlist *@gip"
    );
    assert_eq!(
        match_line("*@tcp", "1.2.3.4@tcp65536"),
        "1.2.3.4@tcp65536 does not match nidlist *@tcp"
    );
}

#[test]
fn an_invalid_nid_to_match_is_refused_after_the_list_is_printed() {
    for nid in [
        "1.2.3.4@foo",
        "127.0.0.1@tcp",
        "1.2.3@o2ib",
        "0@lo1",
        "x@gni",
        "host@tcp",
    ] {
        let r = run(&["1.2.3.4@tcp", nid]);
        assert!(!r.ok, "{nid}");
        assert_eq!(r.stdout, "nidlist parsed to: 1.2.3.4@tcp\n", "{nid}");
        assert_eq!(
            r.stderr,
            format!("Invalid nid for matching {nid}\n"),
            "{nid}"
        );
    }
    // scanf's leniencies: leading zeros and a sign on o2ib, a second 0x and a wrapping
    // sign on gni.
    assert_eq!(
        match_line("5@gni", "0x0x5@gni"),
        "0x0x5@gni matches nidlist 5@gni"
    );
    assert_eq!(
        match_line("4294967295@gni", "-1@gni"),
        "-1@gni matches nidlist 4294967295@gni"
    );
    assert_eq!(
        match_line("1.2.3.4@o2ib", "001.+2.3.04@o2ib"),
        "001.+2.3.04@o2ib matches nidlist 1.2.3.4@o2ib"
    );
}

#[test]
fn a_step_the_c_parser_leaves_unset_or_zero_is_kept_and_cannot_be_matched() {
    assert_eq!(normalized("1.1.1.[1-5/]@tcp"), "1.1.1.[1-5/0]@tcp");
    assert_eq!(normalized("1.1.1.[1-5/3x]@tcp"), "1.1.1.[1-5/3]@tcp");
    assert_eq!(normalized("1.1.1.[0-]@tcp"), "1.1.1.0@tcp");
    let r = run(&["1.1.1.[1-5/0]@tcp", "1.1.1.3@tcp"]);
    assert!(!r.ok);
    assert_eq!(r.stdout, "nidlist parsed to: 1.1.1.[1-5/0]@tcp\n");
    assert_eq!(
        r.stderr,
        "cannot match NID: a range it falls in has a step of 0\n"
    );
    // Outside the range the step is never used.
    assert_eq!(
        match_line("1.1.1.[1-5/0]@tcp", "1.1.1.9@tcp"),
        "1.1.1.9@tcp does not match nidlist 1.1.1.[1-5/0]@tcp"
    );
}

#[test]
fn star_with_other_ranges_of_its_net_does_not_print() {
    let r = run(&["*@tcp 1.2.3.4@tcp", "1.2.3.4@tcp"]);
    assert!(!r.ok);
    assert_eq!(r.stdout, "");
    assert_eq!(
        r.stderr,
        "cannot print nidlist: it has *@tcp and other ranges of tcp\n"
    );
    assert!(run(&["*@tcp 1.2.3.4@tcp1"]).ok);
}

proptest! {
    #[test]
    fn any_text_parses_or_fails_without_panicking(list in ".{0,60}", nid in ".{0,30}") {
        let _ = debug_nidlist(&[&list, &nid]);
    }

    #[test]
    fn list_like_text_prints_to_entries_that_parse_and_print_the_same(
        list in "([0-9*x\\[\\],/ -]{1,12}\\.){0,3}[0-9*\\[\\],/-]{1,10}@(tcp|o2ib|gni|lo|efa)[0-9]{0,2}( [0-9.:/]{1,12}@tcp)?"
    ) {
        if let Ok(parsed) = NidList::parse(&list) {
            if let Ok(text) = parsed.normalized() {
                let again = NidList::parse(&text).unwrap().normalized().unwrap();
                let mut a: Vec<&str> = again.split(' ').collect();
                let mut b: Vec<&str> = text.split(' ').collect();
                a.sort_unstable();
                b.sort_unstable();
                prop_assert_eq!(a, b);
            }
        }
    }
}
