//! Parsing tool arguments once, and the JSON schema the model is shown.
//!
//! Every built-in tool has one argument struct (`#[serde(deny_unknown_fields)]`,
//! `#[derive(Deserialize, JsonSchema)]`). The schema is derived from it, so the
//! keys the model is told about, the keys that are accepted and the fields the
//! tool reads are one definition. Validating newtypes ([`NonEmpty`],
//! [`Amount`], [`PathArg`]) hold the checks that used to be repeated in
//! `demands` and `call`.

use crate::tool::ToolError;
use bulwark_policy::WorkspacePath;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{DeserializeOwned, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// Parses `args` into `A`. A malformed argument is [`ToolError::InvalidArgs`]
/// whose message names the field (`argv[1]: invalid type: ...`) and says what
/// was expected, because a model reads it and retries.
pub fn parse_args<A: DeserializeOwned>(args: &Value) -> Result<A, ToolError> {
    // serde would also read a struct from an array of its fields in order;
    // a tool call's arguments are an object and nothing else.
    if !args.is_object() {
        return Err(ToolError::InvalidArgs(
            "arguments must be a JSON object".into(),
        ));
    }
    serde_path_to_error::deserialize(args).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." {
            ToolError::InvalidArgs(inner.to_string())
        } else {
            ToolError::InvalidArgs(format!("`{path}`: {inner}"))
        }
    })
}

/// The JSON schema of `A` in the subset every consumer accepts: the
/// Anthropic and OpenAI request bodies and the local model's grammar
/// (`bulwark_llm::local::grammar`), which understands `type`, `properties`,
/// `required`, `items`, `enum`, `const`, `anyOf`/`oneOf` and falls back to a
/// generic value for the rest (`$ref` included). So: definitions inlined,
/// no `$schema`, `title` or integer `format`, and an optional property is its
/// plain type (serde still reads `null` for an `Option`; the model need not
/// be told).
pub fn schema_for<A: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<A>().to_value();
    if let Value::Object(map) = &mut schema {
        // The tool's description says what it does; the struct's doc
        // comment is for the code.
        map.remove("description");
        // OpenAI's function parameters want `properties` even when empty.
        if map.get("type").and_then(Value::as_str) == Some("object") {
            map.entry("properties")
                .or_insert_with(|| Value::Object(Default::default()));
        }
    }
    tidy(&mut schema);
    schema
}

fn tidy(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.remove("title");
            map.remove("$schema");
            if map.get("default") == Some(&Value::Null) {
                map.remove("default");
            }
            if map.get("type").and_then(Value::as_str) == Some("integer") {
                map.remove("format");
            }
            let required: Vec<String> = map
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            if let Some(Value::Object(props)) = map.get_mut("properties") {
                for (name, prop) in props.iter_mut() {
                    if !required.contains(name) {
                        drop_null(prop);
                    }
                }
            }
            for value in map.values_mut() {
                tidy(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// `{"type": ["string", "null"]}` → `{"type": "string"}`, and an `anyOf`
/// with a `{"type": "null"}` branch loses that branch.
fn drop_null(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    if let Some(Value::Array(kinds)) = map.get_mut("type") {
        kinds.retain(|k| k != "null");
        if kinds.len() == 1 {
            let only = kinds.remove(0);
            map.insert("type".into(), only);
        }
    }
    let null_branch = |v: &Value| v.get("type").and_then(Value::as_str) == Some("null");
    if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
        branches.retain(|b| !null_branch(b));
        if branches.len() == 1 {
            let only = branches.remove(0);
            map.remove("anyOf");
            if let Value::Object(inner) = only {
                for (k, v) in inner {
                    map.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// The arguments of a tool that takes none: `{}`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// A string that must not be empty (a search query, the text to replace).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "String")]
#[schemars(extend("minLength" = 1))]
pub struct NonEmpty(String);

impl NonEmpty {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for NonEmpty {
    type Error = &'static str;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        if value.is_empty() {
            Err("must not be empty")
        } else {
            Ok(Self(value))
        }
    }
}

/// A positive whole number of credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(with = "u64", extend("minimum" = 1))]
pub struct Amount(u64);

impl Amount {
    pub fn get(self) -> u64 {
        self.0
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Positive;
        impl Visitor<'_> for Positive {
            type Value = Amount;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a positive integer")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Amount, E> {
                if n == 0 {
                    Err(E::invalid_value(serde::de::Unexpected::Unsigned(0), &self))
                } else {
                    Ok(Amount(n))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Amount, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(n), &self)),
                }
            }
        }
        d.deserialize_u64(Positive)
    }
}

/// A workspace-relative path argument, checked while the arguments are
/// parsed. A refused path is kept as its refusal rather than failing the
/// parse: the door reports it as a `path` denial (nothing was touched), not
/// as malformed arguments, as it always has.
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "String")]
pub struct PathArg(Result<WorkspacePath, String>);

/// As the model writes it: a string.
impl JsonSchema for PathArg {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "PathArg".into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        String::json_schema(generator)
    }
}

impl From<String> for PathArg {
    fn from(raw: String) -> Self {
        Self(WorkspacePath::parse(&raw).map_err(|e| e.to_string()))
    }
}

impl PathArg {
    /// The path, which may be the workspace root (a directory to list or
    /// search).
    pub fn any(&self) -> Result<WorkspacePath, ToolError> {
        self.0.clone().map_err(ToolError::Path)
    }

    /// The path of a file: never the workspace root.
    pub fn file(&self, field: &str) -> Result<WorkspacePath, ToolError> {
        let path = self.any()?;
        if path.is_root() {
            return Err(ToolError::Path(format!(
                "`{field}` must name a file, not the workspace root"
            )));
        }
        Ok(path)
    }

    /// An optional directory argument: absent means the workspace root.
    pub fn dir_or_root(arg: Option<&PathArg>) -> Result<WorkspacePath, ToolError> {
        arg.map_or_else(|| Ok(WorkspacePath::root()), PathArg::any)
    }
}
