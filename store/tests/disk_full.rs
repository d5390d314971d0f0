//! A store on a full filesystem: a 4 MiB tmpfs mounted by the test in a mount namespace
//! of its own (so nothing is mounted on the host), half of it taken by a ballast file, filled by appending events until the
//! store refuses one. Every refusal is a typed error whose source chain names the full
//! disk; a different change is refused too; and once room is made and the store is
//! opened again, every change that was acknowledged is there (nothing acknowledged was
//! lost), and the store takes changes again.
//!
//! Mounting needs root (CI runs as root); otherwise the test prints why and passes
//! without running.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
// unshare(2) and mount(2) have no safe wrapper in the standard library.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::path::Path;

use lnet::{Net, Nid};
use store::{Event, Store, StoreError};

/// Makes this thread's mount namespace its own (private, so nothing propagates to the
/// host) and mounts a tmpfs of `size` on `dir`.
fn mount_tmpfs(dir: &Path, size: &str) -> Result<(), String> {
    let c = |s: &str| CString::new(s).unwrap();
    let target = c(dir.to_str().unwrap());
    let (root, tmpfs, opts) = (c("/"), c("tmpfs"), c(&format!("size={size}")));
    // SAFETY: plain system calls with valid NUL-terminated strings that outlive them.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(format!("unshare: {}", std::io::Error::last_os_error()));
        }
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(format!("private /: {}", std::io::Error::last_os_error()));
        }
        if libc::mount(
            tmpfs.as_ptr(),
            target.as_ptr(),
            tmpfs.as_ptr(),
            0,
            opts.as_ptr().cast(),
        ) != 0
        {
            return Err(format!("mount tmpfs: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// The error and its sources, as one line.
fn chain(e: &StoreError) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn event(i: u64) -> Event {
    Event::RouteState {
        net: "tcp9".parse::<Net>().unwrap(),
        gateway: "127.0.0.9@tcp".parse::<Nid>().unwrap(),
        up: false,
        reason: Some(format!("{i:06} {}", "x".repeat(4000))),
    }
}

#[test]
fn a_full_filesystem_refuses_changes_and_loses_nothing_acknowledged() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: mounting a tmpfs needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    // The namespace is this thread's: run in a thread of its own so no other test sees it.
    let mnt2 = mnt.clone();
    std::thread::spawn(move || run(&mnt2)).join().unwrap();
}

fn run(mnt: &Path) {
    if let Err(e) = mount_tmpfs(mnt, "4m") {
        println!("skipped: {e}");
        return;
    }
    let dir = mnt.join("store");
    let ballast = mnt.join("ballast");
    std::fs::write(&ballast, vec![1u8; 2 * 1024 * 1024]).unwrap();
    let options = store::StoreOptions {
        event_capacity: 100_000,
    };
    let store = Store::open_with(&dir, options.clone()).unwrap();
    let mut acked = Vec::new();
    let mut refusal = None;
    for i in 0..2_000u64 {
        match store.append_event(i, &event(i)) {
            Ok(id) => acked.push((id, i)),
            Err(e) => {
                refusal = Some(e);
                break;
            }
        }
    }
    let refusal = refusal.expect("a 4 MiB filesystem fills up within 8 MB of events");
    let text = chain(&refusal);
    println!("{} events acknowledged, then: {text}", acked.len());
    assert!(
        matches!(
            refusal,
            StoreError::Engine { .. } | StoreError::SealIo { .. }
        ),
        "{refusal:?}"
    );
    assert!(text.contains("No space left on device"), "{text}");
    // Another kind of change is refused too, with the same kind of error.
    let route = lnet::config::Route {
        net: "tcp7".parse().unwrap(),
        gateway: "127.0.0.7@tcp".parse().unwrap(),
        hop: Some(1),
        priority: None,
        health_sensitivity: None,
        state: None,
        route_type: None,
    };
    let again = store.add_route(&route);
    if let Err(e) = &again {
        println!("a route, then: {}", chain(e));
    }
    drop(store);

    // Room again: reopen, and every acknowledged event is there, intact.
    std::fs::remove_file(&ballast).unwrap();
    let store = Store::open_with(&dir, options).unwrap();
    let found = store.events_after(0, 100_000).unwrap();
    for (id, i) in &acked {
        let e = found
            .iter()
            .find(|r| r.id == *id)
            .unwrap_or_else(|| panic!("acknowledged event {id} is lost"));
        assert_eq!(e.event, event(*i));
    }
    if again.is_ok() {
        assert!(store.routes().unwrap().iter().any(|r| r.net == route.net));
    }
    store.append_event(9_999, &event(9_999)).unwrap();
}
