//! Swagger 2.0 path items for the endpoints of one CR kind in one version, and of the
//! built-in types (`crdplane_core::builtin::BUILTIN`, under `/api/v1` for the core group).
//!
//! Follows apiextensions-apiserver `pkg/controller/openapi/builder/builder.go`
//! (`generateBuilder`, `buildRoute`, `descriptionFor`), apiserver
//! `pkg/endpoints/openapi/openapi.go` (`GetOperationIDAndTags`, operation ids and tags),
//! and kube-openapi `pkg/builder` (parameters shared by every operation of a path are
//! hoisted to the path item; parameters are ordered by name).
//!
//! The query parameters of each action are those the upstream apiserver publishes for
//! the same options type on the CRD endpoints (taken from the embedded built-in
//! fixture), so descriptions and shared `#/parameters/...` references match upstream.

use serde_json::{Map, Value, json};

use super::builtin;

const SCALE_DEF: &str = "io.k8s.api.autoscaling.v1.Scale";
const STATUS_DEF: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const CRD_COLLECTION: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const CRD_ITEM: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}";

/// Naming information of one served CR version.
pub(crate) struct KindInfo<'a> {
    pub(crate) group: &'a str,
    pub(crate) version: &'a str,
    pub(crate) kind: &'a str,
    pub(crate) plural: &'a str,
    pub(crate) namespaced: bool,
    pub(crate) status: bool,
    pub(crate) scale: bool,
    /// Verbs served on the main resource (discovery's); routes of other verbs are left
    /// out (the status and scale subresources are governed by `status`/`scale`).
    pub(crate) verbs: &'a [&'a str],
    /// Definition name of the kind (`com.example.stable.v1.CronTab`).
    pub(crate) def: &'a str,
    /// Definition name of the list kind.
    pub(crate) list_def: &'a str,
}

/// `ToValidOperationID`: keep letters, `_` and (not leading) digits; any other
/// character is dropped and capitalises the next kept one.
fn valid_operation_id(s: &str, capitalize_first: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut cap = capitalize_first;
    for (i, c) in s.char_indices() {
        if c.is_alphabetic() || c == '_' || (i != 0 && c.is_ascii_digit()) {
            if cap {
                out.extend(c.to_uppercase());
                cap = false;
            } else {
                out.push(c);
            }
        } else {
            cap = true;
        }
    }
    out
}

/// `endpoints.GetArticleForNoun(noun, " ")`.
fn article_for(noun: &str) -> &'static str {
    if !noun.ends_with("ss") && noun.ends_with('s') {
        return " ";
    }
    match noun.chars().next().map(|c| c.to_ascii_lowercase()) {
        Some('a' | 'e' | 'i' | 'o' | 'u') => " an ",
        _ => " a ",
    }
}

fn title(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// A resolved list of the query parameters the CRD endpoint publishes for `method` on
/// `path` (everything except the body parameter).
fn crd_query_params(path: &str, method: &str) -> Vec<Value> {
    builtin()
        .pointer(&format!(
            "/paths/{}/{}/parameters",
            path.replace('~', "~0").replace('/', "~1"),
            method
        ))
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .filter(|p| {
                    let resolved = resolve_param(p);
                    resolved.get("in").and_then(Value::as_str) != Some("body")
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// Follows a `#/parameters/...` reference into the fixture.
pub(crate) fn resolve_param(p: &Value) -> &Value {
    if let Some(r) = p.get("$ref").and_then(Value::as_str)
        && let Some(name) = r.strip_prefix("#/parameters/")
        && let Some(found) = builtin().get("parameters").and_then(|ps| ps.get(name))
    {
        return found;
    }
    p
}

fn param_name(p: &Value) -> &str {
    resolve_param(p)
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn body_param(def: &str, required: bool) -> Value {
    let mut p = json!({
        "in": "body",
        "name": "body",
        "schema": {"$ref": format!("#/definitions/{def}")},
    });
    if required {
        p["required"] = Value::Bool(true);
    }
    p
}

fn response(desc: &str, def: &str) -> Value {
    json!({"description": desc, "schema": {"$ref": format!("#/definitions/{def}")}})
}

struct Route<'a> {
    method: &'static str,
    action: &'static str,
    verb: &'static str,
    sub: &'a str,
    sample: &'a str,
    /// Overrides the generated operation name (list for all namespaces).
    op_name: Option<String>,
}

impl KindInfo<'_> {
    fn description(&self, sub: &str, verb: &str) -> String {
        let article = match verb {
            "list" => " objects of kind ",
            "read" | "replace" | "patch" => " the specified ",
            "create" | "delete" => article_for(self.kind),
            _ => "",
        };
        let sub = if sub.is_empty() {
            String::new()
        } else {
            format!(" {sub} of")
        };
        match verb {
            "patch" => format!("partially update{sub}{article}{}", self.kind),
            "deletecollection" => {
                let sub = if sub.is_empty() {
                    sub
                } else {
                    format!("{sub} a")
                };
                format!("delete collection of{sub} {}", self.kind)
            }
            _ => format!("{verb}{sub}{article}{}", self.kind),
        }
    }

    /// `GetOperationIDAndTags` for `/apis/<group>/<version>/...` routes, and for the core
    /// group's `/api/v1/...` ones (`core` in place of the group: `listCoreV1…`, `core_v1`).
    fn operation_id(&self, op: &str) -> (String, String) {
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group.strip_suffix(".k8s.io").unwrap_or(self.group)
        };
        let infix = format!(
            "{}{}",
            valid_operation_id(group, true),
            valid_operation_id(self.version, true)
        );
        let tag = format!(
            "{}_{}",
            valid_operation_id(group, false),
            valid_operation_id(self.version, false)
        );
        // The verb trie matches the shortest verb (`deletecollection…` → `delete`).
        const VERBS: &[&str] = &[
            "get", "log", "read", "replace", "patch", "delete", "watch", "connect", "proxy",
            "list", "create",
        ];
        match VERBS
            .iter()
            .filter(|v| op.starts_with(**v))
            .min_by_key(|v| v.len())
        {
            Some(v) => (
                format!("{v}{infix}{}", valid_operation_id(&op[v.len()..], true)),
                tag,
            ),
            None => (op.to_string(), tag),
        }
    }

    fn operation(&self, r: &Route<'_>) -> (Value, Vec<Value>) {
        let namespaced = if self.namespaced { "Namespaced" } else { "" };
        let op_name = r
            .op_name
            .clone()
            .unwrap_or_else(|| format!("{}{namespaced}{}{}", r.verb, self.kind, title(r.sub)));
        let (op_id, tag) = self.operation_id(&op_name);

        let mut params: Vec<Value> = Vec::new();
        params.push(json!({"$ref": "#/parameters/pretty"}));
        if self.namespaced && r.op_name.is_none() {
            params.push(json!({
                "description": "object name and auth scope, such as for teams and projects",
                "in": "path",
                "name": "namespace",
                "required": true,
                "type": "string",
                "uniqueItems": true,
            }));
        }
        let item = matches!(r.action, "get" | "put" | "patch" | "delete");
        if item {
            params.push(json!({
                "description": format!("name of the {}", self.kind),
                "in": "path",
                "name": "name",
                "required": true,
                "type": "string",
                "uniqueItems": true,
            }));
        }
        match r.action {
            "get" => params.extend(
                crd_query_params(CRD_COLLECTION, "get")
                    .into_iter()
                    .filter(|p| param_name(p) == "resourceVersion"),
            ),
            "list" | "deletecollection" => params.extend(crd_query_params(CRD_COLLECTION, "get")),
            "put" | "patch" => params.extend(crd_query_params(CRD_ITEM, "put")),
            "post" => params.extend(crd_query_params(CRD_COLLECTION, "post")),
            "delete" => {
                params.push(json!({"$ref": "#/parameters/body-delete"}));
                params.extend(crd_query_params(CRD_ITEM, "delete"));
            }
            _ => {}
        }
        match r.action {
            "post" | "put" => params.push(body_param(r.sample, true)),
            "patch" => params.push(json!({"$ref": "#/parameters/body-patch"})),
            _ => {}
        }

        let mut responses = Map::new();
        responses.insert("200".into(), response("OK", r.sample));
        match r.action {
            "post" => {
                responses.insert("201".into(), response("Created", r.sample));
                responses.insert("202".into(), response("Accepted", r.sample));
            }
            "delete" => {
                responses.insert("202".into(), response("Accepted", r.sample));
            }
            "put" => {
                responses.insert("201".into(), response("Created", r.sample));
            }
            _ => {}
        }
        responses.insert("401".into(), json!({"description": "Unauthorized"}));

        let consumes: Vec<&str> = if r.method == "patch" {
            vec![
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ]
        } else {
            vec!["application/json", "application/yaml"]
        };
        let op = json!({
            "consumes": consumes,
            "description": self.description(r.sub, r.verb),
            "operationId": op_id,
            "produces": ["application/json", "application/yaml"],
            "responses": responses,
            "schemes": ["https"],
            "tags": [tag],
            "x-kubernetes-action": r.action,
            "x-kubernetes-group-version-kind": {
                "group": self.group,
                "kind": self.kind,
                "version": self.version,
            },
        });
        (op, params)
    }

    /// The routes of `routes` (each with the discovery verb that serves it) whose verb
    /// is served.
    fn served<'r>(&self, routes: Vec<(&str, Route<'r>)>) -> Vec<Route<'r>> {
        routes
            .into_iter()
            .filter(|(verb, _)| self.verbs.contains(verb))
            .map(|(_, r)| r)
            .collect()
    }

    /// All path items of this kind/version, keyed by path.
    pub(crate) fn paths(&self) -> Vec<(String, Value)> {
        let mut groups: Vec<(String, Vec<Route<'_>>)> = Vec::new();
        let base = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        let root = if self.namespaced {
            groups.push((
                format!("{base}/{}", self.plural),
                self.served(vec![(
                    "list",
                    Route {
                        method: "get",
                        action: "list",
                        verb: "list",
                        sub: "",
                        sample: self.list_def,
                        op_name: Some(format!("list{}ForAllNamespaces", self.kind)),
                    },
                )]),
            ));
            format!("{base}/namespaces/{{namespace}}/{}", self.plural)
        } else {
            format!("{base}/{}", self.plural)
        };
        let route = |method, action, verb, sub, sample| Route {
            method,
            action,
            verb,
            sub,
            sample,
            op_name: None,
        };
        groups.push((
            root.clone(),
            self.served(vec![
                ("list", route("get", "list", "list", "", self.list_def)),
                ("create", route("post", "post", "create", "", self.def)),
                (
                    "deletecollection",
                    route(
                        "delete",
                        "deletecollection",
                        "deletecollection",
                        "",
                        STATUS_DEF,
                    ),
                ),
            ]),
        ));
        groups.push((
            format!("{root}/{{name}}"),
            self.served(vec![
                ("get", route("get", "get", "read", "", self.def)),
                ("update", route("put", "put", "replace", "", self.def)),
                (
                    "delete",
                    route("delete", "delete", "delete", "", STATUS_DEF),
                ),
                ("patch", route("patch", "patch", "patch", "", self.def)),
            ]),
        ));
        if self.status {
            groups.push((
                format!("{root}/{{name}}/status"),
                vec![
                    route("get", "get", "read", "status", self.def),
                    route("put", "put", "replace", "status", self.def),
                    route("patch", "patch", "patch", "status", self.def),
                ],
            ));
        }
        if self.scale {
            groups.push((
                format!("{root}/{{name}}/scale"),
                vec![
                    route("get", "get", "read", "scale", SCALE_DEF),
                    route("put", "put", "replace", "scale", SCALE_DEF),
                    route("patch", "patch", "patch", "scale", SCALE_DEF),
                ],
            ));
        }
        groups
            .into_iter()
            .filter(|(_, routes)| !routes.is_empty())
            .map(|(path, routes)| {
                let ops: Vec<(&str, Value, Vec<Value>)> = routes
                    .iter()
                    .map(|r| {
                        let (op, params) = self.operation(r);
                        (r.method, op, params)
                    })
                    .collect();
                (path, assemble_path_item(ops))
            })
            .collect()
    }
}

/// Hoists the parameters every operation shares to the path item and sorts both lists
/// by parameter name, as kube-openapi's builder does.
fn assemble_path_item(ops: Vec<(&str, Value, Vec<Value>)>) -> Value {
    let mut shared: Vec<Value> = ops.first().map(|o| o.2.clone()).unwrap_or_default();
    shared.retain(|p| ops.iter().all(|(_, _, ps)| ps.contains(p)));
    let mut item = Map::new();
    for (method, mut op, params) in ops {
        let mut own: Vec<Value> = params.into_iter().filter(|p| !shared.contains(p)).collect();
        own.sort_by(|a, b| param_name(a).cmp(param_name(b)));
        if !own.is_empty() {
            op["parameters"] = Value::Array(own);
        }
        item.insert(method.to_string(), op);
    }
    if !shared.is_empty() {
        shared.sort_by(|a, b| param_name(a).cmp(param_name(b)));
        item.insert("parameters".into(), Value::Array(shared));
    }
    Value::Object(item)
}
