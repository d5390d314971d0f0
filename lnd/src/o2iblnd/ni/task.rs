//! The NI task loop: one tokio task waits on the RDMA-CM event channel, the completion
//! channel, the command channel of [`super::O2ibLnd`] and a one-second tick (deadlines,
//! reconnects, keepalives), and stops the NI.

use super::*;

impl<H: LndHandler> State<H> {
    pub(super) async fn run(
        mut self,
        cm_fd: AsyncFd<Fd>,
        cq_fd: AsyncFd<Fd>,
        mut cmds: mpsc::Receiver<Cmd>,
    ) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let _keep = &self.listener;
        loop {
            tokio::select! {
                r = cm_fd.readable() => {
                    let Ok(mut guard) = r else { break };
                    guard.clear_ready();
                    self.drain_cm().await;
                }
                r = cq_fd.readable() => {
                    let Ok(mut guard) = r else { break };
                    guard.clear_ready();
                    self.cq.take_events();
                    self.drain_cq().await;
                }
                cmd = cmds.recv() => match cmd {
                    Some(Cmd::Send(tx)) => self.send(tx),
                    Some(Cmd::Stats(reply)) => {
                        let _ = reply.send(self.stats.clone());
                    }
                    Some(Cmd::Conn(peer, reply)) => {
                        let _ = reply.send(self.conn_info(peer));
                    }
                    Some(Cmd::Stop(reply)) => {
                        self.shutdown();
                        let _ = reply.send(());
                        break;
                    }
                    None => {
                        self.shutdown();
                        break;
                    }
                },
                _ = tick.tick() => self.on_tick(),
            }
        }
        drop(cm_fd);
        drop(cq_fd);
    }

    pub(super) fn conn_info(&self, peer: Nid) -> Option<ConnInfo> {
        let p = self.peers.get(&peer)?;
        p.conns
            .iter()
            .filter_map(|c| self.conns.get(c))
            .find(|c| c.state == ConnState::Established)
            .map(|c| ConnInfo {
                version: c.version,
                queue_depth: c.credits.queue_depth(),
                max_frags: c.max_frags,
                peer_stamp: c.peer_stamp,
            })
    }

    pub(super) fn new_tx_id(&mut self) -> u32 {
        loop {
            let id = self.next_tx;
            self.next_tx = self.next_tx.wrapping_add(1).max(1);
            if !self.txs.contains_key(&id) {
                return id;
            }
        }
    }

    pub(super) fn new_cookie(&mut self) -> Cookie {
        self.next_cookie = self.next_cookie.wrapping_add(1);
        Cookie(self.next_cookie)
    }

    pub(super) fn add_tx(
        &mut self,
        peer: Nid,
        upper: Option<crate::lnd::TxId>,
        kind: TxKind,
    ) -> u32 {
        let id = self.new_tx_id();
        let cookie = self.new_cookie();
        let class = kind.class();
        self.txs.insert(
            id,
            Tx {
                upper,
                peer,
                kind,
                deadline: Instant::now() + self.cfg.wait_for_conn_timeout(),
                conn: None,
                queued: false,
                sending: 0,
                waiting: false,
                cookie,
                msg_slots: VecDeque::new(),
                src_slot: None,
                class,
                failed: None,
            },
        );
        id
    }

    pub(super) fn complete_upper(
        &self,
        peer: Nid,
        upper: Option<crate::lnd::TxId>,
        result: Result<(), TxFailure>,
        why: &str,
    ) {
        let Some(id) = upper else { return };
        let (status, reason) = match result {
            Ok(()) => (HealthStatus::Ok, None),
            Err(f) => (f.status(), Some(format!("{f:?} {why}").trim().to_string())),
        };
        self.handler.on_send_complete(TxCompletion {
            id,
            ni: self.me.nid,
            peer,
            status,
            reason,
        });
    }

    pub(super) fn on_tick(&mut self) {
        let now = Instant::now();
        // Connections with a tx past its deadline, or a connect that takes too long.
        let mut expired = Vec::new();
        let connreq_timeout = self.cfg.connreq_timeout();
        for (&c, conn) in &self.conns {
            if conn.state != ConnState::Established {
                if now.duration_since(conn.started) > connreq_timeout {
                    expired.push((c, true));
                }
                continue;
            }
            let late = conn
                .active
                .iter()
                .chain(conn.rsrvd.iter())
                .chain(conn.credit_q.iter())
                .chain(conn.nocred.iter())
                .any(|id| self.txs.get(id).is_some_and(|t| t.deadline <= now));
            if late {
                expired.push((c, false));
            }
        }
        for (c, connecting) in expired {
            if connecting {
                tracing::info!(conn = c, "o2iblnd: connect timed out");
                self.abort_connecting(c, Some(TxFailure::ConnectUnreachable));
            } else {
                tracing::warn!(conn = c, "o2iblnd: tx timed out, closing connection");
                self.close_conn(c, CloseWhy::Timeout);
            }
        }
        let stale_attempts: Vec<usize> = self
            .attempts
            .iter()
            .filter(|(_, a)| now.duration_since(a.started) > connreq_timeout)
            .map(|(k, _)| *k)
            .collect();
        for k in stale_attempts {
            if let Some(a) = self.attempts.remove(&k) {
                self.connect_failed(a.peer, TxFailure::ConnectUnreachable);
            }
        }
        // Sends that waited too long for a connection.
        let peers: Vec<Nid> = self.peers.keys().copied().collect();
        for peer in peers {
            let late: Vec<u32> = self.peers.get(&peer).map_or_else(Vec::new, |p| {
                p.queue
                    .iter()
                    .copied()
                    .filter(|id| self.txs.get(id).is_some_and(|t| t.deadline <= now))
                    .collect()
            });
            if !late.is_empty() {
                if let Some(p) = self.peers.get_mut(&peer) {
                    p.queue.retain(|id| !late.contains(id));
                }
                for id in late {
                    if let Some(tx) = self.txs.remove(&id) {
                        self.release(&tx);
                        self.complete_upper(
                            peer,
                            tx.upper,
                            Err(TxFailure::WaitedForConnection),
                            "",
                        );
                    }
                }
                self.report_down(
                    peer,
                    HealthStatus::NetworkTimeout,
                    "no connection in time".into(),
                );
            }
            let retry = self.peers.get(&peer).is_some_and(|p| {
                p.retry_at.is_some_and(|t| t <= now) && !p.connecting && !p.queue.is_empty()
            });
            if retry {
                if self.established_conn(peer).is_some() {
                    if let Some(p) = self.peers.get_mut(&peer) {
                        p.retry_at = None;
                    }
                } else {
                    self.start_connect(peer);
                }
            }
        }
        // Keepalives and anything a freed buffer now allows.
        let all: Vec<u32> = self.conns.keys().copied().collect();
        for c in all {
            self.check_sends(c);
        }
        self.start_sinks();
    }

    pub(super) fn shutdown(&mut self) {
        let all: Vec<u32> = self.conns.keys().copied().collect();
        for c in all {
            self.close_conn(c, CloseWhy::Stop);
        }
        self.attempts.clear();
        let peers: Vec<Nid> = self.peers.keys().copied().collect();
        for peer in peers {
            self.fail_peer_queue(peer, TxFailure::Stopped);
        }
        let left: Vec<u32> = self.txs.keys().copied().collect();
        for id in left {
            if let Some(tx) = self.txs.remove(&id) {
                self.complete_upper(tx.peer, tx.upper, Err(TxFailure::Stopped), "");
            }
        }
        tracing::info!(nid = %self.me.nid, "o2iblnd: NI stopped");
    }
}
