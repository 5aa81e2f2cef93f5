//! `bulwark status`: one screen that tells a new user where they stand.
//!
//! It reads and never writes: no database, key or directory is created, no
//! model is loaded (a model's hash is the marker `model fetch` left, not a
//! re-hash of 500 MB), nothing is sent over the network. Every line that
//! would stop an agent from running is a FAIL naming the command that fixes
//! it, and the exit status is 1 while there is one.

use crate::Failure;
use crate::cmd_keys::SignatureStatus;
use anyhow::anyhow;
use bulwark_kernel::{Home, check_model, default_model};
use bulwark_policy::{GlobalConfig, SandboxEnforcement};
use std::fmt::Write as _;
use std::path::Path;

/// How a line of the report reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Ok,
    Info,
    Warn,
    Fail,
}

impl Level {
    fn label(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Info => "info",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        }
    }
}

/// The report, printed line by line as it is found.
#[derive(Default)]
struct Report {
    /// One line per problem that stops an agent, with its fix.
    blockers: Vec<String>,
}

impl Report {
    fn line(&mut self, level: Level, topic: &str, text: impl AsRef<str>) {
        println!("{:<5} {topic:<9} {}", level.label(), text.as_ref());
        if level == Level::Fail {
            self.blockers.push(format!("{topic}: {}", text.as_ref()));
        }
    }
}

pub fn status(home: &Home) -> Result<(), Failure> {
    let mut report = Report::default();
    println!(
        "bulwark {} · home {}",
        env!("CARGO_PKG_VERSION"),
        home.root().display()
    );
    println!();
    let initialized = home.config_path().exists() || home.agents_dir().is_dir();
    if initialized {
        report.line(Level::Ok, "home", home.root().display().to_string());
    } else {
        report.line(
            Level::Fail,
            "home",
            format!(
                "{} has no config.toml and no agents/: run `bulwark init`",
                home.root().display()
            ),
        );
    }
    let global = config(home, &mut report);
    access(home, &mut report);
    if let Some(global) = global.as_ref().filter(|_| initialized) {
        agents(home, global, &mut report);
    }
    models(home, &mut report);
    provider_keys(global.as_ref(), &mut report);
    sandbox(global.as_ref(), &mut report);
    audit(home, global.as_ref(), &mut report);

    println!();
    if report.blockers.is_empty() {
        println!("ready: nothing here stops an agent from running");
        return Ok(());
    }
    let mut summary = format!(
        "{} problem(s) stop an agent from running:",
        report.blockers.len()
    );
    for b in &report.blockers {
        let _ = write!(summary, "\n  - {b}");
    }
    Err(Failure {
        code: 1,
        error: anyhow!(summary),
    })
}

fn config(home: &Home, report: &mut Report) -> Option<GlobalConfig> {
    let path = home.config_path();
    match home.load_global() {
        Ok(global) if path.exists() => {
            report.line(Level::Ok, "config", format!("{} is valid", path.display()));
            Some(global)
        }
        Ok(global) => {
            report.line(
                Level::Info,
                "config",
                format!("no {} (every default applies)", path.display()),
            );
            Some(global)
        }
        Err(err) => {
            report.line(
                Level::Fail,
                "config",
                format!("{err} (fix the file; `bulwark init --force` rewrites the examples)"),
            );
            None
        }
    }
}

fn access(home: &Home, report: &mut Report) {
    let path = home.access_path();
    match home.load_access() {
        Ok(access) => {
            let tokens: usize = access.users.values().map(|u| u.tokens.len()).sum();
            if path.exists() {
                report.line(
                    Level::Ok,
                    "access",
                    format!(
                        "{}: {} user(s), {tokens} serve token(s) (`bulwark access list`)",
                        path.display(),
                        access.users.len()
                    ),
                );
            } else {
                report.line(
                    Level::Info,
                    "access",
                    "no access.toml: `bulwark serve` lets nobody in (`bulwark access create USER`)",
                );
            }
        }
        Err(err) => report.line(Level::Fail, "access", format!("{err} (fix the file)")),
    }
}

fn agents(home: &Home, global: &GlobalConfig, report: &mut Report) {
    let names = match home.list_agents() {
        Ok(names) => names,
        Err(err) => {
            report.line(Level::Fail, "agents", err.to_string());
            return;
        }
    };
    if names.is_empty() {
        report.line(
            Level::Fail,
            "agents",
            format!(
                "none in {}: run `bulwark init`",
                home.agents_dir().display()
            ),
        );
        return;
    }
    let required = global.trust.require_signed;
    for name in names {
        let loaded = match home.load_agent(&name) {
            Ok(loaded) => loaded,
            Err(err) => {
                report.line(Level::Fail, "agent", format!("{name}: {err}"));
                continue;
            }
        };
        let signature = match crate::cmd_keys::check_agent_signature(home, &name, false) {
            Ok(SignatureStatus::Valid { signer, key_id, .. }) => {
                Ok(format!("signed by {signer} ({key_id:08x})"))
            }
            Ok(SignatureStatus::Unsigned) if required => Err(format!(
                "unsigned, and config.toml requires signed agents: review it, then `bulwark sign {name}`"
            )),
            Ok(SignatureStatus::Unsigned) => Ok("unsigned".to_string()),
            Ok(SignatureStatus::Invalid { reason }) if required => Err(reason),
            Ok(SignatureStatus::Invalid { reason }) => {
                report.line(
                    Level::Warn,
                    "agent",
                    format!("{name}: its signature does not hold: {reason}"),
                );
                Ok("signature broken".to_string())
            }
            Err(failure) => Err(format!("{:#}", failure.error)),
        };
        let model = loaded
            .manifest
            .agent
            .model
            .clone()
            .or_else(|| default_model(global));
        let model = match model {
            None => Err(
                "names no model, and with a provider key set there is no default: set [agent] model or config.toml default_model"
                    .to_string(),
            ),
            Some(model) => check_model(&model, global, &loaded.dir),
        };
        match (signature, model) {
            (Ok(sig), Ok(model)) => {
                report.line(Level::Ok, "agent", format!("{name}: {model}; {sig}"))
            }
            (Err(why), _) | (_, Err(why)) => {
                report.line(Level::Fail, "agent", format!("{name}: {why}"));
            }
        }
    }
}

fn models(home: &Home, report: &mut Report) {
    let catalogue = match bulwark_kernel::model_catalogue() {
        Ok(c) => c,
        Err(err) => {
            report.line(Level::Fail, "models", err.to_string());
            return;
        }
    };
    let dir = bulwark_models::models_dir(home.root());
    let mut installed = Vec::new();
    for spec in catalogue.models() {
        match bulwark_models::status(spec, &dir) {
            (_, bulwark_models::Status::Verified) => {
                installed.push(format!("{} (verified)", spec.name))
            }
            (_, bulwark_models::Status::Unverified) => {
                installed.push(format!("{} (hash not checked yet)", spec.name));
            }
            (path, bulwark_models::Status::Wrong) => report.line(
                Level::Warn,
                "models",
                format!(
                    "{} is damaged at {}: `bulwark model fetch {}`",
                    spec.name,
                    path.display(),
                    spec.name
                ),
            ),
            (_, bulwark_models::Status::Missing) => {}
        }
    }
    if installed.is_empty() {
        report.line(
            Level::Info,
            "models",
            format!(
                "no offline model installed (`bulwark model fetch` gets {})",
                bulwark_models::DEFAULT_MODEL
            ),
        );
    } else {
        report.line(Level::Ok, "models", installed.join(", "));
    }
}

/// Names only: a value is never read beyond "is it set".
fn provider_keys(global: Option<&GlobalConfig>, report: &mut Report) {
    let env = bulwark_kernel::environment();
    let mut names: Vec<&str> = vec!["ANTHROPIC_API_KEY", "OPENAI_API_KEY"];
    if let Some(global) = global {
        for p in global.providers.values() {
            if let Some(var) = p.api_key_env.as_deref()
                && !names.contains(&var)
            {
                names.push(var);
            }
        }
    }
    let (set, unset): (Vec<&str>, Vec<&str>) = names.iter().partition(|v| env.is_set(v));
    let mut text = if set.is_empty() {
        "none set".to_string()
    } else {
        format!("set: {}", set.join(", "))
    };
    if !unset.is_empty() {
        let _ = write!(text, "; not set: {}", unset.join(", "));
    }
    report.line(Level::Info, "keys", text);
}

fn sandbox(global: Option<&GlobalConfig>, report: &mut Report) {
    let support = bulwark_sandbox::probe();
    let strict = global.is_none_or(|g| g.sandbox.enforcement == SandboxEnforcement::Strict);
    let mode = if strict { "strict" } else { "permissive" };
    if support.strict_ready() {
        report.line(
            Level::Ok,
            "sandbox",
            format!("every layer enforced ({mode}; `bulwark sandbox check` for the table)"),
        );
        return;
    }
    let missing = support.missing_layers().join(", ");
    if strict {
        report.line(
            Level::Warn,
            "sandbox",
            format!(
                "missing here: {missing}; in strict mode agents' shell commands are refused (`bulwark sandbox check` says why)"
            ),
        );
    } else {
        report.line(
            Level::Warn,
            "sandbox",
            format!("missing here: {missing}; permissive mode runs shell commands without them"),
        );
    }
}

fn audit(home: &Home, global: Option<&GlobalConfig>, report: &mut Report) {
    let origin = global
        .map(|g| g.audit.origin())
        .unwrap_or(bulwark_policy::AuditSection::DEFAULT_ORIGIN);
    let db = home.db_path();
    let key = home.root().join("keys").join("audit.key");
    audit_key(&key, report);
    if !db.exists() {
        report.line(
            Level::Info,
            "audit",
            "no log yet (the first run creates it)",
        );
        return;
    }
    let bytes = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
    let store = match bulwark_store::Store::open(&db) {
        Ok(store) => store,
        Err(err) => {
            report.line(
                Level::Fail,
                "audit",
                format!("cannot open {}: {err}", db.display()),
            );
            return;
        }
    };
    let sink = store.audit_sink();
    let machine = crate::cmd_audit::read_key(&key)
        .ok()
        .and_then(|k| crate::cmd_audit::verifier(&k).ok());
    if machine.is_none() && !key.exists() && sink.record_count().is_ok_and(|n| n > 0) {
        report.line(
            Level::Fail,
            "audit",
            format!(
                "{} is missing while the log has records: agents will not run; restore it from a backup",
                key.display()
            ),
        );
    }
    let verified = match crate::evidence::verify_local(home, origin, &sink, machine.as_ref(), None)
    {
        Ok(local) => local.report,
        Err(failure) => {
            report.line(
                Level::Fail,
                "audit",
                format!("cannot verify the log: {:#}", failure.error),
            );
            return;
        }
    };
    let checkpoint = match sink.latest_checkpoint() {
        Ok(Some(cp)) => format!("last checkpoint at size {} ({})", cp.size, when(cp.time_ms)),
        Ok(None) => "no checkpoint yet".to_string(),
        Err(err) => format!("checkpoints unreadable: {err}"),
    };
    let size = format!(
        "{} record(s), {:.1} MB",
        verified.records,
        bytes as f64 / 1e6
    );
    match verified.problem {
        None => report.line(
            Level::Ok,
            "audit",
            format!("{size}, verifies; {checkpoint}"),
        ),
        Some(problem) => {
            if crate::cmd_audit::acknowledged(home, &problem.to_string()) {
                report.line(
                    Level::Warn,
                    "audit",
                    format!("{size}; does not verify ({problem}), acknowledged by an operator; {checkpoint}"),
                );
            } else {
                report.line(
                    Level::Fail,
                    "audit",
                    format!(
                        "{size}; does not verify ({problem}): inspect it with `bulwark audit verify`, then `bulwark audit acknowledge`"
                    ),
                );
            }
        }
    }
}

fn audit_key(path: &Path, report: &mut Report) {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Err(_) => {}
        Ok(meta) if meta.permissions().mode() & 0o077 != 0 => report.line(
            Level::Fail,
            "audit",
            format!(
                "{} is readable by other users, so agents will not run: `chmod 600 {}`",
                path.display(),
                path.display()
            ),
        ),
        Ok(_) => {}
    }
}

/// Milliseconds since the epoch as a UTC time, to the minute.
fn when(time_ms: i64) -> String {
    let secs = time_ms.div_euclid(1000);
    match time::OffsetDateTime::from_unix_timestamp(secs) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02} UTC",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute()
        ),
        Err(_) => format!("time {time_ms} ms"),
    }
}
