use super::*;

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
    let b = sample(3.0, 1.0, 1.0);
    let m = median_sample(&[a, b]);
    assert_eq!(m.rate_per_s, 2.0);
    assert_eq!(m.cpu_us_per_put_ack, Some(3.0));
    assert_eq!(median_sample(&[b]).cpu_us_per_put_ack, None);
}

#[test]
fn the_router_config_names_both_nis_and_routes() {
    let y = router_yaml(
        "127.0.58.2@tcp".parse().unwrap(),
        "127.0.59.2@tcp1".parse().unwrap(),
        25800,
    );
    assert!(y.contains("nid: 127.0.58.2@tcp\n"));
    assert!(y.contains("nid: 127.0.59.2@tcp1\n"));
    assert!(y.contains("enable: 1"));
    assert!(y.contains("acceptor_port: 25800"));
}

#[test]
fn cpu_times_come_from_fields_14_and_15() {
    let stat = "4242 (lnet router) S 1 4242 4242 0 -1 4194560 100 0 0 0 700 35 0 0 20 0 9 0";
    assert_eq!(child::stat_cpu_ticks(stat), Some(735));
    assert_eq!(child::stat_cpu_ticks("garbage"), None);
    let own = std::fs::read_to_string("/proc/self/stat").unwrap();
    assert!(child::stat_cpu_ticks(&own).is_some());
}
