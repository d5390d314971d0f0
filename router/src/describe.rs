//! What `net show` prints of a started NI beyond what the node tracks: its interface and
//! the tunables its LND runs with ([`actors::show::NiDescription`]).

use std::time::Duration;

use actors::show::NiDescription;
use lnd::o2iblnd::credits::{clamp_concurrent_sends, clamp_peercredits_hiw};
use lnd::o2iblnd::{LiveTunables as O2ibLiveTunables, O2ibLndConfig};
use lnd::socklnd::LiveTunables;
use lnet::config::LndTunables;

fn secs(d: Duration) -> u32 {
    u32::try_from(d.as_secs()).unwrap_or(u32::MAX)
}

/// A socklnd NI with the settings it runs with now: `conns_per_peer` (0, "auto", is 1
/// here: the link speed is not known), `timeout` in seconds, and `tos` -1 (no type of
/// service is set on its sockets).
pub fn socklnd(t: &LiveTunables, interface: Option<String>) -> NiDescription {
    let cpp = t.effective_conns_per_peer();
    NiDescription {
        interfaces: interface.into_iter().collect(),
        lnd_tunables: Some(LndTunables {
            conns_per_peer: Some(u16::try_from(cpp).unwrap_or(u16::MAX)),
            timeout: Some(secs(t.timeout())),
            tos: Some(-1),
            ..LndTunables::default()
        }),
    }
}

/// An o2iblnd NI started with `c`: `peercredits_hiw` and `concurrent_sends` as the LND
/// clamps them, `map_on_demand` false (payloads are copied into buffers registered once;
/// nothing is mapped per message), `ntx`, the `conns_per_peer` and `timeout` (seconds) it
/// runs with now (`live`; `conns_per_peer` as set, 0 after `net set --conns-per-peer 0` as
/// in the kernel) and `tos` -1. The FMR keys are left out: there is no FMR pool.
pub fn o2iblnd(
    c: &O2ibLndConfig,
    live: &O2ibLiveTunables,
    interface: Option<String>,
) -> NiDescription {
    NiDescription {
        interfaces: interface.into_iter().collect(),
        lnd_tunables: Some(LndTunables {
            peercredits_hiw: Some(u32::from(clamp_peercredits_hiw(
                c.peercredits_hiw,
                c.peer_credits,
            ))),
            concurrent_sends: Some(u32::from(clamp_concurrent_sends(
                c.version,
                c.concurrent_sends,
                c.peer_credits,
            ))),
            map_on_demand: Some(false),
            ntx: Some(u16::try_from(c.ntx).unwrap_or(u16::MAX)),
            conns_per_peer: Some(u16::try_from(live.conns_per_peer()).unwrap_or(u16::MAX)),
            timeout: Some(secs(live.timeout())),
            tos: Some(-1),
            ..LndTunables::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use lnd::socklnd::SockLndConfig;

    #[test]
    fn o2ib_tunables_are_the_lnd_settings_in_lnetctl_keys() {
        let c = O2ibLndConfig::new("10.0.0.1@o2ib".parse().unwrap(), 1);
        let live = O2ibLiveTunables::new(&c);
        let d = o2iblnd(&c, &live, Some("ib0".to_owned()));
        assert_eq!(d.interfaces, ["ib0"]);
        let t = d.lnd_tunables.unwrap();
        // The kernel's defaults for peer_credits 8 (the capture's values).
        assert_eq!(t.peercredits_hiw, Some(4));
        assert_eq!(t.concurrent_sends, Some(8));
        assert_eq!(t.ntx, Some(u16::try_from(c.ntx).unwrap()));
        assert_eq!(t.timeout, Some(u32::try_from(c.timeout.as_secs()).unwrap()));
        assert_eq!((t.conns_per_peer, t.tos), (Some(1), Some(-1)));
        assert_eq!(t.map_on_demand, Some(false));
        assert_eq!(t.fmr_pool_size, None);
        // `net set --lnd-timeout` while it runs: shown at once.
        live.set_timeout(Duration::from_secs(12)).unwrap();
        let t = o2iblnd(&c, &live, None).lnd_tunables.unwrap();
        assert_eq!(t.timeout, Some(12));
        // `net set --conns-per-peer` while it runs: shown at once.
        live.set_conns_per_peer(4).unwrap();
        let t = o2iblnd(&c, &live, None).lnd_tunables.unwrap();
        assert_eq!(t.conns_per_peer, Some(4));
    }

    #[test]
    fn socklnd_auto_conns_per_peer_is_one() {
        let mut c = SockLndConfig::new("10.0.0.1@tcp".parse().unwrap(), 1);
        c.conns_per_peer = 0;
        let live = LiveTunables::new(&c);
        let t = socklnd(&live, None).lnd_tunables.unwrap();
        assert_eq!(t.conns_per_peer, Some(1));
        assert_eq!(t.timeout, Some(u32::try_from(c.timeout.as_secs()).unwrap()));
        live.set_conns_per_peer(3);
        live.set_timeout(Duration::from_secs(9)).unwrap();
        let t = socklnd(&live, None).lnd_tunables.unwrap();
        assert_eq!((t.conns_per_peer, t.timeout), (Some(3), Some(9)));
    }
}
