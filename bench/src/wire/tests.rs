use super::*;
use std::time::Duration;

fn sample(rate: f64, bulk: f64, p99: f64) -> Sample {
    Sample {
        rate_per_s: rate,
        bulk_gb_per_s: bulk,
        p50_us: p99 / 2.0,
        p99_us: p99,
        ..Sample::default()
    }
}

#[test]
fn ratios_are_taken_within_each_repeat() {
    let router = [sample(10.0, 1.0, 40.0), sample(30.0, 2.0, 20.0)];
    let relay = [sample(20.0, 2.0, 20.0), sample(30.0, 4.0, 20.0)];
    let r = ratio("router/relay".into(), &router, &relay);
    assert_eq!((r.rate.min, r.rate.max), (0.5, 1.0));
    assert_eq!(r.rate.median, 0.75);
    assert_eq!(r.bulk.median, 0.5);
    assert_eq!((r.p99.min, r.p99.max), (1.0, 2.0));
}

#[test]
fn medians_skip_missing_cpu_times() {
    let mut a = sample(1.0, 1.0, 1.0);
    a.cpu_us_per_put_ack = Some(3.0);
    a.cpu_kernel_us_per_put_ack = Some(1.0);
    let b = sample(3.0, 1.0, 1.0);
    let m = median_sample(&[a, b]);
    assert_eq!(m.rate_per_s, 2.0);
    assert_eq!(m.cpu_us_per_put_ack, Some(3.0));
    assert_eq!(m.cpu_kernel_us_per_put_ack, Some(1.0));
    assert_eq!(median_sample(&[b]).cpu_us_per_put_ack, None);
    assert_eq!(median_sample(&[b]).cpu_kernel_us_per_put_ack, None);
}

#[test]
fn the_router_config_names_both_nis_and_routes() {
    let near = "127.0.58.2@tcp".parse().unwrap();
    let far = "127.0.59.2@tcp1".parse().unwrap();
    let y = router_yaml(near, far, 25800, None);
    assert!(y.contains("nid: 127.0.58.2@tcp\n"));
    assert!(y.contains("nid: 127.0.59.2@tcp1\n"));
    assert!(y.contains("enable: 1"));
    assert!(y.contains("acceptor_port: 25800"));
    let config = lnet::config::parse(&y).unwrap();
    assert!(config
        .nets
        .iter()
        .flat_map(|n| &n.local_nis)
        .all(|ni| ni.tunables.is_none()));
    // With the router's peer_credits, both nets carry them.
    let tuned = lnet::config::parse(&router_yaml(near, far, 25800, Some(64))).unwrap();
    let credits: Vec<_> = tuned
        .nets
        .iter()
        .flat_map(|n| &n.local_nis)
        .map(|ni| ni.tunables.as_ref().map(|t| t.peer_credits))
        .collect();
    assert_eq!(credits, [Some(64), Some(64)]);
}

#[test]
fn each_router_has_addresses_of_its_own_and_its_source_and_sink_on_two_cpts() {
    let mut octets = Vec::new();
    for index in 0..8 {
        let a = router_octet(index).unwrap();
        let src = pid_at(a, 1, "tcp").unwrap().nid;
        let sink = pid_at(a + 1, 4, "tcp1").unwrap().nid;
        assert_ne!(src.cpt(2), sink.cpt(2), "router {index}");
        octets.extend([a, a + 1]);
    }
    let mut distinct = octets.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), octets.len());
    // Not the direct path's (56), the relay's (57) or the hostile clients' (60).
    assert!(octets.iter().all(|&o| o > 57 && o != 60));
    assert!(router_octet(49).is_ok());
    assert!(router_octet(50).is_err(), "no third byte 256");
}

#[test]
fn cpu_times_come_from_fields_14_and_15() {
    let stat = "4242 (lnet router) S 1 4242 4242 0 -1 4194560 100 0 0 0 700 35 0 0 20 0 9 0";
    assert_eq!(child::stat_cpu_ticks(stat), Some((700, 35)));
    assert_eq!(child::stat_cpu_ticks("garbage"), None);
    let own = std::fs::read_to_string("/proc/self/stat").unwrap();
    assert!(child::stat_cpu_ticks(&own).is_some());
}

#[test]
fn the_machine_s_busy_time_is_everything_but_idle_and_iowait() {
    let stat = "cpu  100 5 40 800 20 3 2 10 7 0\ncpu0 50 2 20 400 10 1 1 5 3 0\n\
                cpu1 50 3 20 400 10 2 1 5 4 0\nintr 12345\nctxt 999\n";
    let t = usage::parse_proc_stat(stat).unwrap();
    assert_eq!((t.busy, t.total, t.cpus), (160, 980, 2));
    let later = usage::MachineTicks {
        busy: 160 + 150,
        total: 980 + 200,
        cpus: 2,
    };
    assert_eq!(later.busy_cpus_since(t), Some(1.5));
    assert_eq!(t.busy_cpus_since(t), None);
    assert_eq!(usage::parse_proc_stat("intr 1 2 3\n"), None);
    assert_eq!(usage::parse_proc_stat("cpu 1 2 3\n"), None);
    let own = usage::machine_ticks().unwrap();
    assert!(own.cpus >= 1 && own.total >= own.busy);
}

#[test]
fn the_end_nodes_threads_are_found_by_their_ids() {
    let me = usage::current_tid().unwrap();
    assert!(usage::thread_cpu(me).is_ok());
    let (src, dst) = (
        pid_at(56, 21, "tcp").unwrap(),
        pid_at(56, 22, "tcp").unwrap(),
    );
    let sink = Sink::start(dst, src, 25874).unwrap();
    let tid = sink.tid();
    assert_ne!(tid, me);
    assert!(usage::thread_cpu(tid).is_ok());
    sink.stop().unwrap();
}

fn short() -> Timing {
    Timing {
        warmup: Duration::from_millis(50),
        measure: Duration::from_millis(200),
        drain: Duration::from_secs(10),
    }
}

/// Every PUT the source sent was received by the sink and ACKed back: the phase ends
/// with nothing in flight, and the sink saw exactly the PUTs the source counted.
fn check_path(source: &mut Source, sink: Sink) {
    let rate = source.run(Load::Rate { window: 32 }, short()).unwrap();
    assert!(rate.counted > 0 && rate.total >= rate.counted, "{rate:?}");
    let bulk = source.run(Load::Bulk { window: 4 }, short()).unwrap();
    assert!(bulk.total > 0, "{bulk:?}");
    let lat = source.run(Load::Latency, short()).unwrap();
    assert!(!lat.rtts_ns.is_empty());
    assert!(lat.rtts_ns.windows(2).all(|w| w[0] <= w[1]));
    let totals = sink.stop().unwrap();
    assert_eq!(totals.puts, rate.total + bulk.total + lat.total);
    assert_eq!(totals.unexpected, 0);
}

#[test]
fn a_source_and_a_sink_complete_put_acks_directly() {
    let (src, dst) = (
        pid_at(56, 11, "tcp").unwrap(),
        pid_at(56, 12, "tcp").unwrap(),
    );
    let sink = Sink::start(dst, src, 25870).unwrap();
    let mut source =
        Source::connect(src, 25870, dst, addr(56, 12, 25870), dst, 8, 64 << 10).unwrap();
    check_path(&mut source, sink);
}

#[test]
fn the_relay_carries_the_handshake_and_frames_both_ways() {
    let (src, dst) = (
        pid_at(57, 11, "tcp").unwrap(),
        pid_at(57, 12, "tcp").unwrap(),
    );
    let sink = Sink::start(dst, src, 25880).unwrap();
    for mode in [RelayMode::Splice, RelayMode::Copy] {
        let listen = if mode == RelayMode::Splice {
            25881
        } else {
            25882
        };
        let args = relay::RelayArgs {
            pairs: vec![format!("{}={}", addr(57, 12, listen), addr(57, 12, 25880))],
            mode,
            lifetime: 20,
        };
        std::thread::spawn(move || relay::run(args));
        let mut source = Source::connect(
            src,
            listen + 10,
            dst,
            addr(57, 12, listen),
            dst,
            8,
            64 << 10,
        )
        .unwrap();
        let rate = source.run(Load::Rate { window: 32 }, short()).unwrap();
        assert!(rate.counted > 0, "{mode:?}: {rate:?}");
        let bulk = source.run(Load::Bulk { window: 4 }, short()).unwrap();
        assert!(bulk.counted > 0, "{mode:?}: {bulk:?}");
    }
    assert_eq!(sink.stop().unwrap().unexpected, 0);
}

/// The command line as `lnet-bench wire` parses it.
#[derive(clap::Parser)]
struct WireCli {
    #[command(flatten)]
    args: WireArgs,
}

#[test]
fn routers_run_n_cpts_for_n_cpus_unless_told_how_many() {
    use clap::Parser;
    let args = |line: &[&str]| WireCli::parse_from([&["wire"], line].concat()).args;
    assert_eq!(args(&[]).router_cpts, None);
    assert_eq!(args(&["--router-cpts", "1"]).router_cpts, Some(1));
    let refused = run(args(&["--router-cpts", "0"]));
    assert!(matches!(refused, Err(BenchError::Usage(_))), "{refused:?}");
}

#[test]
fn a_stat_line_gives_its_scheduling_policy() {
    // A thread's stat as Linux writes it (command name with a space and a parenthesis);
    // field 41 is 3 (SCHED_BATCH).
    let stat = "4242 (tokio (rt) 1) S 1 4242 4242 0 -1 4194368 120 0 0 0 7 3 0 0 20 0 9 0 \
                1000 1000000 500 18446744073709551615 1 1 0 0 0 0 0 4096 17664 0 0 0 -1 1 \
                0 3 0 0 0 0 0";
    assert_eq!(child::stat_policy(stat), Some(3));
    assert_eq!(child::policy_name(3), "batch");
    assert_eq!(child::stat_policy("4242 (x) S 1"), None);
}

#[test]
fn the_threads_of_a_process_are_counted_by_policy() {
    let (set, done) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let (set_tx, set_rx) = set;
    let (done_tx, done_rx) = done;
    let batch = std::thread::spawn(move || {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sets this thread's own policy from a valid sched_param.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
        let _ = set_tx.send(rc);
        let _ = done_rx.recv_timeout(Duration::from_secs(10));
    });
    assert_eq!(set_rx.recv_timeout(Duration::from_secs(10)), Ok(0));
    let counts = child::thread_policies(std::process::id()).unwrap();
    let _ = done_tx.send(());
    batch.join().unwrap();
    assert!(counts.get("batch").is_some_and(|n| *n >= 1), "{counts:?}");
    assert!(counts.get("other").is_some_and(|n| *n >= 1), "{counts:?}");
}
