//! Node-level fault rules over real socklnd on loopback (127.0.6.x, port 22000): two end
//! nodes with two tcp NIs each on one net. 10,000 PUTs with ACK in total, 64 in flight,
//! spread over the ten failure classes (1,000 each): while one class runs, health-error
//! rules (`lnetctl fault drop add -e`) installed through the node make the NI the class
//! charges fail every send with that class: the local NI A0 for a local class, the peer
//! NI B0 for a remote one, the pair A0 -> B0 for NETWORK_TIMEOUT (which charges both).
//! With a resend class every PUT ends
//! with its ACK; with a no-resend class a PUT may instead end with a failure naming the
//! class. No PUT ends silently or outlives its transaction timeout, no PUT reaches the
//! receiver's MD twice, and the failing NI loses health, joins its recovery queue and is
//! back at 1000 once the rule is removed. Every wait is bounded; nothing is timed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actors::events::{Event, NiKind};
use actors::{FailReason, PutRequest};
use actors::{MdSpec, MsgEventKind, Node, NodeConfig, NodeHandler, Outcome};
use bytes::Bytes;
use lnd::socklnd::{SockLnd, SockLndConfig};
use lnet::fault::{FaultHealthError, FaultRule, FaultTrigger, NidMatch, RuleId};
use lnet::health::check::NoResend;
use lnet::health::{HealthStatus, HealthValue};
use lnet::recovery::RecoveryKind;
use lnet::tunables::{TunableName, Tunables};
use lnet::Nid;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinSet;
use tokio::time::{sleep, timeout, Instant};

const PORT: u16 = 22_000;
const PORTAL: u32 = 4;
const BITS: u64 = 9;
const TOTAL: u64 = 10_000;
const IN_FLIGHT: usize = 64;
const TXN_TIMEOUT: Duration = Duration::from_secs(20);
/// A bound on the whole test.
const WAIT: Duration = Duration::from_secs(600);
/// A bound on recovery back to 1000 after a rule is removed.
const RECOVERY_WAIT: Duration = Duration::from_secs(120);

const RESEND: [HealthStatus; 6] = [
    HealthStatus::LocalInterrupt,
    HealthStatus::LocalDropped,
    HealthStatus::LocalAborted,
    HealthStatus::LocalNoRoute,
    HealthStatus::LocalTimeout,
    HealthStatus::RemoteDropped,
];
const NO_RESEND: [HealthStatus; 4] = [
    HealthStatus::LocalError,
    HealthStatus::RemoteError,
    HealthStatus::RemoteTimeout,
    HealthStatus::NetworkTimeout,
];

fn config(ip: [u8; 4]) -> SockLndConfig {
    let addr = Ipv4Addr::from(ip);
    let mut c = SockLndConfig::new(
        format!("{addr}@tcp").parse().unwrap(),
        (0xFA17 << 32) | u64::from(u32::from(addr)),
    );
    c.listen = Some(SocketAddr::new(IpAddr::V4(addr), PORT));
    c.peer_port = PORT;
    c
}

async fn node(ips: &[[u8; 4]]) -> (Node, Vec<Nid>) {
    let mut tunables = Tunables::default();
    // Recovery pings every second at most, so that recovery is quick in real time.
    tunables
        .set(TunableName::MaxRecoveryPingInterval, 1)
        .unwrap();
    let node = Node::start(NodeConfig {
        tunables,
        event_capacity: 1 << 16,
        ..NodeConfig::default()
    });
    let mut nids = Vec::new();
    for ip in ips {
        nids.push(
            node.add_ni::<SockLnd<NodeHandler>>(config(*ip), 8)
                .await
                .unwrap(),
        );
    }
    (node, nids)
}

/// How one PUT ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Acked,
    Failed(HealthStatus, FailReason),
    Silent,
    Hung,
}

/// What the events of one class showed about the failing NIs.
#[derive(Debug, Default)]
struct Seen {
    lowered: HashSet<(NiKind, Nid)>,
    queued: HashSet<(RecoveryKind, Nid)>,
}

async fn one_put(a: Node, dest: Nid, id: u64) -> (u64, End) {
    let mut payload = id.to_le_bytes().to_vec();
    payload.extend_from_slice(&[id as u8; 56]);
    let txn = a
        .put(PutRequest {
            dest,
            portal: PORTAL,
            match_bits: BITS,
            hdr_data: id,
            payload: Bytes::from(payload),
            ack: true,
            timeout: TXN_TIMEOUT,
        })
        .await
        .unwrap();
    let end = match timeout(TXN_TIMEOUT + Duration::from_secs(10), txn.finish()).await {
        Err(_) => End::Hung,
        Ok(events) => match events.last() {
            None => End::Silent,
            Some(e) => match e.status {
                Outcome::Ok if e.kind == MsgEventKind::Ack => End::Acked,
                Outcome::Ok => End::Silent,
                Outcome::Failed { status, reason } => End::Failed(status, reason),
            },
        },
    };
    (id, end)
}

async fn wait_healthy(a: &Node, kind: NiKind, nid: Nid) {
    timeout(RECOVERY_WAIT, async {
        loop {
            let health = match kind {
                NiKind::Local => a
                    .local_nis()
                    .await
                    .unwrap()
                    .into_iter()
                    .find(|n| n.nid == nid)
                    .map(|n| n.health),
                NiKind::Peer => a
                    .peers()
                    .await
                    .unwrap()
                    .into_iter()
                    .flat_map(|p| p.nis)
                    .find(|n| n.nid == nid)
                    .map(|n| n.health),
            };
            let queue = match kind {
                NiKind::Local => RecoveryKind::LocalNi,
                NiKind::Peer => RecoveryKind::PeerNi,
            };
            let queued = a
                .recovery(queue)
                .await
                .unwrap()
                .iter()
                .any(|e| e.key == nid);
            if health == Some(HealthValue::MAX) && !queued {
                return;
            }
            sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{kind:?} NI {nid} back at 1000 and off its queue"));
}

#[actix::test]
async fn ten_thousand_puts_through_every_failure_class_on_one_ni_pair() {
    timeout(WAIT, async {
        let (a, an) = node(&[[127, 0, 6, 1], [127, 0, 6, 2]]).await;
        let (b, bn) = node(&[[127, 0, 6, 11], [127, 0, 6, 12]]).await;
        let mut md = b
            .attach(MdSpec {
                portal: PORTAL,
                match_bits: BITS,
                data: Bytes::new(),
                depth: 1024,
            })
            .await
            .unwrap();
        let delivered: Arc<Mutex<HashMap<u64, u32>>> = Arc::default();
        let counts = Arc::clone(&delivered);
        actix::spawn(async move {
            while let Some(m) = md.recv().await {
                let id = u64::from_le_bytes(m.payload[..8].try_into().unwrap());
                *counts.lock().unwrap().entry(id).or_default() += 1;
            }
        });
        a.add_peer(bn[0], bn.clone(), true).await.unwrap();
        b.add_peer(an[0], an.clone(), true).await.unwrap();
        // Hear from both peer NIs first: only peer NIs heard from join recovery.
        for n in &bn {
            a.ping(*n, Duration::from_secs(10)).await.unwrap();
        }
        assert!(a.fault_rules().is_empty());

        let per_class = TOTAL / (RESEND.len() + NO_RESEND.len()) as u64;
        let started = Instant::now();
        let mut next_id = 0u64;
        let mut acked = 0u64;
        let mut failed: BTreeMap<String, u64> = BTreeMap::new();
        let mut total_sent = 0u64;
        for status in RESEND.into_iter().chain(NO_RESEND) {
            let class_start = Instant::now();
            let seen: Arc<Mutex<Seen>> = Arc::default();
            let mut events = a.events().subscribe();
            let s = Arc::clone(&seen);
            let watcher = actix::spawn(async move {
                loop {
                    match events.recv().await {
                        Ok(Event::Health {
                            kind,
                            nid,
                            before,
                            after,
                            cause: Some(c),
                            ..
                        }) if c == status && after < before => {
                            s.lock().unwrap().lowered.insert((kind, nid));
                        }
                        Ok(Event::RecoveryQueued { queue, nid, .. }) => {
                            s.lock().unwrap().queued.insert((queue, nid));
                        }
                        Ok(_) | Err(RecvError::Lagged(_)) => {}
                        Err(RecvError::Closed) => break,
                    }
                }
            });
            // The failing NI: A0 for a class that charges the local NI only, every send
            // from it failing (`lnetctl fault drop add -s A0 -d * -e <class>` on A0); B0
            // for one that charges the peer NI only, every send to it failing (`-s * -d
            // B0`, on A0 and A1); the pair A0 -> B0 for NETWORK_TIMEOUT, which charges
            // both (`-s A0 -d B0`, on A0).
            let charge = status.charge();
            let rules: Vec<(Nid, NidMatch)> = match (charge.local_ni, charge.peer_ni) {
                (true, false) => vec![(an[0], NidMatch::Any)],
                (false, true) => an.iter().map(|n| (*n, NidMatch::Nid(bn[0]))).collect(),
                _ => vec![(an[0], NidMatch::Nid(bn[0]))],
            };
            let rules: Vec<(Nid, RuleId)> = rules
                .into_iter()
                .map(|(ni, dst)| {
                    let error = FaultHealthError::from_status(status).unwrap();
                    let rule =
                        FaultRule::health_error(NidMatch::Nid(ni), dst, FaultTrigger::All, error)
                            .at(ni);
                    (ni, a.add_fault_rule(rule).unwrap())
                })
                .collect();

            let mut set = JoinSet::new();
            let mut ends: Vec<(u64, End)> = Vec::new();
            for _ in 0..per_class {
                if set.len() >= IN_FLIGHT {
                    ends.push(set.join_next().await.unwrap().unwrap());
                }
                set.spawn(one_put(a.clone(), bn[0], next_id));
                next_id += 1;
            }
            while let Some(r) = set.join_next().await {
                ends.push(r.unwrap());
            }
            total_sent += ends.len() as u64;

            let mut fired = 0;
            let stats = a.fault_rules();
            assert_eq!(stats.len(), rules.len());
            for (ni, id) in &rules {
                let rule = stats.iter().find(|s| s.id == *id).unwrap();
                assert_eq!(rule.rule.local_nid, Some(*ni));
                fired += rule.fired;
                assert!(a.remove_fault_rule(*id));
                assert!(!a.remove_fault_rule(*id));
            }
            assert!(a.fault_rules().is_empty());

            let resend = status.resendable();
            let mut class_acked = 0u64;
            let mut class_failed = 0u64;
            for (id, end) in &ends {
                match end {
                    End::Acked => class_acked += 1,
                    End::Failed(s, reason) => {
                        assert!(
                            !resend,
                            "PUT {id} failed under resend class {status}: {end:?}"
                        );
                        assert_eq!(*s, status, "PUT {id}: {end:?}");
                        assert_eq!(
                            *reason,
                            FailReason::NoResend(NoResend::StatusNotResendable),
                            "PUT {id}"
                        );
                        class_failed += 1;
                    }
                    End::Silent | End::Hung => panic!("PUT {id} under {status}: {end:?}"),
                }
            }
            acked += class_acked;
            *failed.entry(status.to_string()).or_default() += class_failed;
            assert!(fired >= 1, "the rule never fired under {status}");
            if !resend {
                assert!(class_failed >= 1, "no PUT failed under {status}");
            }

            // The NI (or NIs) the class charges lost health and joined recovery; both
            // come back once the rules are gone.
            let mut charged = Vec::new();
            if charge.local_ni {
                charged.push((NiKind::Local, RecoveryKind::LocalNi, an[0]));
            }
            if charge.peer_ni {
                charged.push((NiKind::Peer, RecoveryKind::PeerNi, bn[0]));
            }
            for (kind, queue, nid) in &charged {
                timeout(Duration::from_secs(10), async {
                    loop {
                        {
                            let s = seen.lock().unwrap();
                            if s.lowered.contains(&(*kind, *nid))
                                && s.queued.contains(&(*queue, *nid))
                            {
                                break;
                            }
                        }
                        sleep(Duration::from_millis(50)).await;
                    }
                })
                .await
                .unwrap_or_else(|_| panic!("{status}: {kind:?} {nid} lowered and queued"));
            }
            for (kind, _, nid) in &charged {
                wait_healthy(&a, *kind, *nid).await;
            }
            watcher.abort();

            println!(
                "class {status:<16} sent {:>5} acked {:>5} failed {:>5} rule fired {:>5} \
                 ({:.2?})",
                ends.len(),
                class_acked,
                class_failed,
                fired,
                class_start.elapsed()
            );
        }

        // Every ACKed PUT reached the MD once; no PUT reached it twice.
        let want: u64 = acked;
        timeout(Duration::from_secs(30), async {
            loop {
                let n = delivered
                    .lock()
                    .unwrap()
                    .values()
                    .filter(|c| **c >= 1)
                    .count() as u64;
                if n >= want {
                    break;
                }
                sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .expect("every ACKed PUT delivered");
        let counts = delivered.lock().unwrap().clone();
        let duplicates: u64 = counts
            .values()
            .map(|c| u64::from(c.saturating_sub(1)))
            .sum();
        let total_failed: u64 = failed.values().sum();
        println!(
            "total: sent {total_sent} acked {acked} failed {total_failed} {failed:?} \
             delivered {} duplicates {duplicates} in {:.2?}",
            counts.len(),
            started.elapsed()
        );
        let counters = a.counters().await.unwrap();
        println!("node A counters: {counters:?}");
        assert_eq!(total_sent, TOTAL);
        assert_eq!(acked + total_failed, TOTAL);
        assert_eq!(duplicates, 0);
        assert!(counters.get("resend_count").copied().unwrap_or(0) >= 1);
    })
    .await
    .expect("bounded");
}
