//! A started LND as the node drives it: sends, its counters, and a stop that can come
//! later.
//!
//! [`Lnd::stop`] takes the LND by value, while sends under way share it. [`NiDriver`] keeps
//! the LND in a slot: a send borrows it for as long as the LND takes to accept the
//! message; [`Driver::stop`] takes it out of the slot (from then on sends are refused as
//! stopped), waits a bounded time for the sends under way to return, and stops it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use lnd::{Lnd, SendError, TryRefused, TrySend, TxRequest};
use lnet::Nid;

use crate::lnd_counters::LndCounters;

/// How long [`Driver::stop`] waits for sends under way to return before it drops the LND
/// (which closes it too, less cleanly).
const STOP_WAIT: Duration = Duration::from_secs(5);
/// How often it looks.
const STOP_POLL: Duration = Duration::from_millis(10);

/// A started LND behind a trait object, so that NIs of different LNDs sit side by side.
pub trait Driver: Send + Sync + 'static {
    /// The NI's NID.
    fn nid(&self) -> Nid;
    /// [`Lnd::send`]; [`SendError::Stopped`] once the NI is stopped.
    fn send(
        &self,
        tx: TxRequest,
    ) -> Pin<Box<dyn Future<Output = Result<(), SendError>> + Send + '_>>;
    /// [`Lnd::try_send`]: never waits; [`SendError::Stopped`] once the NI is stopped.
    fn try_send(&self, tx: TxRequest) -> Result<(), TryRefused>;
    /// [`Lnd::sender`] of the running LND; `None` once the NI is stopped, or when the
    /// LND has none.
    fn sender(&self) -> Option<Arc<dyn TrySend>>;
    /// [`Lnd::stop`]: takes the NI down. Whether it stopped cleanly (every send under way
    /// had returned within a bounded wait); a second call does nothing and says true.
    fn stop(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>>;
    /// [`Lnd::counters`], as the layers above show them; `None` when the LND counts
    /// nothing or the NI is stopped.
    fn counters(&self) -> Pin<Box<dyn Future<Output = Option<LndCounters>> + Send + '_>>;
}

/// An LND in its slot. See the module documentation.
pub struct NiDriver<L> {
    nid: Nid,
    slot: ArcSwapOption<L>,
}

impl<L> std::fmt::Debug for NiDriver<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NiDriver").field("nid", &self.nid).finish()
    }
}

impl<L: Lnd> NiDriver<L> {
    /// Keeps the started `lnd`.
    pub fn new(lnd: L) -> NiDriver<L> {
        NiDriver {
            nid: lnd.nid(),
            slot: ArcSwapOption::from_pointee(lnd),
        }
    }

    /// The running LND; `None` once stopped.
    pub fn lnd(&self) -> Option<Arc<L>> {
        self.slot.load_full()
    }

    async fn stop_lnd(&self) -> bool {
        let taken = self.slot.swap(None);
        let Some(mut lnd) = taken else {
            return true;
        };
        let deadline = tokio::time::Instant::now() + STOP_WAIT;
        loop {
            match Arc::try_unwrap(lnd) {
                Ok(owned) => {
                    owned.stop().await;
                    return true;
                }
                Err(shared) if tokio::time::Instant::now() < deadline => {
                    lnd = shared;
                    tokio::time::sleep(STOP_POLL).await;
                }
                Err(_) => {
                    tracing::warn!(nid = %self.nid, "sends still under way: NI dropped");
                    return false;
                }
            }
        }
    }
}

impl<L: Lnd> Driver for NiDriver<L> {
    fn nid(&self) -> Nid {
        self.nid
    }

    fn send(
        &self,
        tx: TxRequest,
    ) -> Pin<Box<dyn Future<Output = Result<(), SendError>> + Send + '_>> {
        let lnd = self.lnd();
        let ni = self.nid;
        Box::pin(async move {
            match lnd {
                Some(lnd) => lnd.send(tx).await,
                None => Err(SendError::Stopped { ni }),
            }
        })
    }

    fn try_send(&self, tx: TxRequest) -> Result<(), TryRefused> {
        // Borrowed, not counted as a holder: the count is one more write per message.
        match &*self.slot.load() {
            Some(lnd) => lnd.try_send(tx),
            None => Err(TryRefused::Refused(SendError::Stopped { ni: self.nid })),
        }
    }

    fn sender(&self) -> Option<Arc<dyn TrySend>> {
        self.slot.load().as_ref().and_then(|lnd| lnd.sender())
    }

    fn stop(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(self.stop_lnd())
    }

    fn counters(&self) -> Pin<Box<dyn Future<Output = Option<LndCounters>> + Send + '_>> {
        let lnd = self.lnd();
        Box::pin(async move { Some(LndCounters::from(lnd?.counters().await?)) })
    }
}
