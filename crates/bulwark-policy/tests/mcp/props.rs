//! Properties of the `domain:operation` split and of host narrowing.

use std::collections::BTreeMap;

use bulwark_policy::HostPattern;
use bulwark_policy::mcp::{McpSection, McpServerConfig, resolve_servers, split_domain_operation};
use proptest::prelude::*;

fn server() -> impl Strategy<Value = String> {
    "[a-z0-9][a-z0-9_-]{0,31}"
}

fn tool() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_.-]{1,40}"
}

fn builtin() -> impl Strategy<Value = String> {
    "[a-z0-9_-]{1,20}".prop_filter("not the mcp prefix", |d| d != "mcp")
}

fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["a", "b", "c"]).prop_map(|s| format!("{s}.example")),
        prop::sample::select(vec!["a", "b"]).prop_map(|s| format!("x.{s}.example")),
        prop::sample::select(vec!["example", "a.example", "b.example"])
            .prop_map(|s| format!("*.{s}")),
        Just("*".to_string()),
    ]
    .prop_flat_map(|h| {
        prop_oneof![
            Just(h.clone()),
            prop::sample::select(vec![443u16, 8443]).prop_map(move |p| format!("{h}:{p}")),
        ]
    })
}

proptest! {
    #[test]
    fn an_mcp_operation_round_trips_and_keeps_its_domain(s in server(), o in tool()) {
        let domain = format!("mcp:{s}");
        let text = format!("{domain}:{o}");
        prop_assert_eq!(split_domain_operation(&text), Some((domain.as_str(), o.as_str())));
        // The domain alone is never split inside itself.
        prop_assert_eq!(split_domain_operation(&domain), None);
    }

    #[test]
    fn a_builtin_operation_round_trips(d in builtin(), o in "[a-z0-9_*-]{1,20}") {
        let text = format!("{d}:{o}");
        prop_assert_eq!(split_domain_operation(&text), Some((d.as_str(), o.as_str())));
        prop_assert_eq!(split_domain_operation(&d), None);
    }

    #[test]
    fn any_split_rejoins_to_its_input(text in "(mcp:)?[a-z:]{0,12}") {
        if let Some((d, o)) = split_domain_operation(&text) {
            prop_assert_eq!(format!("{d}:{o}"), text.clone());
            if text.starts_with("mcp:") {
                prop_assert!(d.starts_with("mcp:") && d.len() > 4 || d == "mcp:", "{d}");
            }
        }
    }

    /// Whatever the manifest asks for, a bare entry's hosts are each
    /// within one of config.toml's, and each host config.toml allows and
    /// the manifest names exactly survives.
    #[test]
    fn narrowing_keeps_only_hosts_within_the_operators(
        wide in prop::collection::vec(host(), 1..5),
        asked in prop::collection::vec(host(), 0..6),
    ) {
        let operator = McpServerConfig {
            command: Some(vec!["srv".into()]),
            allowed_domains: wide.clone(),
            ..Default::default()
        };
        let global = McpSection { servers: BTreeMap::from([("s".to_string(), operator)]) };
        let entry = McpServerConfig { allowed_domains: asked.clone(), ..Default::default() };
        let manifest = McpSection { servers: BTreeMap::from([("s".to_string(), entry)]) };
        let tools = BTreeMap::from([("mcp:s".to_string(), ["*".to_string()].into())]);
        let got = resolve_servers(&global, &manifest, &tools);
        let hosts = &got["s"].allowed_domains;
        let wide_p: Vec<HostPattern> = wide.iter().map(|h| HostPattern::parse(h).unwrap()).collect();
        for h in hosts {
            let p = HostPattern::parse(h).unwrap();
            prop_assert!(wide_p.iter().any(|w| p.is_subset_of(w)), "{h} escaped {wide:?}");
        }
        if asked.is_empty() {
            prop_assert_eq!(hosts, &wide);
        } else {
            for h in asked.iter().filter(|h| wide.contains(h)) {
                prop_assert!(hosts.contains(h), "{h} was dropped");
            }
        }
    }
}
