//! The browser dashboard: the files of `dashboard/dist` (built by `scripts/build-dashboard`),
//! embedded in the binary when the crate compiles and served from `/`.
//!
//! [`router`] has one route per embedded file (`/` is `index.html`), so every other path
//! still reaches the API's own fallback (a JSON 404). Each file is served with its content
//! type; text files come brotli- or gzip-compressed when the client accepts it (the build
//! writes the `.br` and `.gz` copies, nothing is compressed at run time). The hashed files
//! under `assets/` are cached for a year, `index.html` is revalidated every time (by its
//! ETag), and the page gets a Content-Security-Policy that lets it load and connect to this
//! origin only.

use axum::http::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG,
    IF_NONE_MATCH, REFERRER_POLICY, VARY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use rust_embed::RustEmbed;

/// The built dashboard (`dashboard/dist`), embedded at compile time (also in debug builds).
#[derive(RustEmbed)]
#[folder = "../dashboard/dist/"]
struct Assets;

/// What the page may load and connect to: this origin only (styles may be set inline, as
/// the chart library does).
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
    img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; \
    base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The routes of the dashboard, for any server state: `GET /` and `GET /<file>` for each
/// embedded file. Merge it into the API's router (`api.merge(dashboard::router())`).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let mut router = Router::new().route(
        "/",
        get(|h: HeaderMap| std::future::ready(serve("index.html", &h))),
    );
    for file in files() {
        let path = format!("/{file}");
        router = router.route(
            &path,
            get(move |h: HeaderMap| std::future::ready(serve(&file, &h))),
        );
    }
    router
}

/// The paths of the embedded files a client asks for (not the compressed copies), that an
/// axum route can name.
pub fn files() -> Vec<String> {
    Assets::iter()
        .filter(|f| !f.ends_with(".br") && !f.ends_with(".gz"))
        .filter(|f| !f.contains(['{', '}', '*', ':']) && !f.is_empty())
        .map(|f| f.into_owned())
        .collect()
}

/// Whether the dashboard was embedded (an `index.html` is there).
pub fn embedded() -> bool {
    Assets::get("index.html").is_some()
}

/// The content type of a file, by its extension.
fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    match ext {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// Whether `Accept-Encoding` accepts `coding` (a q of 0 refuses it).
fn accepts(headers: &HeaderMap, coding: &str) -> bool {
    headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            name.eq_ignore_ascii_case(coding) && !refused
        })
}

/// One embedded file, compressed as the client accepts, or 304 when it has it already.
fn serve(path: &str, headers: &HeaderMap) -> Response {
    let Some(plain) = Assets::get(path) else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let etag = format!(
        "\"{}\"",
        plain
            .metadata
            .sha256_hash()
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let mut out = HeaderMap::new();
    out.insert(CONTENT_TYPE, HeaderValue::from_static(content_type(path)));
    out.insert(VARY, HeaderValue::from_static("accept-encoding"));
    out.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    out.insert(
        CACHE_CONTROL,
        HeaderValue::from_static(if path.starts_with("assets/") {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        }),
    );
    if path.ends_with(".html") {
        out.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
        out.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
        out.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    if let Ok(v) = HeaderValue::from_str(&etag) {
        out.insert(ETAG, v);
    }
    let fresh = headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim() == etag || t.trim() == "*");
    if fresh {
        return (StatusCode::NOT_MODIFIED, out).into_response();
    }
    for (coding, ext) in [("br", "br"), ("gzip", "gz")] {
        if accepts(headers, coding) {
            if let Some(packed) = Assets::get(&format!("{path}.{ext}")) {
                out.insert(CONTENT_ENCODING, HeaderValue::from_static(coding));
                return (out, packed.data.into_owned()).into_response();
            }
        }
    }
    (out, plain.data.into_owned()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = router::<()>().fallback(|| async { (StatusCode::NOT_FOUND, "api fallback") });
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = reqwest::Client::builder().no_gzip().build().unwrap();
        let mut req = client.get(format!("http://{addr}{path}"));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send().await.unwrap()
    }

    #[tokio::test]
    async fn the_page_and_its_assets_are_served_with_their_types() {
        assert!(embedded(), "dashboard/dist has no index.html");
        let page = get("/", &[]).await;
        assert_eq!(page.status(), 200);
        assert_eq!(page.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
        assert!(page.headers()[CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("connect-src 'self'"));
        assert!(page.headers().get(CONTENT_ENCODING).is_none());
        let html = page.text().await.unwrap();
        assert!(html.contains("<div id=\"app\">"));
        let js = files()
            .into_iter()
            .find(|f| f.starts_with("assets/") && f.ends_with(".js"))
            .unwrap();
        assert!(html.contains(&format!("/{js}")), "index.html loads {js}");
        let script = get(&format!("/{js}"), &[("accept-encoding", "gzip, br")]).await;
        assert_eq!(script.status(), 200);
        assert_eq!(
            script.headers()[CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
        assert_eq!(script.headers()[CONTENT_ENCODING], "br");
        assert!(script.headers()[CACHE_CONTROL]
            .to_str()
            .unwrap()
            .contains("immutable"));
        let gz = get(&format!("/{js}"), &[("accept-encoding", "gzip, br;q=0")]).await;
        assert_eq!(gz.headers()[CONTENT_ENCODING], "gzip");
        let body = gz.bytes().await.unwrap();
        assert_eq!(body.get(..2), Some(&[0x1f, 0x8b][..]), "a gzip stream");
    }

    #[tokio::test]
    async fn an_etag_match_is_not_modified_and_other_paths_fall_through() {
        let page = get("/index.html", &[]).await;
        let etag = page.headers()[ETAG].to_str().unwrap().to_owned();
        let again = get("/", &[("if-none-match", &etag)]).await;
        assert_eq!(again.status(), 304);
        let other = get("/api/v1/nothing", &[]).await;
        assert_eq!(other.status(), 404);
        assert_eq!(other.text().await.unwrap(), "api fallback");
        let compressed_copy = get("/index.html.br", &[]).await;
        assert_eq!(compressed_copy.text().await.unwrap(), "api fallback");
    }

    #[test]
    fn accept_encoding_is_read_with_its_weights() {
        let mut h = HeaderMap::new();
        h.insert(
            ACCEPT_ENCODING,
            HeaderValue::from_static("gzip;q=0.5, br;q=0"),
        );
        assert!(accepts(&h, "gzip"));
        assert!(!accepts(&h, "br"));
        assert!(!accepts(&HeaderMap::new(), "gzip"));
        assert_eq!(content_type("assets/x.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("noext"), "application/octet-stream");
    }
}
