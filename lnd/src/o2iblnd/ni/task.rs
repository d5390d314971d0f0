//! The NI task loop: one tokio task waits on the RDMA-CM event channel, the completion
//! channel, the command channel of [`super::O2ibLnd`] and a one-second tick (deadlines,
//! reconnects, keepalives), feeds what happens to the exchanges and the connection
//! management, carries out the exchanges' [`Action`]s in order, and stops the NI.

use super::*;

/// How long a stopping NI waits for the payloads it lent to be let go of.
const LENT_GRACE: Duration = Duration::from_secs(5);

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
                    self.take_timeout();
                    self.drain_cm().await;
                }
                r = cq_fd.readable() => {
                    let Ok(mut guard) = r else { break };
                    guard.clear_ready();
                    self.take_timeout();
                    self.cq.take_events();
                    self.drain_cq().await;
                }
                cmd = cmds.recv() => match cmd {
                    Some(Cmd::Send(tx)) => {
                        self.take_timeout();
                        self.send(tx);
                    }
                    Some(Cmd::Stats(reply)) => {
                        let _ = reply.send(self.stats());
                    }
                    Some(Cmd::Conn(peer, reply)) => {
                        let _ = reply.send(self.conn_info(peer));
                    }
                    Some(Cmd::Conns(peer, reply)) => {
                        let _ = reply.send(self.peer_conns(peer));
                    }
                    Some(Cmd::Close(c, reply)) => {
                        let known = self.conns.contains_key(&c);
                        if known {
                            tracing::info!(conn = c, "o2iblnd: closing connection on request");
                            self.close_conn(c, CloseWhy::Local);
                        }
                        let _ = reply.send(known);
                    }
                    Some(Cmd::Stop(reply)) => {
                        self.shutdown().await;
                        let _ = reply.send(());
                        break;
                    }
                    None => {
                        self.shutdown().await;
                        break;
                    }
                },
                _ = tick.tick() => {
                    self.take_timeout();
                    self.on_tick().await;
                }
                Some((query, decision)) = self.parked.next(), if !self.parked.is_empty() => {
                    self.take_timeout();
                    self.on_judged(query, decision);
                }
                Some(()) = self.delivering.next(), if !self.delivering.is_empty() => {}
                _ = self.returns.wake.notified() => {
                    self.take_timeout();
                    self.take_returns();
                }
            }
            self.run_actions().await;
        }
        drop(cm_fd);
        drop(cq_fd);
    }

    /// Takes the `timeout` `net set --lnd-timeout` left, if it changed: the waits started
    /// from here on are bounded by it.
    fn take_timeout(&mut self) {
        let timeout = self.live.timeout();
        if timeout != self.cfg.timeout {
            tracing::info!(
                nid = %self.me.nid,
                from = ?self.cfg.timeout,
                to = ?timeout,
                "o2iblnd: timeout changed"
            );
            self.cfg.timeout = timeout;
            self.ex.set_timeout(timeout);
        }
    }

    /// Carries out what the exchanges decided, oldest first, then tells the peer-down
    /// reports.
    pub(super) async fn run_actions(&mut self) {
        loop {
            self.run_exchange_actions().await;
            if self.downs.is_empty() {
                return;
            }
            for down in std::mem::take(&mut self.downs) {
                self.handler.on_peer_down(down);
            }
        }
    }

    async fn run_exchange_actions(&mut self) {
        while let Some(action) = self.ex.poll_action() {
            match action {
                Action::Post(p) => self.post(p),
                Action::Deliver {
                    from,
                    header,
                    payload,
                } => self.deliver(from, header, payload),
                Action::DeliverSink {
                    from,
                    header,
                    offset,
                    len,
                    mut buf,
                    lend,
                } => {
                    let payload = match lend {
                        Some(slot) => {
                            let lent = lend::lent_payload(
                                &self.pools.sink,
                                offset,
                                len,
                                slot,
                                &self.returns,
                            );
                            if lent.is_none() {
                                self.ex.sink_returned(Instant::now(), slot);
                            }
                            lent
                        }
                        None => self.pools.sink.region().read(offset, len).map(|data| {
                            buf.clear();
                            buf.extend_from_slice(data);
                            buf.freeze()
                        }),
                    };
                    if let Some(payload) = payload {
                        self.deliver(from, header, payload);
                    }
                }
                Action::Complete(done) => self.handler.on_send_complete(done),
                Action::Close { conn, why } => self.finish_close(conn, why),
                Action::Connect { peer } => {
                    let p = self.peers.entry(peer).or_default();
                    if p.connecting == 0 && p.retry_at.is_none() {
                        self.connect_peer(peer);
                    }
                }
                Action::ConnectTimedOut { peer } => self.report_down(
                    peer,
                    HealthStatus::NetworkTimeout,
                    "no connection in time".into(),
                ),
            }
        }
    }

    fn stats(&self) -> O2ibStats {
        let ex = self.ex.stats();
        O2ibStats {
            rx_msgs: ex.rx_msgs.clone(),
            tx_msgs: ex.tx_msgs.clone(),
            rdma_bytes: ex.rdma_bytes,
            sinks_lent: ex.sinks_lent,
            sinks_copied: ex.sinks_copied,
            sinks_lent_now: self.ex.sinks_lent_now() as u64,
            peak_credits_in_use: ex.peak_credits_in_use,
            handshakes: self
                .conns
                .values()
                .filter(|c| c.state != ConnState::Established)
                .count() as u64,
            conns: self.conns.len() as u64,
            ..self.stats.clone()
        }
    }

    fn conn_info(&self, peer: Nid) -> Option<ConnInfo> {
        let p = self.peers.get(&peer)?;
        p.conns
            .iter()
            .filter_map(|c| self.conns.get(c))
            .find(|c| c.state == ConnState::Established)
            .map(|c| ConnInfo {
                version: c.version,
                queue_depth: c.queue_depth,
                max_frags: c.max_frags,
                peer_stamp: c.peer_stamp,
            })
    }

    fn peer_conns(&self, peer: Nid) -> Vec<PeerConn> {
        let Some(p) = self.peers.get(&peer) else {
            return Vec::new();
        };
        let mut out: Vec<PeerConn> = p
            .conns
            .iter()
            .filter_map(|id| {
                let c = self.conns.get(id)?;
                let (tx_msgs, rx_msgs) = self.ex.conn_msgs(*id).unwrap_or_default();
                Some(PeerConn {
                    id: *id,
                    active: c.active,
                    established: c.state == ConnState::Established,
                    info: ConnInfo {
                        version: c.version,
                        queue_depth: c.queue_depth,
                        max_frags: c.max_frags,
                        peer_stamp: c.peer_stamp,
                    },
                    tx_msgs,
                    rx_msgs,
                })
            })
            .collect();
        out.sort_unstable_by_key(|c| c.id);
        out
    }

    async fn on_tick(&mut self) {
        let now = Instant::now();
        // Connects that take too long (each bounded by the timeout it started with).
        let mut expired: Vec<u32> = self
            .conns
            .iter()
            .filter(|(_, conn)| {
                conn.state != ConnState::Established
                    && now.duration_since(conn.started) > conn.handshake_timeout
            })
            .map(|(c, _)| *c)
            .collect();
        expired.sort_unstable();
        for c in expired {
            if self
                .conns
                .get(&c)
                .is_some_and(|conn| conn.state == ConnState::Accepting)
            {
                self.handshake_timed_out(c);
            } else {
                tracing::info!(conn = c, "o2iblnd: connect timed out");
                self.abort_connecting(c, Some(TxFailure::ConnectUnreachable));
            }
        }
        let stale_attempts: Vec<usize> = self
            .attempts
            .iter()
            .filter(|(_, a)| now.duration_since(a.started) > a.handshake_timeout)
            .map(|(k, _)| *k)
            .collect();
        for k in stale_attempts {
            if let Some(a) = self.attempts.remove(&k) {
                self.connect_failed(a.peer, TxFailure::ConnectUnreachable);
            }
        }
        // Txs past their deadline, keepalives, and anything a freed buffer now allows.
        self.ex.on_timer(now);
        self.run_actions().await;
        // Connects to retry after a "later" reject.
        let peers: Vec<Nid> = self.peers.keys().copied().collect();
        for peer in peers {
            let retry = self.peers.get(&peer).is_some_and(|p| {
                p.retry_at.is_some_and(|t| t <= now)
                    && p.connecting == 0
                    && self.ex.has_waiting(peer)
            });
            if retry {
                if self.established_conn(peer).is_some() {
                    if let Some(p) = self.peers.get_mut(&peer) {
                        p.retry_at = None;
                    }
                } else {
                    self.connect_peer(peer);
                }
            }
        }
    }

    fn established_conn(&self, peer: Nid) -> Option<u32> {
        let p = self.peers.get(&peer)?;
        p.conns.iter().copied().find(|c| {
            self.conns
                .get(c)
                .is_some_and(|c| c.state == ConnState::Established)
        })
    }

    /// Gives the exchanges the sink buffers the layer above let go of.
    fn take_returns(&mut self) {
        let now = Instant::now();
        for slot in self.returns.take() {
            self.ex.sink_returned(now, slot);
        }
    }

    async fn shutdown(&mut self) {
        // Payloads lent from the sink buffers are being forwarded: give them a moment to
        // go before the NI's memory does (see `lend`).
        let deadline = Instant::now() + LENT_GRACE;
        while self.pools.sink.lent() && Instant::now() < deadline {
            let _ = tokio::time::timeout_at(deadline, self.returns.wake.notified()).await;
            self.take_returns();
        }
        let all: Vec<u32> = self.conns.keys().copied().collect();
        for c in all {
            self.close_conn(c, CloseWhy::Stop);
        }
        self.attempts.clear();
        self.ex.shutdown(Instant::now());
        self.run_actions().await;
        tracing::info!(nid = %self.me.nid, "o2iblnd: NI stopped");
    }
}
