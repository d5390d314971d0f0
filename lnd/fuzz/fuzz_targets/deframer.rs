//! The socklnd stream deframer: any bytes, cut at any points, on either side, never make
//! it panic; once it fails it keeps failing; it never holds more than one frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lnd::socklnd::wire::{Deframer, Side, MAX_FRAME_BYTES};

fuzz_target!(|data: &[u8]| {
    let Some((&control, stream)) = data.split_first() else {
        return;
    };
    let side = if control & 1 == 0 {
        Side::Passive
    } else {
        Side::Active
    };
    let chunk = usize::from(control >> 1).max(1);
    let mut d = Deframer::new(side);
    let mut failed = false;
    for piece in stream.chunks(chunk) {
        d.push(piece);
        loop {
            match d.poll() {
                Ok(Some(_)) => assert!(!failed, "an event after a failure"),
                Ok(None) => break,
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        assert!(d.buffered() <= MAX_FRAME_BYTES + chunk);
    }
    if failed {
        assert!(d.poll().is_err(), "a failed deframer recovered");
    } else {
        let _ = d.finish();
    }
});
