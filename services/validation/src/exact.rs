//! Exact numeric comparisons of decoded JSON numbers with the schema's bounds, used by
//! `maximum`/`minimum`/`exclusive*`, `multipleOf` and `enum` in [`crate::validate`] and the
//! pipeline's fast path.
//!
//! Upstream (kube-openapi pkg/validation/validate/values.go `MaximumNativeType`,
//! `MinimumNativeType`, `MultipleOfNativeType`) compares an integer value as an integer
//! (`MaximumInt`, `MultipleOfInt`), so `maximum: 9007199254740992` rejects
//! 9007199254740993; going through f64 would round the value to 2^53 and accept it. Here an
//! integer (i64 or u64) is compared with the f64 bound exactly, in i128, and only non-integer
//! values use f64.

use serde_json::Number;
use std::cmp::Ordering;

/// The integer value of `n`, when it is one (i64 or u64).
pub fn int(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// Exact ordering of an integer and a float (None for NaN).
pub fn cmp_int_f64(d: i128, b: f64) -> Option<Ordering> {
    if b.is_nan() {
        return None;
    }
    // Every i128 we hold is within ±2^64, far inside ±1e30.
    if b >= 1e30 {
        return Some(Ordering::Less);
    }
    if b <= -1e30 {
        return Some(Ordering::Greater);
    }
    let fl = b.floor();
    // `fl` is an integral f64 below 1e30 in magnitude: exactly representable as i128.
    let fi = fl as i128;
    Some(match d.cmp(&fi) {
        Ordering::Equal if b != fl => Ordering::Less,
        o => o,
    })
}

/// Exact ordering of a JSON number and a float bound.
pub fn cmp_f64(n: &Number, b: f64) -> Option<Ordering> {
    match int(n) {
        Some(d) => cmp_int_f64(d, b),
        None => n.as_f64().and_then(|f| f.partial_cmp(&b)),
    }
}

/// Numeric equality of two JSON numbers (reflect.DeepEqual after numeric conversion), exact
/// for integers of any width.
pub fn num_eq(a: &Number, b: &Number) -> bool {
    match (int(a), int(b)) {
        (Some(x), Some(y)) => x == y,
        (Some(x), None) => b.as_f64().and_then(|f| cmp_int_f64(x, f)) == Some(Ordering::Equal),
        (None, Some(y)) => a.as_f64().and_then(|f| cmp_int_f64(y, f)) == Some(Ordering::Equal),
        (None, None) => a.as_f64() == b.as_f64(),
    }
}

/// `multipleOf` for an integer value and an integral positive factor, exactly (values.go
/// `MultipleOfInt`); None when the float rule applies.
pub fn int_multiple_of(n: &Number, m: f64) -> Option<bool> {
    let d = int(n)?;
    if !((1.0..1e30).contains(&m) && m.fract() == 0.0) {
        return None;
    }
    Some(d % (m as i128) == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ordering::*;

    fn n(s: &str) -> Number {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn compare_with_bounds() {
        let cases: &[(&str, f64, Option<Ordering>)] = &[
            ("9007199254740993", 9007199254740992.0, Some(Greater)),
            ("9007199254740992", 9007199254740992.0, Some(Equal)),
            ("9007199254740991", 9007199254740992.0, Some(Less)),
            ("18446744073709551615", 18446744073709551616.0, Some(Less)),
            ("9223372036854775807", 9223372036854775808.0, Some(Less)),
            ("-9223372036854775808", -9223372036854775808.0, Some(Equal)),
            ("-9223372036854775808", -9223372036854775807.0, Some(Equal)),
            ("3", 2.5, Some(Greater)),
            ("2", 2.5, Some(Less)),
            ("-3", -2.5, Some(Less)),
            ("-2", -2.5, Some(Greater)),
            ("1", f64::INFINITY, Some(Less)),
            ("1", f64::NEG_INFINITY, Some(Greater)),
            ("1", f64::NAN, None),
            ("1.5", 1.5, Some(Equal)),
            ("1.5", 2.0, Some(Less)),
        ];
        for (v, b, want) in cases {
            assert_eq!(cmp_f64(&n(v), *b), *want, "{v} vs {b}");
        }
    }

    #[test]
    fn equality_and_multiples() {
        assert!(!num_eq(&n("9007199254740993"), &n("9007199254740992")));
        assert!(!num_eq(
            &n("18446744073709551615"),
            &n("18446744073709551614")
        ));
        assert!(num_eq(
            &n("18446744073709551615"),
            &n("18446744073709551615")
        ));
        assert!(num_eq(&n("2"), &n("2.0")));
        assert!(!num_eq(&n("9007199254740993"), &n("9007199254740992.0")));
        assert!(num_eq(&n("-1"), &n("-1")));
        assert_eq!(int_multiple_of(&n("9007199254740993"), 2.0), Some(false));
        assert_eq!(int_multiple_of(&n("9007199254740994"), 2.0), Some(true));
        assert_eq!(int_multiple_of(&n("18446744073709551615"), 5.0), Some(true));
        assert_eq!(int_multiple_of(&n("7"), 0.5), None);
        assert_eq!(int_multiple_of(&n("7.5"), 2.0), None);
    }
}
