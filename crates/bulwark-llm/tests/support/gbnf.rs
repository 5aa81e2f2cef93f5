//! A small, independent GBNF parser and recogniser, to check the grammars
//! `bulwark_llm::local::grammar` generates without llama.cpp: every rule
//! parses, every referenced rule exists, no rule is left-recursive, and a
//! given string is (or is not) in the language.
//!
//! It understands what llama.cpp's GBNF has and the generator uses: one
//! rule per line (`name ::= alternatives`), `"literals"` and `[classes]`
//! with `\n \r \t \\ \" \[ \] \xHH \uHHHH` escapes, negated classes and
//! ranges, `.`, rule references, `( groups )`, and `? * +`.

#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};
use std::fmt;

#[derive(Debug, Clone)]
enum Atom {
    Literal(Vec<char>),
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Any,
    Rule(String),
    Group(Vec<Vec<Item>>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Repeat {
    One,
    Optional,
    Star,
    Plus,
}

#[derive(Debug, Clone)]
struct Item {
    atom: Atom,
    repeat: Repeat,
}

pub struct Grammar {
    rules: HashMap<String, Vec<Vec<Item>>>,
}

#[derive(Debug)]
pub struct GbnfError(pub String);

impl fmt::Display for GbnfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

struct Parser<'a> {
    chars: Vec<char>,
    pos: usize,
    line: &'a str,
}

impl Parser<'_> {
    fn err<T>(&self, what: &str) -> Result<T, GbnfError> {
        Err(GbnfError(format!(
            "{what} at column {} of `{}`",
            self.pos, self.line
        )))
    }
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }
    fn skip_space(&mut self) {
        while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
            self.pos += 1;
        }
    }
    fn name(&mut self) -> Result<String, GbnfError> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            self.pos += 1;
        }
        if start == self.pos {
            return self.err("expected a rule name");
        }
        Ok(self.chars[start..self.pos].iter().collect())
    }
    fn hex(&mut self, digits: usize) -> Result<char, GbnfError> {
        let text: String = self
            .chars
            .get(self.pos..self.pos + digits)
            .unwrap_or(&[])
            .iter()
            .collect();
        self.pos += digits;
        u32::from_str_radix(&text, 16)
            .ok()
            .filter(|_| text.len() == digits)
            .and_then(char::from_u32)
            .map_or_else(|| self.err("bad hex escape"), Ok)
    }
    fn char_in(&mut self, close: char) -> Result<char, GbnfError> {
        let Some(c) = self.peek() else {
            return self.err(&format!("unterminated, expected {close}"));
        };
        self.pos += 1;
        if c != '\\' {
            return Ok(c);
        }
        let Some(e) = self.peek() else {
            return self.err("dangling escape");
        };
        self.pos += 1;
        match e {
            'n' => Ok('\n'),
            'r' => Ok('\r'),
            't' => Ok('\t'),
            '\\' | '"' | '[' | ']' | '-' => Ok(e),
            'x' => self.hex(2),
            'u' => self.hex(4),
            'U' => self.hex(8),
            _ => self.err("unknown escape"),
        }
    }
    fn alternatives(&mut self, inside_group: bool) -> Result<Vec<Vec<Item>>, GbnfError> {
        let mut alternatives = vec![Vec::new()];
        loop {
            self.skip_space();
            let Some(c) = self.peek() else {
                return if inside_group {
                    self.err("unclosed group")
                } else {
                    Ok(alternatives)
                };
            };
            let atom = match c {
                '|' => {
                    self.pos += 1;
                    alternatives.push(Vec::new());
                    continue;
                }
                ')' if inside_group => {
                    self.pos += 1;
                    return Ok(alternatives);
                }
                '"' => {
                    self.pos += 1;
                    let mut text = Vec::new();
                    while self.peek() != Some('"') {
                        text.push(self.char_in('"')?);
                    }
                    self.pos += 1;
                    Atom::Literal(text)
                }
                '[' => {
                    self.pos += 1;
                    let negated = self.peek() == Some('^');
                    if negated {
                        self.pos += 1;
                    }
                    let mut ranges = Vec::new();
                    while self.peek() != Some(']') {
                        let low = self.char_in(']')?;
                        let high = if self.peek() == Some('-')
                            && self.chars.get(self.pos + 1) != Some(&']')
                        {
                            self.pos += 1;
                            self.char_in(']')?
                        } else {
                            low
                        };
                        if high < low {
                            return self.err("reversed range");
                        }
                        ranges.push((low, high));
                    }
                    self.pos += 1;
                    Atom::Class { negated, ranges }
                }
                '.' => {
                    self.pos += 1;
                    Atom::Any
                }
                '(' => {
                    self.pos += 1;
                    Atom::Group(self.alternatives(true)?)
                }
                c if c.is_ascii_alphanumeric() || c == '-' => Atom::Rule(self.name()?),
                _ => return self.err("unexpected character"),
            };
            let repeat = match self.peek() {
                Some('?') => Repeat::Optional,
                Some('*') => Repeat::Star,
                Some('+') => Repeat::Plus,
                _ => Repeat::One,
            };
            if repeat != Repeat::One {
                self.pos += 1;
            }
            if let Some(last) = alternatives.last_mut() {
                last.push(Item { atom, repeat });
            }
        }
    }
}

impl Grammar {
    pub fn parse(text: &str) -> Result<Self, GbnfError> {
        let mut rules = HashMap::new();
        for line in text.lines() {
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let mut parser = Parser {
                chars: line.chars().collect(),
                pos: 0,
                line,
            };
            let name = parser.name()?;
            parser.skip_space();
            if !parser.chars[parser.pos..].starts_with(&[':', ':', '=']) {
                return parser.err("expected ::=");
            }
            parser.pos += 3;
            let body = parser.alternatives(false)?;
            if rules.insert(name.clone(), body).is_some() {
                return Err(GbnfError(format!("rule `{name}` defined twice")));
            }
        }
        let grammar = Self { rules };
        if !grammar.rules.contains_key("root") {
            return Err(GbnfError("no root rule".into()));
        }
        for body in grammar.rules.values() {
            grammar.check_refs(body)?;
        }
        Ok(grammar)
    }

    fn check_refs(&self, alternatives: &[Vec<Item>]) -> Result<(), GbnfError> {
        for item in alternatives.iter().flatten() {
            match &item.atom {
                Atom::Rule(name) if !self.rules.contains_key(name) => {
                    return Err(GbnfError(format!("undefined rule `{name}`")));
                }
                Atom::Group(inner) => self.check_refs(inner)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Is all of `input` derived by `root`?
    pub fn accepts(&self, input: &str) -> bool {
        let chars: Vec<char> = input.chars().collect();
        let mut run = Run {
            grammar: self,
            input: &chars,
            memo: HashMap::new(),
        };
        run.rule("root", 0).contains(&chars.len())
    }
}

struct Run<'a> {
    grammar: &'a Grammar,
    input: &'a [char],
    /// `None` while a rule is being matched at a position: meeting it
    /// again there means left recursion.
    memo: HashMap<(String, usize), Option<BTreeSet<usize>>>,
}

impl Run<'_> {
    fn rule(&mut self, name: &str, pos: usize) -> BTreeSet<usize> {
        let key = (name.to_owned(), pos);
        match self.memo.get(&key) {
            Some(Some(ends)) => return ends.clone(),
            Some(None) => panic!("left recursion through `{name}`"),
            None => {}
        }
        self.memo.insert(key.clone(), None);
        let body = &self.grammar.rules[name];
        let ends = self.alternatives(body, pos);
        self.memo.insert(key, Some(ends.clone()));
        ends
    }

    fn alternatives(&mut self, alternatives: &[Vec<Item>], pos: usize) -> BTreeSet<usize> {
        let mut ends = BTreeSet::new();
        for sequence in alternatives {
            let mut current = BTreeSet::from([pos]);
            for item in sequence {
                let mut next = BTreeSet::new();
                for p in current {
                    next.extend(self.item(item, p));
                }
                current = next;
                if current.is_empty() {
                    break;
                }
            }
            ends.extend(current);
        }
        ends
    }

    fn item(&mut self, item: &Item, pos: usize) -> BTreeSet<usize> {
        match item.repeat {
            Repeat::One => self.atom(&item.atom, pos),
            Repeat::Optional => {
                let mut ends = self.atom(&item.atom, pos);
                ends.insert(pos);
                ends
            }
            Repeat::Star | Repeat::Plus => {
                let mut all = BTreeSet::new();
                let mut frontier = vec![pos];
                while let Some(p) = frontier.pop() {
                    for end in self.atom(&item.atom, p) {
                        if all.insert(end) {
                            frontier.push(end);
                        }
                    }
                }
                if item.repeat == Repeat::Star {
                    all.insert(pos);
                }
                all
            }
        }
    }

    fn atom(&mut self, atom: &Atom, pos: usize) -> BTreeSet<usize> {
        let mut ends = BTreeSet::new();
        match atom {
            Atom::Literal(text) => {
                if self.input[pos..].starts_with(text) {
                    ends.insert(pos + text.len());
                }
            }
            Atom::Class { negated, ranges } => {
                if let Some(c) = self.input.get(pos) {
                    let inside = ranges.iter().any(|(low, high)| (low..=high).contains(&c));
                    if inside != *negated {
                        ends.insert(pos + 1);
                    }
                }
            }
            Atom::Any => {
                if pos < self.input.len() {
                    ends.insert(pos + 1);
                }
            }
            Atom::Rule(name) => ends = self.rule(name, pos),
            Atom::Group(alternatives) => ends = self.alternatives(alternatives, pos),
        }
        ends
    }
}

#[test]
fn the_checker_itself_works() {
    let g = Grammar::parse(
        "root ::= greeting ( \", \" greeting )* [!?]?\ngreeting ::= \"hi\" | [a-c]+ | \"\\x41\"\n",
    )
    .unwrap();
    assert!(g.accepts("hi"));
    assert!(g.accepts("hi, abc, A!"));
    assert!(!g.accepts("hi,abc"));
    assert!(!g.accepts(""));
    assert!(Grammar::parse("root ::= missing\n").is_err());
    assert!(Grammar::parse("root ::= \"open\n").is_err());
    assert!(Grammar::parse("other ::= \"x\"\n").is_err());
}
