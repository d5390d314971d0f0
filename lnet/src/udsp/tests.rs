use super::*;

fn rule(src: Option<&str>, dst: Option<&str>, rte: Option<&str>, p: Option<u32>) -> UdspRule {
    UdspRule {
        idx: None,
        src: src.map(str::to_owned),
        dst: dst.map(str::to_owned),
        rte: rte.map(str::to_owned),
        priority: p,
    }
}

fn nid(s: &str) -> Nid {
    s.parse().unwrap()
}

fn nids(s: &[&str]) -> Vec<Nid> {
    s.iter().map(|n| nid(n)).collect()
}

fn net(s: &str) -> Net {
    s.parse().unwrap()
}

const UNSET: u32 = LNET_MAX_SELECTION_PRIORITY;

#[test]
fn udsp_src_net_rule_sets_local_net_priority() {
    let p = UdspPolicy::new(&[rule(Some("o2ib1"), None, None, Some(1))]).unwrap();
    assert_eq!(p.local_net_priority(net("o2ib1")), 1);
    assert_eq!(p.local_net_priority(net("o2ib")), UNSET);
    // A net rule sets the net's priority, not its NIs'.
    assert_eq!(p.local_ni_priority(&nid("10.0.0.1@o2ib1")), UNSET);
    assert_eq!(p.peer_net_priority(net("o2ib1")), UNSET);
    let info = p.local_ni_info(&nid("10.0.0.1@o2ib1"));
    assert_eq!((info.net_priority, info.nid_priority), (1, -1));
}

#[test]
fn udsp_src_nid_rule_sets_local_ni_priority_and_priority_defaults_to_0() {
    let p = UdspPolicy::new(&[rule(Some("10.0.0.[1-2]@tcp"), None, None, None)]).unwrap();
    assert_eq!(p.local_ni_priority(&nid("10.0.0.2@tcp")), 0);
    assert_eq!(p.local_ni_priority(&nid("10.0.0.3@tcp")), UNSET);
    assert_eq!(p.local_net_priority(net("tcp")), UNSET);
    assert_eq!(p.local_ni_info(&nid("10.0.0.2@tcp")).nid_priority, 0);
}

#[test]
fn udsp_dst_rules_set_peer_net_and_peer_ni_priorities() {
    let p = UdspPolicy::new(&[
        rule(None, Some("tcp1"), None, Some(3)),
        rule(None, Some("10.1.0.7@tcp"), None, Some(2)),
    ])
    .unwrap();
    assert_eq!(p.peer_net_priority(net("tcp1")), 3);
    assert_eq!(p.peer_ni_priority(&nid("10.1.0.7@tcp1")), UNSET);
    assert_eq!(p.peer_ni_priority(&nid("10.1.0.7@tcp")), 2);
    assert_eq!(p.peer_ni_priority(&nid("10.1.0.8@tcp")), UNSET);
    assert_eq!(p.local_ni_priority(&nid("10.1.0.7@tcp")), UNSET);
    let info = p.peer_ni_info(&nid("10.1.0.7@tcp"));
    assert_eq!((info.net_priority, info.nid_priority), (-1, 2));
    let info = p.peer_ni_info(&nid("10.1.0.7@tcp1"));
    assert_eq!((info.net_priority, info.nid_priority), (3, -1));
}

#[test]
fn udsp_lower_index_wins_on_overlap() {
    let p = UdspPolicy::new(&[
        rule(Some("10.0.0.1@tcp"), None, None, Some(5)),
        rule(Some("10.0.0.*@tcp"), None, None, Some(9)),
        rule(None, Some("o2ib[0-3]"), None, Some(4)),
        rule(None, Some("o2ib*"), None, Some(7)),
    ])
    .unwrap();
    assert_eq!(p.local_ni_priority(&nid("10.0.0.1@tcp")), 5);
    assert_eq!(p.local_ni_priority(&nid("10.0.0.2@tcp")), 9);
    assert_eq!(p.peer_net_priority(net("o2ib2")), 4);
    assert_eq!(p.peer_net_priority(net("o2ib9")), 7);
}

#[test]
fn udsp_src_dst_prefers_local_nis() {
    let p = UdspPolicy::new(&[rule(
        Some("10.0.0.[2-3]@tcp"),
        Some("10.0.1.[1-9]@tcp"),
        None,
        None,
    )])
    .unwrap();
    let local = nids(&["10.0.0.1@tcp", "10.0.0.3@tcp", "10.0.0.2@tcp"]);
    assert_eq!(
        p.preferred_local_nids(&nid("10.0.1.5@tcp"), &local),
        nids(&["10.0.0.3@tcp", "10.0.0.2@tcp"])
    );
    assert!(p
        .preferred_local_nids(&nid("10.0.1.10@tcp"), &local)
        .is_empty());
    assert!(p.prefers_local(&nid("10.0.1.5@tcp"), &nid("10.0.0.2@tcp")));
    assert!(!p.prefers_local(&nid("10.0.1.5@tcp"), &nid("10.0.0.1@tcp")));
    assert!(!p.prefers_local(&nid("10.0.1.10@tcp"), &nid("10.0.0.2@tcp")));
    // Neither a priority of the local NI nor of the peer NI.
    assert_eq!(p.local_ni_priority(&nid("10.0.0.2@tcp")), UNSET);
    assert_eq!(p.peer_ni_priority(&nid("10.0.1.5@tcp")), UNSET);
    // Shown on the peer NI.
    let info = p.peer_ni_info_with(&nid("10.0.1.5@tcp"), &local, &[]);
    assert_eq!(
        info.preferred_sources,
        nids(&["10.0.0.3@tcp", "10.0.0.2@tcp"])
    );
    assert!(info.preferred_gateways.is_empty());
    assert_eq!((info.net_priority, info.nid_priority), (-1, -1));
}

#[test]
fn udsp_dst_net_expression_names_every_peer_ni_of_the_net() {
    let p = UdspPolicy::new(&[rule(Some("10.0.0.1@tcp"), Some("tcp"), None, None)]).unwrap();
    let local = nids(&["10.0.0.1@tcp", "10.0.0.2@tcp"]);
    assert_eq!(
        p.preferred_local_nids(&nid("10.9.9.9@tcp"), &local),
        nids(&["10.0.0.1@tcp"])
    );
    assert!(p
        .preferred_local_nids(&nid("10.9.9.9@tcp1"), &local)
        .is_empty());
}

#[test]
fn udsp_preferred_list_comes_from_the_lowest_index_rule_that_names_a_nid() {
    let p = UdspPolicy::new(&[
        // Names no NI of this node: skipped, as the kernel leaves the list alone.
        rule(Some("10.0.9.9@tcp"), Some("10.0.1.5@tcp"), None, None),
        rule(Some("10.0.0.1@tcp"), Some("10.0.1.[1-9]@tcp"), None, None),
        // Overlaps the rule above on 10.0.1.5: replaced by it, not added to.
        rule(Some("10.0.0.2@tcp"), Some("10.0.1.*@tcp"), None, None),
    ])
    .unwrap();
    let local = nids(&["10.0.0.1@tcp", "10.0.0.2@tcp"]);
    assert_eq!(
        p.preferred_local_nids(&nid("10.0.1.5@tcp"), &local),
        nids(&["10.0.0.1@tcp"])
    );
    assert_eq!(
        p.preferred_local_nids(&nid("10.0.1.50@tcp"), &local),
        nids(&["10.0.0.2@tcp"])
    );
    assert!(p.prefers_local(&nid("10.0.1.6@tcp"), &nid("10.0.0.1@tcp")));
    assert!(!p.prefers_local(&nid("10.0.1.6@tcp"), &nid("10.0.0.2@tcp")));
}

#[test]
fn udsp_dst_rte_prefers_gateways() {
    let p = UdspPolicy::new(&[rule(None, Some("o2ib"), Some("10.0.0.[3-4]@tcp"), None)]).unwrap();
    let gateways = nids(&["10.0.0.2@tcp", "10.0.0.4@tcp", "10.0.0.3@tcp"]);
    assert_eq!(
        p.preferred_gateways(&nid("192.168.1.1@o2ib"), &gateways),
        nids(&["10.0.0.4@tcp", "10.0.0.3@tcp"])
    );
    assert!(p
        .preferred_gateways(&nid("192.168.1.1@o2ib1"), &gateways)
        .is_empty());
    assert!(p.prefers_gateway(&nid("192.168.1.1@o2ib"), &nid("10.0.0.3@tcp")));
    assert!(!p.prefers_gateway(&nid("192.168.1.1@o2ib"), &nid("10.0.0.2@tcp")));
    assert!(!p.prefers_gateway(&nid("192.168.1.1@o2ib1"), &nid("10.0.0.3@tcp")));
    let info = p.peer_ni_info_with(&nid("192.168.1.1@o2ib"), &[], &gateways);
    assert_eq!(
        info.preferred_gateways,
        nids(&["10.0.0.4@tcp", "10.0.0.3@tcp"])
    );
    assert!(info.preferred_sources.is_empty());
    // A local NI shows no preferred list.
    assert_eq!(p.local_ni_info(&nid("10.0.0.1@tcp")), UdspInfo::default());
}

#[test]
fn udsp_net_only_src_or_rte_in_a_preferred_rule_has_no_effect() {
    let p = UdspPolicy::new(&[
        rule(Some("tcp"), Some("10.0.1.5@tcp"), None, None),
        rule(None, Some("o2ib"), Some("tcp"), None),
    ])
    .unwrap();
    assert_eq!(
        p.notes(),
        [
            UdspNote::NetOnlySource { index: 0 },
            UdspNote::NetOnlyRoute { index: 1 }
        ]
    );
    let local = nids(&["10.0.0.1@tcp"]);
    assert!(p
        .preferred_local_nids(&nid("10.0.1.5@tcp"), &local)
        .is_empty());
    assert!(!p.prefers_local(&nid("10.0.1.5@tcp"), &local[0]));
    assert!(!p.prefers_gateway(&nid("1.1.1.1@o2ib"), &nid("10.0.0.9@tcp")));
    // Writing the NIDs works.
    let p = UdspPolicy::new(&[rule(Some("*@tcp"), Some("10.0.1.5@tcp"), None, None)]).unwrap();
    assert!(p.notes().is_empty());
    assert_eq!(p.preferred_local_nids(&nid("10.0.1.5@tcp"), &local), local);
}

#[test]
fn udsp_same_descriptors_merge_as_lnetctl_import_does() {
    let p = UdspPolicy::new(&[
        rule(Some("tcp"), None, None, Some(1)),
        rule(None, Some("tcp"), None, Some(4)),
        rule(Some("tcp"), None, None, Some(2)),
        rule(Some("tcp0"), None, None, Some(3)),
    ])
    .unwrap();
    // The later priority replaced the earlier rule's, at the earlier rule's place.
    assert_eq!(p.local_net_priority(net("tcp")), 2);
    assert_eq!(p.peer_net_priority(net("tcp")), 4);
    assert_eq!(p.len(), 3);
    assert_eq!(p.notes(), [UdspNote::Merged { index: 2, of: 0 }]);
    assert!(p.notes()[0].to_string().contains("udsp[2]"));
}

#[test]
fn udsp_src_rte_is_rejected() {
    assert_eq!(
        UdspPolicy::new(&[rule(Some("tcp"), None, Some("10.0.0.1@tcp"), None)]),
        Err(UdspError::Combination {
            index: 0,
            reason: "src and rte cannot be combined"
        })
    );
}

#[test]
fn udsp_bad_rules_are_rejected_naming_the_rule_and_field() {
    assert!(matches!(
        UdspPolicy::new(&[rule(Some("tcp"), Some("tcp1"), Some("1.2.3.4@tcp"), None)]),
        Err(UdspError::Combination { index: 0, .. })
    ));
    assert!(matches!(
        UdspPolicy::new(&[rule(None, None, Some("1.2.3.4@tcp"), None)]),
        Err(UdspError::Combination { index: 0, .. })
    ));
    assert!(matches!(
        UdspPolicy::new(&[rule(None, None, None, Some(1))]),
        Err(UdspError::Combination { index: 0, .. })
    ));
    assert_eq!(
        UdspPolicy::new(&[
            rule(Some("tcp"), None, None, None),
            rule(None, Some("o2ib"), Some("1.2.3.4@tcp"), Some(1)),
        ]),
        Err(UdspError::PriorityOnPreferred { index: 1 })
    );
    assert_eq!(
        UdspPolicy::new(&[rule(Some("1.2.3.4@tcp"), Some("o2ib"), None, Some(0))]),
        Err(UdspError::PriorityOnPreferred { index: 0 })
    );
    let bad = UdspPolicy::new(&[
        rule(Some("tcp"), None, None, None),
        rule(None, Some("eth0"), None, None),
    ])
    .unwrap_err();
    assert!(bad.to_string().starts_with("udsp[1].dst: "), "{bad}");
    assert!(matches!(
        UdspPolicy::new(&[rule(None, Some("o2ib"), Some("10.0.0.[9-3]@tcp"), None)]),
        Err(UdspError::Expression {
            index: 0,
            field: "rte",
            ..
        })
    ));
}

#[test]
fn udsp_info_shows_unset_as_minus_one() {
    assert_eq!(shown_priority(LNET_MAX_SELECTION_PRIORITY), -1);
    assert_eq!(shown_priority(0), 0);
    assert_eq!(shown_priority(7), 7);
    let p = UdspPolicy::default();
    assert!(p.is_empty());
    assert_eq!(p.peer_ni_info(&nid("1.2.3.4@tcp")), UdspInfo::default());
}
