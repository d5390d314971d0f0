//! The credit flow of one o2iblnd connection (protocol reference §1.12), as plain state.
//!
//! * `credits`: receive buffers of the peer this side may still fill with credit-bearing
//!   messages (IMMEDIATE, PUT_REQ, GET_REQ; in v1 also NOOP). Starts at the negotiated
//!   queue depth; every message from the peer gives some back in `ibm_credits`.
//! * `outstanding`: credits this side owes the peer: receive buffers it reposted after a
//!   credit-bearing message was consumed. All of them ride on the next message posted.
//! * `reserved`: how many PUT_REQ/GET_REQ may be in flight; each later needs a receive
//!   buffer of this side for the ACK/NAK/DONE that answers it.
//! * `nsends_posted`: signalled sends posted and not completed, capped at
//!   `concurrent_sends`; `noops_posted` at 2 (v2).
//!
//! The receiver refuses a message that would raise `credits` above the queue depth: the
//! kernel closes such a connection, so does [`ConnCredits::on_rx_credits`].

use super::wire::Version;

/// Out-of-band NOOPs a v2 connection may have posted at once (`IBLND_OOB_MSGS`).
pub const MAX_NOOPS_POSTED: u16 = 2;
/// The credit high-water mark of a v1 connection (`IBLND_CREDIT_HIGHWATER_V1`).
pub const CREDITS_HIW_V1: u16 = 7;

/// Which send queue a message goes on, which decides whether it costs a credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendClass {
    /// IMMEDIATE, PUT_REQ, GET_REQ: one peer credit.
    Credit,
    /// PUT_ACK, PUT_NAK, PUT_DONE, GET_DONE, and NOOP in v2: no credit.
    NoCredit,
    /// A NOOP: no credit in v2 (out of band), one credit in v1.
    Noop,
}

/// A credit protocol violation by the peer: the connection must be closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CreditError {
    /// The peer returned more credits than the queue depth allows.
    #[error("peer returned {returned} credits with {credits} of queue depth {queue_depth} held")]
    Overflow {
        /// `ibm_credits` of the message.
        returned: u8,
        /// Credits held before it.
        credits: u16,
        /// The negotiated queue depth.
        queue_depth: u16,
    },
}

/// The credit state of one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnCredits {
    version: Version,
    queue_depth: u16,
    credits: u16,
    outstanding: u16,
    reserved: u16,
    credits_hiw: u16,
    concurrent_sends: u16,
    nsends_posted: u16,
    noops_posted: u16,
    /// Most credits ever in use at once (queue depth minus the low point of `credits`).
    peak_in_use: u16,
}

/// `peercredits_hiw` as the kernel clamps it: 0 means `peer_credits / 2`, and the value is
/// kept in `peer_credits/2 ..= peer_credits − 1`.
pub fn clamp_peercredits_hiw(peercredits_hiw: u16, peer_credits: u16) -> u16 {
    let low = peer_credits / 2;
    let high = peer_credits.saturating_sub(1);
    peercredits_hiw.max(low).min(high)
}

/// `IBLND_CREDITS_HIGHWATER`: `queue_depth × peercredits_hiw / peer_credits` for v2 (4 for
/// the defaults), 7 for v1.
pub fn credits_hiw(version: Version, queue_depth: u16, peer_credits: u16, hiw: u16) -> u16 {
    if version == Version::V1 {
        return CREDITS_HIW_V1;
    }
    let hiw = clamp_peercredits_hiw(hiw, peer_credits);
    let v = u32::from(queue_depth) * u32::from(hiw) / u32::from(peer_credits.max(1));
    u16::try_from(v).unwrap_or(u16::MAX).max(1)
}

/// `concurrent_sends` as the kernel clamps it: 0 means `peer_credits`, and the value is kept
/// in `peer_credits/2 ..= 2·peer_credits` (v1: 4..=16 as well).
pub fn clamp_concurrent_sends(version: Version, concurrent_sends: u16, peer_credits: u16) -> u16 {
    let mut v = if concurrent_sends == 0 {
        peer_credits
    } else {
        concurrent_sends
    };
    v = v.max(peer_credits / 2).min(peer_credits.saturating_mul(2));
    if version == Version::V1 {
        v = v.clamp(4, 16);
    }
    v.max(1)
}

impl ConnCredits {
    /// The state of a new connection with the negotiated `queue_depth`: `credits` and
    /// `reserved` start at it. `peer_credits` and `peercredits_hiw` are the NI's tunables,
    /// `concurrent_sends` the clamped cap (see [`clamp_concurrent_sends`]).
    pub fn new(
        version: Version,
        queue_depth: u16,
        peer_credits: u16,
        peercredits_hiw: u16,
        concurrent_sends: u16,
    ) -> ConnCredits {
        ConnCredits {
            version,
            queue_depth,
            credits: queue_depth,
            outstanding: 0,
            reserved: queue_depth,
            credits_hiw: credits_hiw(version, queue_depth, peer_credits, peercredits_hiw),
            concurrent_sends: concurrent_sends.max(1),
            nsends_posted: 0,
            noops_posted: 0,
            peak_in_use: 0,
        }
    }

    /// Peer receive buffers this side may still fill.
    pub fn credits(&self) -> u16 {
        self.credits
    }

    /// Credits owed to the peer.
    pub fn outstanding(&self) -> u16 {
        self.outstanding
    }

    /// PUT_REQ/GET_REQ that may still start.
    pub fn reserved(&self) -> u16 {
        self.reserved
    }

    /// The high-water mark of owed credits that calls for a NOOP.
    pub fn hiw(&self) -> u16 {
        self.credits_hiw
    }

    /// Signalled sends posted and not completed.
    pub fn nsends_posted(&self) -> u16 {
        self.nsends_posted
    }

    /// NOOPs posted and not completed.
    pub fn noops_posted(&self) -> u16 {
        self.noops_posted
    }

    /// The most credits that were ever in use at once.
    pub fn peak_in_use(&self) -> u16 {
        self.peak_in_use
    }

    /// The negotiated queue depth.
    pub fn queue_depth(&self) -> u16 {
        self.queue_depth
    }

    /// Moves one PUT_REQ/GET_REQ from the reserved queue to the credit queue, if a reserved
    /// credit is left.
    pub fn take_reserved(&mut self) -> bool {
        if self.reserved == 0 {
            return false;
        }
        self.reserved -= 1;
        true
    }

    /// A PUT_ACK, PUT_NAK or GET_DONE arrived: the receive buffer it used is this side's
    /// reserved one.
    pub fn reserved_back(&mut self) {
        self.reserved = self.reserved.saturating_add(1).min(self.queue_depth);
    }

    /// Whether a message of `class` may be posted now.
    pub fn can_post(&self, class: SendClass) -> bool {
        if self.nsends_posted >= self.concurrent_sends {
            return false;
        }
        match (class, self.version) {
            (SendClass::NoCredit, _) | (SendClass::Noop, Version::V2) => true,
            (SendClass::Noop, Version::V1) => self.credits > 0,
            // v1 keeps the last credit back for a NOOP.
            (SendClass::Credit, Version::V1) => self.credits > 1,
            (SendClass::Credit, Version::V2) => self.credits > 0,
        }
    }

    /// Whether a NOOP posted now would be surplus: not needed any more, or (v2) two are
    /// already in flight. Such a NOOP is dropped before posting.
    pub fn noop_surplus(&self, nocred_queued: bool, credit_queue_empty: bool) -> bool {
        !self.need_noop(nocred_queued, credit_queue_empty, false)
            || (self.version == Version::V2 && self.noops_posted >= MAX_NOOPS_POSTED)
    }

    /// A message of `class` is being posted: takes its credit and the credits owed, and
    /// returns the value for its `ibm_credits`.
    pub fn on_post(&mut self, class: SendClass) -> u8 {
        let costs = match (class, self.version) {
            (SendClass::Credit, _) | (SendClass::Noop, Version::V1) => 1,
            _ => 0,
        };
        self.credits = self.credits.saturating_sub(costs);
        self.peak_in_use = self.peak_in_use.max(self.queue_depth - self.credits);
        let give = self.outstanding.min(u16::from(u8::MAX));
        self.outstanding -= give;
        self.nsends_posted += 1;
        if class == SendClass::Noop {
            self.noops_posted += 1;
        }
        // `give` is at most 255.
        u8::try_from(give).unwrap_or(u8::MAX)
    }

    /// A post failed after [`ConnCredits::on_post`]; the connection is closed anyway, so
    /// only the send counters are restored.
    pub fn on_post_failed(&mut self, class: SendClass) {
        self.on_send_complete(class);
    }

    /// A signalled send of `class` completed.
    pub fn on_send_complete(&mut self, class: SendClass) {
        self.nsends_posted = self.nsends_posted.saturating_sub(1);
        if class == SendClass::Noop {
            self.noops_posted = self.noops_posted.saturating_sub(1);
        }
    }

    /// A message arrived carrying `ibm_credits`.
    pub fn on_rx_credits(&mut self, returned: u8) -> Result<(), CreditError> {
        let sum = self.credits + u16::from(returned);
        if sum > self.queue_depth {
            return Err(CreditError::Overflow {
                returned,
                credits: self.credits,
                queue_depth: self.queue_depth,
            });
        }
        self.credits = sum;
        Ok(())
    }

    /// A receive buffer that held a credit-bearing message was reposted: one more credit is
    /// owed to the peer.
    pub fn owe_peer_credit(&mut self) {
        self.outstanding = self.outstanding.saturating_add(1);
    }

    /// Whether a NOOP should be queued to return credits (or as a keepalive):
    /// `outstanding ≥ hiw` (or `keepalive_due`), and in v2 only when no no-credit message is
    /// queued to carry them and the credit queue is empty or out of credits; in v1 only when
    /// nothing else can carry them either.
    pub fn need_noop(
        &self,
        nocred_queued: bool,
        credit_queue_empty: bool,
        keepalive_due: bool,
    ) -> bool {
        if self.outstanding < self.credits_hiw && !keepalive_due {
            return false;
        }
        if nocred_queued {
            return false;
        }
        match self.version {
            Version::V2 => credit_queue_empty || self.credits == 0,
            Version::V1 => credit_queue_empty || self.credits <= 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2() -> ConnCredits {
        ConnCredits::new(
            Version::V2,
            8,
            8,
            0,
            clamp_concurrent_sends(Version::V2, 0, 8),
        )
    }

    #[test]
    fn defaults_give_hiw_4_and_concurrent_sends_8() {
        assert_eq!(credits_hiw(Version::V2, 8, 8, 0), 4);
        assert_eq!(credits_hiw(Version::V2, 8, 8, 100), 7);
        assert_eq!(credits_hiw(Version::V1, 8, 8, 0), 7);
        assert_eq!(credits_hiw(Version::V2, 4, 8, 0), 2);
        assert_eq!(clamp_concurrent_sends(Version::V2, 0, 8), 8);
        assert_eq!(clamp_concurrent_sends(Version::V2, 1, 8), 4);
        assert_eq!(clamp_concurrent_sends(Version::V2, 100, 8), 16);
        assert_eq!(clamp_concurrent_sends(Version::V1, 0, 32), 16);
    }

    #[test]
    fn credits_are_spent_returned_and_capped() {
        let mut c = v2();
        for _ in 0..8 {
            assert!(c.can_post(SendClass::Credit));
            assert_eq!(c.on_post(SendClass::Credit), 0);
            c.on_send_complete(SendClass::Credit);
        }
        assert!(!c.can_post(SendClass::Credit));
        assert!(c.can_post(SendClass::NoCredit));
        assert_eq!(c.peak_in_use(), 8);
        c.on_rx_credits(3).unwrap();
        assert_eq!(c.credits(), 3);
        assert!(c.on_rx_credits(6).is_err());
        assert_eq!(c.credits(), 3);
    }

    #[test]
    fn owed_credits_ride_on_the_next_message() {
        let mut c = v2();
        for _ in 0..3 {
            c.owe_peer_credit();
        }
        assert!(!c.need_noop(false, true, false));
        c.owe_peer_credit();
        assert!(c.need_noop(false, true, false));
        // A queued no-credit message carries them instead.
        assert!(!c.need_noop(true, true, false));
        // Messages waiting for credits that are there carry them too.
        assert!(!c.need_noop(false, false, false));
        assert_eq!(c.on_post(SendClass::NoCredit), 4);
        assert_eq!(c.outstanding(), 0);
        assert_eq!(c.credits(), 8);
    }

    #[test]
    fn v2_noops_are_free_and_at_most_two() {
        let mut c = v2();
        for _ in 0..4 {
            c.owe_peer_credit();
        }
        assert!(!c.noop_surplus(false, true));
        c.on_post(SendClass::Noop);
        assert_eq!(c.credits(), 8);
        for _ in 0..4 {
            c.owe_peer_credit();
        }
        c.on_post(SendClass::Noop);
        for _ in 0..4 {
            c.owe_peer_credit();
        }
        assert!(c.noop_surplus(false, true));
        c.on_send_complete(SendClass::Noop);
        assert!(!c.noop_surplus(false, true));
    }

    #[test]
    fn v1_keeps_the_last_credit_for_a_noop() {
        let mut c = ConnCredits::new(Version::V1, 8, 8, 0, 8);
        for _ in 0..7 {
            assert!(c.can_post(SendClass::Credit));
            c.on_post(SendClass::Credit);
            c.on_send_complete(SendClass::Credit);
        }
        assert!(!c.can_post(SendClass::Credit));
        assert!(c.can_post(SendClass::Noop));
        c.on_post(SendClass::Noop);
        assert_eq!(c.credits(), 0);
    }

    #[test]
    fn reserved_credits_bound_requests_in_flight() {
        let mut c = v2();
        for _ in 0..8 {
            assert!(c.take_reserved());
        }
        assert!(!c.take_reserved());
        c.reserved_back();
        assert!(c.take_reserved());
        for _ in 0..20 {
            c.reserved_back();
        }
        assert_eq!(c.reserved(), 8);
    }

    #[test]
    fn concurrent_sends_cap_posting() {
        let mut c = ConnCredits::new(Version::V2, 8, 8, 0, 2);
        c.on_post(SendClass::NoCredit);
        c.on_post(SendClass::NoCredit);
        assert!(!c.can_post(SendClass::NoCredit));
        c.on_send_complete(SendClass::NoCredit);
        assert!(c.can_post(SendClass::Credit));
    }
}
