//! TLS: the rustls server configuration from PEM certificate and key files (ring
//! provider), and a self-signed certificate for demos and tests.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::WebError;

/// A self-signed certificate and its private key, in PEM.
#[derive(Clone)]
pub struct SelfSigned {
    /// The certificate.
    pub cert_pem: String,
    /// The private key (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for SelfSigned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelfSigned")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

impl SelfSigned {
    /// A new key pair and a certificate for `names` (DNS names or IP addresses, which
    /// become IP subject alternative names).
    pub fn generate(names: &[&str]) -> Result<SelfSigned, WebError> {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let ck = rcgen::generate_simple_self_signed(names)
            .map_err(|source| WebError::CertGen { source })?;
        Ok(SelfSigned {
            cert_pem: ck.cert.pem(),
            key_pem: ck.key_pair.serialize_pem(),
        })
    }

    /// Writes `cert.pem` and `key.pem` (mode 0600) into `dir`; returns their paths.
    pub fn write(&self, dir: &Path) -> Result<(PathBuf, PathBuf), WebError> {
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        std::fs::write(&cert, &self.cert_pem).map_err(|source| WebError::File {
            path: cert.clone(),
            source,
        })?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        options
            .open(&key)
            .and_then(|mut f| f.write_all(self.key_pem.as_bytes()))
            .map_err(|source| WebError::File {
                path: key.clone(),
                source,
            })?;
        Ok((cert, key))
    }
}

fn read(path: &Path) -> Result<Vec<u8>, WebError> {
    std::fs::read(path).map_err(|source| WebError::File {
        path: path.to_owned(),
        source,
    })
}

/// The rustls server configuration for the certificate chain in `cert` and the private
/// key in `key` (PEM files), offering HTTP/1.1.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, WebError> {
    let cert_bytes = read(cert)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_bytes)
        .collect::<Result<_, _>>()
        .map_err(|source| WebError::Pem {
            path: cert.to_owned(),
            source,
        })?;
    if certs.is_empty() {
        return Err(WebError::NoCertificate {
            path: cert.to_owned(),
        });
    }
    let key_bytes = read(key)?;
    let key_der = PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|source| WebError::Pem {
        path: key.to_owned(),
        source,
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|source| WebError::Tls { source })?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|source| WebError::Tls { source })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
