//! String format checkers used by the CR validator for `format:` (validation pass).
//!
//! Follows the default registry of k8s.io/kube-openapi pkg/validation/strfmt (default.go,
//! time.go, duration.go) restricted to the formats apiextensions keeps
//! (pkg/apiserver/validation/formats.go). Go's parsers (net.ParseIP, net.ParseMAC,
//! url.ParseRequestURI, mail.ParseAddress) are approximated with equivalent checks.

use crate::structural::Format;
use regex::Regex;
use std::sync::LazyLock;

fn re(s: &str) -> Regex {
    Regex::new(s).unwrap_or_else(|_| Regex::new("$^").unwrap_or_else(|_| unreachable!()))
}

static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
static UUID: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID3: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static SSN: LazyLock<Regex> = LazyLock::new(|| re(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));
static HEXCOLOR: LazyLock<Regex> = LazyLock::new(|| re(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGBCOLOR: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$",
    )
});
static CREDITCARD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11}|6[27][0-9]{14})$",
    )
});
static EMAIL: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(?:[^<>]*<)?[^\s@<>()\[\],;:]+@[^\s@<>()\[\],;:]+(?:>)?$"));
static DURATION_PART: LazyLock<Regex> = LazyLock::new(|| re(r"^(\d+)\s*([A-Za-zµ]+)$"));
static GO_DURATION: LazyLock<Regex> =
    LazyLock::new(|| re(r"^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"));
static URI_SCHEME: LazyLock<Regex> = LazyLock::new(|| re(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:"));

/// Whether `s` is valid for format `f`.
pub fn check(f: Format, s: &str) -> bool {
    match f {
        Format::Password => true,
        Format::BsonObjectId => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        Format::Uri => is_request_uri(s),
        Format::Email => EMAIL.is_match(s.trim()),
        Format::Hostname => s.len() <= 255 && HOSTNAME.is_match(s),
        Format::Ipv4 => s.contains('.') && parse_ip(s),
        Format::Ipv6 => s.contains(':') && parse_ip(s),
        Format::Cidr => is_cidr(s),
        Format::Mac => is_mac(s),
        Format::Uuid => UUID.is_match(s),
        Format::Uuid3 => UUID3.is_match(s),
        Format::Uuid4 => UUID4.is_match(s),
        Format::Uuid5 => UUID5.is_match(s),
        Format::Isbn => is_isbn10(s) || is_isbn13(s),
        Format::Isbn10 => is_isbn10(s),
        Format::Isbn13 => is_isbn13(s),
        Format::CreditCard => is_credit_card(s),
        Format::Ssn => SSN.is_match(s),
        Format::HexColor => HEXCOLOR.is_match(s),
        Format::RgbColor => RGBCOLOR.is_match(s),
        Format::Byte => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(s).is_ok()
        }
        Format::Date => is_date(s),
        Format::Duration => is_duration(s),
        Format::DateTime => is_datetime(s),
    }
}

fn parse_ip(s: &str) -> bool {
    // Go's net.ParseIP accepts dotted IPv4, IPv6, and IPv4-mapped forms; no zones.
    s.parse::<std::net::IpAddr>().is_ok()
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    if bits.is_empty() || bits.len() > 3 || !bits.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let Ok(n) = bits.parse::<u32>() else {
        return false;
    };
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => n <= 32,
        Ok(std::net::IpAddr::V6(_)) => n <= 128,
        Err(_) => false,
    }
}

fn is_mac(s: &str) -> bool {
    let hex2 = |p: &str| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit());
    let hex4 = |p: &str| p.len() == 4 && p.bytes().all(|b| b.is_ascii_hexdigit());
    for sep in [':', '-'] {
        let parts: Vec<&str> = s.split(sep).collect();
        if matches!(parts.len(), 6 | 8 | 20) && parts.iter().all(|p| hex2(p)) {
            return true;
        }
    }
    let parts: Vec<&str> = s.split('.').collect();
    matches!(parts.len(), 3 | 4 | 10) && parts.iter().all(|p| hex4(p))
}

fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.chars().any(|c| c.is_control() || c == ' ') {
        return false;
    }
    s.starts_with('/') || URI_SCHEME.is_match(s)
}

fn isbn_digits(s: &str) -> String {
    s.chars().filter(|c| *c != '-' && *c != ' ').collect()
}

fn is_isbn10(s: &str) -> bool {
    let d = isbn_digits(s);
    let b = d.as_bytes();
    if b.len() != 10 || !b[..9].iter().all(u8::is_ascii_digit) {
        return false;
    }
    if !(b[9].is_ascii_digit() || b[9] == b'X') {
        return false;
    }
    let mut sum = 0u32;
    for (i, c) in b[..9].iter().enumerate() {
        sum += (i as u32 + 1) * u32::from(c - b'0');
    }
    sum += if b[9] == b'X' {
        100
    } else {
        10 * u32::from(b[9] - b'0')
    };
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let d = isbn_digits(s);
    let b = d.as_bytes();
    if b.len() != 13 || !b.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let mut sum = 0u32;
    for (i, c) in b[..12].iter().enumerate() {
        sum += [1, 3][i % 2] * u32::from(c - b'0');
    }
    (10 - sum % 10) % 10 == u32::from(b[12] - b'0')
}

fn is_credit_card(s: &str) -> bool {
    let d: String = s.chars().filter(char::is_ascii_digit).collect();
    if !CREDITCARD.is_match(&d) {
        return false;
    }
    let mut sum = 0u32;
    let mut double = false;
    for c in d.bytes().rev() {
        let mut n = u32::from(c - b'0');
        if double {
            n *= 2;
            if n > 9 {
                n -= 9;
            }
        }
        sum += n;
        double = !double;
    }
    sum.is_multiple_of(10)
}

fn is_date(s: &str) -> bool {
    s.len() == 10 && chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok()
}

fn is_datetime(s: &str) -> bool {
    if s.is_empty() {
        return false;
    }
    chrono::DateTime::parse_from_rfc3339(s).is_ok()
        || chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").is_ok()
        || chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S").is_ok()
}

fn is_duration(s: &str) -> bool {
    if GO_DURATION.is_match(s) {
        return true;
    }
    // strfmt's fallback: one or more "<int> <unit>" groups with known units.
    let units = [
        "ns",
        "us",
        "µs",
        "ms",
        "s",
        "m",
        "h",
        "d",
        "w",
        "nanosecond",
        "nanoseconds",
        "microsecond",
        "microseconds",
        "millisecond",
        "milliseconds",
        "second",
        "seconds",
        "sec",
        "secs",
        "minute",
        "minutes",
        "min",
        "mins",
        "hour",
        "hours",
        "hr",
        "hrs",
        "day",
        "days",
        "week",
        "weeks",
    ];
    let mut any = false;
    let mut rest = s.trim();
    while !rest.is_empty() {
        // take digits, optional spaces, letters
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        let after = &rest[digits..];
        let after_ws = after.trim_start();
        let unit_len: usize = after_ws
            .char_indices()
            .take_while(|(_, c)| c.is_alphabetic())
            .map(|(_, c)| c.len_utf8())
            .sum();
        let part = &rest[..digits + (after.len() - after_ws.len()) + unit_len];
        let Some(c) = DURATION_PART.captures(part) else {
            return false;
        };
        if !units.contains(&c.get(2).map_or("", |m| m.as_str())) {
            return false;
        }
        any = true;
        rest = after_ws[unit_len..].trim_start();
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    // Cases follow k8s.io/kube-openapi pkg/validation/strfmt/default_test.go
    #[test]
    fn formats() {
        let cases: &[(Format, &str, bool)] = &[
            (Format::Uuid, "a8098c1a-f86e-11da-bd1a-00112444be1e", true),
            (Format::Uuid, "A8098C1AF86E11DABD1A00112444BE1E", true),
            (Format::Uuid, "not-a-uuid", false),
            (Format::Uuid4, "a8098c1a-f86e-41da-bd1a-00112444be1e", true),
            (Format::Uuid4, "a8098c1a-f86e-11da-bd1a-00112444be1e", false),
            (Format::Ipv4, "192.168.0.1", true),
            (Format::Ipv4, "256.1.1.1", false),
            (Format::Ipv4, "::1", false),
            (Format::Ipv6, "::1", true),
            (Format::Ipv6, "1.2.3.4", false),
            (Format::Cidr, "10.0.0.0/8", true),
            (Format::Cidr, "10.0.0.0/33", false),
            (Format::Cidr, "fd00::/64", true),
            (Format::Mac, "01:23:45:67:89:ab", true),
            (Format::Mac, "01-23-45-67-89-ab", true),
            (Format::Mac, "0123.4567.89ab", true),
            (Format::Mac, "01:23:45", false),
            (Format::Hostname, "example.com", true),
            (Format::Hostname, "-bad", false),
            (Format::Email, "a@b.c", true),
            (Format::Email, "nope", false),
            (Format::Uri, "http://example.com/x", true),
            (Format::Uri, "/abs/path", true),
            (Format::Uri, "relative", false),
            (Format::Byte, "aGVsbG8=", true),
            (Format::Byte, "!!", false),
            (Format::Date, "2024-02-29", true),
            (Format::Date, "2023-02-29", false),
            (Format::DateTime, "2014-12-15T19:30:20.000Z", true),
            (Format::DateTime, "2014-12-15T19:30:20", true),
            (Format::DateTime, "yesterday", false),
            (Format::Duration, "3h", true),
            (Format::Duration, "1h30m", true),
            (Format::Duration, "3 days", true),
            (Format::Duration, "forever", false),
            (Format::Isbn10, "0321751043", true),
            (Format::Isbn13, "978-0321751041", true),
            (Format::Isbn10, "0321751044", false),
            (Format::CreditCard, "4111 1111 1111 1111", true),
            (Format::CreditCard, "4111 1111 1111 1112", false),
            (Format::Ssn, "111-11-1111", true),
            (Format::HexColor, "#FFF", true),
            (Format::HexColor, "#GGG", false),
            (Format::RgbColor, "rgb(255,255,255)", true),
            (Format::RgbColor, "rgb(256,255,255)", false),
            (Format::BsonObjectId, "507f1f77bcf86cd799439011", true),
            (Format::Password, "anything", true),
        ];
        for (f, s, ok) in cases {
            assert_eq!(check(*f, s), *ok, "{f:?} {s:?}");
        }
    }
}
