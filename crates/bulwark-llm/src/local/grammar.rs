//! GBNF grammars for the local model's turns, generated from the tool
//! schemas of one request.
//!
//! The point is that a malformed or unauthorised tool call cannot be
//! *produced*: llama.cpp masks every token the grammar does not allow, so the
//! model's turn is, by construction, either
//!
//! - plain text, which never starts with `<`, `{`, `[`, a backtick or whitespace (so it
//!   can never be mistaken for a call, a call can never hide behind a
//!   newline, and a small model cannot answer with a bare JSON "call"), or
//! - 1..=`max_calls` calls separated by `\n`, each in Qwen2.5's convention
//!   `<tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>` or
//!   as the bare object `{"name": "NAME", "arguments": {...}}`, where NAME is
//!   one of exactly the offered tools and the arguments follow that tool's
//!   JSON schema. The bare form is there because Qwen2.5-Coder-0.5B, asked
//!   to use a tool, starts with `{"` far more often than with
//!   `<tool_call>`; letting that start lead into a *constrained* call is
//!   what makes the small model's calls reliable. Either form is read back
//!   the same way and re-rendered in the tagged form.
//!
//! Schemas come from tools (built-in, WASM, MCP servers), so the generator
//! treats them as untrusted-ish input: it never fails on an odd schema, it
//! falls back to a generic JSON value for what it does not understand
//! (`$ref`, `allOf`, `not`, patterns, tuple `items`, ...), nesting is cut at
//! [`MAX_SCHEMA_DEPTH`], and the whole grammar is capped at
//! [`MAX_GRAMMAR_BYTES`]. What *is* enforced: object property names and
//! which of them are required (declared properties only, in the order a
//! `serde_json::Map` holds them, so the arguments re-render into the next
//! prompt exactly as generated), `string` / `integer` / `number` /
//! `boolean` / `null`, arrays and
//! their item schema, `enum`, `const`, `anyOf` / `oneOf`, and type unions.
//! Length, range and pattern limits are not: the tool still validates its
//! input, the grammar only guarantees the shape. The tool NAME is always
//! constrained, whatever the schema says.
//!
//! Where the kernel says a top-level argument names a workspace path
//! ([`PathChoices`]), that argument is narrowed further: a listed set of
//! paths becomes exactly those JSON strings (a prefix tree of rules, so
//! llama.cpp follows one branch instead of testing every path per token),
//! [`AllowedPaths::Relative`] a relative path of plain segments
//! ([`RELATIVE_PATH_RULES`]), and a required argument with nothing listed
//! takes its tool out of the turn. Path rules share a budget of
//! [`MAX_PATH_RULE_BYTES`]; a list over what is left is written as
//! `Relative` instead. A grammar in which no tool can be called is the
//! text grammar, even when a call was required: there is always a valid
//! output.
//!
//! JSON is spelled the way the model was trained to write it (Python's
//! `json.dumps` defaults: `", "` and `": "` separators, no other
//! whitespace), see [`to_spaced_json`]; a fixed spelling also keeps small
//! models from wandering into runs of whitespace.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::Value;

use crate::{AllowedPaths, PathChoices, PathKind, ToolDef};

use super::spaced_json::json_string;
pub use super::spaced_json::to_spaced_json;

/// Deeper schema nesting becomes a generic JSON value.
pub const MAX_SCHEMA_DEPTH: usize = 12;
/// Upper bound on the grammar text; a larger one is an error.
pub const MAX_GRAMMAR_BYTES: usize = 256 * 1024;
/// Upper bound on calls in one turn (the grammar grows with it).
pub const MAX_CALLS_PER_TURN: usize = 16;
/// Objects with more declared properties than this take a generic object.
pub const MAX_PROPERTIES: usize = 128;

/// Upper bound on the rules that spell listed paths, all arguments of one
/// grammar together (each distinct list is written once): 64 KiB holds a
/// prefix tree of a few thousand short paths, and keeps llama.cpp's
/// per-token grammar work small. A list that does not fit is written as
/// [`AllowedPaths::Relative`].
pub const MAX_PATH_RULE_BYTES: usize = 64 * 1024;
/// Prefix-tree nesting beyond this spells the remaining suffixes as a flat
/// alternation (bounds recursion on long, hostile names).
const MAX_TRIE_DEPTH: usize = 64;

/// A relative path of plain segments, as a JSON string: ASCII letters,
/// digits, `_`, `+`, and (not first) `-` and `.`; segments joined by `/`. So no
/// scheme, no absolute path, no `.`/`..`/hidden segment, no backslash, no
/// empty segment, nothing to escape.
pub const RELATIVE_PATH_RULES: &str = r#"path-rel ::= "\"" path-seg ( "/" path-seg )* "\""
path-seg ::= [A-Za-z0-9_+] [A-Za-z0-9_.+-]*
"#;

/// Opening and closing tags of one call, as in Qwen2.5's chat template.
pub const CALL_OPEN: &str = "<tool_call>\n";
pub const CALL_CLOSE: &str = "\n</tool_call>";

/// Why no grammar could be built for a request's tools.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrammarError {
    #[error("a tool turn needs at least one tool")]
    NoTools,
    #[error("tool `{0}` is offered twice")]
    DuplicateTool(String),
    #[error("a tool turn must allow between 1 and {MAX_CALLS_PER_TURN} calls, not {0}")]
    CallLimit(usize),
    #[error(
        "the grammar for these tool schemas is {0} bytes, over the {MAX_GRAMMAR_BYTES}-byte limit"
    )]
    TooLarge(usize),
}

/// Shared JSON rules, in the spelling of [`to_spaced_json`].
const JSON_RULES: &str = r#"json-value ::= json-object | json-array | json-string | json-number | json-boolean | "null"
json-object ::= "{" ( json-string ": " json-value ( ", " json-string ": " json-value )* )? "}"
json-array ::= "[" ( json-value ( ", " json-value )* )? "]"
json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] )
json-integer ::= "-"? ( "0" | [1-9] [0-9]* )
json-number ::= json-integer ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
json-boolean ::= "true" | "false"
"#;

/// Plain text: at least one character, no NUL anywhere, and a first
/// character that is not `<` (a call), `{` or `[` (a bare JSON "call", which
/// Qwen2.5-Coder-0.5B writes instead of `<tool_call>` when it may), a
/// backtick (the same "call" in a code fence, which it writes when a turn
/// may only answer) or whitespace.
const TEXT_RULE: &str = "text ::= [^<{\\[`\\x00\\t\\n\\r ] [^\\x00]*\n";

/// The grammar of a turn that may only answer in text (no tools offered,
/// or the tool-call budget is spent).
pub fn text_grammar() -> String {
    format!("root ::= text\n{TEXT_RULE}")
}

/// The grammar of a turn that may answer in text or make 1..=`max_calls`
/// calls to exactly `tools`, with arguments shaped by their schemas.
pub fn tool_grammar(tools: &[ToolDef], max_calls: usize) -> Result<String, GrammarError> {
    build(tools, &PathChoices::default(), max_calls, true)
}

/// [`tool_grammar`], with each path argument in `paths` limited to what
/// it offers (see [`PathChoices`]).
pub fn tool_grammar_with_paths(
    tools: &[ToolDef],
    paths: &PathChoices,
    max_calls: usize,
) -> Result<String, GrammarError> {
    build(tools, paths, max_calls, true)
}

/// [`call_grammar`], with each path argument in `paths` limited to what
/// it offers.
pub fn call_grammar_with_paths(
    tools: &[ToolDef],
    paths: &PathChoices,
    max_calls: usize,
) -> Result<String, GrammarError> {
    build(tools, paths, max_calls, false)
}

/// A string argument whose value must begin with `prefix`: what a file
/// already holds, in a write that adds to it (`append.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentPrefix {
    pub tool: String,
    pub argument: String,
    pub prefix: String,
}

/// [`call_grammar_with_paths`], with `prefixed`'s argument required and
/// beginning with its prefix.
pub fn call_grammar_with_prefix(
    tools: &[ToolDef],
    paths: &PathChoices,
    max_calls: usize,
    prefixed: &ArgumentPrefix,
) -> Result<String, GrammarError> {
    build_with(tools, paths, max_calls, false, Some(prefixed))
}

/// The grammar of a turn that must make 1..=`max_calls` calls to exactly
/// `tools` (no text): [`super::ToolChoice::Required`].
pub fn call_grammar(tools: &[ToolDef], max_calls: usize) -> Result<String, GrammarError> {
    build(tools, &PathChoices::default(), max_calls, false)
}

fn build(
    tools: &[ToolDef],
    paths: &PathChoices,
    max_calls: usize,
    allow_text: bool,
) -> Result<String, GrammarError> {
    build_with(tools, paths, max_calls, allow_text, None)
}

fn build_with(
    tools: &[ToolDef],
    paths: &PathChoices,
    max_calls: usize,
    allow_text: bool,
    prefixed: Option<&ArgumentPrefix>,
) -> Result<String, GrammarError> {
    if tools.is_empty() {
        return Err(GrammarError::NoTools);
    }
    if max_calls == 0 || max_calls > MAX_CALLS_PER_TURN {
        return Err(GrammarError::CallLimit(max_calls));
    }
    let mut seen = HashSet::new();
    for tool in tools {
        if !seen.insert(tool.name.as_str()) {
            return Err(GrammarError::DuplicateTool(tool.name.clone()));
        }
    }

    let mut builder = Builder::default();
    let mut alternatives = Vec::with_capacity(tools.len());
    for (index, tool) in tools.iter().enumerate() {
        let hint = format!("t{index}");
        let Some(mut slots) = builder.path_slots(tool, paths, &hint) else {
            // A required path argument with nothing to offer: no valid
            // call to this tool exists this turn.
            continue;
        };
        if let Some(prefixed) = prefixed.filter(|p| p.tool == tool.name) {
            // The JSON string's opening quote and the prefix's escaped
            // text, without the closing quote: then a character that is
            // no space, quote or escape (a write that adds, adds
            // something to see), then any JSON string text.
            let open = json_string(&prefixed.prefix);
            let open = &open[..open.len() - 1];
            let rule = builder.fresh(&format!("{hint}-prefix"));
            builder.add(
                &rule,
                format!(r#"{} [^"\\\x00-\x20] json-char* "\"""#, literal(open)),
            );
            slots.insert(prefixed.argument.clone(), PathSlot::Required(rule));
        }
        let args = builder.arguments(&tool.input_schema, &hint, &slots);
        let head = format!("{}, \"arguments\": ", json_string(&tool.name));
        let name = builder.fresh(&format!("tool{index}"));
        builder.add(&name, format!("{} {args}", literal(&head)));
        alternatives.push(name);
    }

    if alternatives.is_empty() {
        // Nothing can be called: text is the only valid turn, so the
        // grammar is never unsatisfiable.
        return Ok(text_grammar());
    }
    let mut out = String::new();
    if allow_text {
        out.push_str("root ::= text | calls\n");
        out.push_str(TEXT_RULE);
    } else {
        out.push_str("root ::= calls\n");
    }
    let mut calls = String::from("call");
    for _ in 1..max_calls {
        calls = format!("call ( \"\\n\" {calls} )?");
    }
    // `calls` is built inside out; this reads `call ( "\n" call ( ... )? )?`.
    let _ = writeln!(out, "calls ::= {calls}");
    let _ = writeln!(
        out,
        "call ::= {} call-body {} | call-body",
        literal(CALL_OPEN),
        literal(CALL_CLOSE),
    );
    let _ = writeln!(
        out,
        "call-body ::= \"{{\\\"name\\\": \" ( {} ) \"}}\"",
        alternatives.join(" | "),
    );
    for (name, expr) in &builder.rules {
        let _ = writeln!(out, "{name} ::= {expr}");
    }
    if builder.relative_used {
        out.push_str(RELATIVE_PATH_RULES);
    }
    out.push_str(JSON_RULES);
    if out.len() > MAX_GRAMMAR_BYTES {
        return Err(GrammarError::TooLarge(out.len()));
    }
    Ok(out)
}

/// Rules generated for one grammar, in order of creation.
#[derive(Default)]
struct Builder {
    rules: Vec<(String, String)>,
    names: HashSet<String>,
    /// Whether [`RELATIVE_PATH_RULES`] is referenced.
    relative_used: bool,
    /// Each distinct listed set's rule, written once.
    listed: HashMap<Vec<String>, String>,
    /// Bytes of listed-path rules so far (against [`MAX_PATH_RULE_BYTES`]).
    path_bytes: usize,
}

/// What one top-level path argument may hold.
enum PathSlot {
    /// This expression (a rule name).
    Expr(String),
    /// Nothing: the argument is optional and can only be left out.
    Omit,
    /// This expression, and the argument may not be left out: an optional
    /// directory argument whose choices do not hold the root (`""`), which
    /// leaving it out would name.
    Required(String),
}

impl Builder {
    /// A rule name from `hint` (GBNF names are `[a-zA-Z0-9-]+`), made unique.
    fn fresh(&mut self, hint: &str) -> String {
        let mut base: String = hint
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .take(40)
            .collect();
        if base.is_empty() {
            base.push('r');
        }
        let mut name = base.clone();
        let mut n = 2;
        // `json-`, `text`, `root`, `call`, `calls` are fixed rules; the
        // generated names all start with `t`/`tool` plus a digit, but the
        // set check keeps that an invariant rather than a convention.
        while self.names.contains(&name)
            || name.starts_with("json-")
            || name.starts_with("path-")
            || ["root", "text", "call", "calls", "call-body"].contains(&name.as_str())
        {
            name = format!("{base}-{n}");
            n += 1;
        }
        self.names.insert(name.clone());
        name
    }

    fn add(&mut self, name: &str, expr: String) {
        self.rules.push((name.to_owned(), expr));
    }

    /// The `arguments` object of a call: always a JSON object, so a
    /// schema that describes something else gets a generic object. Its
    /// top-level properties in `slots` take the slot instead of their
    /// schema.
    fn arguments(
        &mut self,
        schema: &Value,
        hint: &str,
        slots: &HashMap<String, PathSlot>,
    ) -> String {
        match schema {
            Value::Object(map) if is_object_schema(map) => self.object_with(map, hint, 0, slots),
            _ => "json-object".into(),
        }
    }

    /// The path slots of `tool`'s top-level arguments, or `None` when a
    /// required one has nothing to offer (the tool cannot be called).
    /// Choices for a tool whose schema is no object, or for a property it
    /// does not declare, change nothing.
    fn path_slots(
        &mut self,
        tool: &ToolDef,
        paths: &PathChoices,
        hint: &str,
    ) -> Option<HashMap<String, PathSlot>> {
        let mut slots = HashMap::new();
        let Value::Object(map) = &tool.input_schema else {
            return Some(slots);
        };
        if !is_object_schema(map) {
            return Some(slots);
        }
        let declared = |name: &str| {
            map.get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| p.contains_key(name))
        };
        let required = |name: &str| {
            map.get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|v| v.as_str() == Some(name)))
        };
        for choice in paths.for_tool(&tool.name) {
            let name = choice.argument.as_str();
            if !declared(name) || slots.contains_key(name) {
                continue;
            }
            // Leaving out an optional directory argument names the root, so
            // it is only offered when the root is.
            let root_withheld = choice.kind == PathKind::Directory
                && !required(name)
                && matches!(&choice.allowed, AllowedPaths::Listed(list) if !list.iter().any(String::is_empty));
            let slot = match &choice.allowed {
                AllowedPaths::Listed(list) if list.is_empty() => {
                    if required(name) || root_withheld {
                        return None;
                    }
                    PathSlot::Omit
                }
                AllowedPaths::Listed(list) => {
                    let expr = self
                        .listed_paths(list, &format!("{hint}-{name}"))
                        .unwrap_or_else(|| self.relative());
                    if root_withheld {
                        PathSlot::Required(expr)
                    } else {
                        PathSlot::Expr(expr)
                    }
                }
                AllowedPaths::Relative => PathSlot::Expr(self.relative()),
            };
            slots.insert(name.to_owned(), slot);
        }
        Some(slots)
    }

    fn relative(&mut self) -> String {
        self.relative_used = true;
        "path-rel".into()
    }

    /// A rule matching exactly the JSON strings of `list`, as a prefix
    /// tree; `None` when it would not fit in what is left of
    /// [`MAX_PATH_RULE_BYTES`] (nothing is added then).
    fn listed_paths(&mut self, list: &[String], hint: &str) -> Option<String> {
        let mut key = list.to_vec();
        key.sort_unstable();
        key.dedup();
        if let Some(name) = self.listed.get(&key) {
            return Some(name.clone());
        }
        let literals: Vec<Vec<char>> = key
            .iter()
            .map(|p| json_string(p).chars().collect())
            .collect();
        // The flat spelling bounds the tree's from above (plus one rule
        // line per branching node): refuse early what cannot fit.
        let flat: usize = literals.iter().map(|l| l.len() + 4).sum();
        if flat / 2 > MAX_PATH_RULE_BYTES.saturating_sub(self.path_bytes) {
            return None;
        }
        let mark = self.rules.len();
        let items: Vec<&[char]> = literals.iter().map(Vec::as_slice).collect();
        let expr = self.trie(&items, &format!("{hint}-paths"), 0);
        let name = self.fresh(&format!("{hint}-paths"));
        self.add(&name, expr);
        let added: usize = self.rules[mark..]
            .iter()
            .map(|(n, e)| n.len() + e.len() + 5)
            .sum();
        if self.path_bytes + added > MAX_PATH_RULE_BYTES {
            for (n, _) in self.rules.drain(mark..) {
                self.names.remove(&n);
            }
            return None;
        }
        self.path_bytes += added;
        self.listed.insert(key, name.clone());
        Some(name)
    }

    /// The alternation of `items` (sorted, distinct, none a prefix of
    /// another: JSON string literals), sharing common prefixes.
    fn trie(&mut self, items: &[&[char]], hint: &str, depth: usize) -> String {
        if depth >= MAX_TRIE_DEPTH {
            let flat: Vec<String> = items
                .iter()
                .map(|i| literal(&i.iter().collect::<String>()))
                .collect();
            return group(&flat);
        }
        let mut alternatives = Vec::new();
        let mut start = 0;
        while start < items.len() {
            let first = items[start].first();
            let mut end = start + 1;
            while end < items.len() && items[end].first() == first {
                end += 1;
            }
            let group_items = &items[start..end];
            if let [one] = group_items {
                alternatives.push(literal(&one.iter().collect::<String>()));
            } else {
                let shared = common_prefix(group_items);
                let head = literal(&group_items[0][..shared].iter().collect::<String>());
                let rest: Vec<&[char]> = group_items.iter().map(|i| &i[shared..]).collect();
                let expr = self.trie(&rest, hint, depth + 1);
                let name = self.fresh(hint);
                self.add(&name, expr);
                alternatives.push(format!("{head} {name}"));
            }
            start = end;
        }
        alternatives.join(" | ")
    }

    /// An expression matching the JSON spelling of values valid for
    /// `schema`: a rule name, a literal or a parenthesised group.
    fn value(&mut self, schema: &Value, hint: &str, depth: usize) -> String {
        if depth > MAX_SCHEMA_DEPTH {
            return "json-value".into();
        }
        let Value::Object(map) = schema else {
            // `true`, `false` (unsatisfiable; the tool will refuse) and
            // anything that is not a schema.
            return "json-value".into();
        };
        if let Some(value) = map.get("const") {
            return literal(&to_spaced_json(value));
        }
        if let Some(Value::Array(options)) = map.get("enum")
            && !options.is_empty()
        {
            let mut seen = HashSet::new();
            let alternatives: Vec<String> = options
                .iter()
                .map(|v| literal(&to_spaced_json(v)))
                .filter(|lit| seen.insert(lit.clone()))
                .collect();
            return group(&alternatives);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = map.get(key)
                && !branches.is_empty()
            {
                let alternatives: Vec<String> = branches
                    .iter()
                    .enumerate()
                    .map(|(i, branch)| self.value(branch, &format!("{hint}-{i}"), depth + 1))
                    .collect();
                return group(&dedup(alternatives));
            }
        }
        match map.get("type") {
            Some(Value::String(kind)) => self.typed(kind, map, hint, depth),
            Some(Value::Array(kinds)) if !kinds.is_empty() => {
                let mut alternatives = Vec::with_capacity(kinds.len());
                for kind in kinds {
                    match kind {
                        Value::String(kind) => {
                            alternatives.push(self.typed(kind, map, hint, depth))
                        }
                        _ => return "json-value".into(),
                    }
                }
                group(&dedup(alternatives))
            }
            None if is_object_schema(map) => self.object(map, hint, depth),
            None if map.contains_key("items") => self.array(map, hint, depth),
            _ => "json-value".into(),
        }
    }

    fn typed(
        &mut self,
        kind: &str,
        map: &serde_json::Map<String, Value>,
        hint: &str,
        depth: usize,
    ) -> String {
        match kind {
            "string" => "json-string".into(),
            "integer" => "json-integer".into(),
            "number" => "json-number".into(),
            "boolean" => "json-boolean".into(),
            "null" => literal("null"),
            "object" => self.object(map, hint, depth),
            "array" => self.array(map, hint, depth),
            _ => "json-value".into(),
        }
    }

    /// Arrays of one item schema; `minItems >= 1` makes them non-empty.
    /// Tuple forms (`items: [...]`, `prefixItems`) take a generic array.
    fn array(&mut self, map: &serde_json::Map<String, Value>, hint: &str, depth: usize) -> String {
        let item = match map.get("items") {
            Some(items @ (Value::Object(_) | Value::Bool(true))) => {
                self.value(items, &format!("{hint}-item"), depth + 1)
            }
            _ => return "json-array".into(),
        };
        let non_empty = map
            .get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|n| n >= 1);
        let name = self.fresh(&format!("{hint}-array"));
        let items = format!("{item} ( \", \" {item} )*");
        let expr = if non_empty {
            format!("\"[\" {items} \"]\"")
        } else {
            format!("\"[\" ( {items} )? \"]\"")
        };
        self.add(&name, expr);
        name
    }

    /// Objects with declared properties, in declaration order: each
    /// required property must appear, each optional one may, nothing else
    /// may. Without declared properties: `{}` when `additionalProperties`
    /// is `false`, else a generic object.
    fn object(&mut self, map: &serde_json::Map<String, Value>, hint: &str, depth: usize) -> String {
        self.object_with(map, hint, depth, &HashMap::new())
    }

    /// [`Builder::object`], with the properties in `slots` taking their
    /// slot instead of their schema (and left out when the slot is
    /// [`PathSlot::Omit`]).
    fn object_with(
        &mut self,
        map: &serde_json::Map<String, Value>,
        hint: &str,
        depth: usize,
        slots: &HashMap<String, PathSlot>,
    ) -> String {
        let mut required: Vec<&str> = match map.get("required") {
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        for (name, slot) in slots {
            if matches!(slot, PathSlot::Required(_)) && !required.contains(&name.as_str()) {
                required.push(name.as_str());
            }
        }
        // A required name without a declaration still has to be there,
        // with any value. The order is the `Map`'s own, the order in which
        // the arguments are read back and re-rendered into the prompt.
        let mut declared = match map.get("properties") {
            Some(Value::Object(props)) => props.clone(),
            _ => serde_json::Map::new(),
        };
        for name in &required {
            if !declared.contains_key(*name) {
                declared.insert((*name).to_owned(), Value::Bool(true));
            }
        }
        declared.retain(|name, _| !matches!(slots.get(name), Some(PathSlot::Omit)));
        let props: Vec<(&str, &Value, bool)> = declared
            .iter()
            .map(|(k, v)| (k.as_str(), v, required.contains(&k.as_str())))
            .collect();
        if props.is_empty() {
            let omitted = slots.values().any(|s| matches!(s, PathSlot::Omit));
            return if omitted || map.get("additionalProperties") == Some(&Value::Bool(false)) {
                literal("{}")
            } else {
                "json-object".into()
            };
        }
        if props.len() > MAX_PROPERTIES {
            return "json-object".into();
        }
        let pairs: Vec<String> = props
            .iter()
            .map(|(key, schema, _)| {
                let value = match slots.get(*key) {
                    Some(PathSlot::Expr(expr) | PathSlot::Required(expr)) => expr.clone(),
                    _ => self.value(schema, &format!("{hint}-{key}"), depth + 1),
                };
                let name = self.fresh(&format!("{hint}-{key}-kv"));
                self.add(
                    &name,
                    format!("{} {value}", literal(&format!("{}: ", json_string(key)))),
                );
                name
            })
            .collect();
        let is_required: Vec<bool> = props.iter().map(|(_, _, r)| *r).collect();
        let all_optional = !is_required.contains(&true);
        let first = self.first_rule(&pairs, &is_required, 0, hint);
        let name = self.fresh(&format!("{hint}-object"));
        let body = if all_optional {
            format!("( {first} )?")
        } else {
            first
        };
        self.add(&name, format!("\"{{\" {body} \"}}\""));
        name
    }

    /// The rule for "properties `from..` where none was written yet": the
    /// first one written has no `, ` before it. An optional property may be
    /// skipped only while a later one can still come first.
    fn first_rule(
        &mut self,
        pairs: &[String],
        required: &[bool],
        from: usize,
        hint: &str,
    ) -> String {
        let rest: String = (from + 1..pairs.len())
            .map(|j| {
                if required[j] {
                    format!(" \", \" {}", pairs[j])
                } else {
                    format!(" ( \", \" {} )?", pairs[j])
                }
            })
            .collect();
        let mut alternatives = vec![format!("{}{rest}", pairs[from])];
        if !required[from] && from + 1 < pairs.len() {
            alternatives.push(self.first_rule(pairs, required, from + 1, hint));
        }
        let name = self.fresh(&format!("{hint}-from{from}"));
        self.add(&name, alternatives.join(" | "));
        name
    }
}

fn is_object_schema(map: &serde_json::Map<String, Value>) -> bool {
    match map.get("type") {
        Some(Value::String(kind)) => kind == "object",
        Some(_) => false,
        None => map.contains_key("properties") || map.contains_key("required"),
    }
}

/// How many leading characters all of `items` (at least two) share.
fn common_prefix(items: &[&[char]]) -> usize {
    let first = items[0];
    let mut n = 0;
    while n < first.len() && items.iter().all(|i| i.get(n) == Some(&first[n])) {
        n += 1;
    }
    n
}

fn dedup(items: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    items
        .into_iter()
        .filter(|i| seen.insert(i.clone()))
        .collect()
}

fn group(alternatives: &[String]) -> String {
    match alternatives {
        [one] => one.clone(),
        _ => format!("( {} )", alternatives.join(" | ")),
    }
}

/// `text` as a GBNF string literal. Everything this module puts in a
/// literal went through [`to_spaced_json`] or is fixed scaffolding, so
/// control characters are rare; they are escaped all the same.
pub(crate) fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
#[path = "grammar_tests.rs"]
mod tests;
