//! A raw HTTP caller for the stand-in's own tests: status and JSON body, nothing interpreted,
//! so these tests check the wire itself (the operator's typed client is tested against the
//! stand-in in `actors/tests/contract.rs`).

#![allow(dead_code)]

use reqwest::Method;
use serde_json::Value;
use terdut_standin::Handle;

pub struct Api {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Api {
    pub fn new(standin: &Handle) -> Self {
        terdut_standin::init_tls();
        Self {
            http: reqwest::Client::new(),
            base: standin.base_url().to_owned(),
            key: standin.operator_key().to_owned(),
        }
    }

    /// Calls with the operator key.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_with(method, path, body, Some(&self.key)).await
    }

    pub async fn call_with(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        key: Option<&str>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("request");
        Self::read(resp).await
    }

    /// Sends a raw body with a given content type.
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: &'static str,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        Self::read(req.send().await.expect("request")).await
    }

    /// Posts to an absolute URL (a webhook URL) with headers.
    pub async fn post_url(&self, url: &str, headers: &[(&str, &str)]) -> u16 {
        let mut req = self.http.post(url).body(r#"{"alerts":[]}"#);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send().await.expect("request").status().as_u16()
    }

    async fn read(resp: reqwest::Response) -> (u16, Value) {
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, value)
    }
}

/// The `error` code of an error body.
pub fn code(body: &Value) -> &str {
    body["error"].as_str().unwrap_or("")
}
