//! Go-style printing, in one place: what Go's `fmt` verbs (`%v`, `%q`, `%#v`, `%T`,
//! `fmt.Sprint`), `strconv.FormatFloat` and `encoding/json.Marshal` print for values decoded
//! from JSON into `interface{}`. Upstream's error texts and Table cells are built with these
//! verbs (apimachinery `pkg/util/validation/field/errors.go` `%#v`/`%q`; `pkg/labels`
//! `fmt.Sprint` of field values; `printers/tablegenerator` `json.Marshal` of non-scalar cells),
//! so every module that renders such a text calls this one.

use serde_json::Value;

/// Go's `%v` for JSON scalars, `%q` for strings, `%#v` for maps/slices of unstructured JSON.
pub fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        _ => go_sharp_v(v),
    }
}

fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    go_float(f)
}

/// Go's `%v` of a float64 (`strconv.FormatFloat(f, 'g', -1, 64)` with %v's exponent rule:
/// exponent form when exp < -4 || exp >= 21).
pub fn go_float(f: f64) -> String {
    if f == 0.0 {
        return "0".to_string();
    }
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let exp = f.abs().log10().floor() as i32;
    if (-4..21).contains(&exp) {
        let s = format!("{f}");
        s
    } else {
        // Rust `{:e}` gives e.g. "1e21"; Go gives "1e+21" and two-digit exponents.
        let s = format!("{f:e}");
        let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
        let (sign, digits) = if let Some(d) = e.strip_prefix('-') {
            ('-', d)
        } else {
            ('+', e)
        };
        let digits = if digits.len() < 2 {
            format!("0{digits}")
        } else {
            digits.to_string()
        };
        format!("{mant}e{sign}{digits}")
    }
}

/// Go's `%q` of a string.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%#v` of a `[]string` (`[]string{"a", "b"}`; `[]string{}` when empty).
pub fn go_string_slice<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let parts: Vec<String> = items.into_iter().map(go_quote).collect();
    format!("[]string{{{}}}", parts.join(", "))
}

fn go_sharp_v(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(go_sharp_v).collect();
            format!("[]interface {{}}{{{}}}", parts.join(", "))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", go_quote(k), go_sharp_v(&m[*k])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", parts.join(", "))
        }
    }
}

/// Go's `fmt.Sprint` of a decoded unstructured JSON value.
pub fn go_sprint(v: &Value) -> String {
    let mut out = String::new();
    go_sprint_into(v, &mut out);
    out
}

fn go_sprint_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else {
                // Integers beyond int64 decode as float64 upstream.
                out.push_str(&go_float(n.as_f64().unwrap_or(0.0)));
            }
        }
        Value::String(s) => out.push_str(s),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                go_sprint_into(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push_str("map[");
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                go_sprint_into(&m[k.as_str()], out);
            }
            out.push(']');
        }
    }
}

/// Go's `%T` of a value decoded into `interface{}` by the unstructured JSON decoder.
pub fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// `encoding/json`'s name of a JSON value's kind in its unmarshal errors (`json: cannot
/// unmarshal <kind> into Go value of type …`).
pub fn go_json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's `encoding/json.Marshal` of decoded unstructured JSON, as a string (see
/// [`go_json_into`]).
pub fn go_json(v: &Value) -> String {
    let mut out = String::new();
    go_json_into(v, &mut out);
    out
}

/// Go's `encoding/json.Marshal` of decoded unstructured JSON: sorted keys, HTML-safe string
/// escaping, Go's float format.
pub fn go_json_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) if n.is_i64() || n.is_u64() => out.push_str(&n.to_string()),
        Value::Number(n) => out.push_str(&go_json_float(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => go_json_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json_into(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json_string(k, out);
                out.push(':');
                go_json_into(&m[k.as_str()], out);
            }
            out.push('}');
        }
    }
}

fn go_json_string(s: &str, out: &mut String) {
    let quoted = serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    for c in quoted.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
}

/// Go encoding/json float64: `'f'` format unless |f| < 1e-6 or ≥ 1e21, then `'e'` with
/// `e-09` shortened to `e-9`.
pub fn go_json_float(f: f64) -> String {
    if !f.is_finite() {
        return "null".into();
    }
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        return format!("{f}");
    }
    let s = format!("{f:e}");
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    match exp.strip_prefix('-') {
        Some(d) => format!("{mant}e-{d}"),
        None if exp.len() < 2 => format!("{mant}e+0{exp}"),
        None => format!("{mant}e+{exp}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_formatting() {
        assert_eq!(go_value(&json!(1.5)), "1.5");
        assert_eq!(go_value(&json!(1e21)), "1e+21");
        assert_eq!(go_value(&json!(null)), "null");
        assert_eq!(
            go_value(&json!({"b": 1, "a": "x"})),
            "map[string]interface {}{\"a\":\"x\", \"b\":1}"
        );
        assert_eq!(go_value(&json!(["a", 1])), "[]interface {}{\"a\", 1}");
        assert_eq!(go_quote("a\"b\u{1}"), "\"a\\\"b\\x01\"");
    }

    #[test]
    fn go_json_float_format() {
        let cases = [
            (1.5, "1.5"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e-7, "1.5e-7"),
            (1e-10, "1e-10"),
            (0.000001, "0.000001"),
            (-2.5e22, "-2.5e+22"),
        ];
        for (f, want) in cases {
            assert_eq!(go_json_float(f), want, "{f}");
        }
    }

    #[test]
    fn sprint_type_and_json_table() {
        let v = json!({"b": [1, "x", null], "a": 1.5, "c": "<&>"});
        assert_eq!(go_sprint(&v), "map[a:1.5 b:[1 x <nil>] c:<&>]");
        assert_eq!(
            go_json(&v),
            r#"{"a":1.5,"b":[1,"x",null],"c":"\u003c\u0026\u003e"}"#
        );
        let types = [
            (json!(null), "<nil>"),
            (json!(true), "bool"),
            (json!(3), "int64"),
            (json!(3.5), "float64"),
            (json!("s"), "string"),
            (json!([]), "[]interface {}"),
            (json!({}), "map[string]interface {}"),
        ];
        for (v, t) in types {
            assert_eq!(go_type(&v), t, "{v}");
        }
        let floats = [
            (0.0, "0"),
            (1.0, "1"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (f64::INFINITY, "+Inf"),
        ];
        for (f, want) in floats {
            assert_eq!(go_float(f), want, "{f}");
        }
    }
}
