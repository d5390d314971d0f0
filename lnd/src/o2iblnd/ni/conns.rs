//! Connection management: active connects through RDMA-CM (address and route
//! resolution, CONNREQ, rejects and reconnects), passive accepts and refusals, the QP and
//! receive buffers of a connection, handing an established connection to the exchanges,
//! and closing a connection.

use std::net::Ipv4Addr;

use super::*;

impl<H: LndHandler> State<H> {
    pub(super) fn cm_params(&self) -> ConnectParams {
        ConnectParams {
            responder_resources: 0,
            initiator_depth: 0,
            flow_control: 1,
            retry_count: self.cfg.retry_count,
            rnr_retry_count: self.cfg.rnr_retry_count,
            qp_num: 0,
        }
    }

    /// Connects to `peer`, which has no connection and no connect under way: the NI's
    /// `conns_per_peer` connections at once, as the kernel's `kiblnd_launch_tx` does for a
    /// new peer NI (the value taken now, so a peer keeps the count it was connected with).
    pub(super) fn connect_peer(&mut self, peer: Nid) {
        let n = self.live.effective_conns_per_peer();
        for _ in 0..n {
            self.start_connect(peer);
        }
    }

    /// Starts one active connect to `peer` (address resolution first); counted in the
    /// peer's attempts until it is established or fails.
    pub(super) fn start_connect(&mut self, peer: Nid) {
        let Some(dst) = self.cfg.peer_addr(peer) else {
            self.fail_peer_queue(peer, TxFailure::ConnectUnreachable);
            return;
        };
        let p = self.peers.entry(peer).or_default();
        let version = p.version.unwrap_or(self.cfg.version);
        let params = p.params.unwrap_or(ConnParams {
            queue_depth: self.cfg.peer_credits,
            ..ConnParams::DEFAULT
        });
        let peer_stamp = p.stamp.map_or(0, |(s, _)| s);
        p.connecting += 1;
        p.retry_at = None;
        let started = CmId::new(&self.ch).and_then(|id| {
            id.resolve_addr(
                SocketAddrV4::new(self.ip, 0),
                dst,
                i32::try_from(RESOLVE_TIMEOUT.as_millis()).unwrap_or(5000),
            )?;
            Ok(id)
        });
        match started {
            Ok(id) => {
                self.attempts.insert(
                    id.key(),
                    Attempt {
                        id,
                        peer,
                        version,
                        params,
                        peer_stamp,
                        started: Instant::now(),
                        handshake_timeout: self.cfg.connreq_timeout(),
                    },
                );
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "o2iblnd: connect failed");
                self.connect_failed(peer, TxFailure::ConnectLocal);
            }
        }
    }

    /// One active connect to `peer` failed with `f`: see [`Self::attempts_failed`].
    pub(super) fn connect_failed(&mut self, peer: Nid, f: TxFailure) {
        self.end_attempt(peer);
        self.attempts_failed(peer, f);
    }

    /// One active connect to `peer` ended (established, failed or replaced).
    pub(super) fn end_attempt(&mut self, peer: Nid) {
        if let Some(p) = self.peers.get_mut(&peer) {
            p.connecting = p.connecting.saturating_sub(1);
        }
    }

    /// An active connect to `peer` failed with `f` and ended: as the kernel's
    /// `kiblnd_peer_connect_failed`, nothing more while another connect is under way;
    /// once none is, the sends waiting for a connection fail with `f` and the peer is
    /// reported down (unless a connection came up: then nothing waits).
    pub(super) fn attempts_failed(&mut self, peer: Nid, f: TxFailure) {
        if let Some(p) = self.peers.get_mut(&peer) {
            if p.connecting > 0 {
                return;
            }
            p.reconnects = 0;
        }
        self.fail_peer_queue(peer, f);
        self.report_down(peer, f.status(), format!("connect failed: {f:?}"));
    }

    pub(super) fn fail_peer_queue(&mut self, peer: Nid, f: TxFailure) {
        self.ex.fail_waiting(peer, f);
    }

    pub(super) fn report_down(&mut self, peer: Nid, status: HealthStatus, reason: String) {
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        if p.down_reported || !p.conns.is_empty() || p.connecting > 0 || self.ex.has_waiting(peer) {
            return;
        }
        p.down_reported = true;
        // Told after the completions of the peer's txs, which wait in the action queue.
        self.downs
            .push(PeerDown::new(self.me.nid, peer, status, reason));
    }

    pub(super) fn new_conn_id(&mut self) -> u32 {
        loop {
            let id = self.next_conn & 0x00ff_ffff;
            self.next_conn = self.next_conn.wrapping_add(1);
            if id != 0 && !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    /// Creates the QP on `id`, posts every receive buffer, and files the connection.
    pub(super) fn build_conn(
        &mut self,
        id: CmId,
        peer: Nid,
        state: ConnState,
        version: Version,
        params: ConnParams,
        peer_stamp: u64,
    ) -> Result<u32, (Option<CmId>, String)> {
        let Some(block) = self.rx_free.pop() else {
            return Err((Some(id), "no receive buffers left (max_conns)".into()));
        };
        let rx_per_conn = self.cfg.rx_per_conn();
        let caps = QpCaps {
            max_send_wr: self.max_send_wr,
            max_recv_wr: u32::try_from(rx_per_conn).unwrap_or(u32::MAX),
            max_send_sge: 2,
        };
        if let Err(e) = id.create_qp(&self.pd, &self.cq, caps) {
            self.rx_free.push(block);
            return Err((Some(id), format!("rdma_create_qp: {e}")));
        }
        let c = self.new_conn_id();
        let now = Instant::now();
        let conn = Conn {
            peer,
            state,
            active: state == ConnState::Connecting,
            version,
            offered: params,
            peer_stamp,
            max_frags: params.max_frags,
            queue_depth: params.queue_depth,
            rx_block: block,
            parked_rx: Vec::new(),
            started: now,
            handshake_timeout: self.cfg.connreq_timeout(),
            addr: None,
            id,
        };
        self.by_cm.insert(conn.id.key(), c);
        self.conns.insert(c, conn);
        for i in 0..rx_per_conn {
            if !self.repost_rx(c, block * rx_per_conn + i) {
                self.rx_free.push(block);
                let conn = self.conns.remove(&c);
                if let Some(conn) = &conn {
                    self.by_cm.remove(&conn.id.key());
                }
                return Err((conn.map(|c| c.id), "ibv_post_recv failed".into()));
            }
        }
        self.peers.entry(peer).or_default().conns.push(c);
        Ok(c)
    }

    pub(super) async fn drain_cm(&mut self) {
        loop {
            let ev = match self.ch.next_event() {
                Ok(Some(ev)) => ev,
                Ok(None) => return,
                Err(e) => {
                    tracing::error!(error = %e, "o2iblnd: rdma_get_cm_event failed");
                    return;
                }
            };
            self.on_cm_event(ev).await;
            self.run_actions().await;
        }
    }

    pub(super) async fn on_cm_event(&mut self, ev: CmEvent) {
        tracing::debug!(kind = ?ev.kind, status = ev.status, "o2iblnd: CM event");
        if ev.kind == CmEventKind::DeviceRemoval {
            tracing::error!(nid = %self.me.nid, "o2iblnd: RDMA device removed");
            self.fatal = true;
            let all: Vec<u32> = self.conns.keys().copied().collect();
            for c in all {
                self.close_conn(c, CloseWhy::Device);
            }
            let peers: Vec<Nid> = self.attempts.values().map(|a| a.peer).collect();
            self.attempts.clear();
            for p in peers {
                self.connect_failed(p, TxFailure::DeviceRemoved);
            }
            return;
        }
        if ev.kind == CmEventKind::ConnectRequest && ev.id == self.listener_key {
            if let Some(id) = ev.new_id {
                self.passive(id, &ev.private_data);
            }
            return;
        }
        if let Some(a) = self.attempts.remove(&ev.id) {
            self.on_attempt_event(a, ev);
            return;
        }
        let Some(&c) = self.by_cm.get(&ev.id) else {
            return;
        };
        let accepting = self
            .conns
            .get(&c)
            .is_some_and(|conn| conn.state == ConnState::Accepting);
        if accepting
            && matches!(
                ev.kind,
                CmEventKind::Unreachable
                    | CmEventKind::ConnectError
                    | CmEventKind::Rejected
                    | CmEventKind::Disconnected
            )
        {
            if let Some((peer, addr)) = self.abort_accepting(c) {
                tracing::info!(?addr, %peer, kind = ?ev.kind, status = ev.status, "o2iblnd: incoming connection failed before it was established");
            }
            return;
        }
        match ev.kind {
            CmEventKind::Established => self.on_established(c, &ev.private_data).await,
            CmEventKind::Rejected => self.on_rejected(c, ev.status, &ev.private_data),
            CmEventKind::Unreachable | CmEventKind::ConnectError => {
                let state = self.conns.get(&c).map(|c| c.state);
                if state == Some(ConnState::Established) {
                    self.close_conn(c, CloseWhy::PeerGone);
                } else {
                    self.abort_connecting(c, Some(TxFailure::ConnectUnreachable));
                }
            }
            CmEventKind::Disconnected => self.close_conn(c, CloseWhy::PeerGone),
            _ => {}
        }
    }

    pub(super) fn on_attempt_event(&mut self, a: Attempt, ev: CmEvent) {
        match ev.kind {
            CmEventKind::AddrResolved => {
                match a
                    .id
                    .resolve_route(i32::try_from(RESOLVE_TIMEOUT.as_millis()).unwrap_or(5000))
                {
                    Ok(()) => {
                        self.attempts.insert(a.id.key(), a);
                    }
                    Err(_) => self.connect_failed(a.peer, TxFailure::ConnectUnreachable),
                }
            }
            CmEventKind::RouteResolved => {
                let req = connreq(&self.me, a.peer, a.peer_stamp, a.version, a.params);
                let bytes = match req.encode() {
                    Ok(b) => b,
                    Err(_) => {
                        self.connect_failed(a.peer, TxFailure::ConnectLocal);
                        return;
                    }
                };
                let peer = a.peer;
                match self.build_conn(
                    a.id,
                    peer,
                    ConnState::Connecting,
                    a.version,
                    a.params,
                    a.peer_stamp,
                ) {
                    Ok(c) => {
                        if let Some(conn) = self.conns.get_mut(&c) {
                            conn.started = a.started;
                            conn.handshake_timeout = a.handshake_timeout;
                        }
                        let params = self.cm_params();
                        let ok = self
                            .conns
                            .get(&c)
                            .map(|conn| conn.id.connect(&params, &bytes));
                        if let Some(Err(e)) = ok {
                            tracing::warn!(%peer, error = %e, "o2iblnd: rdma_connect failed");
                            self.abort_connecting(c, Some(TxFailure::ConnectLocal));
                        }
                    }
                    Err((_id, why)) => {
                        tracing::warn!(%peer, %why, "o2iblnd: cannot build connection");
                        self.connect_failed(peer, TxFailure::ConnectLocal);
                    }
                }
            }
            _ => {
                // ADDR_ERROR, ROUTE_ERROR, UNREACHABLE: EHOSTUNREACH/ETIMEDOUT.
                tracing::info!(peer = %a.peer, kind = ?ev.kind, status = ev.status, "o2iblnd: connect failed");
                self.connect_failed(a.peer, TxFailure::ConnectUnreachable);
            }
        }
    }

    /// Removes an active connection that never came up, ending its attempt; `fail`: it
    /// failed with that ([`Self::attempts_failed`]).
    pub(super) fn abort_connecting(&mut self, c: u32, fail: Option<TxFailure>) {
        let Some(conn) = self.conns.remove(&c) else {
            return;
        };
        self.by_cm.remove(&conn.id.key());
        self.rx_free.push(conn.rx_block);
        let peer = conn.peer;
        drop(conn);
        if let Some(p) = self.peers.get_mut(&peer) {
            p.conns.retain(|x| *x != c);
        }
        self.end_attempt(peer);
        if let Some(f) = fail {
            self.attempts_failed(peer, f);
        }
    }

    pub(super) async fn on_established(&mut self, c: u32, private_data: &[u8]) {
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        let peer = conn.peer;
        match conn.state {
            ConnState::Connecting => {
                match check_connack(private_data, &self.me, peer, conn.version, conn.offered) {
                    Ok(acc) => {
                        conn.peer_stamp = acc.peer_stamp;
                        conn.max_frags = acc.params.max_frags;
                        conn.queue_depth = acc.params.queue_depth;
                    }
                    Err(e) => {
                        tracing::warn!(%peer, error = %e, "o2iblnd: bad CONNACK, closing");
                        let _ = conn.id.disconnect();
                        self.abort_connecting(c, Some(TxFailure::ClosedLocally(TxStage::Queued)));
                        return;
                    }
                }
            }
            ConnState::Accepting => {}
            ConnState::Established => return,
        }
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        let active = conn.state == ConnState::Connecting;
        conn.state = ConnState::Established;
        let (stamp, version, qd, frags) = (
            conn.peer_stamp,
            conn.version,
            conn.queue_depth,
            conn.max_frags,
        );
        let parked = std::mem::take(&mut conn.parked_rx);
        self.stats.conns_established += 1;
        tracing::info!(%peer, conn = c, ?version, qd, "o2iblnd: connection established");
        let p = self.peers.entry(peer).or_default();
        if active {
            p.connecting = p.connecting.saturating_sub(1);
        }
        p.stamp = Some((stamp, version));
        p.version = Some(version);
        p.params = Some(ConnParams {
            queue_depth: qd,
            max_frags: frags,
            ..ConnParams::DEFAULT
        });
        p.races = 0;
        p.reconnects = 0;
        p.retry_at = None;
        p.down_reported = false;
        let concurrent =
            clamp_concurrent_sends(version, self.cfg.concurrent_sends, self.cfg.peer_credits);
        let link = LinkParams {
            peer,
            version,
            peer_stamp: stamp,
            max_frags: frags,
            credits: ConnCredits::new(
                version,
                qd,
                self.cfg.peer_credits,
                self.cfg.peercredits_hiw,
                concurrent,
            ),
        };
        self.ex.add_conn(Instant::now(), c, link);
        for (idx, len) in parked {
            self.on_rx(c, idx, len).await;
        }
        self.ex.flush(Instant::now(), c);
    }

    pub(super) fn on_rejected(&mut self, c: u32, status: i32, private_data: &[u8]) {
        let Some(conn) = self.conns.get(&c) else {
            return;
        };
        if conn.state != ConnState::Connecting {
            self.close_conn(c, CloseWhy::PeerGone);
            return;
        }
        let (peer, version, offered, stamp) =
            (conn.peer, conn.version, conn.offered, conn.peer_stamp);
        let rej = if status == IB_CM_REJ_CONSUMER_DEFINED {
            Rej::decode(private_data).ok()
        } else {
            None
        };
        bump(
            &mut self.stats.rejects_received,
            rej.map_or(0, |r| r.why.to_u8()),
        );
        tracing::info!(%peer, status, why = ?rej.map(|r| r.why), "o2iblnd: connect rejected");
        self.abort_connecting(c, None);
        let action = match status {
            IB_CM_REJ_INVALID_SERVICE_ID => {
                self.attempts_failed(peer, TxFailure::ConnectUnreachable);
                return;
            }
            IB_CM_REJ_STALE_CONN => RejectAction::Reconnect {
                version,
                params: offered,
                peer_stamp: stamp,
            },
            _ => on_reject(rej.as_ref(), version, offered, stamp),
        };
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        match action {
            RejectAction::Reconnect {
                version,
                params,
                peer_stamp,
            } => {
                p.reconnects += 1;
                if p.reconnects > MAX_RECONNECTS
                    || (!self.ex.has_waiting(peer) && p.version == Some(version))
                {
                    self.attempts_failed(peer, TxFailure::ConnectRefused);
                    return;
                }
                p.version = Some(version);
                p.params = Some(params);
                if let Some(r) = rej.filter(|r| r.why == RejWhy::ConnStale) {
                    p.stamp = r.params.map(|rp| (rp.incarnation, version)).or(p.stamp);
                } else if peer_stamp != 0 {
                    p.stamp = Some((peer_stamp, version));
                }
                if self.ex.has_waiting(peer) {
                    self.start_connect(peer);
                }
            }
            RejectAction::Later => {
                p.retry_at = Some(Instant::now() + Duration::from_secs(1));
            }
            _ => self.attempts_failed(peer, TxFailure::ConnectRefused),
        }
    }

    pub(super) fn passive(&mut self, id: CmId, private_data: &[u8]) {
        let addr = id.peer_addr().map(|a| *a.ip());
        let decision = {
            let peers = &self.peers;
            let conns = &self.conns;
            check_connreq(private_data, &self.me, |nid| {
                let p = peers.get(&nid);
                PeerView {
                    connecting: p.is_some_and(|p| {
                        p.connecting > 0
                            || p.conns.iter().any(|c| {
                                conns
                                    .get(c)
                                    .is_some_and(|c| c.state == ConnState::Connecting)
                            })
                    }),
                    races: p.map_or(0, |p| p.races),
                    known: p.and_then(|p| p.stamp),
                }
            })
        };
        match decision {
            PassiveDecision::Reject {
                rej,
                peer,
                peer_stamp,
                reason,
            } => {
                tracing::info!(?addr, ?peer, why = ?rej.why, ?reason, "o2iblnd: refusing connection");
                bump(&mut self.stats.rejects_sent, rej.why.to_u8());
                let _ = id.reject(&rej.encode());
                drop(id);
                if let Some(peer) = peer {
                    if rej.why == RejWhy::ConnRace {
                        self.peers.entry(peer).or_default().races += 1;
                    }
                    if matches!(reason, crate::o2iblnd::connect::RefuseReason::PeerRestarted) {
                        let conns: Vec<u32> = self
                            .peers
                            .get(&peer)
                            .map(|p| p.conns.clone())
                            .unwrap_or_default();
                        for c in conns {
                            self.close_conn(c, CloseWhy::PeerGone);
                        }
                        if let (Some(p), Some(s)) = (self.peers.get_mut(&peer), peer_stamp) {
                            p.stamp = Some((s, rej.version));
                        }
                    }
                }
            }
            PassiveDecision::Accept {
                peer,
                peer_stamp,
                version,
                params,
                connack,
            } => {
                if let Some(ip) = addr {
                    let from_ip = self.handshakes_from(ip);
                    if from_ip >= self.cfg.max_handshakes_per_addr {
                        self.refuse_over_limit(
                            &id,
                            ip,
                            peer,
                            version,
                            HandshakeLimit::Address(from_ip),
                        );
                        return;
                    }
                }
                let all = self.handshakes_from_all();
                if all >= self.cfg.max_handshakes {
                    let ip = addr.unwrap_or(Ipv4Addr::UNSPECIFIED);
                    self.refuse_over_limit(&id, ip, peer, version, HandshakeLimit::All(all));
                    return;
                }
                let bytes = match connack.encode() {
                    Ok(b) => b,
                    Err(_) => return,
                };
                match self.build_conn(id, peer, ConnState::Accepting, version, params, peer_stamp) {
                    Ok(c) => {
                        let cm = self.cm_params();
                        let res = self.conns.get_mut(&c).map(|conn| {
                            conn.addr = addr;
                            conn.id.accept(&cm, &bytes)
                        });
                        if let Some(Err(e)) = res {
                            tracing::warn!(%peer, ?addr, error = %e, "o2iblnd: rdma_accept failed");
                            self.abort_accepting(c);
                        }
                    }
                    Err((id, why)) => {
                        tracing::warn!(%peer, ?addr, %why, "o2iblnd: cannot accept");
                        let rej = self.me.rej(version, RejWhy::NoResources);
                        bump(&mut self.stats.rejects_sent, RejWhy::NoResources.to_u8());
                        if let Some(id) = id {
                            let _ = id.reject(&rej.encode());
                        }
                    }
                }
            }
        }
    }

    /// Incoming connections in handshake now, from any address.
    fn handshakes_from_all(&self) -> usize {
        self.conns
            .values()
            .filter(|c| c.state == ConnState::Accepting)
            .count()
    }

    /// Incoming connections from `ip` in handshake now.
    pub(super) fn handshakes_from(&self, ip: Ipv4Addr) -> usize {
        self.conns
            .values()
            .filter(|c| c.state == ConnState::Accepting && c.addr == Some(ip))
            .count()
    }

    /// Rejects a CONNREQ from `ip` over the bound `limit` says, with
    /// `IBLND_REJECT_NO_RESOURCES`: counted, and logged for the first refusal of the
    /// address and every 100th after it.
    fn refuse_over_limit(
        &mut self,
        id: &CmId,
        ip: Ipv4Addr,
        peer: Nid,
        version: Version,
        limit: HandshakeLimit,
    ) {
        let rej = self.me.rej(version, RejWhy::NoResources);
        bump(&mut self.stats.rejects_sent, RejWhy::NoResources.to_u8());
        self.stats.handshake_limit_rejects += 1;
        let refused = self.limit_refused.entry(ip).or_default();
        *refused += 1;
        if *refused % 100 == 1 {
            match limit {
                HandshakeLimit::Address(in_handshake) => tracing::warn!(
                    addr = %ip,
                    %peer,
                    in_handshake,
                    refused = *refused,
                    "o2iblnd: too many connections in handshake from this address, CONNREQ rejected (NO_RESOURCES)"
                ),
                HandshakeLimit::All(in_handshake) => tracing::warn!(
                    addr = %ip,
                    %peer,
                    in_handshake,
                    refused = *refused,
                    "o2iblnd: too many connections in handshake from all addresses, CONNREQ rejected (NO_RESOURCES)"
                ),
            }
        }
        if let Err(e) = id.reject(&rej.encode()) {
            tracing::debug!(addr = %ip, error = %e, "o2iblnd: rdma_reject failed");
        }
    }

    /// Tears down an incoming connection that never came up: its QP, CM id and receive
    /// buffers are freed. The NID its CONNREQ named is not told down and its queue is not
    /// failed (any requester can name any NID); sends queued for that NID with no other
    /// connection get one of their own, as when any connection closes. Returns the NID
    /// and the address.
    pub(super) fn abort_accepting(&mut self, c: u32) -> Option<(Nid, Option<Ipv4Addr>)> {
        let conn = self.conns.remove(&c)?;
        self.by_cm.remove(&conn.id.key());
        self.rx_free.push(conn.rx_block);
        let (peer, addr) = (conn.peer, conn.addr);
        // Destroys the QP and the CM id: the device no longer touches the buffers.
        drop(conn);
        let mut reconnect = false;
        if let Some(p) = self.peers.get_mut(&peer) {
            p.conns.retain(|x| *x != c);
            reconnect = p.conns.is_empty() && p.connecting == 0;
        }
        if reconnect && self.ex.has_waiting(peer) && !self.fatal {
            self.connect_peer(peer);
        }
        self.forget_idle_peer(peer);
        if let Some(ip) = addr {
            if self.handshakes_from(ip) == 0 {
                self.limit_refused.remove(&ip);
            }
        }
        Some((peer, addr))
    }

    /// An incoming connection still in handshake after the connect timeout: the requester
    /// never sent its RTU. Torn down, counted and logged with the requester's address.
    pub(super) fn handshake_timed_out(&mut self, c: u32) {
        let started = self.conns.get(&c).map(|conn| conn.started);
        if let Some((peer, addr)) = self.abort_accepting(c) {
            self.stats.handshake_timeouts += 1;
            let waited = started.map(|s| s.elapsed());
            tracing::warn!(
                addr = ?addr,
                %peer,
                conn = c,
                ?waited,
                "o2iblnd: incoming connection never completed its handshake, torn down"
            );
        }
    }

    /// Forgets a peer entry that holds nothing: no connection, no connect, no queued tx,
    /// no known incarnation, no pending retry (what a refused or abandoned CONNREQ leaves).
    fn forget_idle_peer(&mut self, peer: Nid) {
        let idle = self.peers.get(&peer).is_some_and(|p| {
            p.conns.is_empty()
                && p.connecting == 0
                && p.stamp.is_none()
                && p.retry_at.is_none()
                && p.races == 0
        }) && !self.ex.has_waiting(peer);
        if idle {
            self.peers.remove(&peer);
        }
    }

    /// Closes connection `c`: its txs fail (the exchanges), then [`Self::finish_close`].
    pub(super) fn close_conn(&mut self, c: u32, why: CloseWhy) {
        self.ex.close_conn(Instant::now(), c, why);
        self.finish_close(c, why);
    }

    /// Destroys the QP of connection `c`, whose txs already failed, and reconnects or
    /// reports its peer down.
    pub(super) fn finish_close(&mut self, c: u32, why: CloseWhy) {
        let Some(conn) = self.conns.remove(&c) else {
            return;
        };
        self.by_cm.remove(&conn.id.key());
        let _ = conn.id.disconnect();
        let peer = conn.peer;
        let was_connecting = conn.state == ConnState::Connecting;
        self.rx_free.push(conn.rx_block);
        // Destroys the QP: the device no longer touches the buffers of this connection.
        drop(conn);
        self.stats.conns_closed += 1;
        tracing::info!(%peer, conn = c, ?why, "o2iblnd: connection closed");
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        p.conns.retain(|x| *x != c);
        if was_connecting {
            p.connecting = p.connecting.saturating_sub(1);
        }
        if why == CloseWhy::Stop {
            return;
        }
        // As the kernel's: the peer's other connections carry on, and none is opened in
        // its place; only sends that wait with no connection and no connect left start a
        // new set (`conns_per_peer` of them).
        if p.conns.is_empty() && self.ex.has_waiting(peer) && p.connecting == 0 && !self.fatal {
            self.connect_peer(peer);
        } else {
            self.report_down(
                peer,
                why.down_status(),
                format!("connection closed: {why:?}"),
            );
        }
    }
}

/// Which bound on incoming connections in handshake a CONNREQ went over, and how many
/// there were.
#[derive(Debug, Clone, Copy)]
enum HandshakeLimit {
    /// `max_handshakes_per_addr`, from the requester's address.
    Address(usize),
    /// `max_handshakes`, from all addresses.
    All(usize),
}
