//! The options of a watch request and upstream's rules for them: apimachinery
//! pkg/apis/meta/internalversion/validation `ValidateListOptions` (the watch branch: 422
//! Invalid on `ListOptions.meta.k8s.io`), the `resourceVersion` a watch starts after, and
//! `timeoutSeconds` (absent: apiserver's random 30–60 minutes, handlers/get.go).
//!
//! Where it sits: the first step of every watch handler, before anything is read.

use crdplane_core::ApiError;
use crdplane_core::field::FieldError;
use std::time::Duration;

/// The watch parameters of one request, as its query carried them.
#[derive(Debug, Clone, Copy, Default)]
pub struct WatchQuery<'a> {
    /// `resourceVersion` ("" when absent).
    pub resource_version: &'a str,
    /// `resourceVersionMatch` ("" when absent).
    pub resource_version_match: &'a str,
    /// `sendInitialEvents`, a `*bool` of the parameter codec (None when absent).
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `timeoutSeconds` (None when absent).
    pub timeout_seconds: Option<&'a str>,
}

/// The validated options of one watch.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchOptions {
    /// `resourceVersion` to stream the changes after; None for "" or "0" (start with the
    /// current state as ADDED events).
    pub from_rv: Option<u64>,
    /// `sendInitialEvents=true` (watch-list: initial ADDED events ended by a BOOKMARK).
    pub send_initial_events: bool,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
    /// `timeoutSeconds`, or upstream's random 30–60 min when absent.
    pub timeout: Duration,
}

/// Checks `q` with upstream's watch rules and parses it.
pub fn watch_options(q: WatchQuery<'_>) -> Result<WatchOptions, ApiError> {
    let (rv, rvm) = (q.resource_version, q.resource_version_match);
    let mut errs = Vec::new();
    match q.send_initial_events {
        Some(_) => {
            if rvm != "NotOlderThan" {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if !q.allow_watch_bookmarks {
                errs.push(FieldError::forbidden(
                    "allowWatchBookmarks",
                    "allowWatchBookmarks required when sendInitialEvents is set",
                ));
            }
        }
        None if !rvm.is_empty() => {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        None => {}
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid("ListOptions", "meta.k8s.io", "", &errs));
    }
    let from_rv = match rv {
        "" | "0" => None,
        s => Some(s.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "resourceVersion: Invalid value: {s:?}: must be a non-negative integer"
            ))
        })?),
    };
    let timeout =
        match q.timeout_seconds {
            Some(t) if !t.is_empty() => Duration::from_secs(t.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("timeoutSeconds: invalid value {t:?}"))
            })?),
            // Upstream picks a random timeout in [MinRequestTimeout, 2×MinRequestTimeout].
            _ => Duration::from_secs(1800 + rand::random::<u64>() % 1800),
        };
    Ok(WatchOptions {
        from_rv,
        send_initial_events: q.send_initial_events == Some(true),
        bookmarks: q.allow_watch_bookmarks,
        timeout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q<'a>(rv: &'a str, rvm: &'a str) -> WatchQuery<'a> {
        WatchQuery {
            resource_version: rv,
            resource_version_match: rvm,
            ..Default::default()
        }
    }

    #[test]
    fn parameter_rules() {
        let p = watch_options(WatchQuery {
            timeout_seconds: Some("5"),
            ..q("12", "")
        })
        .unwrap();
        assert_eq!(
            (p.from_rv, p.timeout, p.send_initial_events, p.bookmarks),
            (Some(12), Duration::from_secs(5), false, false)
        );
        assert_eq!(watch_options(q("0", "")).unwrap().from_rv, None);
        assert_eq!(watch_options(q("", "")).unwrap().from_rv, None);
        let t = watch_options(q("", "")).unwrap().timeout.as_secs();
        assert!((1800..3600).contains(&t), "{t}");

        let e = watch_options(q("", "NotOlderThan")).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains(
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
            ),
            "{}",
            e.message
        );
        // sendInitialEvents needs NotOlderThan and bookmarks: both causes in one 422.
        let e = watch_options(WatchQuery {
            send_initial_events: Some(false),
            ..q("", "")
        })
        .unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains(
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
            ),
            "{}",
            e.message
        );
        assert!(
            e.message
                .contains("allowWatchBookmarks required when sendInitialEvents is set"),
            "{}",
            e.message
        );
        let ok = watch_options(WatchQuery {
            send_initial_events: Some(true),
            allow_watch_bookmarks: true,
            ..q("", "NotOlderThan")
        })
        .unwrap();
        assert!(ok.send_initial_events && ok.bookmarks);

        assert_eq!(watch_options(q("abc", "")).unwrap_err().code, 400);
        let e = watch_options(WatchQuery {
            timeout_seconds: Some("x"),
            ..q("", "")
        })
        .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "timeoutSeconds: invalid value \"x\"")
        );
    }
}
