//! Group/resource naming as upstream prints it (`schema.GroupResource.String()`,
//! `schema.GroupKind.String()` in k8s.io/apimachinery/pkg/runtime/schema), and timestamps.

use std::fmt;

/// A group + resource, printed `resource.group` (or `resource` for the core group).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// `Kind.group` (or `Kind` for the core group), as in Invalid messages.
pub fn qualified_kind(kind: &str, group: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

/// The current time as a Kubernetes `metav1.Time` (RFC 3339, second precision, UTC).
pub fn now_timestamp() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Splits `group/version` (or `version` for the core group) into (group, version).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_resource_display() {
        assert_eq!(
            GroupResource::new("stable.example.com", "crontabs").to_string(),
            "crontabs.stable.example.com"
        );
        assert_eq!(
            GroupResource::new("", "namespaces").to_string(),
            "namespaces"
        );
        assert_eq!(
            qualified_kind("CronTab", "stable.example.com"),
            "CronTab.stable.example.com"
        );
        assert_eq!(
            split_api_version("stable.example.com/v1"),
            ("stable.example.com", "v1")
        );
        assert_eq!(split_api_version("v1"), ("", "v1"));
    }

    #[test]
    fn timestamp_shape() {
        let t = now_timestamp();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z'));
    }
}
