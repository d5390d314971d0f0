//! Writes deferred to the end of a reader's round.
//!
//! A reader that forwards what it read queues frames on other connections, often on
//! another CPT's thread. Waking that connection's writer task for each of them costs a
//! thread wake-up per message; instead, while a reader runs (inside [`Batched`]), a
//! connection that needs writing is noted here and written by the reader itself, with
//! non-blocking writes, before it next reads, after every [`FLUSH_EVENTS`] events of one
//! read ([`FlushBudget`]) and when it stops running: the frames it queued on a connection
//! in between go out in one write. What cannot be written without waiting is left to
//! that connection's writer task ([`WriteNow::hand_off`]).
//!
//! A send's completion may free the credit that the next frame read waits for, so a
//! reader may take a connection's frames in several rounds before it reads again: while
//! a frame's decision waits, or while a frame short of a credit is left with it
//! (`LndHandler::try_whole_now`), ([`write_noted`] with `more`) a round stages its frames
//! (they complete, their bytes stay with the connection's queue) or, past the
//! bytes a connection stages, is written telling TCP that more follows (`MSG_MORE`). The
//! flush before the next read writes the staged connections and the noted ones without
//! it, which sends everything, and pushes ([`WriteNow::push`]) any connection last
//! written as the start of more. So the rounds leave as one write, or one burst, and
//! wake the receiver once.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::time::Instant;

/// Most events (frames, payloads) a reader acts on between two flushes. A read can bring
/// a whole window of frames; written only once all of them are taken, they would leave
/// as one clump, and each hop would take the window in turn, the next one idle meanwhile.
/// Writing every this many lets the next hop start on the first ones while the reader
/// takes the rest (measured in docs/bench.md: 16 and 24 forward about a tenth more than
/// 32 when one thread reads both ways, 24 with less CPU at two CPUs; 8 costs a write per
/// few frames).
pub(crate) const FLUSH_EVENTS: u32 = 24;

/// Most rounds of deferred writes one flush makes: writes complete sends, whose
/// completions may queue more; past this the writer tasks take over.
const FLUSH_ROUNDS: usize = 8;

/// A connection that can be written without waiting.
pub(crate) trait WriteNow: Send + Sync {
    /// Writes what is queued, as far as the socket takes it without blocking (`more`: a
    /// frame read waits, the new frames are staged or written as the start of more, which
    /// TCP may hold until a write without it); hands the rest to the connection's writer
    /// task. Whether it wrote anything (staging is no write).
    fn write_now(&self, more: bool) -> bool;
    /// Hands what is queued to the connection's writer task.
    fn hand_off(&self);
    /// Sends what writes as the start of more left in the socket.
    fn push(&self);
}

#[derive(Default)]
struct Pending {
    /// Readers running on this thread (nested polls).
    depth: u32,
    /// Connections to write.
    connections: Vec<Arc<dyn WriteNow>>,
    /// Connections last written as the start of more: to push.
    corked: Vec<Arc<dyn WriteNow>>,
    /// Connections holding staged frames: to write.
    staged: Vec<Arc<dyn WriteNow>>,
    /// When the running reader's last read returned ([`now`]).
    read_at: Option<Instant>,
}

thread_local! {
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
}

/// Whether a reader runs on this thread: a connection that needs writing is then
/// [`defer`]red rather than its writer task woken.
pub(crate) fn active() -> bool {
    PENDING.with(|p| p.try_borrow().is_ok_and(|p| p.depth > 0))
}

/// The running reader's last read returned at `at`: what it forwards is timed from it.
pub(crate) fn read_at(at: Instant) {
    PENDING.with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            if p.depth > 0 {
                p.read_at = Some(at);
            }
        }
    });
}

/// Now, for timing a send: when a reader runs on this thread, the time its last read
/// returned (what it forwards comes from that read: one clock read per read, not per
/// frame); otherwise the clock.
pub(crate) fn now() -> Instant {
    PENDING
        .with(|p| p.try_borrow().ok().and_then(|p| p.read_at))
        .unwrap_or_else(Instant::now)
}

/// Notes `conn` for the next [`flush`] on this thread; false (and nothing noted) when no
/// reader runs here.
pub(crate) fn defer(conn: Arc<dyn WriteNow>) -> bool {
    PENDING.with(|p| match p.try_borrow_mut() {
        Ok(mut p) if p.depth > 0 => {
            p.connections.push(conn);
            true
        }
        _ => false,
    })
}

/// Notes `conn`, which staged frames, for the next [`flush`] on this thread (once).
pub(crate) fn staged(conn: Arc<dyn WriteNow>) {
    PENDING.with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            let noted = p
                .staged
                .iter()
                .any(|w| std::ptr::addr_eq(Arc::as_ptr(w), Arc::as_ptr(&conn)));
            if !noted {
                p.staged.push(conn);
            }
        }
    });
}

fn take_noted() -> Vec<Arc<dyn WriteNow>> {
    PENDING.with(|p| {
        p.try_borrow_mut()
            .map(|mut p| std::mem::take(&mut p.connections))
            .unwrap_or_default()
    })
}

/// Writes the connections noted on this thread, round after round while the writes'
/// completions note more (`more`: as the start of more, to be pushed by the next
/// [`flush`]); whether it wrote any.
pub(crate) fn write_noted(more: bool) -> bool {
    let mut any = false;
    for _ in 0..FLUSH_ROUNDS {
        let list = take_noted();
        if list.is_empty() {
            break;
        }
        any = true;
        for conn in list {
            let wrote = conn.write_now(more);
            PENDING.with(|p| {
                if let Ok(mut p) = p.try_borrow_mut() {
                    let same = |w: &Arc<dyn WriteNow>| {
                        std::ptr::addr_eq(Arc::as_ptr(w), Arc::as_ptr(&conn))
                    };
                    if more && wrote {
                        if !p.corked.iter().any(same) {
                            p.corked.push(conn);
                        }
                    } else if wrote {
                        // A write without `MSG_MORE` sends what waited too.
                        p.corked.retain(|w| !same(w));
                    }
                }
            });
        }
    }
    any
}

/// Writes the connections that staged frames on this thread, then every connection noted
/// ([`write_noted`]), not as the start of more; hands what keeps coming to the writer
/// tasks, then pushes each connection whose last write was the start of more.
pub(crate) fn flush() {
    let staged = PENDING.with(|p| {
        p.try_borrow_mut()
            .map(|mut p| std::mem::take(&mut p.staged))
            .unwrap_or_default()
    });
    for conn in staged {
        if conn.write_now(false) {
            PENDING.with(|p| {
                if let Ok(mut p) = p.try_borrow_mut() {
                    p.corked
                        .retain(|w| !std::ptr::addr_eq(Arc::as_ptr(w), Arc::as_ptr(&conn)));
                }
            });
        }
    }
    write_noted(false);
    for conn in take_noted() {
        conn.hand_off();
    }
    let corked = PENDING.with(|p| {
        p.try_borrow_mut()
            .map(|mut p| std::mem::take(&mut p.corked))
            .unwrap_or_default()
    });
    for conn in corked {
        conn.push();
    }
}

/// A reader's count of the events it acted on since it last read: when the next one
/// would be past [`FLUSH_EVENTS`], what they forwarded is written first ([`flush`]).
#[derive(Debug, Default)]
pub(crate) struct FlushBudget {
    events: u32,
}

impl FlushBudget {
    /// Counts the next event; true if [`FLUSH_EVENTS`] came before it since the last
    /// flush: the caller flushes before acting on it.
    pub(crate) fn next_needs_flush(&mut self) -> bool {
        let full = self.events == FLUSH_EVENTS;
        if full {
            self.events = 0;
        }
        self.events += 1;
        full
    }
}

/// Counts a running reader on this thread for as long as it lives.
struct Running;

impl Running {
    fn enter() -> Running {
        PENDING.with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                p.depth += 1;
            }
        });
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let last = PENDING.with(|p| {
            p.try_borrow_mut().is_ok_and(|mut p| {
                p.depth = p.depth.saturating_sub(1);
                if p.depth == 0 {
                    p.read_at = None;
                }
                p.depth == 0
            })
        });
        if last {
            // Writes made while flushing are still deferred, to the next round.
            let _again = Running::enter_quiet();
            flush();
        }
    }
}

impl Running {
    /// Like [`Running::enter`], without flushing when dropped.
    fn enter_quiet() -> Quiet {
        PENDING.with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                p.depth += 1;
            }
        });
        Quiet
    }
}

/// A running flush: connections written meanwhile are deferred to its next round.
struct Quiet;

impl Drop for Quiet {
    fn drop(&mut self) {
        PENDING.with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                p.depth = p.depth.saturating_sub(1);
            }
        });
    }
}

/// A reader's future: every poll of it runs as a reader on its thread, and what it
/// deferred is written before the poll returns.
pub(crate) struct Batched<F> {
    inner: Pin<Box<F>>,
}

impl<F: Future> Batched<F> {
    /// Runs `inner` as a reader.
    pub(crate) fn new(inner: F) -> Batched<F> {
        Batched {
            inner: Box::pin(inner),
        }
    }
}

impl<F: Future> Future for Batched<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _running = Running::enter();
        self.inner.as_mut().poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counted {
        written: AtomicUsize,
        handed: AtomicUsize,
        pushed: AtomicUsize,
        requeue: AtomicUsize,
        me: std::sync::Weak<Counted>,
    }

    impl WriteNow for Counted {
        fn write_now(&self, _more: bool) -> bool {
            self.written.fetch_add(1, Ordering::SeqCst);
            if self.requeue.load(Ordering::SeqCst) > 0 {
                self.requeue.fetch_sub(1, Ordering::SeqCst);
                if let Some(me) = self.me.upgrade() {
                    assert!(defer(me), "a write during a flush is deferred");
                }
            }
            true
        }
        fn hand_off(&self) {
            self.handed.fetch_add(1, Ordering::SeqCst);
        }
        fn push(&self) {
            assert!(
                self.written.load(Ordering::SeqCst) > 0,
                "only a connection written is pushed"
            );
            self.pushed.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counted(requeue: usize) -> Arc<Counted> {
        Arc::new_cyclic(|me| Counted {
            written: AtomicUsize::new(0),
            handed: AtomicUsize::new(0),
            pushed: AtomicUsize::new(0),
            requeue: AtomicUsize::new(requeue),
            me: me.clone(),
        })
    }

    #[test]
    fn a_reader_flushes_before_each_event_past_a_full_round() {
        let mut budget = FlushBudget::default();
        let total = 3 * FLUSH_EVENTS + 5;
        let flushed_before: Vec<u32> = (0..total).filter(|_| budget.next_needs_flush()).collect();
        assert_eq!(
            flushed_before,
            vec![FLUSH_EVENTS, 2 * FLUSH_EVENTS, 3 * FLUSH_EVENTS],
            "events 0.. of one read: a flush before the first of each new round"
        );
        // A read's events up to a full round: only the flush before the next read.
        let mut budget = FlushBudget::default();
        assert!((0..FLUSH_EVENTS).all(|_| !budget.next_needs_flush()));
    }

    #[test]
    fn nothing_is_deferred_outside_a_reader() {
        assert!(!active());
        assert!(!defer(counted(0)));
    }

    #[test]
    fn a_reader_poll_writes_what_it_deferred_before_returning() {
        let c = counted(0);
        let c2 = c.clone();
        let fut = Batched::new(async move {
            assert!(active());
            assert!(defer(c2.clone()));
            assert!(defer(c2));
        });
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut fut = std::pin::pin!(fut);
        assert!(fut.as_mut().poll(&mut cx).is_ready());
        assert_eq!(c.written.load(Ordering::SeqCst), 2);
        assert_eq!(
            c.pushed.load(Ordering::SeqCst),
            0,
            "written as the end of what it had: nothing to push"
        );
        assert!(!active());
    }

    #[test]
    fn writes_that_keep_queueing_are_handed_to_the_writer_task() {
        let c = counted(usize::MAX);
        let c2 = c.clone();
        let fut = Batched::new(async move {
            defer(c2);
        });
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut fut = std::pin::pin!(fut);
        assert!(fut.as_mut().poll(&mut cx).is_ready());
        assert_eq!(c.written.load(Ordering::SeqCst), FLUSH_ROUNDS);
        assert_eq!(c.handed.load(Ordering::SeqCst), 1);
        assert_eq!(c.pushed.load(Ordering::SeqCst), 0);
        assert!(!active());
    }

    #[test]
    fn a_connection_that_staged_frames_is_written_once_by_the_flush_and_not_pushed() {
        let c = counted(0);
        let c2 = c.clone();
        let fut = Batched::new(async move {
            staged(c2.clone());
            staged(c2);
            assert!(
                !write_noted(true),
                "staging notes nothing to write meanwhile"
            );
        });
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut fut = std::pin::pin!(fut);
        assert!(fut.as_mut().poll(&mut cx).is_ready());
        assert_eq!(c.written.load(Ordering::SeqCst), 1);
        assert_eq!(c.pushed.load(Ordering::SeqCst), 0);
        assert!(!active());
    }

    #[test]
    fn a_connection_written_as_the_start_of_more_is_pushed_unless_written_again() {
        let (again, left) = (counted(0), counted(0));
        let (a2, l2) = (again.clone(), left.clone());
        let fut = Batched::new(async move {
            // A decision waits: both written as the start of more.
            assert!(defer(a2.clone()));
            assert!(defer(l2));
            assert!(write_noted(true));
            assert!(!write_noted(true), "nothing noted any more");
            // More for one of them before the flush.
            assert!(defer(a2));
        });
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut fut = std::pin::pin!(fut);
        assert!(fut.as_mut().poll(&mut cx).is_ready());
        assert_eq!(again.written.load(Ordering::SeqCst), 2);
        assert_eq!(
            again.pushed.load(Ordering::SeqCst),
            0,
            "its last write, without MSG_MORE, sent the rest"
        );
        assert_eq!(left.written.load(Ordering::SeqCst), 1);
        assert_eq!(left.pushed.load(Ordering::SeqCst), 1, "pushed by the flush");
        assert!(!active());
    }
}
