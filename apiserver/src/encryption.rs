//! Encryption at rest: kube-apiserver's `--encryption-provider-config`
//! (`EncryptionConfiguration` of `apiserver.config.k8s.io/v1`) with the `aesgcm`,
//! `secretbox` and `identity` providers, applied to the objects of the listed resources
//! before they reach the storage service, and undone after they come back.
//!
//! Where it sits: in the gateway's store of built-in types
//! (`gateway/src/stores/builtin/store.rs` `BuiltinStore`, and the list and watch paths of
//! `gateway/src/builtin.rs`): [`Transformer::seal`] after the strategy made
//! the object to store, [`Transformer::open`] on every object read back (get, list, watch
//! events, the answers of create/update/delete). No IO here.
//!
//! Follows upstream's `k8s.io/apiserver/pkg/storage/value` (prefix transformers),
//! `.../value/encrypt/aes` (AES-GCM, the storage key as additional authenticated data),
//! `.../value/encrypt/secretbox` (XSalsa20-Poly1305) and
//! `.../server/options/encryptionconfig` (the file, providers in order), written anew:
//! - The first provider of a resource's entry writes: with its first key, the value is
//!   `k8s:enc:<aesgcm|secretbox>:v1:<key name>:` followed by the nonce and the sealed bytes
//!   (RustCrypto `aes-gcm`, 16/24/32-byte keys, random 12-byte nonce; `crypto_secretbox`,
//!   32-byte keys, random 24-byte nonce). `identity` first writes plaintext.
//! - Every listed provider and key reads: the value's prefix names the key, so rotating is
//!   "add the new key first, keep the old one second, rewrite the objects, drop the old
//!   key". Plaintext reads only while `identity` is listed; a sealed value whose key is
//!   not listed is an error, never returned as it is.
//! - Additional authenticated data is the object's place: `<tenant>/<group>/<resource>/
//!   <namespace>/<name>` (upstream: the etcd key), so sealed bytes copied to another name
//!   or another tenant do not open.
//! - Upstream's `aescbc` and `kms` providers are refused at load, naming them.
//!
//! What differs because storage indexes objects: the storage service evaluates label and
//! field selectors, keeps the garbage collector's owner index and splices the
//! resourceVersion into each object, so a sealed object is stored as an *envelope*: the
//! whole object sealed in [`ENVELOPE_FIELD`], beside a clear copy of what storage and the
//! registry use — `apiVersion`, `kind`, `type`, and the metadata fields in
//! [`CLEAR_METADATA`] (name, namespace, uid, labels, owner references, finalizers,
//! deletion and creation times, generation, resourceVersion). Annotations (where
//! `kubectl apply` keeps the last applied object, data included), managed fields and the
//! data itself exist only sealed. [`Transformer::open`] takes the clear fields as
//! authoritative (the registry's garbage collector edits them in place) and the rest from
//! the sealed object. Upstream seals the whole object, names included; here names and
//! labels stay readable in Redis, as the keys themselves are.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use base64::Engine;
use rand::RngCore;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;

/// The top-level field of an envelope that holds the sealed object.
pub const ENVELOPE_FIELD: &str = "crdplane.io/encrypted";
/// The metadata fields an envelope keeps in the clear (see the module docs).
pub const CLEAR_METADATA: [&str; 11] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "ownerReferences",
    "finalizers",
];
/// Top-level fields an envelope keeps in the clear.
const CLEAR_TOP: [&str; 3] = ["apiVersion", "kind", "type"];

/// The configuration's API group and kind.
pub const API_VERSION: &str = "apiserver.config.k8s.io/v1";
/// The configuration's kind.
pub const KIND: &str = "EncryptionConfiguration";

const AESGCM_PREFIX: &str = "k8s:enc:aesgcm:v1:";
const SECRETBOX_PREFIX: &str = "k8s:enc:secretbox:v1:";
const AESGCM_NONCE: usize = 12;
const SECRETBOX_NONCE: usize = 24;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileConfig {
    api_version: String,
    kind: String,
    #[serde(default)]
    resources: Vec<ResourceConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceConfig {
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    providers: Vec<ProviderConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderConfig {
    aesgcm: Option<KeysConfig>,
    secretbox: Option<KeysConfig>,
    identity: Option<Value>,
    aescbc: Option<Value>,
    kms: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysConfig {
    #[serde(default)]
    keys: Vec<KeyConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyConfig {
    #[serde(default)]
    name: String,
    #[serde(default)]
    secret: String,
}

/// One key of a provider.
enum Cipher {
    Aes128(Box<aes_gcm::Aes128Gcm>),
    Aes192(Box<aes_gcm::AesGcm<aes_gcm::aes::Aes192, aes_gcm::aead::consts::U12>>),
    Aes256(Box<aes_gcm::Aes256Gcm>),
    Secretbox(Box<crypto_secretbox::XSalsa20Poly1305>),
}

impl Cipher {
    fn nonce_len(&self) -> usize {
        match self {
            Cipher::Secretbox(_) => SECRETBOX_NONCE,
            _ => AESGCM_NONCE,
        }
    }

    fn seal(&self, nonce: &[u8], plain: &[u8], aad: &[u8]) -> Result<Vec<u8>, String> {
        let p = Payload { msg: plain, aad };
        let r = match self {
            Cipher::Aes128(c) => c.encrypt(nonce.into(), p),
            Cipher::Aes192(c) => c.encrypt(nonce.into(), p),
            Cipher::Aes256(c) => c.encrypt(nonce.into(), p),
            // XSalsa20-Poly1305 has no additional data (upstream's secretbox neither binds
            // the key): the place is bound by sealing it with the object.
            Cipher::Secretbox(c) => c.encrypt(nonce.into(), [aad, plain].concat().as_slice()),
        };
        r.map_err(|_| "encryption failed".to_string())
    }

    fn open(&self, nonce: &[u8], sealed: &[u8], aad: &[u8]) -> Option<Vec<u8>> {
        let p = Payload { msg: sealed, aad };
        match self {
            Cipher::Aes128(c) => c.decrypt(nonce.into(), p).ok(),
            Cipher::Aes192(c) => c.decrypt(nonce.into(), p).ok(),
            Cipher::Aes256(c) => c.decrypt(nonce.into(), p).ok(),
            Cipher::Secretbox(c) => {
                let both = c.decrypt(nonce.into(), sealed).ok()?;
                both.strip_prefix(aad).map(<[u8]>::to_vec)
            }
        }
    }
}

/// A provider of a resource's entry, in configuration order.
enum Provider {
    /// Keys by name, first writes; `prefix` is `k8s:enc:<kind>:v1:`.
    Keys {
        prefix: &'static str,
        keys: Vec<(String, Cipher)>,
    },
    Identity,
}

/// The providers of one entry of the configuration (see the module docs).
pub struct Transformer {
    providers: Vec<Provider>,
}

impl std::fmt::Debug for Transformer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .providers
            .iter()
            .map(|p| match p {
                Provider::Keys { prefix, keys } => format!(
                    "{prefix}[{}]",
                    keys.iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                Provider::Identity => "identity".into(),
            })
            .collect();
        f.debug_struct("Transformer")
            .field("providers", &names)
            .finish()
    }
}

/// The place of an object, its additional authenticated data.
fn place(tenant: &str, group: &str, resource: &str, obj: &Value) -> Vec<u8> {
    let m = |k: &str| {
        obj.pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    format!(
        "{tenant}/{group}/{resource}/{}/{}",
        m("namespace"),
        m("name")
    )
    .into_bytes()
}

/// Whether `v` is an envelope.
pub fn is_envelope(v: &Value) -> bool {
    v.get(ENVELOPE_FIELD).is_some()
}

/// Whether the stored bytes `b` hold an envelope (a cheap look for paths that pass
/// stored bytes through without parsing them).
pub fn looks_sealed(b: &[u8]) -> bool {
    memchr::memmem::find(b, ENVELOPE_FIELD.as_bytes()).is_some()
}

/// The error of an envelope read without any configuration for its resource.
pub fn not_configured(prefix_of: &Value) -> String {
    let p = prefix_of
        .get(ENVELOPE_FIELD)
        .and_then(Value::as_str)
        .and_then(|s| s.get(..s.rfind(':').unwrap_or(0)))
        .unwrap_or("");
    format!("the object is encrypted ({p}) but no encryption provider is configured for it")
}

impl Transformer {
    /// The object to store for `obj` of `tenant`'s `group/resource`: an envelope, or `obj`
    /// itself when the first provider is `identity`.
    pub fn seal(
        &self,
        obj: Value,
        tenant: &str,
        group: &str,
        resource: &str,
    ) -> Result<Value, String> {
        let Some(Provider::Keys { prefix, keys }) = self.providers.first() else {
            return Ok(obj);
        };
        let (name, cipher) = &keys[0];
        let aad = place(tenant, group, resource, &obj);
        let plain = serde_json::to_vec(&obj).map_err(|e| e.to_string())?;
        let mut nonce = vec![0u8; cipher.nonce_len()];
        rand::rng().fill_bytes(&mut nonce);
        let mut sealed = nonce.clone();
        sealed.extend(cipher.seal(&nonce, &plain, &aad)?);
        let value = format!(
            "{prefix}{name}:{}",
            base64::engine::general_purpose::STANDARD.encode(sealed)
        );
        let mut env = Map::new();
        for k in CLEAR_TOP {
            if let Some(v) = obj.get(k) {
                env.insert(k.into(), v.clone());
            }
        }
        let mut meta = Map::new();
        if let Some(m) = obj.get("metadata").and_then(Value::as_object) {
            for k in CLEAR_METADATA {
                if let Some(v) = m.get(k) {
                    meta.insert(k.into(), v.clone());
                }
            }
        }
        env.insert("metadata".into(), Value::Object(meta));
        env.insert(ENVELOPE_FIELD.into(), Value::String(value));
        Ok(Value::Object(env))
    }

    /// The object stored as `stored` (an envelope, or plaintext while `identity` is
    /// listed) of `tenant`'s `group/resource`.
    pub fn open(
        &self,
        stored: Value,
        tenant: &str,
        group: &str,
        resource: &str,
    ) -> Result<Value, String> {
        self.open_checked(stored, tenant, group, resource)
            .map(|(v, _)| v)
    }

    /// [`Transformer::open`], and whether the stored form is stale: written by another
    /// provider or key than the one that writes now (upstream's `stale` flag of
    /// `TransformFromStorage`), so a rewrite would seal it anew.
    pub fn open_checked(
        &self,
        stored: Value,
        tenant: &str,
        group: &str,
        resource: &str,
    ) -> Result<(Value, bool), String> {
        let Some(sealed) = stored.get(ENVELOPE_FIELD).and_then(Value::as_str) else {
            return if self
                .providers
                .iter()
                .any(|p| matches!(p, Provider::Identity))
            {
                let stale = !matches!(self.providers.first(), Some(Provider::Identity));
                Ok((stored, stale))
            } else {
                Err("the object is stored unencrypted and the identity provider is not configured for it".into())
            };
        };
        let aad = place(tenant, group, resource, &stored);
        let mut found_key = false;
        for (pi, p) in self.providers.iter().enumerate() {
            let Provider::Keys { prefix, keys } = p else {
                continue;
            };
            let Some(rest) = sealed.strip_prefix(prefix) else {
                continue;
            };
            for (ki, (name, cipher)) in keys.iter().enumerate() {
                let Some(b64) = rest
                    .strip_prefix(name.as_str())
                    .and_then(|r| r.strip_prefix(':'))
                else {
                    continue;
                };
                found_key = true;
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|_| "the encrypted object is damaged".to_string())?;
                if raw.len() < cipher.nonce_len() {
                    return Err("the encrypted object is damaged".into());
                }
                let (nonce, body) = raw.split_at(cipher.nonce_len());
                if let Some(plain) = cipher.open(nonce, body, &aad) {
                    let obj: Value = serde_json::from_slice(&plain)
                        .map_err(|_| "the decrypted object is not JSON".to_string())?;
                    return Ok((overlay(obj, &stored), pi != 0 || ki != 0));
                }
            }
        }
        let name = sealed.get(..sealed.rfind(':').unwrap_or(0)).unwrap_or("");
        Err(if found_key {
            format!(
                "the object does not decrypt with key {name} (damaged, or moved from another place)"
            )
        } else {
            format!(
                "the object is encrypted with {name}, which the encryption configuration does not list"
            )
        })
    }
}

/// `obj` (opened) with the envelope's clear fields, which are authoritative.
fn overlay(mut obj: Value, env: &Value) -> Value {
    let Some(o) = obj.as_object_mut() else {
        return obj;
    };
    for k in CLEAR_TOP {
        match env.get(k) {
            Some(v) => {
                o.insert(k.into(), v.clone());
            }
            None => {
                o.remove(k);
            }
        }
    }
    let clear = env.get("metadata").and_then(Value::as_object);
    let meta = o
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(m) = meta.as_object_mut() {
        for k in CLEAR_METADATA {
            match clear.and_then(|c| c.get(k)) {
                Some(v) => {
                    m.insert(k.into(), v.clone());
                }
                None => {
                    m.remove(k);
                }
            }
        }
    }
    obj
}

/// A loaded `EncryptionConfiguration`: a transformer per listed resource.
#[derive(Debug, Default)]
pub struct EncryptionConfig {
    /// `(group, resource)` → its entry's providers; the first entry naming a resource
    /// wins, as upstream.
    rules: Vec<((String, String), Arc<Transformer>)>,
}

/// `resource` or `resource.group` of the configuration as `(group, resource)`.
fn split_resource(r: &str) -> (String, String) {
    match r.split_once('.') {
        Some((res, group)) => (group.to_string(), res.to_string()),
        None => (String::new(), r.to_string()),
    }
}

fn key_cipher(kind: &str, secret: &[u8]) -> Result<Cipher, String> {
    let bad = |want: &str| {
        format!(
            "secret is not of the expected length, got {}, expected one of [{want}]",
            secret.len()
        )
    };
    match kind {
        "aesgcm" => match secret.len() {
            16 => Ok(Cipher::Aes128(Box::new(
                aes_gcm::Aes128Gcm::new_from_slice(secret).map_err(|e| e.to_string())?,
            ))),
            24 => Ok(Cipher::Aes192(Box::new(
                aes_gcm::AesGcm::new_from_slice(secret).map_err(|e| e.to_string())?,
            ))),
            32 => Ok(Cipher::Aes256(Box::new(
                aes_gcm::Aes256Gcm::new_from_slice(secret).map_err(|e| e.to_string())?,
            ))),
            _ => Err(bad("16 24 32")),
        },
        _ => match secret.len() {
            32 => Ok(Cipher::Secretbox(Box::new(
                crypto_secretbox::XSalsa20Poly1305::new_from_slice(secret)
                    .map_err(|e| e.to_string())?,
            ))),
            _ => Err(bad("32")),
        },
    }
}

impl EncryptionConfig {
    /// Reads and checks the configuration file at `path` (YAML or JSON).
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "error reading encryption provider configuration file {:?}: {e}",
                path.display().to_string()
            )
        })?;
        Self::parse(&text)
    }

    /// Parses and checks a configuration (see the module docs); errors name the field.
    pub fn parse(text: &str) -> Result<Self, String> {
        let f: FileConfig = serde_saphyr::from_str(text)
            .map_err(|e| format!("error decoding encryption provider configuration: {e}"))?;
        if f.kind != KIND || f.api_version != API_VERSION {
            return Err(format!(
                "error decoding encryption provider configuration: want {API_VERSION} {KIND}, got {} {}",
                f.api_version, f.kind
            ));
        }
        if f.resources.is_empty() {
            return Err("resources: Required value: resources is a required field".into());
        }
        let mut rules: Vec<((String, String), Arc<Transformer>)> = Vec::new();
        for (i, rc) in f.resources.iter().enumerate() {
            let at = format!("resources[{i}]");
            if rc.resources.is_empty() {
                return Err(format!("{at}.resources: Required value"));
            }
            if rc.providers.is_empty() {
                return Err(format!("{at}.providers: Required value"));
            }
            let mut providers = Vec::new();
            for (j, p) in rc.providers.iter().enumerate() {
                let at = format!("{at}.providers[{j}]");
                let set = [
                    p.aesgcm.is_some(),
                    p.secretbox.is_some(),
                    p.identity.is_some(),
                    p.aescbc.is_some(),
                    p.kms.is_some(),
                ]
                .iter()
                .filter(|b| **b)
                .count();
                if set != 1 {
                    return Err(format!(
                        "{at}: Invalid value: exactly one provider must be set per element, got {set}"
                    ));
                }
                if p.aescbc.is_some() || p.kms.is_some() {
                    let which = if p.aescbc.is_some() { "aescbc" } else { "kms" };
                    return Err(format!(
                        "{at}.{which}: Unsupported value: crdplane supports the aesgcm, secretbox and identity providers"
                    ));
                }
                if p.identity.is_some() {
                    providers.push(Provider::Identity);
                    continue;
                }
                let (kind, prefix, kc) = match (&p.aesgcm, &p.secretbox) {
                    (Some(k), _) => ("aesgcm", AESGCM_PREFIX, k),
                    (_, Some(k)) => ("secretbox", SECRETBOX_PREFIX, k),
                    _ => unreachable!("one provider is set"),
                };
                if kc.keys.is_empty() {
                    return Err(format!("{at}.{kind}.keys: Required value"));
                }
                let mut keys: Vec<(String, Cipher)> = Vec::new();
                for (k, key) in kc.keys.iter().enumerate() {
                    let at = format!("{at}.{kind}.keys[{k}]");
                    if key.name.is_empty() {
                        return Err(format!("{at}.name: Required value"));
                    }
                    if key.name.contains(':') {
                        return Err(format!(
                            "{at}.name: Invalid value: {:?}: key names must not contain ':'",
                            key.name
                        ));
                    }
                    if keys.iter().any(|(n, _)| *n == key.name) {
                        return Err(format!("{at}.name: Duplicate value: {:?}", key.name));
                    }
                    let secret = base64::engine::general_purpose::STANDARD
                        .decode(key.secret.trim())
                        .map_err(|_| {
                            format!("{at}.secret: Invalid value: \"REDACTED\": secrets must be base64 encoded")
                        })?;
                    let c = key_cipher(kind, &secret)
                        .map_err(|e| format!("{at}.secret: Invalid value: \"REDACTED\": {e}"))?;
                    keys.push((key.name.clone(), c));
                }
                providers.push(Provider::Keys { prefix, keys });
            }
            let t = Arc::new(Transformer { providers });
            for r in &rc.resources {
                if r.contains('*') {
                    return Err(format!(
                        "{at}.resources: Unsupported value: {r:?}: crdplane needs each resource named"
                    ));
                }
                let gr = split_resource(r);
                if !rules.iter().any(|(k, _)| *k == gr) {
                    rules.push((gr, t.clone()));
                }
            }
        }
        Ok(Self { rules })
    }

    /// The providers of `group/resource`, `None` when the configuration does not list it.
    pub fn for_resource(&self, group: &str, resource: &str) -> Option<&Arc<Transformer>> {
        self.rules
            .iter()
            .find(|((g, r), _)| g == group && r == resource)
            .map(|(_, t)| t)
    }

    /// The listed resources as `(group, resource)`.
    pub fn resources(&self) -> impl Iterator<Item = (&str, &str)> {
        self.rules
            .iter()
            .map(|((g, r), _)| (g.as_str(), r.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const K16: &str = "MDEyMzQ1Njc4OWFiY2RlZg=="; // 16 bytes
    const K32A: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="; // 32 bytes
    const K32B: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="; // 32 bytes

    fn cfg(providers: &str) -> EncryptionConfig {
        EncryptionConfig::parse(&format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets, widgets.example.com]\n  providers:\n{providers}"
        ))
        .unwrap()
    }

    fn secret() -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "s", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "labels": {"app": "a"}, "annotations": {"note": "hunter2"},
                "ownerReferences": [{"uid": "o1", "kind": "X", "name": "x", "apiVersion": "v1"}]},
            "data": {"password": "aHVudGVyMg=="}})
    }

    fn t(c: &EncryptionConfig) -> &Transformer {
        c.for_resource("", "secrets").unwrap()
    }

    #[test]
    fn every_provider_round_trips_and_hides_the_data() {
        for (p, prefix) in [
            (
                format!("  - aesgcm: {{keys: [{{name: k1, secret: {K16}}}]}}\n"),
                "k8s:enc:aesgcm:v1:k1:",
            ),
            (
                format!("  - aesgcm: {{keys: [{{name: k1, secret: {K32A}}}]}}\n"),
                "k8s:enc:aesgcm:v1:k1:",
            ),
            (
                "  - aesgcm: {keys: [{name: k1, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3}]}\n"
                    .to_string(),
                "k8s:enc:aesgcm:v1:k1:",
            ),
            (
                format!("  - secretbox: {{keys: [{{name: k2, secret: {K32B}}}]}}\n"),
                "k8s:enc:secretbox:v1:k2:",
            ),
        ] {
            let c = cfg(&p);
            let env = t(&c).seal(secret(), "t1", "", "secrets").unwrap();
            let text = env.to_string();
            assert!(
                env[ENVELOPE_FIELD].as_str().unwrap().starts_with(prefix),
                "{text}"
            );
            for hidden in ["aHVudGVyMg==", "hunter2", "annotations", "password"] {
                assert!(!text.contains(hidden), "{hidden} in {text}");
            }
            // What storage indexes stays in the clear.
            assert_eq!(env["metadata"]["labels"]["app"], "a");
            assert_eq!(env["metadata"]["ownerReferences"][0]["uid"], "o1");
            assert_eq!(env["type"], "Opaque");
            assert_eq!(
                t(&c).open(env.clone(), "t1", "", "secrets").unwrap(),
                secret()
            );
            // Two seals of the same object differ (fresh nonces).
            let again = t(&c).seal(secret(), "t1", "", "secrets").unwrap();
            assert_ne!(again[ENVELOPE_FIELD], env[ENVELOPE_FIELD]);
            // Another tenant, resource or name: the bytes do not open there.
            assert!(t(&c).open(env.clone(), "t2", "", "secrets").is_err());
            assert!(
                t(&c)
                    .open(env.clone(), "t1", "example.com", "widgets")
                    .is_err()
            );
            let mut moved = env.clone();
            moved["metadata"]["name"] = json!("other");
            let e = t(&c).open(moved, "t1", "", "secrets").unwrap_err();
            assert!(e.contains("does not decrypt"), "{e}");
            // Tampering is detected.
            let mut bad = env.clone();
            let s = bad[ENVELOPE_FIELD].as_str().unwrap().to_string();
            let flipped = format!(
                "{}{}",
                &s[..s.len() - 4],
                if &s[s.len() - 4..] == "AAAA" {
                    "BBBB"
                } else {
                    "AAAA"
                }
            );
            bad[ENVELOPE_FIELD] = json!(flipped);
            assert!(t(&c).open(bad, "t1", "", "secrets").is_err());
        }
    }

    #[test]
    fn clear_fields_are_authoritative() {
        let c = cfg(&format!(
            "  - secretbox: {{keys: [{{name: k, secret: {K32A}}}]}}\n"
        ));
        let mut env = t(&c).seal(secret(), "t", "", "secrets").unwrap();
        // As the garbage collector edits a stored object: owner references dropped, a
        // finalizer and a deletion time added, a new resourceVersion spliced in.
        let m = env["metadata"].as_object_mut().unwrap();
        m.remove("ownerReferences");
        m.insert("finalizers".into(), json!(["foregroundDeletion"]));
        m.insert("deletionTimestamp".into(), json!("2026-01-01T00:00:00Z"));
        m.insert("resourceVersion".into(), json!("9"));
        let o = t(&c).open(env, "t", "", "secrets").unwrap();
        assert!(o["metadata"].get("ownerReferences").is_none());
        assert_eq!(o["metadata"]["finalizers"], json!(["foregroundDeletion"]));
        assert_eq!(o["metadata"]["resourceVersion"], "9");
        assert_eq!(o["metadata"]["annotations"]["note"], "hunter2");
        assert_eq!(o["data"]["password"], "aHVudGVyMg==");
    }

    #[test]
    fn rotation_identity_and_unknown_keys() {
        let old = cfg(&format!(
            "  - aesgcm: {{keys: [{{name: old, secret: {K32A}}}]}}\n"
        ));
        let sealed_old = t(&old).seal(secret(), "t", "", "secrets").unwrap();
        // New key first, old one second: the new one writes, both read.
        let both = cfg(&format!(
            "  - secretbox: {{keys: [{{name: new, secret: {K32B}}}]}}\n  - aesgcm: {{keys: [{{name: old, secret: {K32A}}}]}}\n"
        ));
        assert_eq!(
            t(&both)
                .open(sealed_old.clone(), "t", "", "secrets")
                .unwrap(),
            secret()
        );
        // Read with the old key: stale, a rewrite seals it anew.
        assert!(
            t(&both)
                .open_checked(sealed_old.clone(), "t", "", "secrets")
                .unwrap()
                .1
        );
        let sealed_new = t(&both).seal(secret(), "t", "", "secrets").unwrap();
        assert!(
            !t(&both)
                .open_checked(sealed_new.clone(), "t", "", "secrets")
                .unwrap()
                .1
        );
        assert!(
            sealed_new[ENVELOPE_FIELD]
                .as_str()
                .unwrap()
                .starts_with("k8s:enc:secretbox:v1:new:")
        );
        // The old key dropped: what it sealed is an error, never returned as stored.
        let new_only = cfg(&format!(
            "  - secretbox: {{keys: [{{name: new, secret: {K32B}}}]}}\n"
        ));
        assert_eq!(
            t(&new_only).open(sealed_new, "t", "", "secrets").unwrap(),
            secret()
        );
        let e = t(&new_only)
            .open(sealed_old, "t", "", "secrets")
            .unwrap_err();
        assert!(e.contains("k8s:enc:aesgcm:v1:old"), "{e}");
        // Plaintext reads only with identity listed; identity first writes plaintext.
        let e = t(&new_only).open(secret(), "t", "", "secrets").unwrap_err();
        assert!(e.contains("identity"), "{e}");
        let id_last = cfg(&format!(
            "  - secretbox: {{keys: [{{name: new, secret: {K32B}}}]}}\n  - identity: {{}}\n"
        ));
        assert_eq!(
            t(&id_last).open(secret(), "t", "", "secrets").unwrap(),
            secret()
        );
        assert!(
            t(&id_last)
                .open_checked(secret(), "t", "", "secrets")
                .unwrap()
                .1,
            "plaintext is stale"
        );
        let id_first = cfg(&format!(
            "  - identity: {{}}\n  - secretbox: {{keys: [{{name: new, secret: {K32B}}}]}}\n"
        ));
        assert_eq!(
            t(&id_first).seal(secret(), "t", "", "secrets").unwrap(),
            secret()
        );
        // Resources: named ones only; others get no transformer.
        assert!(id_first.for_resource("example.com", "widgets").is_some());
        assert!(id_first.for_resource("", "configmaps").is_none());
        assert!(looks_sealed(
            t(&both)
                .seal(secret(), "t", "", "secrets")
                .unwrap()
                .to_string()
                .as_bytes()
        ));
        assert!(!looks_sealed(secret().to_string().as_bytes()));
    }

    #[test]
    fn configuration_errors_name_the_field() {
        let head = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n";
        let cases: &[(&str, &str)] = &[
            ("resources: []\n", "resources: Required value"),
            (
                "resources:\n- resources: []\n  providers: [{identity: {}}]\n",
                "resources[0].resources: Required value",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: []\n",
                "resources[0].providers: Required value",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{identity: {}, aesgcm: {keys: []}}]\n",
                "resources[0].providers[0]: Invalid value: exactly one provider must be set per element, got 2",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{aescbc: {keys: []}}]\n",
                "resources[0].providers[0].aescbc: Unsupported value",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{kms: {name: x}}]\n",
                "resources[0].providers[0].kms: Unsupported value",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{aesgcm: {keys: []}}]\n",
                "resources[0].providers[0].aesgcm.keys: Required value",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{aesgcm: {keys: [{name: k, secret: c2hvcnQ=}]}}]\n",
                "resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 5, expected one of [16 24 32]",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{secretbox: {keys: [{name: k, secret: MDEyMzQ1Njc4OWFiY2RlZg==}]}}]\n",
                "resources[0].providers[0].secretbox.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 16, expected one of [32]",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{secretbox: {keys: [{name: k, secret: '***'}]}}]\n",
                "secrets must be base64 encoded",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{secretbox: {keys: [{secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=}]}}]\n",
                "resources[0].providers[0].secretbox.keys[0].name: Required value",
            ),
            (
                "resources:\n- resources: ['*.*']\n  providers: [{identity: {}}]\n",
                "crdplane needs each resource named",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers: [{identity: {}}]\n  extra: 1\n",
                "unknown field",
            ),
        ];
        for (body, want) in cases {
            let e = EncryptionConfig::parse(&format!("{head}{body}")).unwrap_err();
            assert!(e.contains(want), "{body}\n  got: {e}\n  want: {want}");
            assert!(!e.contains("c2hvcnQ"), "secrets are never echoed: {e}");
        }
        let e = EncryptionConfig::parse("apiVersion: v1\nkind: EncryptionConfig\nresources: []\n")
            .unwrap_err();
        assert!(
            e.contains("want apiserver.config.k8s.io/v1 EncryptionConfiguration"),
            "{e}"
        );
        let e = EncryptionConfig::load(Path::new("/nonexistent/enc.yaml")).unwrap_err();
        assert!(e.contains("/nonexistent/enc.yaml"), "{e}");
    }
}
