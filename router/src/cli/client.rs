//! The HTTPS client of the lnetctl-style commands and the errors they print in lnetctl's
//! shape.

use serde::de::DeserializeOwned;

use super::Connect;

/// The value at a JSON pointer, `null` when absent.
pub(crate) fn at<'a>(v: &'a serde_json::Value, pointer: &str) -> &'a serde_json::Value {
    v.pointer(pointer).unwrap_or(&serde_json::Value::Null)
}

/// What went wrong, with the names lnetctl's error YAML uses.
#[derive(Debug)]
pub struct CtlError {
    /// The command (`show`, `add`, `del`, `set`, `ping`...).
    pub command: &'static str,
    /// The object (`net`, `route`, ...).
    pub object: &'static str,
    /// The errno lnetctl would print (negative).
    pub errno: i32,
    /// The description.
    pub descr: String,
    /// A document lnetctl prints on standard output although the command failed (`ping`
    /// of several NIDs, some unreachable: the answers and a `manage:` list of failures).
    /// When set, it is printed instead of the error YAML (unless `error_too`).
    pub printed: Option<String>,
    /// Whether the error YAML is printed too, after `printed` (`import --exec`: the
    /// answers of the commands that ran before one was refused, then the refusal).
    pub error_too: bool,
    /// More failures of the same command, printed after this one in the same list
    /// (`import`: one item per section or object that failed).
    pub(crate) more: Vec<ErrorItem>,
    /// Whether `descr` holds the plain lines lnetctl writes to standard error instead of
    /// its error YAML (`debug nidlist`): then they are printed as they are, and no YAML.
    pub plain: bool,
}

/// One more `- OBJECT:` item of an error list.
#[derive(Debug, Clone)]
pub(crate) struct ErrorItem {
    /// The object.
    pub(crate) object: String,
    /// The errno (negative).
    pub(crate) errno: i32,
    /// The description.
    pub(crate) descr: String,
}

impl CtlError {
    /// lnetctl's error YAML.
    pub fn to_yaml(&self) -> String {
        let item = |object: &str, errno: i32, descr: &str| {
            format!(
                "    - {object}:\n          errno: {errno}\n          descr: \"{}\"\n",
                descr.replace('"', "'")
            )
        };
        let mut out = format!("{}:\n", self.command);
        out.push_str(&item(self.object, self.errno, &self.descr));
        for m in &self.more {
            out.push_str(&item(&m.object, m.errno, &m.descr));
        }
        out
    }
}

/// The errno lnetctl reports for an HTTP status of the API.
pub(crate) fn errno_of(status: reqwest::StatusCode) -> i32 {
    match status.as_u16() {
        401 | 403 => -1,  // EPERM
        404 => -2,        // ENOENT
        409 => -17,       // EEXIST
        400 | 422 => -22, // EINVAL
        503 => -16,       // EBUSY
        _ => -5,          // EIO
    }
}

/// `strerror` of the errnos the commands print.
pub(crate) fn strerror(errno: i32) -> &'static str {
    match errno {
        -1 => "Operation not permitted",
        -2 => "No such file or directory",
        -5 => "Input/output error",
        -16 => "Device or resource busy",
        -17 => "File exists",
        -22 => "Invalid argument",
        -71 => "Protocol error",
        -95 => "Operation not supported",
        -110 => "Connection timed out",
        -111 => "Connection refused",
        -113 => "No route to host",
        _ => "Unknown error",
    }
}

pub(crate) struct Client {
    pub(crate) http: reqwest::Client,
    pub(crate) base: String,
    token: Option<String>,
    command: &'static str,
    object: &'static str,
}

impl Client {
    pub(crate) fn new(
        c: &Connect,
        command: &'static str,
        object: &'static str,
    ) -> Result<Client, CtlError> {
        let fail = |descr: String| CtlError {
            command,
            object,
            errno: -22,
            descr,
            printed: None,
            error_too: false,
            more: Vec::new(),
            plain: false,
        };
        let mut b = reqwest::Client::builder().use_rustls_tls();
        if let Some(ca) = &c.ca_cert {
            let pem = std::fs::read(ca).map_err(|e| fail(format!("{}: {e}", ca.display())))?;
            let cert = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| fail(format!("{}: {e}", ca.display())))?;
            b = b.add_root_certificate(cert);
        }
        let http = b.build().map_err(|e| fail(e.to_string()))?;
        Ok(Client {
            http,
            base: c.api.trim_end_matches('/').to_owned(),
            token: c.token.clone(),
            command,
            object,
        })
    }

    pub(crate) fn err(&self, errno: i32, descr: String) -> CtlError {
        CtlError {
            command: self.command,
            object: self.object,
            errno,
            descr,
            printed: None,
            error_too: false,
            more: Vec::new(),
            plain: false,
        }
    }

    pub(crate) async fn send(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<serde_json::Value, CtlError> {
        let req = match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        };
        let resp = req
            .send()
            .await
            .map_err(|e| self.err(-111, format!("cannot reach {}: {e}", self.base)))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| self.err(-5, format!("bad answer from {}: {e}", self.base)))?;
        let body: serde_json::Value = if text.trim().is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(&text)
                .map_err(|e| self.err(-5, format!("bad answer from {}: {e}", self.base)))?
        };
        if !status.is_success() {
            let msg = at(&body, "/error/message")
                .as_str()
                .unwrap_or("request refused")
                .to_owned();
            let field = at(&body, "/error/field").as_str();
            let descr = match field {
                Some(f) => format!("{f}: {msg}"),
                None => msg,
            };
            return Err(self.err(errno_of(status), descr));
        }
        Ok(body)
    }

    /// A document that is not JSON (`GET /api/v1/export`, YAML) as text; a refusal is
    /// read as the API's JSON error.
    pub(crate) async fn get_text(&self, path: &str) -> Result<String, CtlError> {
        let req = self.http.get(format!("{}{path}", self.base));
        let req = match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        };
        let resp = req
            .send()
            .await
            .map_err(|e| self.err(-111, format!("cannot reach {}: {e}", self.base)))?;
        if resp.status().is_success() {
            return resp
                .text()
                .await
                .map_err(|e| self.err(-5, format!("bad answer from {}: {e}", self.base)));
        }
        // Not a success: the same error as any other request's.
        let status = resp.status();
        let body: serde_json::Value = resp.json().await.unwrap_or_default();
        let msg = at(&body, "/error/message")
            .as_str()
            .unwrap_or("request refused")
            .to_owned();
        Err(self.err(errno_of(status), msg))
    }

    pub(crate) async fn get(&self, path: &str) -> Result<serde_json::Value, CtlError> {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    pub(crate) async fn post(
        &self,
        path: &str,
        body: serde_json::Value,
    ) -> Result<serde_json::Value, CtlError> {
        self.send(self.http.post(format!("{}{path}", self.base)).json(&body))
            .await
    }

    pub(crate) async fn delete(&self, path: &str) -> Result<serde_json::Value, CtlError> {
        self.send(self.http.delete(format!("{}{path}", self.base)))
            .await
    }

    pub(crate) fn model<T: DeserializeOwned>(&self, v: serde_json::Value) -> Result<T, CtlError> {
        serde_json::from_value(v).map_err(|e| self.err(-5, format!("unexpected document: {e}")))
    }
}

/// A document as `--json` prints it.
pub(crate) fn json(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}
