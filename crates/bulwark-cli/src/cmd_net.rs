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
use bulwark_kernel::{Home, LOCAL_USER, PolicyContext, ToolRegistry, effective_policy};
use bulwark_net::{EgressPolicy, HttpLimits, SafeHttp, forbidden_range};
use bulwark_policy::Demand;
use std::collections::BTreeMap;
use std::net::IpAddr;

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
    let (egress, policy) = match agent {
        Some(name) => {
            let global = home.load_global().map_err(usage_error)?;
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
            let egress = EgressPolicy {
                allowed_domains: policy.sandbox.allowed_domains.clone(),
                allow_all: policy.sandbox.allow_all,
            };
            (egress, Some(policy))
        }
        // Without an agent only the address policy applies.
        None => (
            EgressPolicy {
                allowed_domains: Vec::new(),
                allow_all: true,
            },
            None,
        ),
    };
    let http = SafeHttp::new(egress, HttpLimits::default()).map_err(usage_error)?;
    let parsed = match http.check_url(url) {
        Ok(parsed) => parsed,
        Err(err) => return deny(url, format!("url: {err}")),
    };
    let host = parsed
        .host_str()
        .unwrap_or_default()
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

    let addresses: Vec<IpAddr> = if let Ok(ip) = host.parse::<IpAddr>() {
        vec![ip]
    } else if let Some(answers) = overrides.get(&host) {
        answers.clone()
    } else {
        match tokio::net::lookup_host((host.as_str(), port)).await {
            Ok(found) => found.map(|sa| sa.ip()).collect(),
            Err(err) => {
                return deny(
                    url,
                    format!("resolving {host} failed ({err}); unresolved names are refused"),
                );
            }
        }
    };
    if addresses.is_empty() {
        return deny(url, format!("{host} resolved to no address; refused"));
    }
    // Every answer is checked, not only the first: a resolver may hand any
    // of them to the connector.
    for addr in &addresses {
        if let Some(range) = forbidden_range(*addr) {
            return deny(url, format!("{host} resolves to {addr}, in {range}"));
        }
    }
    println!("allowed {url}");
    let list: Vec<String> = addresses.iter().map(ToString::to_string).collect();
    println!("  {host}:{port} → {}", list.join(", "));
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
