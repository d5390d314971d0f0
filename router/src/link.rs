//! The link of each NI's network interface, watched so that a link that goes down is
//! advertised at once (the NI turns DOWN in this node's ping info, which is pushed to
//! its peers: they stop routing through it toward that net), and `net show` says `status:
//! down`, `fatal_error: 1`. The kernel's socklnd and o2iblnd both mark an NI's link fatal
//! when its netdev goes down (o2iblnd: the IPoIB interface, or the Ethernet one under
//! RoCE); so are tcp and o2ib NIs both watched here, on the interface that carries the NI's
//! address.
//!
//! Linux shows an interface's state in `/sys/class/net/IF/operstate` and its flags in
//! `/sys/class/net/IF/flags` (bit 0: IFF_UP). A link is up when the interface is
//! administratively up and its operational state is not `down`, `lowerlayerdown` or
//! `notpresent` (a dummy or loopback interface reports `unknown` while up). An interface
//! that disappears is down.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actors::Node;
use lnet::Nid;
use tokio::task::AbortHandle;

/// How often the links are read.
pub const LINK_POLL: Duration = Duration::from_millis(200);

/// The interface an NI sits on: its configured name, else the interface that carries its
/// address.
pub fn interface_of(configured: Option<&str>, addr: Option<Ipv4Addr>) -> Option<String> {
    if let Some(name) = configured {
        if PathBuf::from("/sys/class/net").join(name).exists() {
            return Some(name.to_owned());
        }
    }
    let addr = addr?;
    if_addrs::get_if_addrs()
        .ok()?
        .into_iter()
        .find(|i| i.ip() == std::net::IpAddr::V4(addr))
        .map(|i| i.name)
}

/// Whether an interface with these `flags` (as `/sys` prints them, `0x1003`) and this
/// `operstate` has its link up.
pub fn link_up(flags: &str, operstate: &str) -> bool {
    let flags = u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).unwrap_or(0);
    let admin_up = flags & 1 != 0;
    let oper = operstate.trim();
    admin_up && !matches!(oper, "down" | "lowerlayerdown" | "notpresent")
}

/// Reads the link state of interface `name` now.
pub fn read_link(name: &str) -> bool {
    let dir = PathBuf::from("/sys/class/net").join(name);
    let flags = std::fs::read_to_string(dir.join("flags"));
    let oper = std::fs::read_to_string(dir.join("operstate"));
    match (flags, oper) {
        (Ok(f), Ok(o)) => link_up(&f, &o),
        _ => false,
    }
}

/// The link watches of a node's NIs (tcp and o2ib alike, configured or added at run time),
/// by NID: each ends when its NI is deleted (`net del`) or the node stops.
#[derive(Debug, Clone, Default)]
pub struct LinkWatches(Arc<Mutex<HashMap<Nid, AbortHandle>>>);

impl LinkWatches {
    /// Starts watching the link of NI `nid` on `interface` (none: the NI has no interface
    /// of its own, nothing to watch), in place of any watch it had. Must be called inside
    /// the node's actix system (on the system thread, where the NIs start).
    pub fn start(&self, node: &Node, nid: Nid, interface: Option<String>) {
        let Some(name) = interface else {
            return;
        };
        let watch = actix::spawn(watch(node.clone(), nid, name)).abort_handle();
        if let Ok(mut watches) = self.0.lock() {
            if let Some(old) = watches.insert(nid, watch) {
                old.abort();
            }
        }
    }

    /// Ends the link watch of NI `nid`, if it has one.
    pub fn end(&self, nid: Nid) {
        if let Some(w) = self.0.lock().ok().and_then(|mut w| w.remove(&nid)) {
            w.abort();
        }
    }

    /// Ends every link watch.
    pub fn end_all(&self) {
        if let Ok(mut watches) = self.0.lock() {
            for (_, w) in watches.drain() {
                w.abort();
            }
        }
    }
}

/// Watches the link of NI `nid` on interface `name` until the NI or the node is gone,
/// telling the node of every change.
async fn watch(node: Node, nid: Nid, name: String) {
    let mut was = true;
    let mut tick = tokio::time::interval(LINK_POLL);
    loop {
        tick.tick().await;
        let up = read_link(&name);
        if up != was {
            tracing::warn!(%nid, interface = %name, up, "link changed");
            if node.set_ni_link(nid, up).await.is_err() {
                // The NI was deleted (`net del`) or the node stopped.
                return;
            }
            was = up;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_operstate_decide_the_link() {
        assert!(link_up("0x1003\n", "up\n"));
        assert!(link_up("0x9", "unknown"));
        assert!(!link_up("0x1002", "down"));
        assert!(!link_up("0x1003", "lowerlayerdown"));
        assert!(!link_up("junk", "up"));
    }

    #[test]
    fn loopback_is_up_and_a_missing_interface_is_down() {
        assert!(read_link("lo"));
        assert!(!read_link("no-such-interface-here"));
        assert_eq!(
            interface_of(None, Some(Ipv4Addr::LOCALHOST)).as_deref(),
            Some("lo")
        );
    }
}
