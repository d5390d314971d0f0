//! A one-shot RDMA-CM connect with chosen private data: what a peer answers to a CONNREQ
//! (a diagnostic, and how tests send CONNREQs no NI would send).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use super::config::RESOLVE_TIMEOUT;
use super::sys::{self, CmEventKind, CmId, ConnectParams, Cq, EventChannel, Pd, QpCaps};
use super::wire::{Rej, RejError};

/// How a probe connect ended.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProbeOutcome {
    /// The peer accepted; its CONNACK private data. The connection is closed again.
    Accepted {
        /// The private data of the ESTABLISHED event.
        private_data: Vec<u8>,
    },
    /// The peer rejected.
    Rejected {
        /// The IB CM reject reason (28: consumer defined, carrying a `kib_rej`).
        cm_status: i32,
        /// The reject private data, decoded.
        rej: Result<Rej, RejError>,
    },
    /// Resolution or connection failed with this RDMA-CM event.
    Failed {
        /// The event.
        kind: CmEventKind,
        /// Its status.
        status: i32,
    },
}

/// Why a probe could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// A verbs or RDMA-CM call failed.
    #[error("{what}: {source}")]
    Verbs {
        /// The step.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

fn v(what: &'static str) -> impl FnOnce(std::io::Error) -> ProbeError {
    move |source| ProbeError::Verbs { what, source }
}

/// Connects from `src` to `dst` sending `private_data` (at most 56 bytes reach an IB-CM
/// peer) and reports the answer.
pub async fn connect_raw(
    src: Ipv4Addr,
    dst: SocketAddrV4,
    private_data: &[u8],
    timeout: Duration,
) -> Result<ProbeOutcome, ProbeError> {
    let ch = EventChannel::new().map_err(v("rdma_create_event_channel"))?;
    let fd = sys::async_fd(ch.fd()).map_err(v("event channel"))?;
    let id = CmId::new(&ch).map_err(v("rdma_create_id"))?;
    let ms = i32::try_from(RESOLVE_TIMEOUT.as_millis()).unwrap_or(5000);
    id.resolve_addr(SocketAddrV4::new(src, 0), dst, ms)
        .map_err(v("rdma_resolve_addr"))?;
    let mut resources: Option<(Cq, Pd)> = None;
    let deadline = tokio::time::Instant::now() + timeout;
    let outcome = loop {
        let ev = loop {
            if let Some(ev) = ch.next_event().map_err(v("rdma_get_cm_event"))? {
                break ev;
            }
            let mut guard = tokio::time::timeout_at(deadline, fd.readable())
                .await
                .map_err(|_| ProbeError::Timeout(timeout))?
                .map_err(v("event channel"))?;
            guard.clear_ready();
        };
        match ev.kind {
            CmEventKind::AddrResolved => id.resolve_route(ms).map_err(v("rdma_resolve_route"))?,
            CmEventKind::RouteResolved => {
                let pd = Pd::on_device_of(&id).map_err(v("ibv_alloc_pd"))?;
                let cq = Cq::new(&pd, 16).map_err(v("ibv_create_cq"))?;
                let caps = QpCaps {
                    max_send_wr: 4,
                    max_recv_wr: 4,
                    max_send_sge: 1,
                };
                id.create_qp(&pd, &cq, caps).map_err(v("rdma_create_qp"))?;
                resources = Some((cq, pd));
                let p = ConnectParams {
                    responder_resources: 0,
                    initiator_depth: 0,
                    flow_control: 1,
                    retry_count: 5,
                    rnr_retry_count: 6,
                    qp_num: 0,
                };
                id.connect(&p, private_data).map_err(v("rdma_connect"))?;
            }
            CmEventKind::Established => {
                let _ = id.disconnect();
                break ProbeOutcome::Accepted {
                    private_data: ev.private_data,
                };
            }
            CmEventKind::Rejected => {
                break ProbeOutcome::Rejected {
                    cm_status: ev.status,
                    rej: Rej::decode(&ev.private_data),
                }
            }
            kind => {
                break ProbeOutcome::Failed {
                    kind,
                    status: ev.status,
                }
            }
        }
    };
    // The QP goes before its CQ and PD, the id before the channel.
    drop(id);
    drop(resources);
    drop(fd);
    drop(ch);
    Ok(outcome)
}
