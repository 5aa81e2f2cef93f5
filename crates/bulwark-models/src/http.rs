//! The authors' URL over HTTPS, streamed to the hashing sink.

use crate::fetch::{SourceError, error_chain};
use crate::verify::Sink;
use crate::{ModelSpec, Progress, Stage};
use std::path::Path;
use std::time::Duration;
use tempfile::NamedTempFile;

/// How to download the file from a URL.
#[derive(Clone, Default)]
pub struct Http {
    /// Use this URL instead of the catalogue's (a mirror, or a test server).
    pub url: Option<String>,
    /// Send requests through this proxy (`http://host:port`). The process
    /// environment is never consulted, because the CLI scrubs it: the caller
    /// passes what the user set.
    pub proxy: Option<String>,
    /// Hosts that bypass the proxy, in `NO_PROXY` syntax.
    pub no_proxy: Option<String>,
}

/// Without the proxy, which may be `http://user:password@host`.
impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("url", &self.url)
            .field("proxy", &self.proxy.as_ref().map(|_| "(set)"))
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

/// A stalled connection fails after this long without a byte.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

impl Http {
    pub(crate) fn url_for<'a>(&'a self, spec: &'a ModelSpec) -> Option<&'a str> {
        self.url.as_deref().or(spec.url.as_deref())
    }

    fn client(&self, url: &str) -> Result<reqwest::blocking::Client, SourceError> {
        let fail = |message: String| SourceError::Http {
            url: url.to_owned(),
            message,
        };
        let mut builder = reqwest::blocking::Client::builder()
            .no_proxy()
            .connect_timeout(CONNECT_TIMEOUT)
            // In the blocking client this bounds each wait (the response
            // head, every read of the body), not the whole transfer.
            .timeout(READ_TIMEOUT)
            .user_agent(concat!("bulwark/", env!("CARGO_PKG_VERSION")));
        if let Some(proxy) = &self.proxy {
            let proxy = reqwest::Proxy::all(proxy)
                .map_err(|e| fail(format!("bad proxy `{proxy}`: {}", error_chain(&e))))?
                .no_proxy(
                    self.no_proxy
                        .as_deref()
                        .and_then(reqwest::NoProxy::from_string),
                );
            builder = builder.proxy(proxy);
        }
        builder.build().map_err(|e| {
            fail(format!(
                "cannot set up the HTTP client: {}",
                error_chain(&e)
            ))
        })
    }

    pub(crate) fn fetch(
        &self,
        spec: &ModelSpec,
        dest_dir: &Path,
        progress: &mut dyn Progress,
    ) -> Result<NamedTempFile, SourceError> {
        let Some(url) = self.url_for(spec) else {
            return Err(SourceError::NotAvailable(
                "no download URL is published for this model".into(),
            ));
        };
        let fail = |message: String| SourceError::Http {
            url: url.to_owned(),
            message,
        };
        let client = self.client(url)?;
        let mut response = client
            .get(url)
            .send()
            .map_err(|e| fail(format!("request failed: {}", error_chain(&e))))?;
        let status = response.status();
        if !status.is_success() {
            return Err(fail(format!("the server answered {status}")));
        }
        if let Some(len) = response.content_length()
            && len != spec.size
        {
            return Err(SourceError::Size {
                what: "the download".to_owned(),
                actual: len,
                expected: spec.size,
            });
        }
        let what = "the download".to_owned();
        let mut sink = Sink::new(dest_dir, spec.size)?;
        progress.stage(Stage::Downloading { what: url }, Some(spec.size));
        sink.pump(&mut response, &what, progress)?;
        sink.finish(spec, &what)
    }
}
