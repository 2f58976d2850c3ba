//! Label and field selectors, parsed and matched exactly as upstream does.
//!
//! Where it sits: the gateway parses `?labelSelector=` / `?fieldSelector=` of LIST and WATCH
//! requests with [`LabelSelector::parse`] / [`FieldSelector::parse`] (a parse error becomes a
//! 400 BadRequest whose message is the returned text), checks the field labels a custom
//! resource supports with [`CustomResourceFieldLabels::check`] (upstream's `ConvertFieldLabel`
//! transform), and storage / the watch fan-out filter objects with `matches`.
//!
//! Ported semantics:
//! - label selectors: k8s.io/apimachinery/pkg/labels/selector.go (lexer, parser, `NewRequirement`,
//!   `Requirement.Matches`, `String`), with key/value validation from
//!   k8s.io/apimachinery/pkg/util/validation/validation.go (`IsQualifiedName`,
//!   `IsValidLabelValue`, `IsDNS1123Subdomain`) and the error rendering of
//!   k8s.io/apimachinery/pkg/util/validation/field (see [`crate::field`]);
//! - field selectors: k8s.io/apimachinery/pkg/fields/selector.go (`splitTerms`, `splitTerm`,
//!   `UnescapeValue`, `parseSelector`, `hasTerm`/`notHasTerm`);
//! - the field labels of custom resources: apiextensions-apiserver
//!   pkg/apiserver/conversion/converter.go (`crConverter.ConvertFieldLabel`) and
//!   pkg/registry/customresource/strategy.go (`selectableFields`, `objectMetaFieldsSet`).
//!
//! Upstream has no size limit of its own besides the URL length; we bound the selector text to
//! [`MAX_SELECTOR_BYTES`] and the number of requirements to [`MAX_REQUIREMENTS`] so parsing and
//! matching stay cheap on any input.

use std::fmt;

use serde_json::{Map, Value};

use crate::field::{FieldError, go_quote};

/// Longest selector text accepted (label or field), in bytes.
pub const MAX_SELECTOR_BYTES: usize = 16 * 1024;
/// Most requirements (comma-separated terms) accepted in one selector.
pub const MAX_REQUIREMENTS: usize = 256;

fn check_bounds(kind: &str, s: &str) -> Result<(), String> {
    if s.len() > MAX_SELECTOR_BYTES {
        return Err(format!(
            "{kind} selector is too long: {} bytes, must be no more than {MAX_SELECTOR_BYTES} bytes",
            s.len()
        ));
    }
    Ok(())
}

fn too_many(kind: &str) -> String {
    format!("{kind} selector has too many requirements: must be no more than {MAX_REQUIREMENTS}")
}

pub use crate::validation::{is_dns1123_subdomain, is_qualified_name, is_valid_label_value};

// ---------------------------------------------------------------------------------------------
// Label selectors
// ---------------------------------------------------------------------------------------------

/// A label requirement operator (upstream `selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `in`: the label's value is one of the values.
    In,
    /// `notin`: the label is absent or its value is none of the values.
    NotIn,
    /// `=`: the label has this value.
    Equals,
    /// `==`: same as `=`.
    DoubleEquals,
    /// `!=`: the label is absent or has another value.
    NotEquals,
    /// `key` alone: the label is present.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `gt`: the label's value, an integer, is greater than the value.
    GreaterThan,
    /// `lt`: the label's value, an integer, is less than the value.
    LessThan,
}

impl Operator {
    /// The upstream `selection.Operator` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

/// One label requirement: key, operator, values (sorted and de-duplicated, as the upstream
/// parser builds them from a `sets.String`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

/// The `field.Path` the parser reports value errors under: `values[i][key]`.
fn value_path(i: usize, key: &str) -> String {
    format!("values[{i}][{key}]")
}

impl Requirement {
    /// Upstream `NewRequirement` (no path prefix): validates the key, the value count for the
    /// operator and every value; the error is the aggregated field error text.
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, String> {
        // Each entry is one `field.Error.Error()` text; `values` errors carry the Go `[]string`
        // value, printed with `%#v`.
        let mut errs: Vec<String> = Vec::new();
        let key_errs = is_qualified_name(key);
        if !key_errs.is_empty() {
            errs.push(
                FieldError::invalid("key", Value::String(key.to_string()), key_errs.join("; "))
                    .to_string(),
            );
        }
        let values_err = |detail: &str| {
            let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
            format!(
                "values: Invalid value: []string{{{}}}: {detail}",
                quoted.join(", ")
            )
        };
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    errs.push(values_err(
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    errs.push(values_err(
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(values_err(
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(values_err(
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if parse_go_int(v).is_none() {
                        errs.push(
                            FieldError::invalid(
                                format!("values[{i}]"),
                                Value::String(v.clone()),
                                "for 'Gt', 'Lt' operators, the value must be an integer",
                            )
                            .to_string(),
                        );
                    }
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let v_errs = is_valid_label_value(v);
            if !v_errs.is_empty() {
                errs.push(
                    FieldError::invalid(
                        value_path(i, key),
                        Value::String(v.clone()),
                        v_errs.join("; "),
                    )
                    .to_string(),
                );
            }
        }
        if !errs.is_empty() {
            return Err(aggregate_texts(errs));
        }
        Ok(Self {
            key: key.to_string(),
            operator,
            values,
        })
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }
    /// The requirement's operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }
    /// The values (one for `=`/`!=`/`gt`/`lt`, none for exists tests).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    fn has_value(&self, v: &str) -> bool {
        self.values.iter().any(|x| x == v)
    }

    /// Upstream `Requirement.Matches` against a label map (non-string values count as absent).
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        let lookup = || labels.get(&self.key).and_then(Value::as_str);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                lookup().is_some_and(|v| self.has_value(v))
            }
            Operator::NotIn | Operator::NotEquals => lookup().is_none_or(|v| !self.has_value(v)),
            Operator::Exists => lookup().is_some(),
            Operator::DoesNotExist => lookup().is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(have) = lookup().and_then(parse_go_int) else {
                    return false;
                };
                let [want] = self.values.as_slice() else {
                    return false;
                };
                let Some(want) = parse_go_int(want) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

/// `ErrorList.ToAggregate().Error()` over already rendered texts: duplicates dropped, one
/// error bare, several as `[a, b]`.
fn aggregate_texts(errs: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        seen.pop().unwrap_or_default()
    } else {
        format!("[{}]", seen.join(", "))
    }
}

/// Go's `strconv.ParseInt(s, 10, 64)`: optional sign, decimal digits only.
fn parse_go_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl fmt::Display for Requirement {
    /// Upstream `Requirement.String()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let (op, paren) = match self.operator {
            Operator::Equals => ("=", false),
            Operator::DoubleEquals => ("==", false),
            Operator::NotEquals => ("!=", false),
            Operator::In => (" in ", true),
            Operator::NotIn => (" notin ", true),
            Operator::GreaterThan => (">", false),
            Operator::LessThan => ("<", false),
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
        };
        f.write_str(op)?;
        if paren {
            f.write_str("(")?;
        }
        let mut sorted = self.values.clone();
        sorted.sort();
        f.write_str(&sorted.join(","))?;
        if paren {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A parsed label selector: the AND of its requirements, sorted by key like upstream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn string_to_token(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// The upstream byte lexer. Like upstream, a NUL byte reads as end of input.
struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    fn read(&mut self) -> u8 {
        if self.pos < self.s.len() {
            let b = self.s[self.pos];
            self.pos += 1;
            b
        } else {
            0
        }
    }
    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }
    fn lit(&self, start: usize, end: usize) -> String {
        String::from_utf8_lossy(&self.s[start..end]).into_owned()
    }
    fn scan_id_or_keyword(&mut self) -> (Token, String) {
        let start = self.pos;
        let mut end;
        loop {
            end = self.pos;
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if is_special_symbol(ch) || is_whitespace(ch) {
                self.unread();
                break;
            }
        }
        let bytes = &self.s[start..end];
        match string_to_token(bytes) {
            Some(t) => (t, self.lit(start, end)),
            None => (Token::Identifier, self.lit(start, end)),
        }
    }
    fn scan_special_symbol(&mut self) -> (Token, String) {
        let start = self.pos;
        let mut last: Option<(Token, usize)> = None;
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if is_special_symbol(ch) {
                match string_to_token(&self.s[start..self.pos]) {
                    Some(t) => last = Some((t, self.pos)),
                    None => {
                        if last.is_some() {
                            self.unread();
                            break;
                        }
                    }
                }
            } else {
                self.unread();
                break;
            }
        }
        // Every single special symbol is a token, so `last` is always set here.
        match last {
            Some((t, end)) => (t, self.lit(start, end)),
            None => (Token::EndOfString, String::new()),
        }
    }
    fn lex(&mut self) -> (Token, String) {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            (Token::EndOfString, String::new())
        } else if is_special_symbol(ch) {
            self.unread();
            self.scan_special_symbol()
        } else {
            self.unread();
            self.scan_id_or_keyword()
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

impl Parser {
    fn peek(&self, ctx: Context) -> (Token, String) {
        let (t, l) = self
            .items
            .get(self.position)
            .cloned()
            .unwrap_or((Token::EndOfString, String::new()));
        let t = match (ctx, t) {
            (Context::Values, Token::In | Token::NotIn) => Token::Identifier,
            _ => t,
        };
        (t, l)
    }
    fn lookahead(&self, ctx: Context) -> (Token, String) {
        self.peek(ctx)
    }
    fn consume(&mut self, ctx: Context) -> (Token, String) {
        let r = self.peek(ctx);
        self.position += 1;
        r
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    if reqs.len() > MAX_REQUIREMENTS {
                        return Err(too_many("label"));
                    }
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(reqs),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!("found '{l}', expected: ',' or 'end of string'"));
                        }
                    }
                }
                Token::EndOfString => return Ok(reqs),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (Operator::Exists | Operator::DoesNotExist)) = op {
            return Requirement::new(&key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, op, values)
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            op = Some(Operator::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let errs = is_qualified_name(&lit);
        if !errs.is_empty() {
            // The parser's own path is nil, which field.Path prints as "<nil>".
            return Err(
                FieldError::invalid("<nil>", Value::String(lit), errs.join("; ")).to_string(),
            );
        }
        let (t, _) = self.lookahead(Context::Values);
        if (t == Token::EndOfString || t == Token::Comma) && op != Some(Operator::DoesNotExist) {
            op = Some(Operator::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => return Err(format!("found '{lit}', expected: {BINARY_OPERATORS}")),
        })
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let s = self.parse_identifiers_list()?;
                let (tok, _) = self.consume(Context::Values);
                if tok != Token::ClosedPar {
                    // Upstream reports the literal seen right after '(' here.
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(s)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut set: Vec<String> = Vec::new();
        let insert = |set: &mut Vec<String>, v: String| {
            if !set.contains(&v) {
                set.push(v);
            }
        };
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    insert(&mut set, lit);
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => break,
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if set.is_empty() {
                        insert(&mut set, String::new());
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Token::ClosedPar {
                        insert(&mut set, String::new());
                        break;
                    }
                    if tok2 == Token::Comma {
                        insert(&mut set, String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
        set.sort();
        Ok(set)
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Token::Identifier {
            return Ok(vec![lit]);
        }
        Err(format!("found '{lit}', expected: identifier"))
    }
}

impl LabelSelector {
    /// The selector that matches everything (`labels.Everything()`).
    pub fn everything() -> Self {
        Self::default()
    }

    /// Upstream `labels.Parse`: the error text is what upstream puts in the 400 message.
    pub fn parse(s: &str) -> Result<Self, String> {
        check_bounds("label", s)?;
        let mut lexer = Lexer {
            s: s.as_bytes(),
            pos: 0,
        };
        let mut items = Vec::new();
        loop {
            let (t, l) = lexer.lex();
            items.push((t, l));
            if t == Token::EndOfString {
                break;
            }
        }
        let mut p = Parser { items, position: 0 };
        let mut requirements = p.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { requirements })
    }

    /// True when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, all of which must match (sorted by key as upstream).
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// True if every requirement matches the label map (`metadata.labels`).
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Matches an object by its `metadata.labels` (absent labels = empty set).
    pub fn matches_object(&self, obj: &Value) -> bool {
        if self.is_empty() {
            return true;
        }
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        let labels = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .unwrap_or_else(|| EMPTY.get_or_init(Map::new));
        self.matches(labels)
    }

    /// Upstream `RequiresExactMatch`: the single value required for `label` by `=`, `==` or a
    /// one-value `in`, if the first requirement on that key is such.
    pub fn requires_exact_match(&self, label: &str) -> Option<&str> {
        let r = self.requirements.iter().find(|r| r.key == label)?;
        match (r.operator, r.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [v]) => Some(v),
            _ => None,
        }
    }
}

impl fmt::Display for LabelSelector {
    /// Upstream `internalSelector.String()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Field selectors
// ---------------------------------------------------------------------------------------------

/// A field selector operator; `=` and `==` are the same term upstream (`hasTerm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldOperator {
    /// `=` or `==`: the field has this value.
    Equals,
    /// `!=`: the field has another value.
    NotEquals,
}

/// One field selector term (upstream `fields.Requirement`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field label (e.g. `metadata.name`).
    pub field: String,
    /// The term's operator.
    pub operator: FieldOperator,
    /// The unescaped value.
    pub value: String,
}

impl FieldRequirement {
    fn matches(&self, have: &str) -> bool {
        match self.operator {
            FieldOperator::Equals => have == self.value,
            FieldOperator::NotEquals => have != self.value,
        }
    }
}

/// A parsed field selector: the AND of its terms, in upstream's order (terms sorted as text).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

/// Upstream `splitTerms`: split on commas not preceded by a backslash escape.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Upstream `splitTerm`: the first position where `!=`, `==` or `=` starts splits the term.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, kind) in [
            ("!=", FieldOperator::NotEquals),
            ("==", FieldOperator::Equals),
            ("=", FieldOperator::Equals),
        ] {
            if rest.starts_with(op) {
                return Some((&term[..i], kind, &term[i + op.len()..]));
            }
        }
    }
    None
}

/// Upstream `UnescapeValue`: `\\`, `\,`, `\=` are the only escapes; bare `,`/`=` are errors.
pub fn unescape_field_value(s: &str) -> Result<String, String> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                _ => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{c}"
                    ));
                }
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // Go prints the rune with %v, i.e. as its number.
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ));
            }
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(out)
}

/// Upstream `EscapeValue`: escapes `\`, `,` and `=` for use in a field selector value.
pub fn escape_field_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl FieldSelector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Upstream `fields.ParseSelector`.
    pub fn parse(s: &str) -> Result<Self, String> {
        check_bounds("field", s)?;
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut requirements = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((lhs, op, rhs)) = split_term(part) else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let value = unescape_field_value(rhs)?;
            requirements.push(FieldRequirement {
                field: lhs.to_string(),
                operator: op,
                value,
            });
            if requirements.len() > MAX_REQUIREMENTS {
                return Err(too_many("field"));
            }
        }
        Ok(Self { requirements })
    }

    /// True when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The terms, all of which must match.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// True if every term matches; `get` returns the object's value of a field label
    /// (a missing field reads as "", like upstream's `fields.Set.Get`).
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements
            .iter()
            .all(|r| r.matches(get(&r.field).as_deref().unwrap_or("")))
    }

    /// Upstream `RequiresExactMatch`: the value of the first `field=value` term on `field`.
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && r.operator == FieldOperator::Equals)
            .map(|r| r.value.as_str())
    }

    /// The name when the selector is exactly `metadata.name=<x>` (or `==`): storage can serve
    /// it as a single-key lookup.
    pub fn exact_name(&self) -> Option<&str> {
        match self.requirements.as_slice() {
            [r] if r.field == "metadata.name" && r.operator == FieldOperator::Equals => {
                Some(&r.value)
            }
            _ => None,
        }
    }
}

impl fmt::Display for FieldSelector {
    /// Upstream `String()`: `f=v` / `f!=v` joined by commas (values are not re-escaped).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = match r.operator {
                FieldOperator::Equals => "=",
                FieldOperator::NotEquals => "!=",
            };
            write!(f, "{}{op}{}", r.field, r.value)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Field labels of custom resources
// ---------------------------------------------------------------------------------------------

/// One declared `selectableFields[].jsonPath` of a CRD version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectableField {
    /// The field label: the JSON path without its leading `.` (e.g. `spec.color`).
    pub name: String,
    segments: Vec<String>,
}

impl SelectableField {
    /// From a CRD `jsonPath` such as `.spec.color` (a simple path without array notation, as
    /// CRD validation guarantees).
    pub fn new(json_path: &str) -> Self {
        let name = json_path.strip_prefix('.').unwrap_or(json_path).to_string();
        let segments = name
            .split('.')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        Self { name, segments }
    }

    /// The value of this field in `obj` as upstream's `fmt.Sprint` renders it; absent or null
    /// gives "".
    pub fn value_of(&self, obj: &Value) -> String {
        let mut cur = obj;
        for seg in &self.segments {
            match cur.get(seg.as_str()) {
                Some(v) if cur.is_object() => cur = v,
                _ => return String::new(),
            }
        }
        match cur {
            Value::Null => String::new(),
            v => go_sprint(v),
        }
    }
}

pub use crate::gofmt::go_sprint;

/// The field labels a custom resource supports: `metadata.name`, `metadata.namespace` (only
/// when namespaced) and the version's `selectableFields`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomResourceFieldLabels {
    namespaced: bool,
    selectable: Vec<SelectableField>,
}

impl CustomResourceFieldLabels {
    /// `selectable_json_paths` are the CRD version's `selectableFields[].jsonPath` values.
    pub fn new<I, S>(namespaced: bool, selectable_json_paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self {
            namespaced,
            selectable: selectable_json_paths
                .into_iter()
                .map(|p| SelectableField::new(p.as_ref()))
                .collect(),
        }
    }

    /// From a CRD version JSON object (reads `selectableFields[].jsonPath`).
    pub fn from_crd_version(namespaced: bool, version: &Value) -> Self {
        let paths = version
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        Self::new(namespaced, paths)
    }

    /// The CRD version's `selectableFields`.
    pub fn selectable_fields(&self) -> &[SelectableField] {
        &self.selectable
    }

    /// Upstream `crConverter.ConvertFieldLabel`: Err is the 400 message.
    pub fn convert_field_label(&self, label: &str) -> Result<(), String> {
        if label == "metadata.name"
            || (self.namespaced && label == "metadata.namespace")
            || self.selectable.iter().any(|f| f.name == label)
        {
            Ok(())
        } else {
            Err(format!("field label not supported: {label}"))
        }
    }

    /// Checks every term of a selector, in upstream's order; the first unsupported label is
    /// the error (HTTP 400 BadRequest with this message).
    pub fn check(&self, selector: &FieldSelector) -> Result<(), String> {
        selector
            .requirements()
            .iter()
            .try_for_each(|r| self.convert_field_label(&r.field))
    }

    /// The value of a field label for `obj` (upstream's `GetAttrs` field set); None when the
    /// label is not in the set (matching then compares against "").
    pub fn field_value(&self, obj: &Value, label: &str) -> Option<String> {
        let meta = |k: &str| {
            obj.get("metadata")
                .and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match label {
            "metadata.name" => Some(meta("name")),
            "metadata.namespace" if self.namespaced => Some(meta("namespace")),
            _ => self
                .selectable
                .iter()
                .find(|f| f.name == label)
                .map(|f| f.value_of(obj)),
        }
    }

    /// True if `obj` matches `selector`.
    pub fn matches(&self, selector: &FieldSelector, obj: &Value) -> bool {
        selector.matches(|label| self.field_value(obj, label))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    const NAME_PART_REGEX_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const VALUE_REGEX_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    #[test]
    fn label_parse_and_string_roundtrip() {
        let cases = [
            ("", ""),
            ("x=a", "x=a"),
            ("x==a", "x==a"),
            ("x!=a", "x!=a"),
            ("x", "x"),
            ("!x", "!x"),
            ("x in (b,a)", "x in (a,b)"),
            ("x notin (a)", "x notin (a)"),
            ("x>1", "x>1"),
            ("x<1", "x<1"),
            ("  b = c ,  a  ", "a,b=c"),
            ("x in (a,,b)", "x in (,a,b)"),
            ("x in ()", "x in ()"),
            ("x in (,)", "x in ()"),
            ("x=", "x="),
            ("x=,y", "x=,y"),
            ("x in (in,notin)", "x in (in,notin)"),
            ("example.com/x=y", "example.com/x=y"),
            ("x=a,x=b", "x=a,x=b"),
            ("x in (a,a)", "x in (a)"),
        ];
        for (input, want) in cases {
            let s = LabelSelector::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(s.to_string(), want, "input {input:?}");
        }
    }

    #[test]
    fn label_parse_syntax_errors() {
        let cases = [
            ("x=a b", "found 'b', expected: ',' or 'end of string'"),
            ("x,", "found '', expected: identifier after ','"),
            (
                ",x",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
            (
                "=x",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            (
                "x y",
                "unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "x in a",
                "unable to parse requirement: found 'a' expected: '('",
            ),
            (
                "x in (a",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
            (
                "x in (a b)",
                "unable to parse requirement: found 'b', expected: ',' or ')'",
            ),
            (
                "x in (=)",
                "unable to parse requirement: found '=', expected: ',', ')' or identifier",
            ),
            (
                "x in (,=)",
                "unable to parse requirement: found '=', expected: ',', or identifier",
            ),
            (
                "x==(",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                "!",
                "unable to parse requirement: found '', expected: identifier",
            ),
            (
                "!=x",
                "found '!=', expected: !, identifier, or 'end of string'",
            ),
        ];
        for (input, want) in cases {
            let err = LabelSelector::parse(input).expect_err(input);
            assert_eq!(err, want, "input {input:?}");
        }
    }

    #[test]
    fn label_parse_validation_errors() {
        let cases = [
            (
                "-x=a".to_string(),
                format!("unable to parse requirement: <nil>: Invalid value: \"-x\": {NAME_PART_REGEX_MSG}"),
            ),
            (
                "/x".to_string(),
                "unable to parse requirement: <nil>: Invalid value: \"/x\": prefix part must be non-empty".to_string(),
            ),
            (
                "a/b/c".to_string(),
                "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_string(),
            ),
            (
                "Foo.com/x".to_string(),
                "unable to parse requirement: <nil>: Invalid value: \"Foo.com/x\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string(),
            ),
            (
                format!("{}=a", "k".repeat(64)),
                format!(
                    "unable to parse requirement: <nil>: Invalid value: \"{}\": name part must be no more than 63 characters",
                    "k".repeat(64)
                ),
            ),
            (
                "x=-a".to_string(),
                format!("unable to parse requirement: values[0][x]: Invalid value: \"-a\": {VALUE_REGEX_MSG}"),
            ),
            (
                "x in (-a,b,-c)".to_string(),
                format!(
                    "unable to parse requirement: [values[0][x]: Invalid value: \"-a\": {VALUE_REGEX_MSG}, values[1][x]: Invalid value: \"-c\": {VALUE_REGEX_MSG}]"
                ),
            ),
            (
                format!("x={}", "v".repeat(64)),
                format!(
                    "unable to parse requirement: values[0][x]: Invalid value: \"{}\": must be no more than 63 characters",
                    "v".repeat(64)
                ),
            ),
            (
                "x>a".to_string(),
                "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer".to_string(),
            ),
            (
                "x<".to_string(),
                "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer".to_string(),
            ),
        ];
        for (input, want) in cases {
            let err = LabelSelector::parse(&input).expect_err(&input);
            assert_eq!(err, want, "input {input:?}");
        }
    }

    #[test]
    fn requirement_new_errors() {
        assert_eq!(
            Requirement::new("x", Operator::In, vec![]).unwrap_err(),
            "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            Requirement::new("x", Operator::Exists, vec!["a".into()]).unwrap_err(),
            "values: Invalid value: []string{\"a\"}: values set must be empty for exists and does not exist"
        );
        assert!(Requirement::new("x", Operator::Equals, vec!["a".into(), "b".into()]).is_err());
        assert!(Requirement::new("x", Operator::Equals, vec!["a".into()]).is_ok());
    }

    #[test]
    fn label_matching() {
        let l = labels(json!({"env": "prod", "tier": "web", "n": "5", "bad": 3}));
        let cases = [
            ("", true),
            ("env=prod", true),
            ("env==prod", true),
            ("env=dev", false),
            ("env!=dev", true),
            ("env!=prod", false),
            ("missing!=x", true),
            ("env in (dev,prod)", true),
            ("env in (dev)", false),
            ("missing in (dev)", false),
            ("env notin (dev)", true),
            ("env notin (prod)", false),
            ("missing notin (prod)", true),
            ("env", true),
            ("missing", false),
            ("!missing", true),
            ("!env", false),
            ("env=prod,tier=web", true),
            ("env=prod,tier=db", false),
            ("n>4", true),
            ("n>5", false),
            ("n<6", true),
            ("env>1", false),
            ("missing<1", false),
            ("bad", false),
            ("x=", false),
        ];
        for (sel, want) in cases {
            let s = LabelSelector::parse(sel).unwrap();
            assert_eq!(s.matches(&l), want, "selector {sel:?}");
        }
        let obj = json!({"metadata": {"labels": {"a": "b"}}});
        assert!(LabelSelector::parse("a=b").unwrap().matches_object(&obj));
        assert!(
            !LabelSelector::parse("a")
                .unwrap()
                .matches_object(&json!({}))
        );
        assert!(
            LabelSelector::parse("!a")
                .unwrap()
                .matches_object(&json!({}))
        );
    }

    #[test]
    fn label_requires_exact_match_and_empty() {
        let s = LabelSelector::parse("b in (x),a=y,c!=z").unwrap();
        assert_eq!(s.requires_exact_match("a"), Some("y"));
        assert_eq!(s.requires_exact_match("b"), Some("x"));
        assert_eq!(s.requires_exact_match("c"), None);
        assert!(!s.is_empty());
        assert!(LabelSelector::parse("").unwrap().is_empty());
        assert!(LabelSelector::parse("   ").unwrap().is_empty());
    }

    #[test]
    fn label_nul_byte_ends_input_like_upstream() {
        // A NUL where a token starts ends the input; inside an identifier it only ends it.
        let s = LabelSelector::parse("a \0garbage ((").unwrap();
        assert_eq!(s.to_string(), "a");
        assert_eq!(
            LabelSelector::parse("a\0b").unwrap_err(),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
    }

    #[test]
    fn selector_bounds() {
        let long = "a".repeat(MAX_SELECTOR_BYTES + 1);
        assert_eq!(
            LabelSelector::parse(&long).unwrap_err(),
            format!(
                "label selector is too long: {} bytes, must be no more than {MAX_SELECTOR_BYTES} bytes",
                MAX_SELECTOR_BYTES + 1
            )
        );
        assert!(
            FieldSelector::parse(&long)
                .unwrap_err()
                .starts_with("field selector is too long")
        );
        let many: Vec<String> = (0..=MAX_REQUIREMENTS).map(|i| format!("k{i}")).collect();
        assert_eq!(
            LabelSelector::parse(&many.join(",")).unwrap_err(),
            format!(
                "label selector has too many requirements: must be no more than {MAX_REQUIREMENTS}"
            )
        );
        let many: Vec<String> = (0..=MAX_REQUIREMENTS).map(|i| format!("k{i}=v")).collect();
        assert!(
            FieldSelector::parse(&many.join(","))
                .unwrap_err()
                .contains("too many")
        );
        let ok: Vec<String> = (0..MAX_REQUIREMENTS).map(|i| format!("k{i}")).collect();
        assert!(LabelSelector::parse(&ok.join(",")).is_ok());
    }

    #[test]
    fn label_parse_never_panics_on_odd_input() {
        let odd = [
            "(",
            ")",
            "((",
            "))",
            "!!",
            "!=",
            "==",
            "<>",
            "in",
            "notin",
            "in (a)",
            "a in",
            "a in (",
            "a notin ()",
            "é=ü",
            "a=\u{0}",
            "\u{0}",
            ",,,",
            "a,,b",
            "a=b,",
            "!a=b",
            "a!b",
        ];
        for s in odd {
            let _ = LabelSelector::parse(s);
        }
        assert_eq!(
            LabelSelector::parse("!a=b").unwrap_err(),
            "found '=', expected: ',' or 'end of string'"
        );
    }

    #[test]
    fn field_parse_and_string() {
        let cases = [
            ("", ""),
            (",", ""),
            ("metadata.name=foo", "metadata.name=foo"),
            ("metadata.name==foo", "metadata.name=foo"),
            ("metadata.name!=foo", "metadata.name!=foo"),
            ("b=1,a=2", "a=2,b=1"),
            ("a=", "a="),
            ("a=x\\,y", "a=x,y"),
            ("a=x\\=y", "a=x=y"),
            ("a=x\\\\y", "a=x\\y"),
            ("=x", "=x"),
        ];
        for (input, want) in cases {
            let s = FieldSelector::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(s.to_string(), want, "input {input:?}");
        }
        let s = FieldSelector::parse("a=x\\,y,b!=z").unwrap();
        assert_eq!(
            s.requirements(),
            &[
                FieldRequirement {
                    field: "a".into(),
                    operator: FieldOperator::Equals,
                    value: "x,y".into()
                },
                FieldRequirement {
                    field: "b".into(),
                    operator: FieldOperator::NotEquals,
                    value: "z".into()
                },
            ]
        );
    }

    #[test]
    fn field_parse_errors() {
        let cases = [
            ("foo", "invalid selector: 'foo'; can't understand 'foo'"),
            (
                "a=b,foo",
                "invalid selector: 'a=b,foo'; can't understand 'foo'",
            ),
            (
                "a=b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "a===c",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "a=b\\x",
                "invalid field selector: invalid escape sequence: \\x",
            ),
            (
                "a=b\\",
                "invalid field selector: invalid escape sequence: \\",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                FieldSelector::parse(input).unwrap_err(),
                want,
                "input {input:?}"
            );
        }
    }

    #[test]
    fn field_escape_roundtrip() {
        for v in ["plain", "a,b", "a=b", "a\\b", "\\,=", ""] {
            let sel = format!("f={}", escape_field_value(v));
            let s = FieldSelector::parse(&sel).unwrap();
            assert_eq!(s.requirements()[0].value, v);
        }
    }

    #[test]
    fn field_matching_and_exact_name() {
        let get = |f: &str| match f {
            "metadata.name" => Some("foo".to_string()),
            "metadata.namespace" => Some("ns".to_string()),
            _ => None,
        };
        let cases = [
            ("", true),
            ("metadata.name=foo", true),
            ("metadata.name==foo", true),
            ("metadata.name=bar", false),
            ("metadata.name!=bar", true),
            ("metadata.name!=foo", false),
            ("metadata.name=foo,metadata.namespace=ns", true),
            ("metadata.name=foo,metadata.namespace=other", false),
            ("spec.x=", true),
            ("spec.x!=", false),
        ];
        for (sel, want) in cases {
            assert_eq!(
                FieldSelector::parse(sel).unwrap().matches(get),
                want,
                "{sel}"
            );
        }
        assert_eq!(
            FieldSelector::parse("metadata.name=foo")
                .unwrap()
                .exact_name(),
            Some("foo")
        );
        assert_eq!(
            FieldSelector::parse("metadata.name==foo")
                .unwrap()
                .exact_name(),
            Some("foo")
        );
        assert_eq!(
            FieldSelector::parse("metadata.name!=foo")
                .unwrap()
                .exact_name(),
            None
        );
        assert_eq!(
            FieldSelector::parse("metadata.name=foo,metadata.namespace=x")
                .unwrap()
                .exact_name(),
            None
        );
        assert_eq!(
            FieldSelector::parse("metadata.name=foo,metadata.namespace=x")
                .unwrap()
                .requires_exact_match("metadata.name"),
            Some("foo")
        );
    }

    #[test]
    fn custom_resource_field_labels() {
        let ns = CustomResourceFieldLabels::new(true, [".spec.color", ".spec.size"]);
        let cluster = CustomResourceFieldLabels::new(false, Vec::<String>::new());
        let cases: [(&CustomResourceFieldLabels, &str, Result<(), String>); 7] = [
            (&ns, "metadata.name=a", Ok(())),
            (&ns, "metadata.namespace=a", Ok(())),
            (&ns, "spec.color=red,spec.size!=L", Ok(())),
            (
                &ns,
                "spec.shape=round",
                Err("field label not supported: spec.shape".into()),
            ),
            (
                &cluster,
                "metadata.namespace=a",
                Err("field label not supported: metadata.namespace".into()),
            ),
            (&cluster, "metadata.name=a", Ok(())),
            // The first unsupported term in sorted order is reported.
            (
                &ns,
                "z.b=1,metadata.name=x,a.b=1",
                Err("field label not supported: a.b".into()),
            ),
        ];
        for (labels, sel, want) in cases {
            assert_eq!(
                labels.check(&FieldSelector::parse(sel).unwrap()),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn crd_version_selectable_fields() {
        let v = json!({"name": "v1", "selectableFields": [{"jsonPath": ".spec.color"}]});
        let l = CustomResourceFieldLabels::from_crd_version(true, &v);
        assert_eq!(l.selectable_fields().len(), 1);
        assert_eq!(l.selectable_fields()[0].name, "spec.color");
        assert!(l.convert_field_label("spec.color").is_ok());
    }

    #[test]
    fn selectable_field_values() {
        let obj = json!({
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"color": "red", "on": true, "n": 42, "big": 1.5, "nil": null, "obj": {"b": 1, "a": "x"}, "arr": [1, "y"]}
        });
        let cases = [
            (".spec.color", "red"),
            (".spec.on", "true"),
            (".spec.n", "42"),
            (".spec.big", "1.5"),
            (".spec.nil", ""),
            (".spec.missing", ""),
            (".spec.color.deeper", ""),
            (".status.x", ""),
            (".spec.obj", "map[a:x b:1]"),
            (".spec.arr", "[1 y]"),
        ];
        for (path, want) in cases {
            assert_eq!(SelectableField::new(path).value_of(&obj), want, "{path}");
        }
        let labels = CustomResourceFieldLabels::new(true, [".spec.color", ".spec.n"]);
        assert_eq!(
            labels.field_value(&obj, "metadata.name").as_deref(),
            Some("a")
        );
        assert_eq!(
            labels.field_value(&obj, "metadata.namespace").as_deref(),
            Some("ns")
        );
        let cases = [
            ("spec.color=red", true),
            ("spec.color=blue", false),
            ("spec.n=42,metadata.namespace=ns", true),
            ("spec.n!=42", false),
            ("metadata.name=a", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                labels.matches(&FieldSelector::parse(sel).unwrap(), &obj),
                want,
                "{sel}"
            );
        }
        let cluster = CustomResourceFieldLabels::new(false, Vec::<String>::new());
        assert_eq!(cluster.field_value(&obj, "metadata.namespace"), None);
    }

    #[test]
    fn validation_helpers() {
        assert!(is_qualified_name("example.com/my-key_1.x").is_empty());
        assert!(is_qualified_name("a").is_empty());
        assert_eq!(
            is_qualified_name(""),
            vec![
                "name part must be non-empty".to_string(),
                NAME_PART_REGEX_MSG.to_string()
            ]
        );
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("A-b_c.9").is_empty());
        assert_eq!(
            is_valid_label_value("a b"),
            vec![VALUE_REGEX_MSG.to_string()]
        );
        assert!(is_dns1123_subdomain("a.b-c.d").is_empty());
        assert_eq!(is_dns1123_subdomain("a..b").len(), 1);
        assert_eq!(is_dns1123_subdomain(&"a".repeat(254)).len(), 1);
    }
}
