//! Where an NI or peer NI actor runs: on the arbiter of the CPT of its NID (`Nid::cpt`,
//! the kernel's hash), the thread whose runtime also runs socklnd's peer and connection
//! tasks for that NID (`lnd::socklnd::Cpts::of`), so that a peer's actor and its
//! connections share a thread.

use actix::{Actor, Addr, ArbiterHandle, Context};
use lnet::Nid;

/// Starts `actor`, the actor of `nid`, on the arbiter of `nid`'s CPT among `cpts`; on the
/// current arbiter when there are none.
pub(super) fn start_on_cpt<A>(cpts: &[ArbiterHandle], nid: &Nid, actor: A) -> Addr<A>
where
    A: Actor<Context = Context<A>> + Send,
{
    let cpt = u32::try_from(cpts.len())
        .ok()
        .filter(|n| *n > 0)
        .and_then(|n| usize::try_from(nid.cpt(n)).ok());
    match cpt.and_then(|i| cpts.get(i)) {
        Some(arbiter) => A::start_in_arbiter(arbiter, move |_| actor),
        None => actor.start(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::thread::ThreadId;

    use actix::{Arbiter, Handler, Message, MessageResult};
    use tokio::sync::oneshot;

    use super::*;

    /// An actor that says which thread it runs on.
    struct Here;

    impl Actor for Here {
        type Context = Context<Self>;
    }

    #[derive(Message)]
    #[rtype(result = "ThreadId")]
    struct Where;

    impl Handler<Where> for Here {
        type Result = MessageResult<Where>;

        fn handle(&mut self, _: Where, _: &mut Context<Self>) -> MessageResult<Where> {
            MessageResult(std::thread::current().id())
        }
    }

    #[actix::test]
    async fn an_actor_runs_on_the_thread_of_its_nids_cpt_with_the_nids_connection_tasks() {
        let arbiters: Vec<Arbiter> = (0..3).map(|_| Arbiter::new()).collect();
        let handles: Vec<ArbiterHandle> = arbiters.iter().map(Arbiter::handle).collect();
        // Each CPT's runtime, as the daemon hands them to socklnd.
        let mut runtimes = Vec::new();
        for a in &arbiters {
            let (tx, rx) = oneshot::channel();
            assert!(a.spawn_fn(move || {
                let _ = tx.send(tokio::runtime::Handle::current());
            }));
            runtimes.push(rx.await.unwrap());
        }
        let lnd_cpts = lnd::socklnd::Cpts(runtimes);
        let mut threads = HashSet::new();
        for s in [
            "10.0.0.1@tcp",
            "10.0.0.2@tcp",
            "10.0.0.3@tcp",
            "192.168.1.7@tcp1",
        ] {
            let nid: Nid = s.parse().unwrap();
            let actor = start_on_cpt(&handles, &nid, Here)
                .send(Where)
                .await
                .unwrap();
            let (tx, rx) = oneshot::channel();
            lnd_cpts.of(&nid).unwrap().spawn(async move {
                let _ = tx.send(std::thread::current().id());
            });
            assert_eq!(actor, rx.await.unwrap(), "{nid}");
            threads.insert(actor);
        }
        // Neighbouring addresses land on different CPTs.
        assert!(threads.len() >= 2, "{threads:?}");
        for a in arbiters {
            a.stop();
        }
    }

    #[actix::test]
    async fn without_cpts_an_actor_runs_where_it_was_started() {
        let nid: Nid = "10.0.0.1@tcp".parse().unwrap();
        let actor = start_on_cpt(&[], &nid, Here).send(Where).await.unwrap();
        assert_eq!(actor, std::thread::current().id());
    }
}
