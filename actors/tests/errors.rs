//! The node's errors carry their typed cause: an LND that cannot start, a refused peer,
//! a refused UDSP rule list.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod fabric_support;
use fabric_support::{nid, node};

use std::error::Error;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};

use actors::{BadPeerReason, Node, NodeConfig, NodeError, NodeHandler};
use lnd::socklnd::{SockLnd, SockLndConfig, StartError};
use lnet::config::UdspRule;

#[actix::test]
async fn an_lnd_that_cannot_start_gives_its_own_error_as_the_source() {
    let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 9, 1)), 0);
    let taken = TcpListener::bind(addr).unwrap();
    let mut config = SockLndConfig::new(nid("127.0.9.1@tcp"), 0x5EED_0000_0001);
    config.listen = Some(taken.local_addr().unwrap());
    let node = Node::start(NodeConfig::default());
    let err = node
        .add_ni::<SockLnd<NodeHandler>>(config, 8)
        .await
        .unwrap_err();
    let NodeError::NiStart { source } = &err else {
        panic!("{err:?}");
    };
    assert!(
        matches!(
            source.get().downcast_ref::<StartError>(),
            Some(StartError::Listen { .. })
        ),
        "{source:?}"
    );
    assert!(err.source().is_some());
    assert!(
        err.to_string()
            .starts_with("NI could not start: cannot listen on"),
        "{err}"
    );
    assert!(node.local_nis().await.unwrap().is_empty());
}

#[actix::test]
async fn a_refused_peer_says_which_rule_it_broke() {
    let fabric = lnd::fabric::Fabric::new();
    let (a, an) = node(&fabric, &["10.0.0.1@tcp"]).await;
    let own = a.add_peer(an[0], vec![an[0]], true).await.unwrap_err();
    assert_eq!(
        own,
        NodeError::BadPeer {
            reason: BadPeerReason::NoUsableNid
        }
    );
    let (x, y, z) = (
        nid("10.0.0.7@tcp"),
        nid("10.0.0.8@tcp"),
        nid("10.0.0.9@tcp"),
    );
    a.add_peer(x, vec![x, y], true).await.unwrap();
    let taken = a.add_peer(z, vec![z, y], true).await.unwrap_err();
    assert_eq!(
        taken,
        NodeError::BadPeer {
            reason: BadPeerReason::NidTaken { nid: y, owner: x }
        }
    );
    assert_eq!(
        taken.to_string(),
        "bad peer: 10.0.0.8@tcp belongs to peer 10.0.0.7@tcp already"
    );
}

#[actix::test]
async fn a_refused_rule_list_gives_the_udsp_error_as_the_source() {
    let fabric = lnd::fabric::Fabric::new();
    let (a, _) = node(&fabric, &["10.0.0.1@tcp"]).await;
    let rule = UdspRule {
        src: Some("10.0.0.300@tcp".into()),
        priority: Some(0),
        ..UdspRule::default()
    };
    let err = a.set_udsp(&[rule]).await.unwrap_err();
    let NodeError::Udsp(udsp) = &err else {
        panic!("{err:?}");
    };
    let source = err.source().unwrap();
    assert_eq!(source.to_string(), udsp.to_string());
}
