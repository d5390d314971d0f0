//! Hostile API clients against the real server (HTTPS with a self-signed certificate, or
//! plain HTTP, on 127.0.0.1): a request head dripped a byte at a time and a silent
//! connection are cut by the head timeout; a body over the limit gets 413; event streams
//! beyond the limit get 503 while the server keeps answering; unknown tokens are counted
//! and, past a few, the address must wait (401 with `Retry-After`) while another address is
//! served; a TLS 1.0 ClientHello is refused. Each refusal is counted in the server's guard
//! counters, which `/metrics` serves. Every wait is bounded.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::time::Duration;

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::json;
use support::{eventually, fabric_pair, frozen, serve_with, Mode, ADMIN, READER, WAIT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use web::Refusal;

/// Reads until the server closes the connection (bounded); the bytes it sent.
async fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut got)).await;
    got
}

/// The resident set of this process (server and clients), in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[actix::test]
async fn slow_request_heads_and_silent_connections_are_cut() {
    let (a, _an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve_with(a, frozen(), Mode::PlainReadOnly, |c| {
        c.header_timeout = Duration::from_millis(1500);
    })
    .await;
    let addr = api.server.local_addr();
    let guard = api.server.guard_stats();

    // A head dripped a byte every 200 ms: cut, whatever it sends.
    let drip = async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let head =
            b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
        for b in head {
            if s.write_all(&[*b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        read_to_close(&mut s).await
    };
    // A connection that sends nothing: closed too.
    let silent = async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        read_to_close(&mut s).await
    };
    // A well-behaved client meanwhile.
    let good = async {
        let a = api.get("/livez", None).await;
        assert_eq!(a.status, StatusCode::OK);
    };
    let (dripped, quiet, ()) = tokio::join!(drip, silent, good);
    assert!(
        !String::from_utf8_lossy(&dripped).contains("200 OK"),
        "the dripped request was answered"
    );
    assert!(quiet.is_empty());
    eventually(|| async {
        (guard.get(Refusal::SlowHeader) >= 1 && guard.get(Refusal::Idle) >= 1).then_some(())
    })
    .await;
    // The same head sent at once is answered.
    let a = api.get("/livez", None).await;
    assert_eq!(a.status, StatusCode::OK);
}

#[actix::test]
async fn oversized_bodies_get_413_and_are_counted() {
    let (a, _an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve_with(a, frozen(), Mode::Https, |_| {}).await;
    let big = "x".repeat(web::guard::DEFAULT_MAX_BODY_BYTES + 1);
    let a = api
        .call(
            reqwest::Method::POST,
            "/api/v1/routes",
            Some(ADMIN),
            Some(json!({"net": "tcp9", "gateway": "10.0.0.9@tcp", "padding": big})),
        )
        .await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", a.text);
    let (_, message) = a.error();
    assert!(message.contains("too large"), "{message}");
    assert_eq!(api.server.guard_stats().get(Refusal::BodyTooLarge), 1);
    let metrics = api.get("/metrics", Some(READER)).await.text;
    assert!(
        metrics.contains("lnet_router_api_refused_total{reason=\"body_too_large\"} 1"),
        "{metrics}"
    );
}

#[actix::test]
async fn a_thousand_event_subscribers_are_bounded_and_the_server_answers() {
    const SUBSCRIBERS: usize = 1000;
    const ALLOWED: usize = 100;
    let (a, _an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve_with(a, frozen(), Mode::Https, |c| {
        c.max_event_streams = ALLOWED;
    })
    .await;
    let rss_before = rss_kib();
    let url = format!("{}/api/v1/events/stream", api.base);
    let opened = join_all((0..SUBSCRIBERS).map(|_| {
        let (client, url) = (api.client.clone(), url.clone());
        async move {
            tokio::time::timeout(WAIT, client.get(url).bearer_auth(READER).send())
                .await
                .expect("bounded")
                .unwrap()
        }
    }))
    .await;
    let ok = opened
        .iter()
        .filter(|r| r.status() == StatusCode::OK)
        .count();
    let full = opened
        .iter()
        .filter(|r| r.status() == StatusCode::SERVICE_UNAVAILABLE)
        .count();
    assert_eq!((ok, full), (ALLOWED, SUBSCRIBERS - ALLOWED));
    assert_eq!(
        api.server.guard_stats().get(Refusal::EventStreamsFull),
        (SUBSCRIBERS - ALLOWED) as u64
    );
    // With every allowed stream open, the server still answers.
    let nets = api.get("/api/v1/nets", Some(READER)).await;
    assert_eq!(nets.status, StatusCode::OK);
    println!(
        "{SUBSCRIBERS} subscribers ({ALLOWED} streams open, {full} refused): RSS {rss_before} KiB \
         before, {} KiB with them held",
        rss_kib()
    );
    drop(opened);
}

#[actix::test]
async fn token_guessing_is_counted_and_slowed_per_address() {
    let (a, _an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve_with(a, frozen(), Mode::Https, |_| {}).await;
    let guard = api.server.guard_stats();
    let mut throttled = None;
    for i in 0..20 {
        let a = api
            .get(
                "/api/v1/nets",
                Some(&format!("guess-{i:04}-0123456789abcdef")),
            )
            .await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED);
        if let Some(wait) = a.headers.get("retry-after") {
            throttled = Some((i, wait.to_str().unwrap().to_owned(), a.error().1));
            break;
        }
    }
    let (attempt, wait, message) = throttled.expect("guessing was never slowed");
    assert!(
        attempt > web::guard::throttle::FREE_FAILURES as usize,
        "slowed at attempt {attempt}"
    );
    assert!(wait.parse::<u64>().unwrap() >= 1);
    assert!(message.contains("too many unknown tokens"), "{message}");
    // In its wait, even the right token from that address is turned away unchecked...
    let refused = api.get("/api/v1/nets", Some(READER)).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    // ... while another address is served.
    let other = reqwest::Client::builder()
        .use_rustls_tls()
        .danger_accept_invalid_certs(true)
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let served = other
        .get(format!("{}/api/v1/nets", api.base))
        .bearer_auth(READER)
        .send()
        .await
        .unwrap();
    assert_eq!(served.status(), StatusCode::OK);
    assert!(guard.get(Refusal::AuthFailed) > web::guard::throttle::FREE_FAILURES.into());
    assert!(guard.get(Refusal::AuthThrottled) >= 2);
}

/// A TLS 1.0 ClientHello: no extensions, two RSA AES-CBC suites.
fn tls10_client_hello() -> Vec<u8> {
    let mut body = vec![0x03, 0x01];
    body.extend_from_slice(&[0x5a; 32]);
    body.push(0);
    body.extend_from_slice(&[0x00, 0x04, 0x00, 0x2f, 0x00, 0x35]);
    body.extend_from_slice(&[0x01, 0x00]);
    let mut hs = vec![0x01, 0, 0, body.len() as u8];
    hs.extend_from_slice(&body);
    let mut record = vec![0x16, 0x03, 0x01, 0, hs.len() as u8];
    record.extend_from_slice(&hs);
    record
}

#[actix::test]
async fn tls_below_1_2_is_refused_and_counted() {
    let (a, _an, _b, _bn, _fabric) = fabric_pair(frozen()).await;
    let api = serve_with(a, frozen(), Mode::Https, |_| {}).await;
    let mut s = TcpStream::connect(api.server.local_addr()).await.unwrap();
    s.write_all(&tls10_client_hello()).await.unwrap();
    let answer = read_to_close(&mut s).await;
    // An alert record, or nothing: never a ServerHello.
    assert!(answer.first().is_none_or(|&t| t == 0x15), "{answer:02x?}");
    let guard = api.server.guard_stats();
    eventually(|| async { (guard.get(Refusal::TlsIncompatible) >= 1).then_some(()) }).await;
    // A TLS 1.2+ client is served meanwhile.
    assert_eq!(api.get("/livez", None).await.status, StatusCode::OK);
}
