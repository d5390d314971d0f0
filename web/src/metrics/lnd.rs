//! What the LND of each local NI counts of how its connections end ([`Node::lnd_counters`]):
//! socklnd's closes by reason and its rounds of writes; o2iblnd's connections, rejects by
//! why and the handshakes it cut off. Families of an LND no NI runs are left out.
//! `docs/metrics.md` lists each series.
//!
//! [`Node::lnd_counters`]: actors::Node::lnd_counters

use actors::lnd_counters::{O2iblndCounters, SocklndCounters};
use actors::{LndCounters, NiLndCounters};

use super::exposition::{Exposition, Family};
use crate::error::ApiError;
use crate::state::AppState;

/// Writes the socklnd series of `nis`.
fn write_socklnd(x: &mut Exposition, nis: &[(String, &SocklndCounters)]) {
    let mut closed = Family::counter(
        "lnet_router_socklnd_conns_closed_total",
        "Connections and connection attempts of a socklnd NI that ended, by reason (handshake_timeout: a passive handshake not done in time; handshake_limit: over max_handshakes_per_addr from one address; bad_hello, bad_lnet_header, ...).",
    );
    let mut writes = Family::counter(
        "lnet_router_socklnd_writes_total",
        "Rounds of writes on a socklnd NI's connections, by who wrote them: the reader that forwarded the frames, or the connection's writer task.",
    );
    let mut cut_short = Family::counter(
        "lnet_router_socklnd_reader_writes_cut_short_total",
        "Rounds a socklnd reader wrote that the socket did not take whole (the rest went to the writer task).",
    );
    let mut more = Family::counter(
        "lnet_router_socklnd_reader_writes_more_total",
        "Rounds a socklnd reader wrote as the start of more (MSG_MORE), while a frame it read waited for a credit or a buffer.",
    );
    let mut staged = Family::counter(
        "lnet_router_socklnd_reader_rounds_staged_total",
        "Rounds a socklnd reader staged while a frame it read waited for a credit or a buffer: the frames' sends completed, their bytes written with the next write.",
    );
    for (nid, c) in nis {
        for (reason, n) in &c.closes {
            closed.add(vec![("nid", nid.clone()), ("reason", (*reason).into())], *n);
        }
        let w = &c.writes;
        for (by, n) in [("reader", w.by_reader), ("writer_task", w.by_writer_task)] {
            writes.add(vec![("nid", nid.clone()), ("by", by.into())], n);
        }
        cut_short.add(vec![("nid", nid.clone())], w.cut_short);
        more.add(vec![("nid", nid.clone())], w.more);
        staged.add(vec![("nid", nid.clone())], w.staged);
    }
    x.family(closed);
    x.family(writes);
    x.family(cut_short);
    x.family(more);
    x.family(staged);
}

/// Writes the o2iblnd series of `nis`.
fn write_o2iblnd(x: &mut Exposition, nis: &[(String, &O2iblndCounters)]) {
    type Field = fn(&O2iblndCounters) -> u64;
    let plain: [(&str, &str, bool, Field); 11] = [
        (
            "lnet_router_o2iblnd_conns_established_total",
            "Connections an o2iblnd NI established (both directions).",
            true,
            |c| c.conns_established,
        ),
        (
            "lnet_router_o2iblnd_conns_closed_total",
            "Connections of an o2iblnd NI that closed.",
            true,
            |c| c.conns_closed,
        ),
        (
            "lnet_router_o2iblnd_handshake_timeouts_total",
            "Incoming connections an o2iblnd NI tore down because the requester did not complete the handshake within the connect timeout.",
            true,
            |c| c.handshake_timeouts,
        ),
        (
            "lnet_router_o2iblnd_handshake_limit_rejects_total",
            "Connection requests an o2iblnd NI rejected (no_resources) because their address already had max_handshakes_per_addr connections in handshake.",
            true,
            |c| c.handshake_limit_rejects,
        ),
        (
            "lnet_router_o2iblnd_wc_errors_total",
            "Receive or send completions that failed on a live connection of an o2iblnd NI.",
            true,
            |c| c.wc_errors,
        ),
        (
            "lnet_router_o2iblnd_puts_lent_total",
            "PUTs an o2iblnd NI received and handed up in the registered buffer the peer's RDMA wrote them to, without a copy.",
            true,
            |c| c.puts_lent,
        ),
        (
            "lnet_router_o2iblnd_puts_copied_total",
            "PUTs an o2iblnd NI received and handed up as a copy, half its sink buffers being lent at the time.",
            true,
            |c| c.puts_copied,
        ),
        (
            "lnet_router_o2iblnd_bulk_sent_in_place_total",
            "Payloads an o2iblnd NI sent by RDMA from the router buffer they were read into, without a copy.",
            true,
            |c| c.bulk_sent_in_place,
        ),
        (
            "lnet_router_o2iblnd_bulk_sent_copied_total",
            "Payloads an o2iblnd NI sent by RDMA after a copy into its own registered buffers.",
            true,
            |c| c.bulk_sent_copied,
        ),
        (
            "lnet_router_o2iblnd_handshakes",
            "Connections of an o2iblnd NI in handshake now, each holding a QP and receive buffers.",
            false,
            |c| c.handshakes,
        ),
        (
            "lnet_router_o2iblnd_conns",
            "Connections of an o2iblnd NI now, in any state (max_conns at most).",
            false,
            |c| c.conns,
        ),
    ];
    for (name, help, counter, field) in plain {
        let mut f = if counter {
            Family::counter(name, help)
        } else {
            Family::gauge(name, help)
        };
        for (nid, c) in nis {
            f.add(vec![("nid", nid.clone())], field(c));
        }
        x.family(f);
    }
    let mut sent = Family::counter(
        "lnet_router_o2iblnd_rejects_sent_total",
        "Connection requests an o2iblnd NI rejected, by why (conn_race, no_resources, fatal, conn_stale, ...).",
    );
    let mut received = Family::counter(
        "lnet_router_o2iblnd_rejects_received_total",
        "Rejects an o2iblnd NI's connects received, by why (as sent; not_o2ib: an IB CM reject without an o2ib reject in it).",
    );
    for (nid, c) in nis {
        for (fam, by_why) in [
            (&mut sent, &c.rejects_sent),
            (&mut received, &c.rejects_received),
        ] {
            for (why, n) in by_why {
                fam.add(vec![("nid", nid.clone()), ("why", (*why).into())], *n);
            }
        }
    }
    x.family(sent);
    x.family(received);
}

/// Writes the LND series of `nis`, each family with the NIs of its LND.
pub(crate) fn write_counters(x: &mut Exposition, nis: &[NiLndCounters]) {
    let mut sock = Vec::new();
    let mut o2ib = Vec::new();
    for ni in nis {
        match &ni.counters {
            LndCounters::Socklnd(c) => sock.push((ni.nid.to_string(), c)),
            LndCounters::O2iblnd(c) => o2ib.push((ni.nid.to_string(), c)),
        }
    }
    write_socklnd(x, &sock);
    write_o2iblnd(x, &o2ib);
}

/// Writes every series of this module.
pub(crate) async fn write(x: &mut Exposition, s: &AppState) -> Result<(), ApiError> {
    let nis = s.shared.node.lnd_counters().await?;
    write_counters(x, &nis);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use actors::lnd_counters::SocklndWrites;

    #[test]
    fn the_lnd_series_are_written_by_ni_reason_and_why() {
        let sock = SocklndCounters {
            closes: [("handshake_limit", 0), ("handshake_timeout", 3)]
                .into_iter()
                .collect(),
            writes: SocklndWrites {
                by_reader: 10,
                by_writer_task: 4,
                cut_short: 1,
                more: 2,
                staged: 6,
            },
        };
        let o2ib = O2iblndCounters {
            conns_established: 5,
            conns_closed: 2,
            rejects_sent: [("conn_race", 1), ("no_resources", 7)]
                .into_iter()
                .collect(),
            rejects_received: [("not_o2ib", 2)].into_iter().collect(),
            handshake_timeouts: 6,
            handshake_limit_rejects: 7,
            handshakes: 1,
            conns: 3,
            wc_errors: 0,
            puts_lent: 8,
            puts_copied: 1,
            bulk_sent_in_place: 5,
            bulk_sent_copied: 2,
        };
        let nis = [
            NiLndCounters {
                nid: "10.0.0.1@tcp".parse().unwrap(),
                counters: LndCounters::Socklnd(sock),
            },
            NiLndCounters {
                nid: "10.1.0.1@o2ib".parse().unwrap(),
                counters: LndCounters::O2iblnd(o2ib),
            },
        ];
        let mut x = Exposition::new(vec![("component", "lnet".into())]);
        write_counters(&mut x, &nis);
        let want = "\
# HELP lnet_router_socklnd_conns_closed_total Connections and connection attempts of a socklnd NI that ended, by reason (handshake_timeout: a passive handshake not done in time; handshake_limit: over max_handshakes_per_addr from one address; bad_hello, bad_lnet_header, ...).
# TYPE lnet_router_socklnd_conns_closed_total counter
lnet_router_socklnd_conns_closed_total{nid=\"10.0.0.1@tcp\",reason=\"handshake_limit\"} 0
lnet_router_socklnd_conns_closed_total{nid=\"10.0.0.1@tcp\",reason=\"handshake_timeout\"} 3
# HELP lnet_router_socklnd_writes_total Rounds of writes on a socklnd NI's connections, by who wrote them: the reader that forwarded the frames, or the connection's writer task.
# TYPE lnet_router_socklnd_writes_total counter
lnet_router_socklnd_writes_total{nid=\"10.0.0.1@tcp\",by=\"reader\"} 10
lnet_router_socklnd_writes_total{nid=\"10.0.0.1@tcp\",by=\"writer_task\"} 4
# HELP lnet_router_socklnd_reader_writes_cut_short_total Rounds a socklnd reader wrote that the socket did not take whole (the rest went to the writer task).
# TYPE lnet_router_socklnd_reader_writes_cut_short_total counter
lnet_router_socklnd_reader_writes_cut_short_total{nid=\"10.0.0.1@tcp\"} 1
# HELP lnet_router_socklnd_reader_writes_more_total Rounds a socklnd reader wrote as the start of more (MSG_MORE), while a frame it read waited for a credit or a buffer.
# TYPE lnet_router_socklnd_reader_writes_more_total counter
lnet_router_socklnd_reader_writes_more_total{nid=\"10.0.0.1@tcp\"} 2
# HELP lnet_router_socklnd_reader_rounds_staged_total Rounds a socklnd reader staged while a frame it read waited for a credit or a buffer: the frames' sends completed, their bytes written with the next write.
# TYPE lnet_router_socklnd_reader_rounds_staged_total counter
lnet_router_socklnd_reader_rounds_staged_total{nid=\"10.0.0.1@tcp\"} 6
# HELP lnet_router_o2iblnd_conns_established_total Connections an o2iblnd NI established (both directions).
# TYPE lnet_router_o2iblnd_conns_established_total counter
lnet_router_o2iblnd_conns_established_total{nid=\"10.1.0.1@o2ib\"} 5
# HELP lnet_router_o2iblnd_conns_closed_total Connections of an o2iblnd NI that closed.
# TYPE lnet_router_o2iblnd_conns_closed_total counter
lnet_router_o2iblnd_conns_closed_total{nid=\"10.1.0.1@o2ib\"} 2
# HELP lnet_router_o2iblnd_handshake_timeouts_total Incoming connections an o2iblnd NI tore down because the requester did not complete the handshake within the connect timeout.
# TYPE lnet_router_o2iblnd_handshake_timeouts_total counter
lnet_router_o2iblnd_handshake_timeouts_total{nid=\"10.1.0.1@o2ib\"} 6
# HELP lnet_router_o2iblnd_handshake_limit_rejects_total Connection requests an o2iblnd NI rejected (no_resources) because their address already had max_handshakes_per_addr connections in handshake.
# TYPE lnet_router_o2iblnd_handshake_limit_rejects_total counter
lnet_router_o2iblnd_handshake_limit_rejects_total{nid=\"10.1.0.1@o2ib\"} 7
# HELP lnet_router_o2iblnd_wc_errors_total Receive or send completions that failed on a live connection of an o2iblnd NI.
# TYPE lnet_router_o2iblnd_wc_errors_total counter
lnet_router_o2iblnd_wc_errors_total{nid=\"10.1.0.1@o2ib\"} 0
# HELP lnet_router_o2iblnd_puts_lent_total PUTs an o2iblnd NI received and handed up in the registered buffer the peer's RDMA wrote them to, without a copy.
# TYPE lnet_router_o2iblnd_puts_lent_total counter
lnet_router_o2iblnd_puts_lent_total{nid=\"10.1.0.1@o2ib\"} 8
# HELP lnet_router_o2iblnd_puts_copied_total PUTs an o2iblnd NI received and handed up as a copy, half its sink buffers being lent at the time.
# TYPE lnet_router_o2iblnd_puts_copied_total counter
lnet_router_o2iblnd_puts_copied_total{nid=\"10.1.0.1@o2ib\"} 1
# HELP lnet_router_o2iblnd_bulk_sent_in_place_total Payloads an o2iblnd NI sent by RDMA from the router buffer they were read into, without a copy.
# TYPE lnet_router_o2iblnd_bulk_sent_in_place_total counter
lnet_router_o2iblnd_bulk_sent_in_place_total{nid=\"10.1.0.1@o2ib\"} 5
# HELP lnet_router_o2iblnd_bulk_sent_copied_total Payloads an o2iblnd NI sent by RDMA after a copy into its own registered buffers.
# TYPE lnet_router_o2iblnd_bulk_sent_copied_total counter
lnet_router_o2iblnd_bulk_sent_copied_total{nid=\"10.1.0.1@o2ib\"} 2
# HELP lnet_router_o2iblnd_handshakes Connections of an o2iblnd NI in handshake now, each holding a QP and receive buffers.
# TYPE lnet_router_o2iblnd_handshakes gauge
lnet_router_o2iblnd_handshakes{nid=\"10.1.0.1@o2ib\"} 1
# HELP lnet_router_o2iblnd_conns Connections of an o2iblnd NI now, in any state (max_conns at most).
# TYPE lnet_router_o2iblnd_conns gauge
lnet_router_o2iblnd_conns{nid=\"10.1.0.1@o2ib\"} 3
# HELP lnet_router_o2iblnd_rejects_sent_total Connection requests an o2iblnd NI rejected, by why (conn_race, no_resources, fatal, conn_stale, ...).
# TYPE lnet_router_o2iblnd_rejects_sent_total counter
lnet_router_o2iblnd_rejects_sent_total{nid=\"10.1.0.1@o2ib\",why=\"conn_race\"} 1
lnet_router_o2iblnd_rejects_sent_total{nid=\"10.1.0.1@o2ib\",why=\"no_resources\"} 7
# HELP lnet_router_o2iblnd_rejects_received_total Rejects an o2iblnd NI's connects received, by why (as sent; not_o2ib: an IB CM reject without an o2ib reject in it).
# TYPE lnet_router_o2iblnd_rejects_received_total counter
lnet_router_o2iblnd_rejects_received_total{nid=\"10.1.0.1@o2ib\",why=\"not_o2ib\"} 2
";
        assert_eq!(x.finish(), want);
    }

    #[test]
    fn nothing_is_written_without_an_ni_that_counts() {
        let mut x = Exposition::new(Vec::new());
        write_counters(&mut x, &[]);
        assert_eq!(x.finish(), "");
    }
}
