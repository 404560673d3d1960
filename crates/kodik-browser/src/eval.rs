//! The `eval` whitelist (B12): literals, arithmetic and approved property reads — no calls, no
//! assignments, no arbitrary JavaScript. Parsed and computed here; only the fixed property
//! reads go to the page.

use serde_json::Value;

use crate::error::BrowserError;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Num(f64),
    Str(String),
    Bool(bool),
    Null,
    /// An approved read: `document.title`, `location.href`, `element.value`, …
    Read(&'static str),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
}

/// Page reads an expression may make, and whether they need `target`.
const READS: &[(&str, bool)] = &[
    ("document.title", false),
    ("document.URL", false),
    ("location.href", false),
    ("window.location.href", false),
    ("location.pathname", false),
    ("location.origin", false),
    ("element.value", true),
    ("element.checked", true),
    ("element.textContent", true),
    ("element.innerText", true),
    ("element.disabled", true),
];

/// Whether the read needs an element.
pub(crate) fn needs_element(read: &str) -> bool {
    READS.iter().any(|(r, el)| *r == read && *el)
}

fn refused(msg: impl Into<String>) -> BrowserError {
    BrowserError::Refused(msg.into())
}

struct Parser<'a> {
    s: &'a [u8],
    src: &'a str,
    i: usize,
}

/// Parses `src` or says why it is not allowed.
pub(crate) fn parse(src: &str) -> Result<Expr, BrowserError> {
    let mut p = Parser { s: src.as_bytes(), src, i: 0 };
    let e = p.sum()?;
    p.ws();
    if p.i < p.s.len() {
        let rest = &src[p.i..];
        if rest.starts_with('=') && !rest.starts_with("==") {
            return Err(refused(
                "eval refuses assignments; it only reads (literals, arithmetic, document.title, location.href, element.value/checked/textContent with target)",
            ));
        }
        if rest.starts_with('(') {
            return Err(refused(
                "eval refuses calls; it only reads (literals, arithmetic, document.title, location.href, element.value/checked/textContent with target)",
            ));
        }
        return Err(refused(format!(
            "eval does not accept `{}`: only literals, + - * / %, parentheses and approved reads",
            clip(rest)
        )));
    }
    Ok(e)
}

fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }
    fn sum(&mut self) -> Result<Expr, BrowserError> {
        let mut l = self.product()?;
        while let Some(c @ (b'+' | b'-')) = self.peek() {
            self.i += 1;
            if self.s.get(self.i) == Some(&b'=') || self.s.get(self.i) == Some(&c) {
                return Err(refused("eval refuses assignments and increments"));
            }
            let r = self.product()?;
            l = Expr::Bin(c as char, Box::new(l), Box::new(r));
        }
        Ok(l)
    }
    fn product(&mut self) -> Result<Expr, BrowserError> {
        let mut l = self.unary()?;
        while let Some(c @ (b'*' | b'/' | b'%')) = self.peek() {
            self.i += 1;
            if self.s.get(self.i) == Some(&b'=') {
                return Err(refused("eval refuses assignments"));
            }
            let r = self.unary()?;
            l = Expr::Bin(c as char, Box::new(l), Box::new(r));
        }
        Ok(l)
    }
    fn unary(&mut self) -> Result<Expr, BrowserError> {
        match self.peek() {
            Some(b'-') => {
                self.i += 1;
                Ok(Expr::Neg(Box::new(self.unary()?)))
            }
            Some(b'+') => {
                self.i += 1;
                self.unary()
            }
            _ => self.primary(),
        }
    }
    fn primary(&mut self) -> Result<Expr, BrowserError> {
        let Some(c) = self.peek() else { return Err(refused("eval: the expression ends too early")) };
        if c == b'(' {
            self.i += 1;
            let e = self.sum()?;
            if self.peek() != Some(b')') {
                return Err(refused("eval: a `(` is not closed"));
            }
            self.i += 1;
            return Ok(e);
        }
        if c.is_ascii_digit() || c == b'.' {
            let start = self.i;
            while self.i < self.s.len() && (self.s[self.i].is_ascii_digit() || self.s[self.i] == b'.') {
                self.i += 1;
            }
            return self.src[start..self.i]
                .parse()
                .map(Expr::Num)
                .map_err(|_| refused(format!("eval: `{}` is not a number", &self.src[start..self.i])));
        }
        if c == b'"' || c == b'\'' {
            self.i += 1;
            let mut out = String::new();
            let rest = &self.src[self.i..];
            let mut chars = rest.char_indices();
            while let Some((k, ch)) = chars.next() {
                if ch as u32 == c as u32 {
                    self.i += k + 1;
                    return Ok(Expr::Str(out));
                }
                if ch == '\\' {
                    match chars.next() {
                        Some((_, 'n')) => out.push('\n'),
                        Some((_, 't')) => out.push('\t'),
                        Some((_, other)) => out.push(other),
                        None => break,
                    }
                } else {
                    out.push(ch);
                }
            }
            return Err(refused("eval: a string is not closed"));
        }
        if c.is_ascii_alphabetic() || c == b'_' || c == b'$' {
            let start = self.i;
            while self.i < self.s.len()
                && (self.s[self.i].is_ascii_alphanumeric() || matches!(self.s[self.i], b'_' | b'$' | b'.'))
            {
                self.i += 1;
            }
            let word = &self.src[start..self.i];
            if self.peek() == Some(b'(') {
                return Err(refused(format!("eval refuses calls (`{word}(…)`); it only reads values")));
            }
            if self.peek() == Some(b'[') {
                return Err(refused("eval refuses computed property access (`[…]`)"));
            }
            return match word {
                "true" => Ok(Expr::Bool(true)),
                "false" => Ok(Expr::Bool(false)),
                "null" => Ok(Expr::Null),
                _ => READS.iter().find(|(r, _)| *r == word).map(|(r, _)| Expr::Read(r)).ok_or_else(|| {
                    refused(format!(
                        "eval may not read `{word}`; approved reads: {}",
                        READS.iter().map(|(r, _)| *r).collect::<Vec<_>>().join(", ")
                    ))
                }),
            };
        }
        Err(refused(format!("eval does not accept `{}`", clip(&self.src[self.i..]))))
    }
}

/// The approved reads an expression makes, each once.
pub(crate) fn reads(e: &Expr, out: &mut Vec<&'static str>) {
    match e {
        Expr::Read(r) if !out.contains(r) => out.push(r),
        Expr::Neg(x) => reads(x, out),
        Expr::Bin(_, a, b) => {
            reads(a, out);
            reads(b, out)
        }
        _ => {}
    }
}

/// Computes the expression with the values of its reads, with JavaScript's rules for `+`
/// (string concatenation when either side is a string).
pub(crate) fn compute(e: &Expr, values: &dyn Fn(&str) -> Value) -> Value {
    match e {
        Expr::Num(n) => num(*n),
        Expr::Str(s) => Value::String(s.clone()),
        Expr::Bool(b) => Value::Bool(*b),
        Expr::Null => Value::Null,
        Expr::Read(r) => values(r),
        Expr::Neg(x) => num(-to_num(&compute(x, values))),
        Expr::Bin(op, a, b) => {
            let (a, b) = (compute(a, values), compute(b, values));
            if *op == '+' && (a.is_string() || b.is_string()) {
                return Value::String(format!("{}{}", to_str(&a), to_str(&b)));
            }
            let (x, y) = (to_num(&a), to_num(&b));
            num(match op {
                '+' => x + y,
                '-' => x - y,
                '*' => x * y,
                '/' => x / y,
                _ => x % y,
            })
        }
    }
}

fn num(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9e15 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map(Value::Number).unwrap_or(Value::Null)
    }
}

fn to_num(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Null => 0.0,
        Value::String(s) => s.trim().parse().unwrap_or(f64::NAN),
        _ => f64::NAN,
    }
}

fn to_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b12_literals_arithmetic_and_reads_pass_calls_and_assignments_are_refused() {
        let e = parse("1 + 2 * (3 - 1)").unwrap();
        assert_eq!(compute(&e, &|_| Value::Null), Value::from(5));
        let e = parse("'Title: ' + document.title").unwrap();
        assert_eq!(compute(&e, &|_| Value::String("Home".into())), Value::String("Title: Home".into()));
        for bad in ["alert(1)", "document.title = 'x'", "fetch('/x')", "window.foo", "a[0]", "x++", "document.cookie"] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains("eval"), "{bad}: {err}");
        }
    }
}
