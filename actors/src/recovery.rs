//! The recovery queue actors: one for local NIs, one for peer NIs (health reference 2.5).
//!
//! Each wraps an [`lnet::recovery::RecoveryQueue`]. Once a second (on tokio's clock) it
//! runs a recovery round: NIs whose ping is due are handed to the LNet actor to ping, on
//! the backoff schedule of the queue (1, 2, 4, … s up to `max_recovery_ping_interval`),
//! and every step is an event. An NI leaves when its health is back to 1000.

use std::time::Duration;

use actix::prelude::*;
use lnet::health::HealthValue;
use lnet::recovery::{AddOutcome, RecoveryConfig, RecoveryEntry, RecoveryKind, RecoveryQueue};
use lnet::time::Millis;
use lnet::Nid;

use crate::clock::Clock;
use crate::events::{Event, EventBus};
use crate::mailbox::NI_MAILBOX;

/// How often a recovery round runs (the monitor thread's 1 s).
pub const RECOVERY_ROUND: Duration = Duration::from_secs(1);

/// Put an NI on the queue (if the rules allow).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub(crate) struct Queue {
    pub(crate) nid: Nid,
    pub(crate) health: HealthValue,
    pub(crate) last_alive: Option<Millis>,
}

/// An NI's health changed (at 1000 it leaves).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub(crate) struct HealthChanged {
    pub(crate) nid: Nid,
    pub(crate) health: HealthValue,
}

/// A message was received from (or on) an NI: its ping count goes back to 0.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub(crate) struct Heard {
    pub(crate) nid: Nid,
}

/// The NI is gone (removed from the node): it leaves the queue.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub(crate) struct Forget {
    pub(crate) nid: Nid,
}

/// The queue's entries, in order (`lnetctl debug recovery`).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Vec<RecoveryEntry<Nid>>")]
pub(crate) struct List;

/// A recovery ping is due: the LNet actor sends it.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub(crate) struct PingDue {
    pub(crate) queue: RecoveryKind,
    pub(crate) nid: Nid,
}

/// New recovery settings.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub(crate) struct Configure(pub(crate) RecoveryConfig);

/// One recovery queue.
#[derive(Debug)]
pub struct RecoveryActor {
    queue: RecoveryQueue<Nid>,
    config: RecoveryConfig,
    clock: Clock,
    events: EventBus,
    pinger: Recipient<PingDue>,
}

impl RecoveryActor {
    pub(crate) fn new(
        kind: RecoveryKind,
        config: RecoveryConfig,
        clock: Clock,
        events: EventBus,
        pinger: Recipient<PingDue>,
    ) -> RecoveryActor {
        RecoveryActor {
            queue: RecoveryQueue::new(kind),
            config,
            clock,
            events,
            pinger,
        }
    }

    fn round(&mut self) {
        let now = self.clock.now();
        let kind = self.queue.kind();
        let round = self.queue.due(now, &self.config);
        for nid in round.dropped {
            self.events.publish(Event::RecoveryLeft {
                at: now,
                queue: kind,
                nid,
            });
        }
        for ping in round.pings {
            self.events.publish(Event::RecoveryPing {
                at: now,
                queue: kind,
                nid: ping.key,
                ping_count: ping.ping_count,
                next_ping: ping.next_ping,
            });
            let pinger = self.pinger.clone();
            actix::spawn(async move {
                let _ = pinger
                    .send(PingDue {
                        queue: kind,
                        nid: ping.key,
                    })
                    .await;
            });
        }
    }
}

impl Actor for RecoveryActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(NI_MAILBOX);
        ctx.run_interval(RECOVERY_ROUND, |act, _ctx| act.round());
    }
}

impl Handler<Queue> for RecoveryActor {
    type Result = ();

    fn handle(&mut self, q: Queue, _ctx: &mut Context<Self>) {
        let now = self.clock.now();
        let kind = self.queue.kind();
        match self
            .queue
            .add(q.nid, q.health, q.last_alive, now, &self.config)
        {
            AddOutcome::Added => self.events.publish(Event::RecoveryQueued {
                at: now,
                queue: kind,
                nid: q.nid,
            }),
            AddOutcome::PastRecoveryLimit => self.events.publish(Event::RecoveryLeft {
                at: now,
                queue: kind,
                nid: q.nid,
            }),
            _ => {}
        }
    }
}

impl Handler<HealthChanged> for RecoveryActor {
    type Result = ();

    fn handle(&mut self, h: HealthChanged, _ctx: &mut Context<Self>) {
        if self.queue.health_changed(&h.nid, h.health) {
            self.events.publish(Event::RecoveryLeft {
                at: self.clock.now(),
                queue: self.queue.kind(),
                nid: h.nid,
            });
        }
    }
}

impl Handler<Heard> for RecoveryActor {
    type Result = ();

    fn handle(&mut self, h: Heard, _ctx: &mut Context<Self>) {
        self.queue.message_received(&h.nid, self.clock.now());
    }
}

impl Handler<Forget> for RecoveryActor {
    type Result = ();

    fn handle(&mut self, f: Forget, _ctx: &mut Context<Self>) {
        if self.queue.remove(&f.nid).is_some() {
            self.events.publish(Event::RecoveryLeft {
                at: self.clock.now(),
                queue: self.queue.kind(),
                nid: f.nid,
            });
        }
    }
}

impl Handler<List> for RecoveryActor {
    type Result = MessageResult<List>;

    fn handle(&mut self, _: List, _ctx: &mut Context<Self>) -> MessageResult<List> {
        MessageResult(self.queue.entries().cloned().collect())
    }
}

impl Handler<Configure> for RecoveryActor {
    type Result = ();

    fn handle(&mut self, Configure(config): Configure, _ctx: &mut Context<Self>) {
        self.config = config;
    }
}
