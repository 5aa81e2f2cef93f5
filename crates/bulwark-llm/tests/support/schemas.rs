//! A family of tool schemas, each with a value valid for it, for the
//! grammar property tests: strings (with quotes, escapes, control and
//! non-ASCII characters), integers, numbers, booleans, null, enums, consts,
//! type unions, arrays, objects with required and optional properties
//! (odd property names included), `anyOf`, and features the generator
//! does not model (`$ref`, `{}`), which must still take any JSON value.

#![allow(dead_code)]

use bulwark_llm::ToolDef;
use bulwark_llm::local::grammar::{CALL_CLOSE, CALL_OPEN, to_spaced_json};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// A schema and a value valid for it.
pub type Case = (Value, Value);

pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 ._/-]{0,12}",
        "\\PC{0,8}",
        prop::collection::vec(any::<char>(), 0..6).prop_map(|c| c.into_iter().collect()),
        Just("quote \" backslash \\ newline \n tab \t".to_owned()),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![4 => "[a-z_]{1,8}", 1 => text()]
}

/// Any JSON value (for schemas that do not constrain).
pub fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(|x| json!(x)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..4)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

fn leaf() -> impl Strategy<Value = Case> {
    prop_oneof![
        text().prop_map(|s| (json!({"type": "string", "maxLength": 99}), json!(s))),
        any::<i64>().prop_map(|n| (json!({"type": "integer"}), json!(n))),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(|x| (json!({"type": "number", "minimum": 0}), json!(x))),
        any::<bool>().prop_map(|b| (json!({"type": "boolean"}), json!(b))),
        Just((json!({"type": "null"}), Value::Null)),
        (
            prop::collection::vec(any_json(), 1..4),
            any::<prop::sample::Index>()
        )
            .prop_map(|(options, i)| {
                let pick = options[i.index(options.len())].clone();
                (json!({"enum": options}), pick)
            }),
        any_json().prop_map(|v| (json!({"const": v.clone()}), v)),
        (text(), any::<bool>()).prop_map(|(s, null)| {
            let value = if null { Value::Null } else { json!(s) };
            (json!({"type": ["string", "null"]}), value)
        }),
        any_json().prop_map(|v| (json!({"$ref": "#/definitions/thing"}), v)),
        any_json().prop_map(|v| (json!({}), v)),
        any_json().prop_map(|v| (json!({"type": "uuid"}), v)),
    ]
}

/// Nested schemas: arrays, objects, `anyOf`.
pub fn case() -> impl Strategy<Value = Case> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (inner.clone(), 0..3usize, any::<bool>()).prop_map(|((schema, value), n, min1)| {
                let n = if min1 { n.max(1) } else { n };
                let mut array = json!({"type": "array", "items": schema});
                if min1 {
                    array["minItems"] = json!(1);
                }
                (array, Value::Array(vec![value; n]))
            }),
            object(inner.clone()),
            (
                prop::collection::vec(inner, 1..3),
                any::<prop::sample::Index>()
            )
                .prop_map(|(branches, i)| {
                    let chosen = branches[i.index(branches.len())].1.clone();
                    let schemas: Vec<Value> = branches.into_iter().map(|(s, _)| s).collect();
                    (json!({"anyOf": schemas}), chosen)
                }),
        ]
    })
}

/// Objects: each property required or optional, optional ones present or
/// not in the value; sometimes a required name with no declaration.
fn object(inner: impl Strategy<Value = Case>) -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((key(), inner, any::<bool>(), any::<bool>()), 0..5),
        prop::option::of((key(), any_json())),
        any::<bool>(),
    )
        .prop_map(|(props, undeclared, typed)| {
            let mut properties = Map::new();
            let mut required = Vec::new();
            let mut value = Map::new();
            for (name, (schema, sample), is_required, present) in props {
                if properties.contains_key(&name) {
                    continue;
                }
                properties.insert(name.clone(), schema);
                if is_required {
                    required.push(json!(name));
                }
                if is_required || present {
                    value.insert(name, sample);
                }
            }
            if let Some((name, sample)) = undeclared
                && !properties.contains_key(&name)
            {
                required.push(json!(name));
                value.insert(name, sample);
            }
            let mut schema = json!({"properties": properties, "required": required});
            if typed {
                schema["type"] = json!("object");
            }
            (schema, Value::Object(value))
        })
}

/// Tool arguments: an object schema (as tools declare) and a valid value.
pub fn arguments() -> impl Strategy<Value = Case> {
    object(case())
}

/// 1..=4 tools with distinct names, each with a valid arguments value.
pub fn tools() -> impl Strategy<Value = Vec<(ToolDef, Value)>> {
    prop::collection::vec(
        (prop_oneof![3 => "[a-z_]{1,12}", 1 => text()], arguments()),
        1..5,
    )
    .prop_map(|tools| {
        let mut out: Vec<(ToolDef, Value)> = Vec::new();
        for (name, (schema, value)) in tools {
            if out.iter().any(|(t, _)| t.name == name) {
                continue;
            }
            let tool = ToolDef {
                name,
                description: "generated".into(),
                input_schema: schema,
            };
            out.push((tool, value));
        }
        out
    })
}

/// One call exactly as the model must write it, in the tagged form.
pub fn call_text(name: &str, arguments: &Value) -> String {
    format!("{CALL_OPEN}{}{CALL_CLOSE}", bare_call_text(name, arguments))
}

/// The same call in the bare form.
pub fn bare_call_text(name: &str, arguments: &Value) -> String {
    format!(
        "{{\"name\": {}, \"arguments\": {}}}",
        Value::String(name.to_owned()),
        to_spaced_json(arguments)
    )
}
