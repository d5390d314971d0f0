use super::*;

const ACTIVE: NetCheckMode = NetCheckMode::Active {
    probe_interval: Millis(500),
    down_after: Millis(1500),
};

/// The router ticks every 100 ms.
const TICK: u64 = 100;

/// What a stretch of ticks did.
#[derive(Debug, Default)]
struct Run {
    /// When a probe went out, and to which peer NI.
    probes: Vec<(u64, usize)>,
    /// When the net went DOWN.
    downs: Vec<u64>,
    /// When the net came UP.
    ups: Vec<u64>,
}

/// Ticks `n` from `from` to `to` (ms) with `peers` peer NIs; a probe to a peer NI for which
/// `answers` holds is answered 50 ms later.
fn run(
    n: &mut NetLiveness,
    from: u64,
    to: u64,
    peers: usize,
    answers: impl Fn(usize) -> bool,
) -> Run {
    let mut out = Run::default();
    for t in (from..=to).step_by(TICK as usize) {
        let tick = n.tick(Millis(t), ACTIVE, peers);
        if tick.down {
            out.downs.push(t);
        }
        if let Some(peer) = tick.probe {
            assert!(peer < peers, "{peer} of {peers}");
            out.probes.push((t, peer));
            if answers(peer) && n.heard(Millis(t + 50), Heard::Other, ACTIVE).is_some() {
                out.ups.push(t + 50);
            }
        }
    }
    out
}

#[test]
fn passive_rule_needs_pings_and_takes_110_s() {
    let mode = NetCheckMode::KERNEL;
    let mut n = NetLiveness::new(Millis(0));
    assert_eq!(n.heard(Millis(50_000), Heard::Other, mode), None);
    assert_eq!(n.tick(Millis(109_999), mode, 1), Tick::default());
    let t = n.tick(Millis(110_000), mode, 1);
    assert!(t.down && t.probe.is_none());
    assert!(n.is_down());
    assert_eq!(n.heard(Millis(111_000), Heard::Other, mode), None);
    assert_eq!(
        n.heard(Millis(112_000), Heard::Ping, mode),
        Some(NetChange::Up)
    );
}

#[test]
fn active_rule_probes_a_silent_net_then_marks_it_down_and_up() {
    let mut n = NetLiveness::new(Millis(0));
    // Traffic keeps it quiet: no probe.
    for t in (100..=1000).step_by(100) {
        n.heard(Millis(t), Heard::Other, ACTIVE);
        assert_eq!(n.tick(Millis(t), ACTIVE, 1), Tick::default());
    }
    // Silent since 1000: probes every 500 ms (each lost), DOWN at 2500.
    assert_eq!(n.tick(Millis(1400), ACTIVE, 1), Tick::default());
    assert_eq!(n.tick(Millis(1500), ACTIVE, 1).probe, Some(0));
    assert_eq!(n.tick(Millis(1700), ACTIVE, 1).probe, None);
    assert_eq!(n.tick(Millis(2000), ACTIVE, 1).probe, Some(0));
    let t = n.tick(Millis(2500), ACTIVE, 1);
    assert!(t.down && t.probe.is_some());
    // Still down, still probing, no second DOWN.
    let t = n.tick(Millis(3000), ACTIVE, 1);
    assert!(!t.down && t.probe.is_some());
    assert_eq!(
        n.heard(Millis(3100), Heard::Other, ACTIVE),
        Some(NetChange::Up)
    );
    assert!(!n.is_down());
}

#[test]
fn a_net_whose_first_peer_appears_late_is_not_down_before_its_first_probe_could_be_answered() {
    let mut n = NetLiveness::new(Millis(0));
    // A minute without any peer NI on the net: nothing to probe, nothing changes.
    let quiet = run(&mut n, 100, 60_000, 0, |_| true);
    assert!(
        quiet.probes.is_empty() && quiet.downs.is_empty(),
        "{quiet:?}"
    );
    assert!(!n.is_down());
    // The first peer NI appears; it answers its probe 50 ms later: the net never went
    // DOWN (it used to, one tick after the probe).
    let first = run(&mut n, 60_100, 60_300, 1, |_| true);
    assert_eq!(first.probes, vec![(60_100, 0)]);
    assert!(first.downs.is_empty() && first.ups.is_empty(), "{first:?}");
    // A first probe nobody answers: DOWN once it has waited D - P = 1 s, as a net that
    // carried traffic is DOWN 1 s after its first probe.
    let mut n = NetLiveness::new(Millis(0));
    run(&mut n, 100, 60_000, 0, |_| true);
    let dead = run(&mut n, 60_100, 62_000, 1, |_| false);
    assert_eq!(dead.probes.first(), Some(&(60_100, 0)));
    assert_eq!(dead.downs, vec![61_100]);
}

#[test]
fn a_peer_ni_leaving_the_net_stops_its_probes_without_a_down() {
    let mut n = NetLiveness::new(Millis(0));
    let r = run(&mut n, 100, 1_000, 1, |_| false);
    assert_eq!(r.probes, vec![(500, 0), (1_000, 0)]);
    // The only peer NI is gone before the net could be DOWN: no evidence, no change.
    let r = run(&mut n, 1_100, 30_000, 0, |_| false);
    assert!(r.probes.is_empty() && r.downs.is_empty(), "{r:?}");
    // It comes back: its silence counts from its first probe again.
    let r = run(&mut n, 30_100, 32_000, 1, |_| false);
    assert_eq!(r.probes.first(), Some(&(30_100, 0)));
    assert_eq!(r.downs, vec![31_100]);
}

#[test]
fn a_quiet_net_that_answers_is_probed_ever_less_often_down_to_one_probe_per_8_s() {
    let mut n = NetLiveness::new(Millis(0));
    let r = run(&mut n, 100, 3_600_000, 1, |_| true);
    assert!(r.downs.is_empty(), "{r:?}");
    let gaps: Vec<u64> = r.probes.windows(2).map(|w| w[1].0 - w[0].0).collect();
    // The interval counts from the answer (50 ms after the probe), on 100 ms ticks.
    assert_eq!(&gaps[..4], &[1_100, 2_100, 4_100, 8_100], "{gaps:?}");
    assert!(gaps[4..].iter().all(|g| *g == 8_100), "{gaps:?}");
    // An hour costs 447 probes, not the 6,000 of a probe every 600 ms.
    assert_eq!(r.probes.len(), 447);
    assert_eq!(n.probe_interval(ACTIVE), Millis(8_000));
}

#[test]
fn probes_are_per_net_so_a_thousand_peer_nis_cost_what_one_does() {
    let mut one = NetLiveness::new(Millis(0));
    let mut many = NetLiveness::new(Millis(0));
    let r1 = run(&mut one, 100, 600_000, 1, |_| true);
    let r1000 = run(&mut many, 100, 600_000, 1000, |_| true);
    assert_eq!(r1.probes.len(), r1000.probes.len());
    // A dead net: one probe in flight at a time, one every P, however many peer NIs.
    let mut one = NetLiveness::new(Millis(0));
    let mut many = NetLiveness::new(Millis(0));
    let r1 = run(&mut one, 100, 60_000, 1, |_| false);
    let r1000 = run(&mut many, 100, 60_000, 1000, |_| false);
    assert_eq!(r1.probes.len(), 120);
    assert_eq!(r1000.probes.len(), 120);
    let gaps_ok = r1000.probes.windows(2).all(|w| w[1].0 - w[0].0 == 500);
    assert!(gaps_ok, "{:?}", r1000.probes);
    // Each lost probe moves on to the next peer NI.
    let peers: Vec<usize> = r1000.probes.iter().map(|p| p.1).take(4).collect();
    assert_eq!(peers, vec![0, 1, 2, 3]);
}

#[test]
fn a_net_that_carries_traffic_is_never_probed() {
    let mut n = NetLiveness::new(Millis(0));
    for t in (100..=600_000).step_by(TICK as usize) {
        if t % 400 == 0 {
            assert_eq!(n.heard(Millis(t), Heard::Other, ACTIVE), None);
        }
        assert_eq!(n.tick(Millis(t), ACTIVE, 5), Tick::default(), "at {t}");
    }
}

#[test]
fn traffic_brings_the_probe_interval_back_so_a_net_that_falls_silent_is_down_after_1_5_s() {
    let mut n = NetLiveness::new(Millis(0));
    run(&mut n, 100, 60_000, 1, |_| true);
    assert_eq!(n.probe_interval(ACTIVE), Millis(8_000));
    // Traffic, then silence from 70 s: probed at 70.5 s, DOWN at 71.5 s, as before any
    // backing off.
    n.heard(Millis(70_000), Heard::Other, ACTIVE);
    assert_eq!(n.probe_interval(ACTIVE), Millis(500));
    let r = run(&mut n, 70_000, 72_000, 1, |_| false);
    assert_eq!(r.probes.first(), Some(&(70_500, 0)));
    assert_eq!(r.downs, vec![71_500]);
}

#[test]
fn a_quiet_net_that_dies_is_down_within_8_s_and_1_s() {
    let mut n = NetLiveness::new(Millis(0));
    let r = run(&mut n, 100, 60_000, 1, |_| true);
    let last_answer = r.probes.last().map(|p| p.0 + 50).unwrap_or_default();
    let r = run(&mut n, 60_100, 80_000, 1, |_| false);
    let down = r.downs.first().copied().unwrap_or(u64::MAX);
    // 16 P + D - P after the last answer, rounded up to the next tick.
    assert!(down - last_answer <= 9_100, "{last_answer} {r:?}");
    // Back UP with the first answer (probes go on every P while DOWN).
    let up = run(&mut n, 80_100, 81_000, 1, |_| true);
    assert_eq!(up.ups, vec![80_550]);
    assert_eq!(n.probe_interval(ACTIVE), Millis(500));
}

#[test]
fn one_dead_peer_ni_does_not_make_a_net_down_while_another_answers() {
    for dead in [0, 1] {
        let mut n = NetLiveness::new(Millis(0));
        let r = run(&mut n, 100, 600_000, 2, |p| p != dead);
        assert!(r.downs.is_empty(), "dead {dead}: {r:?}");
        // Probes stay on the peer NI that answers.
        let to_dead = r.probes.iter().filter(|p| p.1 == dead).count();
        assert!(to_dead <= 1, "dead {dead}: {r:?}");
    }
    // Among a thousand, the peer NI that answered dies: the next one is probed at once.
    let mut n = NetLiveness::new(Millis(0));
    run(&mut n, 100, 60_000, 1000, |p| p != 1);
    let r = run(&mut n, 60_100, 120_000, 1000, |p| p == 1);
    assert!(r.downs.is_empty(), "{r:?}");
}

#[test]
fn two_dead_peer_nis_in_a_row_make_a_net_down_as_fast_as_one_dead_peer_ni() {
    let mut one = NetLiveness::new(Millis(0));
    let mut two = NetLiveness::new(Millis(0));
    one.heard(Millis(1_000), Heard::Other, ACTIVE);
    two.heard(Millis(1_000), Heard::Other, ACTIVE);
    let r1 = run(&mut one, 1_100, 5_000, 1, |_| false);
    let r2 = run(&mut two, 1_100, 5_000, 2, |_| false);
    assert_eq!(r1.downs, vec![2_500]);
    assert_eq!(r2.downs, vec![2_500]);
    assert_eq!(r2.probes[..2], [(1_500, 0), (2_000, 1)]);
}

#[test]
fn off_mode_brings_a_down_net_back() {
    let mut n = NetLiveness::new(Millis(0));
    assert!(n.tick(Millis(200_000), NetCheckMode::KERNEL, 1).down);
    n.tick(Millis(200_001), NetCheckMode::Off, 1);
    assert!(!n.is_down());
}

/// Ticks every `every` ms from `from` to `to`, each `every - TICK` late (the caller's
/// check ran that late: `unobserved` first, if `missed`); a probe is answered, if
/// `answers`, when the second tick after it is over, as a reply queued behind a busy
/// node is.
fn run_late(
    n: &mut NetLiveness,
    from: u64,
    to: u64,
    every: u64,
    answers: bool,
    missed: bool,
) -> Run {
    let mut out = Run::default();
    let mut answers_due: Vec<(u64, u64)> = Vec::new();
    for t in (from..=to).step_by(every as usize) {
        if missed {
            n.unobserved(Millis(t), Millis(every - TICK));
        }
        let tick = n.tick(Millis(t), ACTIVE, 1);
        if tick.down {
            out.downs.push(t);
        }
        for (_, at) in answers_due.extract_if(.., |(after, _)| *after <= t) {
            n.heard(Millis(at), Heard::Other, ACTIVE);
        }
        if let Some(peer) = tick.probe {
            out.probes.push((t, peer));
            if answers {
                let after = t + 2 * every;
                answers_due.push((after, after + 10));
            }
        }
    }
    out
}

#[test]
fn a_check_that_runs_late_does_not_count_the_time_it_missed_as_silence() {
    // Checks 700 ms apart, each answer counted two checks later: the time counted in
    // full, every probe looks lost and the quiet net that answers goes DOWN.
    let mut n = NetLiveness::new(Millis(0));
    let r = run_late(&mut n, 700, 30_100, 700, true, false);
    assert!(!r.downs.is_empty(), "{r:?}");
    // The time the checks missed not counted: never DOWN.
    let mut n = NetLiveness::new(Millis(0));
    let r = run_late(&mut n, 700, 30_100, 700, true, true);
    assert!(r.downs.is_empty(), "{r:?}");
    assert!(!r.probes.is_empty());
    // A net that answers nothing still goes DOWN, within 15 s of checks this late.
    let mut n = NetLiveness::new(Millis(0));
    let r = run_late(&mut n, 700, 30_100, 700, false, true);
    assert!(r.downs.first().is_some_and(|t| *t <= 15_000), "{r:?}");
}

#[test]
fn time_not_observed_never_moves_a_net_past_now() {
    let mut n = NetLiveness::new(Millis(0));
    n.unobserved(Millis(200), Millis(10_000));
    assert_eq!(n.last_heard(), Millis(200));
    // Heard after `now` (a later clock read of another thread): kept.
    n.heard(Millis(900), Heard::Other, ACTIVE);
    n.unobserved(Millis(800), Millis(500));
    assert_eq!(n.last_heard(), Millis(900));
}
