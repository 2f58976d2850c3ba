//! The audit event (`audit.k8s.io/v1` `Event`) and its batch (`EventList`), as the log
//! and webhook backends write them: upstream's field names and order, `omitempty` where
//! upstream has it, MicroTime timestamps (`2006-01-02T15:04:05.000000Z`).
//!
//! One [`Event`] is built per audited request when it is received, and written once per
//! stage with [`Event::line`] (the stage, its timestamp and the response status change in
//! between). Bodies are kept as parsed JSON, with `metadata.managedFields` removed when
//! the policy says so ([`strip_managed_fields`]).

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

use super::policy::{Level, Stage};

/// The event's kind and API version.
pub const API_VERSION: &str = "audit.k8s.io/v1";

/// The annotation that records the tenant a request addressed (crdplane's own key: upstream
/// has one cluster).
pub const TENANT_ANNOTATION: &str = "crdplane.io/tenant";
/// upstream's authorization decision annotation (`allow` or `forbid`).
pub const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
/// upstream's authorization reason annotation.
pub const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";

/// A user as an audit event records it (`authentication.k8s.io/v1` `UserInfo`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct User {
    /// The name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// The uid.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The groups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Authenticator-specific extra information.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What a resource request addressed (upstream `audit.ObjectReference`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// Plural resource.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// Namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Object name (from the path, or the body of a create).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's uid, when the request body names it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// API group (empty for the core group).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// API version.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The object's resourceVersion, when the request body names it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// Subresource.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// The status of a response as an event records it (a `metav1.Status` with upstream's
/// bounded fields, in its field order).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ResponseStatus {
    metadata: serde_json::Map<String, Value>,
    /// `Success` or `Failure` (error Statuses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    /// The message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Value>,
    /// The reason (`NotFound`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Value>,
    /// The details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// The HTTP code.
    pub code: u16,
}

impl ResponseStatus {
    /// A status with `code` and, when given, a message and reason (and status Failure
    /// with a reason).
    pub fn new(code: u16, message: Option<String>, reason: Option<&str>) -> Self {
        ResponseStatus {
            status: reason.map(|_| Value::from("Failure")),
            message: message.map(Value::from),
            reason: reason.map(Value::from),
            code,
            ..Default::default()
        }
    }
}

/// One audit event (upstream `audit.Event`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    kind: &'static str,
    api_version: &'static str,
    /// The level the policy chose.
    #[serde(serialize_with = "level_name")]
    pub level: Level,
    /// The request's unique id (also the `Audit-Id` response header).
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// The stage this line records.
    #[serde(serialize_with = "stage_name")]
    pub stage: Stage,
    /// The request URI as sent (path and query).
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// The request verb (`create`, `list`, …; lowercase method for non-resource requests).
    pub verb: String,
    /// Who sent the request.
    pub user: User,
    /// Whom the request impersonated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<User>,
    /// Where it came from: `X-Forwarded-For`, `X-Real-Ip`, then the peer.
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    /// The `User-Agent` header.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    /// What a resource request addressed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    /// The response's status: `{"metadata":{},"code":200}`, or the bounded fields of an
    /// error Status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    /// The request body (level Request and up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Value>,
    /// The response body (level RequestResponse).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Value>,
    /// When the request was received.
    pub request_received_timestamp: String,
    /// When this stage was reached.
    pub stage_timestamp: String,
    /// Annotations (the tenant, the authorization decision).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

fn level_name<S: serde::Serializer>(l: &Level, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(l.as_str())
}

fn stage_name<S: serde::Serializer>(st: &Stage, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(st.as_str())
}

/// A new audit id: a random (version 4) UUID from the thread's generator, which costs no
/// system call.
pub fn new_audit_id() -> String {
    new_audit_uuid().to_string()
}

/// A new random (version 4) UUID from the thread's generator, for [`new_audit_id`] and for
/// callers that format it themselves.
pub fn new_audit_uuid() -> uuid::Uuid {
    use rand::RngCore;
    let mut b = [0u8; 16];
    rand::rng().fill_bytes(&mut b);
    uuid::Builder::from_random_bytes(b).into_uuid()
}

/// A MicroTime as upstream prints it (UTC, six fractional digits).
pub fn micro_time(t: chrono::DateTime<chrono::Utc>) -> String {
    use chrono::{Datelike, Timelike};
    use std::fmt::Write;
    // Written field by field: chrono's `format` parses its pattern on every call.
    let mut s = String::with_capacity(27);
    let _ = write!(
        s,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.nanosecond() / 1000 % 1_000_000
    );
    s
}

impl Event {
    /// A new event at stage RequestReceived, received now.
    pub fn new(level: Level, audit_id: String, request_uri: String, verb: String) -> Self {
        let now = micro_time(chrono::Utc::now());
        Event {
            kind: "Event",
            api_version: API_VERSION,
            level,
            audit_id,
            stage: Stage::RequestReceived,
            request_uri,
            verb,
            user: User::default(),
            impersonated_user: None,
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: None,
            response_status: None,
            request_object: None,
            response_object: None,
            stage_timestamp: now.clone(),
            request_received_timestamp: now,
            annotations: BTreeMap::new(),
        }
    }

    /// Moves the event to `stage`, reached now.
    pub fn enter(&mut self, stage: Stage) {
        self.stage = stage;
        self.stage_timestamp = micro_time(chrono::Utc::now());
    }

    /// The event as one JSON line (with its newline), as the log backend writes it.
    pub fn line(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// Records the response code, and for an error Status body its bounded fields
    /// (upstream `LogResponseObject`: status, message, reason, details, code).
    pub fn set_response(&mut self, code: u16, status_body: Option<&Value>) {
        let mut st = ResponseStatus {
            code,
            ..Default::default()
        };
        if let Some(Value::Object(s)) = status_body
            && s.get("kind").and_then(Value::as_str) == Some("Status")
        {
            st.status = s.get("status").cloned();
            st.message = s.get("message").cloned();
            st.reason = s.get("reason").cloned();
            st.details = s.get("details").cloned();
        }
        self.response_status = Some(st);
    }
}

/// Removes `metadata.managedFields` from an object and from each item of a list.
pub fn strip_managed_fields(v: &mut Value) {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
        for i in items {
            if let Some(m) = i.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
            }
        }
    }
}

/// A batch of event lines as the webhook backend posts it (`audit.k8s.io/v1`
/// `EventList`): the lines are already JSON objects, so they are joined, not re-encoded.
pub fn event_list<L: AsRef<[u8]>>(lines: &[L]) -> Vec<u8> {
    let mut out = Vec::with_capacity(lines.iter().map(|l| l.as_ref().len()).sum::<usize>() + 80);
    out.extend_from_slice(
        br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":["#,
    );
    for (i, l) in lines.iter().enumerate() {
        let l = l.as_ref();
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(l.strip_suffix(b"\n").unwrap_or(l));
    }
    out.extend_from_slice(b"]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_in_upstreams_shape() {
        let mut e = Event::new(
            Level::Metadata,
            "4a5e0a0f-6a4c-4c8e-9a57-2a1c2e7f0f11".into(),
            "/api/v1/namespaces/default/secrets?fieldManager=kubectl-create".into(),
            "create".into(),
        );
        e.user = User {
            username: "admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            ..Default::default()
        };
        e.source_ips = vec!["127.0.0.1".into()];
        e.object_ref = Some(ObjectReference {
            resource: "secrets".into(),
            namespace: "default".into(),
            name: "s".into(),
            api_version: "v1".into(),
            ..Default::default()
        });
        e.annotations
            .insert(TENANT_ANNOTATION.into(), "acme".into());
        e.enter(Stage::ResponseComplete);
        e.set_response(201, None);
        let line = e.line();
        assert_eq!(line.last(), Some(&b'\n'));
        let v: Value = serde_json::from_slice(&line).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        // serde_json's map is sorted here; the order on the wire is the struct's.
        assert!(keys.contains(&"requestReceivedTimestamp"));
        let text = String::from_utf8(line).unwrap();
        assert!(
            text.starts_with(r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"4a5e0a0f-6a4c-4c8e-9a57-2a1c2e7f0f11","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/default/secrets?fieldManager=kubectl-create","verb":"create","user":{"username":"admin","groups":["system:masters","system:authenticated"]},"sourceIPs":["127.0.0.1"],"objectRef":{"resource":"secrets","namespace":"default","name":"s","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":""#),
            "{text}"
        );
        assert!(text.ends_with("\"annotations\":{\"crdplane.io/tenant\":\"acme\"}}\n"));
        let ts = v["stageTimestamp"].as_str().unwrap();
        assert_eq!(ts.len(), "2006-01-02T15:04:05.000000Z".len(), "{ts}");
    }

    #[test]
    fn error_statuses_keep_their_bounded_fields() {
        let mut e = Event::new(Level::Metadata, "id".into(), "/x".into(), "get".into());
        let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "secrets \"s\" not found", "reason": "NotFound",
            "details": {"name": "s", "kind": "secrets"}, "code": 404});
        e.set_response(404, Some(&body));
        assert_eq!(
            serde_json::to_string(&e.response_status).unwrap(),
            r#"{"metadata":{},"status":"Failure","message":"secrets \"s\" not found","reason":"NotFound","details":{"kind":"secrets","name":"s"},"code":404}"#
        );
        // (details keep the keys of the body they came from, as parsed: sorted.)
        // A body that is no Status (a Go http.Error text, an object) records the code only.
        e.set_response(429, Some(&json!({"kind": "CronTab"})));
        assert_eq!(
            serde_json::to_value(&e.response_status).unwrap(),
            json!({"metadata": {}, "code": 429})
        );
    }

    #[test]
    fn micro_times() {
        let t = chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05.006007089Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(micro_time(t), "2026-01-02T03:04:05.006007Z");
    }

    #[test]
    fn managed_fields_and_lists() {
        let mut v = json!({"metadata": {"name": "a", "managedFields": [{}]},
            "items": [{"metadata": {"managedFields": []}}]});
        strip_managed_fields(&mut v);
        assert_eq!(
            v,
            json!({"metadata": {"name": "a"}, "items": [{"metadata": {}}]})
        );
        assert_eq!(
            String::from_utf8(event_list(&[
                b"{\"a\":1}\n".to_vec(),
                b"{\"b\":2}\n".to_vec()
            ]))
            .unwrap(),
            r#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[{"a":1},{"b":2}]}"#
        );
    }
}
