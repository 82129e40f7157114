//! A test PKI (rcgen): a CA and the certificates it signs, as PEM files,
//! for the suites that run TLS (`tls.rs`, `sentinel.rs`).
#![allow(dead_code)]
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use std::path::PathBuf;

/// A CA, and certificates it (or another CA) signed, as PEM files.
pub struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

/// A certificate and its key on disk.
pub struct Pair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Pki {
    pub fn new(name: &str) -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        let ca = p.self_signed(&ca_key).unwrap();
        std::fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
        Pki { dir, ca, ca_key }
    }

    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// A certificate for `names` (DNS names or IPs), valid now unless
    /// `expired`, for server or client use.
    pub fn issue(&self, file: &str, names: &[&str], client: bool, expired: bool) -> Pair {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.distinguished_name.push(DnType::CommonName, file);
        p.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        if !client {
            // A server's certificate also serves as its client certificate
            // on outgoing links (Redis's fallback), as in Redis's own tests.
            p.extended_key_usages
                .push(ExtendedKeyUsagePurpose::ClientAuth);
        }
        if expired {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = p.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let pair = Pair {
            cert: self.dir.path().join(format!("{file}.crt")),
            key: self.dir.path().join(format!("{file}.key")),
        };
        std::fs::write(&pair.cert, cert.pem()).unwrap();
        std::fs::write(&pair.key, key.serialize_pem()).unwrap();
        pair
    }

    pub fn server(&self) -> Pair {
        self.issue("server", &["localhost", "127.0.0.1"], false, false)
    }
}
