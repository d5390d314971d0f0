//! The CPT threads: one per CPU partition, each with an arbiter (for the node's NI and
//! peer NI actors) and a runtime (for the LNDs' peer and connection tasks), and how Linux
//! schedules them.
//!
//! A CPT thread is woken by its sockets: a burst of frames arrives, the thread reads and
//! forwards it, and sleeps again. With the default `SCHED_OTHER`, a woken thread may
//! preempt the thread that woke it, often the one writing that burst, so the burst is cut
//! short and both switch more. Under `SCHED_BATCH` (sched(7): for non-interactive,
//! CPU-bound work) a woken CPT thread waits for the running thread to sleep or for the
//! scheduler's tick, and then takes a longer burst: on CPUs shared with other busy
//! threads it forwards more for less CPU per message (docs/bench.md). Only the CPT
//! threads take it: the thread that starts the node (the LNet actor, the router checker,
//! the timers of health and recovery) stays as it is.

use std::io;

/// How Linux schedules the CPT threads (`lnet-router run --cpt-scheduling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
#[non_exhaustive]
pub enum CptScheduling {
    /// `SCHED_BATCH`: a CPT thread that wakes does not preempt the running thread.
    #[default]
    Batch,
    /// `SCHED_OTHER`, as every other thread of the process.
    Normal,
}

impl CptScheduling {
    /// The Linux policy.
    fn policy(self) -> libc::c_int {
        match self {
            CptScheduling::Batch => libc::SCHED_BATCH,
            CptScheduling::Normal => libc::SCHED_OTHER,
        }
    }

    /// Puts the calling thread under this policy (priority 0, the only one these two
    /// policies have). Needs no privilege.
    pub fn apply_to_this_thread(self) -> io::Result<()> {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid, initialized sched_param that outlives the call; pid
        // 0 names the calling thread.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::sched_setscheduler(0, self.policy(), &param) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// Starts `n` CPT threads (none for `n` < 2) under `scheduling`: their arbiters and their
/// runtimes. A thread whose policy cannot be set runs as it is (logged).
pub(crate) async fn start(
    n: usize,
    scheduling: CptScheduling,
) -> (Vec<actix::Arbiter>, Vec<tokio::runtime::Handle>) {
    let mut arbiters = Vec::new();
    let mut handles = Vec::new();
    if n < 2 {
        return (arbiters, handles);
    }
    for cpt in 0..n {
        let arbiter = actix::Arbiter::new();
        let (tx, rx) = tokio::sync::oneshot::channel();
        arbiter.spawn(async move {
            if let Err(e) = scheduling.apply_to_this_thread() {
                tracing::warn!(cpt, ?scheduling, %e, "CPT thread: scheduling policy not set");
            }
            let _ = tx.send(tokio::runtime::Handle::current());
        });
        if let Ok(h) = rx.await {
            handles.push(h);
            arbiters.push(arbiter);
        }
    }
    (arbiters, handles)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The policy of the calling thread, if it is one of the two.
    fn of_this_thread() -> Option<CptScheduling> {
        // SAFETY: no pointer is passed; pid 0 names the calling thread.
        #[allow(unsafe_code)]
        let policy = unsafe { libc::sched_getscheduler(0) };
        [CptScheduling::Batch, CptScheduling::Normal]
            .into_iter()
            .find(|s| s.policy() == policy & !libc::SCHED_RESET_ON_FORK)
    }

    /// The policy each CPT thread runs under, as the thread itself reads it.
    async fn policies(handles: &[tokio::runtime::Handle]) -> Vec<Option<CptScheduling>> {
        let mut out = Vec::new();
        for h in handles {
            let read = h.spawn(async { of_this_thread() });
            out.push(read.await.ok().flatten());
        }
        out
    }

    #[actix::test]
    async fn cpt_threads_run_as_batch_work_by_default_and_the_starting_thread_does_not() {
        let (arbiters, handles) = start(2, CptScheduling::default()).await;
        assert_eq!(arbiters.len(), 2);
        assert_eq!(
            policies(&handles).await,
            vec![Some(CptScheduling::Batch); 2]
        );
        assert_eq!(of_this_thread(), Some(CptScheduling::Normal));
        for a in arbiters {
            a.stop();
        }
    }

    #[actix::test]
    async fn cpt_threads_can_be_left_as_every_other_thread() {
        let (arbiters, handles) = start(3, CptScheduling::Normal).await;
        assert_eq!(
            policies(&handles).await,
            vec![Some(CptScheduling::Normal); 3]
        );
        for a in arbiters {
            a.stop();
        }
    }

    #[actix::test]
    async fn one_cpt_is_the_starting_thread_itself() {
        let (arbiters, handles) = start(1, CptScheduling::Batch).await;
        assert!(arbiters.is_empty() && handles.is_empty());
        assert_eq!(of_this_thread(), Some(CptScheduling::Normal));
    }
}
