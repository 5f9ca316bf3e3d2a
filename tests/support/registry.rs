//! A test's own requests to an OCI registry, made as a client other than the tool makes them:
//! to check what the tool pushed, or to plant what the tool must then find.

use super::docker::local_registry;
use super::{runtime, sha256_hex};

/// What a manifest GET accepts: an index or a single-platform manifest.
const MANIFEST_ACCEPT: &str =
    "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json";

/// The media type of an OCI index, for [`Registry::put_manifest`].
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// A registry's base URL and, for https, the only CA its certificate may chain to.
pub struct Registry {
    base: String,
    ca_pem: Option<Vec<u8>>,
}

impl Registry {
    /// The shared local registry (`scripts/local-registry.sh`), plain http.
    pub fn local() -> Registry {
        Registry {
            base: format!("http://{}", local_registry()),
            ca_pem: None,
        }
    }

    /// An https registry at `base` (`https://host:port`) whose certificate `ca_pem` signed.
    pub fn tls(base: String, ca_pem: Vec<u8>) -> Registry {
        Registry {
            base,
            ca_pem: Some(ca_pem),
        }
    }

    /// A client per request: each request runs on a runtime of its own, and a pooled
    /// connection would outlive the runtime that drives it.
    fn client(&self) -> reqwest::Client {
        let mut builder = reqwest::Client::builder().no_proxy();
        if let Some(pem) = &self.ca_pem {
            builder = builder.tls_certs_only([reqwest::Certificate::from_pem(pem).unwrap()]);
        }
        builder.build().unwrap()
    }

    fn url(&self, repository: &str, reference: &str) -> String {
        format!("{}/v2/{repository}/manifests/{reference}", self.base)
    }

    /// `GET /v2/<repository>/manifests/<reference>`, with `bearer` as the token when given:
    /// (status, `sha256:` of the body).
    pub fn get_manifest(
        &self,
        repository: &str,
        reference: &str,
        bearer: Option<&str>,
    ) -> (u16, String) {
        let url = self.url(repository, reference);
        runtime().block_on(async {
            let mut request = self.client().get(&url).header("Accept", MANIFEST_ACCEPT);
            if let Some(token) = bearer {
                request = request.bearer_auth(token);
            }
            let response = request
                .send()
                .await
                .unwrap_or_else(|e| panic!("GET {url}: {e}"));
            let status = response.status().as_u16();
            let body = response.bytes().await.unwrap();
            (status, format!("sha256:{}", sha256_hex(&body)))
        })
    }

    /// `PUT /v2/<repository>/manifests/<reference>` of `body` as `media_type`; fails the test
    /// unless the registry accepts it.
    pub fn put_manifest(&self, repository: &str, reference: &str, media_type: &str, body: Vec<u8>) {
        let url = self.url(repository, reference);
        runtime().block_on(async {
            let response = self
                .client()
                .put(&url)
                .header("Content-Type", media_type)
                .body(body)
                .send()
                .await
                .unwrap_or_else(|e| panic!("PUT {url}: {e}"));
            assert!(
                response.status().is_success(),
                "PUT {url}: {}",
                response.status()
            );
        });
    }

    /// `GET` of a manifest (by tag or digest) or of a blob (`what`: `manifests` or `blobs`):
    /// its body when the registry answers 200, `None` when 404; fails the test otherwise.
    pub fn get_body(&self, repository: &str, what: &str, reference: &str) -> Option<Vec<u8>> {
        let url = format!("{}/v2/{repository}/{what}/{reference}", self.base);
        runtime().block_on(async {
            let response = self
                .client()
                .get(&url)
                .header("Accept", MANIFEST_ACCEPT)
                .send()
                .await
                .unwrap_or_else(|e| panic!("GET {url}: {e}"));
            match response.status().as_u16() {
                200 => Some(response.bytes().await.unwrap().to_vec()),
                404 => None,
                other => panic!("GET {url}: {other}"),
            }
        })
    }
}
