//! The bookkeeping of [`RegisteredMemory`] with a domain that hands out keys and records
//! what is registered (the registration itself is the verbs call the o2iblnd NI makes,
//! tested on soft-RoCE).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;

use super::*;

/// Records the ranges registered with it now.
#[derive(Default)]
struct Keys {
    next: AtomicU32,
    live: Mutex<BTreeSet<(usize, usize, u32)>>,
}

struct Key {
    range: (usize, usize, u32),
    domain: Arc<Keys>,
}

impl Registration for Key {
    fn lkey(&self) -> u32 {
        self.range.2
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        self.domain.live.lock().unwrap().remove(&self.range);
    }
}

struct Recording(Arc<Keys>);

impl Domain for Recording {
    fn register(&self, addr: usize, len: usize) -> io::Result<Box<dyn Registration>> {
        let key = self.0.next.fetch_add(1, Ordering::SeqCst) + 100;
        let range = (addr, len, key);
        self.0.live.lock().unwrap().insert(range);
        Ok(Box::new(Key {
            range,
            domain: Arc::clone(&self.0),
        }))
    }
}

fn domain() -> (Arc<Keys>, Arc<dyn Domain>) {
    let keys = Arc::new(Keys::default());
    (Arc::clone(&keys), Arc::new(Recording(keys)))
}

#[test]
fn without_a_domain_there_is_no_registered_buffer() {
    let m = RegisteredMemory::new(4096, 4);
    assert!(m.take().is_none());
    assert!(m.is_empty());
}

#[test]
fn a_payload_in_a_buffer_has_the_key_of_each_domain() {
    let m = RegisteredMemory::new(4096, 4);
    let (k1, d1) = domain();
    let id1 = m.add_domain(d1);
    let mut buf = m.take().unwrap();
    assert_eq!(buf.capacity(), 4096);
    buf.extend_from_slice(&[7; 3000]);
    let payload: Bytes = buf.freeze();
    let addr = payload.as_ptr() as usize;
    let key1 = m.key(id1, addr, payload.len()).unwrap();
    assert!(k1.live.lock().unwrap().contains(&(addr, 4096, key1)));
    // A domain added later registers the buffers there are.
    let (k2, d2) = domain();
    let id2 = m.add_domain(d2);
    let key2 = m.key(id2, addr + 100, 2900).unwrap();
    assert!(k2.live.lock().unwrap().contains(&(addr, 4096, key2)));
    // Past the buffer's end, or memory of no buffer: no key.
    assert_eq!(m.key(id1, addr, 4097), None);
    let other = [0u8; 64];
    assert_eq!(m.key(id1, other.as_ptr() as usize, 64), None);
    // A removed domain's registrations end.
    m.remove_domain(id1);
    assert!(k1.live.lock().unwrap().is_empty());
    assert_eq!(m.key(id1, addr, 10), None);
    assert_eq!(m.key(id2, addr, 10), Some(key2));
}

#[test]
fn a_buffer_is_handed_out_again_only_once_nothing_holds_it() {
    let m = RegisteredMemory::new(4096, 2);
    let (_k, d) = domain();
    m.add_domain(d);
    let a = m.take().unwrap().freeze();
    let b = m.take().unwrap();
    // The most there may be: none more.
    assert!(m.take().is_none());
    // A is given back but a clone still holds it: not handed out.
    let held = a.clone();
    m.give_back(a.as_ptr() as usize);
    drop(a);
    assert!(m.take().is_none());
    // Let go of: the same memory again, whole and empty.
    let addr = held.as_ptr() as usize;
    drop(held);
    let again = m.take().unwrap();
    assert_eq!(
        (again.as_ptr() as usize, again.len(), again.capacity()),
        (addr, 0, 4096)
    );
    // Memory of no buffer given back changes nothing.
    let other = [0u8; 64];
    m.give_back(other.as_ptr() as usize);
    m.give_back(addr + 4096);
    assert!(m.take().is_none());
    // B dropped elsewhere, never given back: found all the same.
    let b_addr = b.as_ptr() as usize;
    drop(b);
    assert_eq!(m.take().unwrap().as_ptr() as usize, b_addr);
    assert_eq!(m.len(), 2);
}

#[test]
fn fewer_buffers_free_only_those_nothing_holds() {
    let m = RegisteredMemory::new(4096, 3);
    let (k, d) = domain();
    m.add_domain(d);
    let a = m.take().unwrap();
    let b = m.take().unwrap();
    let c = m.take().unwrap();
    drop(a);
    drop(b);
    // Down to one: A and B are freed, their registrations ended; C is held.
    assert_eq!(m.set_most(1), 1);
    assert_eq!(k.live.lock().unwrap().len(), 1);
    let c_addr = c.as_ptr() as usize;
    assert!(m.key(DomainId(0), c_addr, 10).is_some());
    // To none while C is held: C stays until it is let go of.
    assert_eq!(m.set_most(0), 1);
    drop(c);
    assert_eq!(m.set_most(0), 0);
    assert!(k.live.lock().unwrap().is_empty());
}

#[test]
fn a_domain_that_cannot_register_gives_no_buffer() {
    struct Refusing;
    impl Domain for Refusing {
        fn register(&self, _: usize, _: usize) -> io::Result<Box<dyn Registration>> {
            Err(io::Error::other("no"))
        }
    }
    let m = RegisteredMemory::new(4096, 2);
    m.add_domain(Arc::new(Refusing));
    assert!(m.take().is_none());
    assert!(m.is_empty());
}
