//! A plain TCP relay: the yardstick the router is measured against.
//!
//! It listens on an end node's address at the port the other end dials (socklnd dials the
//! peer NID's address at its `peer_port`), and for each connection it opens one onward to
//! the same address at the port the end node's acceptor really listens on, then copies
//! both directions with fixed buffers until either side closes. It reads no byte of what
//! it carries: the acceptor request, the HELLO and the frames pass through as they are.
//!
//! The onward connection leaves from the dialling node's own address and from a reserved
//! port (1023 down to 512), because a socklnd acceptor closes connections from unreserved
//! ports (`accept=secure`). socklnd does not check the peer's address against the NID in
//! its HELLO, so this is all it takes for both ends to see a normal peer.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use lnd::socklnd::handshake::connect_reserved;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::topo::Host;
use crate::BenchError;

/// The copy buffer of each direction: the read chunk of a socklnd connection (64 KiB).
pub const RELAY_BUFFER: usize = 64 * 1024;
/// How long the onward connect may take.
const CONNECT_LIMIT: Duration = Duration::from_secs(5);

/// Relays running on a host; they stop when this is dropped.
#[derive(Debug)]
pub struct Relay {
    tasks: Vec<JoinHandle<()>>,
}

impl Relay {
    /// Starts, on `host`, one listener per `(listen, target_port)`: connections accepted
    /// on `listen` are relayed to `listen`'s address at `target_port`.
    pub async fn start(
        host: &Host,
        pairs: Vec<(SocketAddr, u16)>,
        buffer: usize,
    ) -> Result<Relay, BenchError> {
        let tasks = host
            .run(move || async move {
                let mut tasks = Vec::new();
                for (listen, target_port) in pairs {
                    let listener = TcpListener::bind(listen).await.map_err(|e| {
                        BenchError::Setup(format!("relay cannot listen on {listen}: {e}"))
                    })?;
                    let target = SocketAddr::new(listen.ip(), target_port);
                    tasks.push(tokio::spawn(accept_loop(listener, target, buffer)));
                }
                Ok::<_, BenchError>(tasks)
            })
            .await??;
        Ok(Relay { tasks })
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn accept_loop(listener: TcpListener, target: SocketAddr, buffer: usize) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, from)) => {
                    conns.spawn(relay_one(stream, from, target, buffer));
                }
                Err(e) => {
                    tracing::warn!(%target, "relay: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn relay_one(mut inbound: TcpStream, from: SocketAddr, target: SocketAddr, buffer: usize) {
    let IpAddr::V4(from_ip) = from.ip() else {
        return;
    };
    let mut onward = match connect_reserved(from_ip, target, CONNECT_LIMIT).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(%from, %target, "relay: onward connect failed: {e}");
            return;
        }
    };
    let _ = inbound.set_nodelay(true);
    let _ = onward.set_nodelay(true);
    let _ =
        tokio::io::copy_bidirectional_with_sizes(&mut inbound, &mut onward, buffer, buffer).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[actix::test]
    async fn bytes_cross_both_ways_from_a_reserved_port_of_the_dialler() {
        let host = Host::new("relay-test");
        let target: SocketAddr = "127.0.59.250:25990".parse().unwrap();
        let server = TcpListener::bind(target).await.unwrap();
        let _relay = Relay::start(
            &host,
            vec![("127.0.59.250:25991".parse().unwrap(), 25990)],
            RELAY_BUFFER,
        )
        .await
        .unwrap();
        let client = tokio::spawn(async move {
            let sock = tokio::net::TcpSocket::new_v4().unwrap();
            sock.bind("127.0.59.251:0".parse().unwrap()).unwrap();
            let mut c = sock
                .connect("127.0.59.250:25991".parse().unwrap())
                .await
                .unwrap();
            c.write_all(b"ping").await.unwrap();
            let mut back = [0u8; 4];
            c.read_exact(&mut back).await.unwrap();
            back
        });
        let (mut s, from) = tokio::time::timeout(Duration::from_secs(10), server.accept())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(from.ip(), "127.0.59.251".parse::<IpAddr>().unwrap());
        assert!(from.port() <= 1023, "{from}");
        let mut got = [0u8; 4];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        s.write_all(b"pong").await.unwrap();
        let back = tokio::time::timeout(Duration::from_secs(10), client)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&back, b"pong");
    }
}
