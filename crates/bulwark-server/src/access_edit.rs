//! Editing access.toml for `bulwark access create | rotate | revoke | list`.
//!
//! Edits keep the operator's comments and layout (`toml_edit`), touch only
//! the one user's entry, and are checked by the same parser the server
//! uses before anything is written. The new file replaces the old one by
//! rename from a 0600 temporary file in the same directory, so the server
//! (polling it) sees the old contents or the new, never half a file.
//! Concurrent edits take turns on a lock file beside it.

use crate::secret::{SecretError, ServerSecret};
use crate::tokens::{IssuedToken, issue};
use bulwark_policy::{ConfigError, UserRole, parse_access};
use std::fs::OpenOptions;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, Value};

#[derive(Debug, thiserror::Error)]
pub enum AccessEditError {
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file as it is does not parse; nothing was changed.
    #[error("{0} (fix access.toml first; nothing was changed)")]
    Invalid(ConfigError),
    #[error(
        "user name {0:?} is invalid: use 1-64 lowercase letters, digits, `-` or `_`, starting with a letter or digit"
    )]
    BadUserName(String),
    /// A name with a meaning to the runtime
    /// ([`AccessFile::RESERVED_USER_NAMES`](bulwark_policy::AccessFile::RESERVED_USER_NAMES)).
    #[error("user name `{name}` is reserved: it {why}; choose another name")]
    ReservedUserName { name: String, why: &'static str },
    #[error("{0:?} is not an agent name or \"*\"")]
    BadAgentName(String),
    #[error("user `{0}` has no entry in access.toml (create one with `bulwark access create {0}`)")]
    UnknownUser(String),
    #[error(
        "user `{0}` already has a token; use `bulwark access rotate {0}` to replace it, or `revoke` to remove it"
    )]
    HasToken(String),
    #[error(
        "user `{0}` already has an entry in access.toml; edit its role or agents there (`create` adds a token to an existing entry only without --role/--agents)"
    )]
    ExistingEntry(String),
    #[error(transparent)]
    Secret(#[from] SecretError),
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> AccessEditError {
    let path = path.to_owned();
    move |source| AccessEditError::Io {
        action,
        path,
        source,
    }
}

/// One user as `bulwark access list` shows it: no hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSummary {
    pub name: String,
    pub role: UserRole,
    pub agents: Option<Vec<String>>,
    /// `(id, created)` of each token.
    pub tokens: Vec<(String, Option<String>)>,
}

/// What `create` did.
#[derive(Debug)]
pub struct Created {
    pub token: IssuedToken,
    /// `false`: the user had an entry (without a token) that was kept.
    pub new_entry: bool,
}

/// The access file at `path`, edited under the server secret at `secret`.
#[derive(Debug, Clone)]
pub struct AccessEditor {
    path: PathBuf,
    secret: PathBuf,
}

impl AccessEditor {
    pub fn new(access_path: impl Into<PathBuf>, secret_path: impl Into<PathBuf>) -> Self {
        Self {
            path: access_path.into(),
            secret: secret_path.into(),
        }
    }

    /// Every user, sorted by name.
    pub fn list(&self) -> Result<Vec<UserSummary>, AccessEditError> {
        let text = self.read()?;
        let access = self.parse(&text)?;
        Ok(access
            .users
            .into_iter()
            .map(|(name, u)| UserSummary {
                name: name.into_string(),
                role: u.role,
                agents: u.agents,
                tokens: u
                    .tokens
                    .into_iter()
                    .map(|t| (t.id, t.created.map(|c| c.to_string())))
                    .collect(),
            })
            .collect())
    }

    /// Adds `user` with a new token. A user with an entry but no token gets
    /// a token and keeps the entry as it is (then `role`/`agents` must be
    /// `None`: restrictions are not silently rewritten).
    pub fn create(
        &self,
        user: &str,
        role: Option<UserRole>,
        agents: Option<&[String]>,
    ) -> Result<Created, AccessEditError> {
        check_user(user)?;
        for a in agents.unwrap_or_default() {
            if !(a == "*" || bulwark_policy::AgentName::new(a.as_str()).is_ok()) {
                return Err(AccessEditError::BadAgentName(a.clone()));
            }
        }
        self.edit(|doc, access, secret| {
            let new_entry = match access.users.get(user) {
                Some(entry) if !entry.tokens.is_empty() => {
                    return Err(AccessEditError::HasToken(user.into()));
                }
                Some(_) if role.is_some() || agents.is_some() => {
                    return Err(AccessEditError::ExistingEntry(user.into()));
                }
                Some(_) => false,
                None => true,
            };
            let token = issue(secret)?;
            let entry = user_table(doc, user, true)?;
            if new_entry {
                let role = match role.unwrap_or_default() {
                    UserRole::User => "user",
                    UserRole::Admin => "admin",
                };
                entry.insert("role", toml_edit::value(role));
                if let Some(agents) = agents {
                    let list: Array = agents.iter().map(String::as_str).collect();
                    entry.insert("agents", toml_edit::value(list));
                }
            }
            entry.insert("tokens", tokens_item(&token));
            Ok(Created { token, new_entry })
        })
    }

    /// Replaces every token of `user` with one new token; returns it and
    /// how many were replaced.
    pub fn rotate(&self, user: &str) -> Result<(IssuedToken, usize), AccessEditError> {
        check_user(user)?;
        self.edit(|doc, access, secret| {
            let old = access
                .users
                .get(user)
                .ok_or_else(|| AccessEditError::UnknownUser(user.into()))?
                .tokens
                .len();
            let token = issue(secret)?;
            user_table(doc, user, false)?.insert("tokens", tokens_item(&token));
            Ok((token, old))
        })
    }

    /// Removes every token of `user` (the entry and its restrictions stay);
    /// returns how many were removed.
    pub fn revoke(&self, user: &str) -> Result<usize, AccessEditError> {
        check_user(user)?;
        self.edit(|doc, access, _| {
            let old = access
                .users
                .get(user)
                .ok_or_else(|| AccessEditError::UnknownUser(user.into()))?
                .tokens
                .len();
            user_table(doc, user, false)?.remove("tokens");
            Ok(old)
        })
    }

    fn read(&self) -> Result<String, AccessEditError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => Ok(text),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(io("read", &self.path)(e)),
        }
    }

    fn parse(&self, text: &str) -> Result<bulwark_policy::AccessFile, AccessEditError> {
        parse_access(text, &self.path.display().to_string()).map_err(AccessEditError::Invalid)
    }

    /// Read, change, check and replace the file under the lock.
    fn edit<T>(
        &self,
        change: impl FnOnce(
            &mut DocumentMut,
            &bulwark_policy::AccessFile,
            &ServerSecret,
        ) -> Result<T, AccessEditError>,
    ) -> Result<T, AccessEditError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        let lock_path = dir.join(".access.toml.lock");
        let lock = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io("create", &lock_path))?;
        lock.lock().map_err(io("lock", &lock_path))?;
        let text = self.read()?;
        let access = self.parse(&text)?;
        let mut doc: DocumentMut = text.parse().map_err(|_| {
            // parse_access accepted it, so toml_edit should too.
            AccessEditError::Invalid(ConfigError {
                origin: self.path.display().to_string(),
                line: 1,
                col: 1,
                field: None,
                message: "the file could not be parsed for editing".into(),
            })
        })?;
        let secret = ServerSecret::load_or_create(&self.secret)?;
        let out = change(&mut doc, &access, &secret)?;
        let new_text = doc.to_string();
        self.parse(&new_text)?;
        write_replace(&self.path, new_text.as_bytes())?;
        drop(lock);
        Ok(out)
    }
}

fn check_user(user: &str) -> Result<(), AccessEditError> {
    let Ok(name) = bulwark_policy::UserName::new(user) else {
        return Err(AccessEditError::BadUserName(user.into()));
    };
    if let Some(why) = name.reserved() {
        return Err(AccessEditError::ReservedUserName {
            name: user.into(),
            why,
        });
    }
    Ok(())
}

/// `tokens = [{ id = "...", hash = "...", created = <now> }]`.
fn tokens_item(token: &IssuedToken) -> Item {
    let mut t = InlineTable::new();
    t.insert("id", Value::from(token.id.as_str()));
    t.insert("hash", Value::from(token.hash_hex.as_str()));
    if let Some(now) = now_datetime() {
        t.insert("created", Value::from(now));
    }
    let mut list = Array::new();
    list.push(t);
    toml_edit::value(list)
}

fn now_datetime() -> Option<toml_edit::Datetime> {
    let now = time::OffsetDateTime::now_utc().replace_nanosecond(0).ok()?;
    let text = now
        .format(&time::format_description::well_known::Rfc3339)
        .ok()?;
    text.parse().ok()
}

/// The `users.<user>` table, created (as `[users.<user>]`) when `create`.
fn user_table<'a>(
    doc: &'a mut DocumentMut,
    user: &str,
    create: bool,
) -> Result<&'a mut dyn toml_edit::TableLike, AccessEditError> {
    let root = doc.as_table_mut();
    if !root.contains_key("users") {
        let mut users = Table::new();
        users.set_implicit(true);
        root.insert("users", Item::Table(users));
    }
    let users = root
        .get_mut("users")
        .and_then(Item::as_table_like_mut)
        .ok_or_else(|| AccessEditError::UnknownUser(user.into()))?;
    if !users.contains_key(user) {
        if !create {
            return Err(AccessEditError::UnknownUser(user.into()));
        }
        users.insert(user, Item::Table(Table::new()));
    }
    users
        .get_mut(user)
        .and_then(Item::as_table_like_mut)
        .ok_or_else(|| AccessEditError::UnknownUser(user.into()))
}

/// Writes `contents` to a new 0600 file beside `path` and renames it over
/// `path`; the temporary file never outlives a failure.
fn write_replace(path: &Path, contents: &[u8]) -> Result<(), AccessEditError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut nonce = [0u8; 8];
    crate::secret::random_bytes(&mut nonce)?;
    let temp = dir.join(format!(".{name}.tmp-{}", hex::encode(nonce)));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(io("create", &temp))?;
        file.write_all(contents)
            .and_then(|()| file.sync_all())
            .map_err(io("write", &temp))?;
        std::fs::rename(&temp, path).map_err(io("replace", path))?;
        // The rename is durable once the directory is.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn editor(dir: &Path) -> AccessEditor {
        AccessEditor::new(dir.join("access.toml"), dir.join("keys/server.secret"))
    }

    #[test]
    fn create_rotate_revoke_keep_comments_and_other_users() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.toml");
        std::fs::write(
            &path,
            "# who may do what\n[users.bob]\nrole = \"user\" # keep me\nagents = [\"x\"]\n",
        )
        .unwrap();
        let ed = editor(dir.path());
        let c = ed
            .create("alice", Some(UserRole::Admin), Some(&["a".into()]))
            .unwrap();
        assert!(c.new_entry);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("# who may do what") && text.contains("# keep me"),
            "{text}"
        );
        assert!(text.contains(&c.token.hash_hex) && !text.contains(c.token.token.as_str()));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        assert!(matches!(
            ed.create("alice", None, None),
            Err(AccessEditError::HasToken(_))
        ));
        // bob has an entry: a token is added, his restrictions kept.
        assert!(matches!(
            ed.create("bob", Some(UserRole::Admin), None),
            Err(AccessEditError::ExistingEntry(_))
        ));
        let b = ed.create("bob", None, None).unwrap();
        assert!(!b.new_entry);
        let (rotated, replaced) = ed.rotate("alice").unwrap();
        assert_eq!(replaced, 1);
        let list = ed.list().unwrap();
        let alice = list.iter().find(|u| u.name == "alice").unwrap();
        assert_eq!(alice.role, UserRole::Admin);
        assert_eq!(alice.tokens.len(), 1);
        assert_eq!(alice.tokens[0].0, rotated.id);
        let bob = list.iter().find(|u| u.name == "bob").unwrap();
        assert_eq!(bob.agents.as_deref(), Some(&["x".to_string()][..]));
        assert_eq!(ed.revoke("alice").unwrap(), 1);
        assert_eq!(ed.revoke("alice").unwrap(), 0);
        assert!(matches!(
            ed.revoke("nobody"),
            Err(AccessEditError::UnknownUser(_))
        ));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&rotated.hash_hex));
        assert!(text.contains(&b.token.hash_hex));
    }

    #[test]
    fn a_broken_file_is_not_touched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.toml");
        let broken = "[users.alice]\nrole = \"superuser\"\n";
        std::fs::write(&path, broken).unwrap();
        let err = editor(dir.path()).create("bob", None, None).unwrap_err();
        assert!(err.to_string().contains("access.toml:2"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
        assert!(matches!(
            editor(dir.path()).create("Bad Name", None, None),
            Err(AccessEditError::BadUserName(_))
        ));
    }

    #[test]
    fn reserved_names_are_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.toml");
        let ed = editor(dir.path());
        for role in [None, Some(UserRole::User), Some(UserRole::Admin)] {
            let err = ed.create("local", role, None).unwrap_err();
            assert!(
                matches!(err, AccessEditError::ReservedUserName { ref name, .. } if name == "local"),
                "{err}"
            );
            assert!(err.to_string().contains("reserved"), "{err}");
        }
        assert!(matches!(
            ed.rotate("local"),
            Err(AccessEditError::ReservedUserName { .. })
        ));
        assert!(!path.exists(), "nothing may be written");
        // The operator's own entry without tokens (its limits) is fine.
        std::fs::write(&path, "[users.local.limits]\ntokens_per_day = 5\n").unwrap();
        assert!(ed.create("alice", None, None).unwrap().new_entry);
        assert!(matches!(
            ed.create("local", None, None),
            Err(AccessEditError::ReservedUserName { .. })
        ));
        // Ordinary names still work.
        std::fs::remove_file(&path).unwrap();
        assert!(ed.create("locals", None, None).unwrap().new_entry);
        assert!(ed.create("admin", None, None).unwrap().new_entry);
    }
}
