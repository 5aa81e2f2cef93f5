//! `bulwark access create | rotate | revoke | list`: users of `bulwark serve`
//! and their API tokens.
//!
//! A token is printed once, when it is issued; access.toml keeps only an
//! HMAC of it under `keys/server.secret`, so neither file lets anyone sign
//! in, and `list` has nothing secret to show. Edits keep the file's
//! comments and other users, and replace it atomically (0600).
//!
//! Every edit is an `access_change` record in the audit log (user `local`,
//! the user's name and the token's ID, never the token); an edit whose
//! record cannot be written is undone (see [`crate::admin_audit`]).

use crate::admin_audit::{self, Event, Snapshot};
use crate::{Failure, usage_error};
use bulwark_kernel::Home;
use bulwark_policy::UserRole;
use bulwark_server::{AccessEditError, AccessEditor, IssuedToken, secret_path};

fn editor(home: &Home) -> AccessEditor {
    AccessEditor::new(home.access_path(), secret_path(home.root()))
}

/// Names, roles and existing entries are the user's to fix (exit 2);
/// I/O and the secret file are exit 1.
fn failure(err: AccessEditError) -> Failure {
    match err {
        AccessEditError::Io { .. } | AccessEditError::Secret(_) => err.into(),
        _ => usage_error(err),
    }
}

fn print_token(token: &IssuedToken, user: &str) {
    println!();
    println!("{}", token.token.as_str());
    println!();
    println!(
        "This token (id {}) is shown only now: store it in a password manager or secret store.",
        token.id
    );
    println!(
        "Send it as `Authorization: Bearer <token>` (WebSocket: subprotocols `bulwark.v1, bearer.<token>`), never in a URL."
    );
    println!("If it leaks, replace it: bulwark access rotate {user}");
}

/// `bulwark access create USER [--role user|admin] [--agents a,b]`
pub fn create(
    home: &Home,
    user: &str,
    role: Option<&str>,
    agents: Option<&[String]>,
) -> Result<(), Failure> {
    let role = match role {
        None => None,
        Some("user") => Some(UserRole::User),
        Some("admin") => Some(UserRole::Admin),
        Some(other) => {
            return Err(usage_error(anyhow::anyhow!(
                "--role must be `user` or `admin`, not {other:?}"
            )));
        }
    };
    let audit = admin_audit::open(home)?;
    let before = Snapshot::take(&home.access_path())?;
    let created = editor(home).create(user, role, agents).map_err(failure)?;
    let role_name = match role.unwrap_or_default() {
        UserRole::User => "user",
        UserRole::Admin => "admin",
    };
    audit.commit(
        &Event {
            action: bulwark_audit::Action::AccessChange,
            operation: "create",
            agent: String::new(),
            what: serde_json::json!({
                "user": user,
                "role": role_name,
                "agents": agents,
                "token_id": created.token.id,
                "new_entry": created.new_entry,
            }),
            detail: format!(
                "issued token {} to user {user:?} (role {role_name}{})",
                created.token.id,
                if created.new_entry {
                    ", new entry"
                } else {
                    ", existing entry kept"
                }
            ),
        },
        &[before],
    )?;
    if created.new_entry {
        let agents = match agents {
            Some(list) => list.join(", "),
            None => "every agent its access mode admits".into(),
        };
        let role = match role.unwrap_or_default() {
            UserRole::User => "user",
            UserRole::Admin => "admin",
        };
        println!(
            "created user `{user}` (role {role}; agents: {agents}) in {}",
            home.access_path().display()
        );
    } else {
        println!(
            "issued a token for `{user}`, keeping their entry in {}",
            home.access_path().display()
        );
    }
    print_token(&created.token, user);
    Ok(())
}

/// `bulwark access rotate USER`
pub fn rotate(home: &Home, user: &str) -> Result<(), Failure> {
    let audit = admin_audit::open(home)?;
    let before = Snapshot::take(&home.access_path())?;
    let (token, replaced) = editor(home).rotate(user).map_err(failure)?;
    audit.commit(
        &Event {
            action: bulwark_audit::Action::AccessChange,
            operation: "rotate",
            agent: String::new(),
            what: serde_json::json!({"user": user, "token_id": token.id, "replaced": replaced}),
            detail: format!(
                "replaced {replaced} token(s) of user {user:?} by token {}",
                token.id
            ),
        },
        &[before],
    )?;
    println!(
        "replaced {replaced} token(s) of `{user}`: the old one stops working within a second, and its open connections are closed"
    );
    print_token(&token, user);
    Ok(())
}

/// `bulwark access revoke USER`
pub fn revoke(home: &Home, user: &str) -> Result<(), Failure> {
    let audit = admin_audit::open(home)?;
    let before = Snapshot::take(&home.access_path())?;
    let removed = editor(home).revoke(user).map_err(failure)?;
    if removed > 0 {
        audit.commit(
            &Event {
                action: bulwark_audit::Action::AccessChange,
                operation: "revoke",
                agent: String::new(),
                what: serde_json::json!({"user": user, "revoked": removed}),
                detail: format!("revoked {removed} token(s) of user {user:?}"),
            },
            &[before],
        )?;
    }
    if removed == 0 {
        println!("`{user}` had no token; nothing changed");
    } else {
        println!(
            "revoked {removed} token(s) of `{user}`: they stop working within a second, and open connections are closed (the entry and its restrictions stay; `bulwark access rotate {user}` issues a new token)"
        );
    }
    Ok(())
}

/// `bulwark access list`
pub fn list(home: &Home) -> Result<(), Failure> {
    let users = editor(home).list().map_err(failure)?;
    if users.is_empty() {
        println!(
            "no users in {} (add one with `bulwark access create USER`)",
            home.access_path().display()
        );
        return Ok(());
    }
    for u in users {
        let role = match u.role {
            UserRole::User => "user",
            UserRole::Admin => "admin",
        };
        let agents = u.agents.map_or_else(|| "*".to_string(), |a| a.join(","));
        let tokens = if u.tokens.is_empty() {
            "no token".to_string()
        } else {
            u.tokens
                .iter()
                .map(|(id, created)| match created {
                    Some(c) => format!("{id} (created {c})"),
                    None => id.clone(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "{:<20} {role:<6} agents={agents:<24} tokens: {tokens}",
            u.name
        );
    }
    Ok(())
}
