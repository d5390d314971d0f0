//! The socklnd stream deframer: any bytes, cut at any points, on either side, in both
//! modes (whole frames, and the header-first mode the connection reader uses), never make
//! it panic; once it fails it keeps failing; it never holds more than one frame; both
//! modes agree on the error and on the frames before it.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use lnd::socklnd::wire::{Deframer, Event, Side, MAX_FRAME_BYTES};

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

    // Whole frames.
    let mut d = Deframer::new(side);
    let mut failed = None;
    let mut whole = Vec::new();
    for piece in stream.chunks(chunk) {
        d.push(piece);
        loop {
            match d.poll() {
                Ok(Some(e)) => {
                    assert!(failed.is_none(), "an event after a failure");
                    whole.push(e);
                }
                Ok(None) => break,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        assert!(d.buffered() <= MAX_FRAME_BYTES + chunk);
    }
    if failed.is_some() {
        assert!(d.poll().is_err(), "a failed deframer recovered");
    } else {
        let _ = d.finish();
    }

    // Header-first, reading at most what it wants; every other payload discarded, the
    // others read straight into the caller's buffer when the chunk size is odd.
    let direct = chunk % 2 == 1;
    let mut d = Deframer::new(side).header_first();
    let mut rest = stream;
    let mut frames = 0usize;
    let mut split = Vec::new();
    let mut hf_failed = None;
    'outer: loop {
        loop {
            match d.poll() {
                Ok(Some(Event::LnetHeader { .. })) => {
                    assert!(hf_failed.is_none());
                    assert_eq!(d.wanted(), 0);
                    let r = if frames % 2 == 0 {
                        d.receive_payload(BytesMut::new())
                    } else {
                        d.discard_payload()
                    };
                    assert!(r.is_ok(), "a decision refused: {r:?}");
                    frames += 1;
                }
                Ok(Some(Event::LnetPayload { header, payload, .. })) => {
                    if let Some(p) = &payload {
                        assert_eq!(p.len(), header.payload_length as usize);
                    }
                    assert!(header.payload_length > 0);
                    split.push(header);
                }
                // A frame with no payload comes whole.
                Ok(Some(Event::Lnet { header, payload, .. })) => {
                    assert!(hf_failed.is_none());
                    assert_eq!(header.payload_length, 0);
                    assert!(payload.is_empty());
                    split.push(header);
                }
                Ok(Some(_)) => assert!(hf_failed.is_none()),
                Ok(None) => break,
                Err(e) => {
                    hf_failed = Some(e);
                    break 'outer;
                }
            }
        }
        if rest.is_empty() {
            break;
        }
        let n = chunk.min(rest.len());
        if direct {
            if let Some((sink, left)) = d.payload_sink() {
                let (piece, tail) = rest.split_at(n.min(left));
                sink.extend_from_slice(piece);
                rest = tail;
                continue;
            }
        }
        let wanted = d.wanted();
        let n = if wanted > 0 { n.min(wanted) } else { n };
        let (piece, tail) = rest.split_at(n);
        rest = tail;
        d.push(piece);
        assert!(d.buffered() <= MAX_FRAME_BYTES);
    }
    if let Some(e) = &hf_failed {
        assert_eq!(d.poll().as_ref().err(), Some(e), "a failed deframer recovered");
    } else {
        let _ = d.finish();
    }
    // Both modes see the same stream the same way.
    assert_eq!(hf_failed.is_some(), failed.is_some());
    let whole_headers: Vec<_> = whole
        .iter()
        .filter_map(|e| match e {
            Event::Lnet { header, .. } => Some(*header),
            _ => None,
        })
        .collect();
    assert_eq!(split, whole_headers);
});
