//! `bulwark net check`: the egress decision for a URL, without sending it.
//!
//! Three checks, in the order a real request meets them: the URL itself
//! (scheme, userinfo, IP literals, the agent's egress allowlist), the door's
//! capability check for the host and port (with `--agent`), and every
//! address the name resolves to. `--resolve host=addr` substitutes DNS
//! answers, so private-resolving names and rebinding can be tried offline.
//! A resolution failure is a denial: nothing unverified is ever allowed.

use crate::{Failure, usage_error};
use anyhow::anyhow;
use bulwark_kernel::{
    AgentSetup, Home, LOCAL_USER, PolicyContext, ToolRegistry, effective_policy, egress_client,
};
use bulwark_net::{EgressPolicy, HttpLimits, SafeHttp, SecretStore, StaticResolver};
use bulwark_policy::Demand;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

fn parse_overrides(rules: &[String]) -> Result<BTreeMap<String, Vec<IpAddr>>, Failure> {
    let mut map: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
    for rule in rules {
        let (host, addr) = rule.split_once('=').ok_or_else(|| {
            usage_error(anyhow!(
                "--resolve `{rule}`: use HOST=ADDRESS, e.g. example.com=93.184.215.14"
            ))
        })?;
        if host.is_empty() {
            return Err(usage_error(anyhow!(
                "--resolve `{rule}`: the host name is empty"
            )));
        }
        let addr: IpAddr = addr
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| {
                usage_error(anyhow!("--resolve `{rule}`: `{addr}` is not an IP address"))
            })?;
        map.entry(host.trim_end_matches('.').to_ascii_lowercase())
            .or_default()
            .push(addr);
    }
    Ok(map)
}

fn deny(url: &str, why: String) -> Result<(), Failure> {
    println!("denied  {url}");
    println!("  {why}");
    Err(Failure {
        code: 1,
        error: anyhow!("egress to {url} would be refused"),
    })
}

pub async fn check(
    home: &Home,
    url: &str,
    agent: Option<&str>,
    resolve: &[String],
) -> Result<(), Failure> {
    let overrides = parse_overrides(resolve)?;
    let global = home.load_global().map_err(usage_error)?;
    let (http, policy) = match agent {
        Some(name) => {
            let access = home.load_access().map_err(usage_error)?;
            let loaded = home.load_agent(name).map_err(usage_error)?;
            let ctx = PolicyContext {
                global: &global,
                access: &access,
                agent: &loaded,
                user: LOCAL_USER,
                remote: false,
            };
            let policy = effective_policy(&ctx, &ToolRegistry::builtin()).map_err(usage_error)?;
            // No secrets are loaded: nothing is sent, so nothing is injected.
            let net = AgentSetup::for_agent(&global, &loaded, Arc::new(SecretStore::new()));
            let http = egress_client(&policy, &net).map_err(usage_error)?;
            (http, Some(policy))
        }
        // Without an agent only the address policy (and the operator's
        // internal services) apply.
        None => {
            let mut http = SafeHttp::new(
                EgressPolicy {
                    allowed_domains: Vec::new(),
                    allow_all: true,
                },
                HttpLimits::default(),
            )
            .map_err(usage_error)?;
            for service in global.internal_services() {
                http.allow_internal_service(&service.host, service.port);
            }
            (http, None)
        }
    };
    let parsed = match http.check_url(url) {
        Ok(parsed) => parsed,
        Err(err) => return deny(url, format!("url: {err}")),
    };
    let url_host = parsed.host_str().unwrap_or_default().to_string();
    let host = url_host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = parsed.port_or_known_default().unwrap_or(0);

    if let Some(policy) = &policy {
        if let Err(denial) = policy.check_tool("web", "fetch") {
            return deny(
                url,
                format!("{} ({})", denial.message, denial.reason.as_str()),
            );
        }
        let demand = Demand::NetConnect {
            host: host.clone(),
            port,
        };
        if let Err(denial) = policy.check_demand(&demand) {
            return deny(
                url,
                format!("{} ({})", denial.message, denial.reason.as_str()),
            );
        }
    }

    // The same single lookup a request would make, every answer checked.
    let http = match overrides.get(host.trim_end_matches('.')) {
        Some(answers) => {
            let table = StaticResolver::new();
            table.answer(&url_host, answers.clone());
            http.with_resolver(Arc::new(table))
        }
        None => http,
    };
    let addresses = match http.check_url_resolved(url).await {
        Ok(addresses) => addresses,
        Err(err) => return deny(url, format!("address: {err}")),
    };
    println!("allowed {url}");
    let list: Vec<String> = addresses.iter().map(ToString::to_string).collect();
    println!("  {host}:{port} → {}", list.join(", "));
    if global
        .internal_services()
        .iter()
        .any(|s| s.host == url_host.trim_end_matches('.') && s.port == port)
    {
        println!(
            "  {url_host}:{port} is an operator-declared internal service ([egress] internal)"
        );
    }
    match agent {
        Some(name) => {
            println!("  agent {name}: web:fetch granted, net_connect covers {host}:{port}")
        }
        None => println!(
            "  (address policy only; pass --agent to apply an agent's grants and allowlist)"
        ),
    }
    Ok(())
}
