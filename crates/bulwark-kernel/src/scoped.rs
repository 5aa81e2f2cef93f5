//! Handles narrowed to what the door approved for one call.
//!
//! Each handle carries the exact demands the door checked. Asking it for
//! anything else is refused here, so the capability check and the effect can
//! never drift apart, even if a tool misreports its demands.

use crate::provenance::LabelRoot;
use crate::setup::ProcessSandbox;
use crate::tool::{CallTaint, ToolError};
use bulwark_audit::{AuditRecord, AuditSink, Decision};
use bulwark_net::{BodyMode, CallContext, CredentialUse, HttpRequest, SafeHttp};
use bulwark_policy::{Demand, EffectivePolicy, TaintLabel, WorkspacePath};
use bulwark_sandbox::{
    EDIT_MAX_BYTES, FsError, Gate, ProcessOutput, ProcessSpec, SEARCH_MAX_FILE_BYTES, SandboxSpec,
    Workspace,
};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

fn fs_error(err: FsError) -> ToolError {
    match err {
        FsError::Escape { .. } => ToolError::Path(err.to_string()),
        FsError::NotCovered { .. } => ToolError::NotGranted(err.to_string()),
        other => ToolError::Failed(other.to_string()),
    }
}

/// The workspace, limited to the paths the door approved for this call.
///
/// The door checked the paths as written; symlinks inside the workspace can
/// make a path lead elsewhere. So every operation also passes a gate that
/// asks the session's policy about the path *really reached* (and, for
/// listings and searches, every entry returned and every file read).
pub struct ScopedFiles {
    workspace: Arc<Workspace>,
    granted: Vec<(Access, WorkspacePath)>,
    policy: Arc<EffectivePolicy>,
    max_read: u64,
    max_write: u64,
}

impl ScopedFiles {
    pub(crate) fn new(
        workspace: Arc<Workspace>,
        granted: Vec<(Access, WorkspacePath)>,
        policy: Arc<EffectivePolicy>,
        max_read: u64,
        max_write: u64,
    ) -> Self {
        Self {
            workspace,
            granted,
            policy,
            max_read,
            max_write,
        }
    }

    fn check(&self, access: Access, path: &WorkspacePath) -> Result<(), ToolError> {
        if self.granted.iter().any(|(a, p)| *a == access && p == path) {
            Ok(())
        } else {
            Err(ToolError::NotGranted(format!(
                "{access:?} of `{path}` was not approved for this call"
            )))
        }
    }

    /// Is `reached` (a path the workspace resolved) covered for `access` by
    /// the session's capabilities?
    fn covers(&self, access: Access, reached: &str) -> bool {
        let Ok(path) = WorkspacePath::parse(reached) else {
            return false;
        };
        let demand = match access {
            Access::Read => Demand::FileRead(path),
            Access::Write => Demand::FileWrite(path),
        };
        self.policy.capabilities.permits(&demand)
    }

    /// The file's bytes and their labels, looked up under the path really
    /// read (a symlink inside the workspace counts as the file it leads
    /// to, so both names find the same entry).
    pub fn read(
        &self,
        path: &WorkspacePath,
        taint: &CallTaint,
    ) -> Result<(Vec<u8>, BTreeSet<TaintLabel>), ToolError> {
        self.read_limited(path, self.max_read, taint)
    }

    fn read_limited(
        &self,
        path: &WorkspacePath,
        max: u64,
        taint: &CallTaint,
    ) -> Result<(Vec<u8>, BTreeSet<TaintLabel>), ToolError> {
        self.check(Access::Read, path)?;
        let reached = Reached::default();
        let gate = |p: &str| reached.note(self.covers(Access::Read, p), p);
        let bytes = self
            .workspace
            .read_gated(path.as_str(), max, &gate)
            .map_err(fs_error)?;
        let real = reached.path(path.as_str())?;
        let labels = taint.read_labels(LabelRoot::Workspace, &real, &bytes)?;
        Ok((bytes, labels))
    }

    /// Writes `data` after recording the call's untrusted labels for it.
    pub fn write(
        &self,
        path: &WorkspacePath,
        data: &[u8],
        taint: &CallTaint,
    ) -> Result<(), ToolError> {
        self.check(Access::Write, path)?;
        let gate = |p: &str| self.covers(Access::Write, p);
        let target = Labelled {
            root: LabelRoot::Workspace,
            taint,
            labels: &taint.written_labels(),
        };
        target.write(&self.workspace, path.as_str(), data, self.max_write, &gate)
    }
    /// The entries the grants cover, and how many others were left out.
    pub fn list(
        &self,
        path: &WorkspacePath,
    ) -> Result<(Vec<bulwark_sandbox::EntryInfo>, usize), ToolError> {
        self.check(Access::Read, path)?;
        let gate = |p: &str| self.covers(Access::Read, p);
        self.workspace
            .list_gated(path.as_str(), &gate)
            .map_err(fs_error)
    }
    /// Replaces `old` with `new` (exactly once unless `replace_all`). The
    /// edited file keeps the untrusted labels of what it held, plus the
    /// call's: an edit by a clean session does not launder a page a
    /// tainted one saved.
    pub fn edit(
        &self,
        path: &WorkspacePath,
        old: &str,
        new: &str,
        replace_all: bool,
        taint: &CallTaint,
    ) -> Result<usize, ToolError> {
        self.check(Access::Write, path)?;
        let shown = path.as_str();
        // The same refusals, in the same words, as `Workspace::edit_gated`
        // (reimplemented here to label the bytes it writes).
        let invalid = |kind, why: &str| {
            fs_error(FsError::Io {
                path: shown.into(),
                source: std::io::Error::new(kind, why.to_string()),
            })
        };
        if old.is_empty() {
            return Err(invalid(
                std::io::ErrorKind::InvalidInput,
                "the text to replace is empty; pass the exact text to change",
            ));
        }
        let (bytes, before) = self.read_limited(path, EDIT_MAX_BYTES, taint)?;
        let text = String::from_utf8(bytes).map_err(|_| {
            invalid(
                std::io::ErrorKind::InvalidData,
                "file is not valid UTF-8; edit only works on text files",
            )
        })?;
        let count = text.matches(old).count();
        if count == 0 {
            return Err(fs_error(FsError::NoMatch { path: shown.into() }));
        }
        if count > 1 && !replace_all {
            return Err(fs_error(FsError::AmbiguousMatch {
                path: shown.into(),
                count,
            }));
        }
        let updated = text.replace(old, new);
        let mut labels = taint.written_labels();
        labels.extend(before.into_iter().filter(|l| l.is_untrusted()));
        let gate = |p: &str| self.covers(Access::Write, p);
        let target = Labelled {
            root: LabelRoot::Workspace,
            taint,
            labels: &labels,
        };
        target.write(
            &self.workspace,
            shown,
            updated.as_bytes(),
            EDIT_MAX_BYTES,
            &gate,
        )?;
        Ok(count)
    }
    /// Hits in files the grants cover, how many files were not read, and
    /// the labels of the files the hits came from (each read again and
    /// looked up; one that cannot be read again counts as unknown).
    pub fn search(
        &self,
        path: &WorkspacePath,
        needle: &str,
        max_results: usize,
        taint: &CallTaint,
    ) -> Result<(Vec<bulwark_sandbox::SearchHit>, usize, BTreeSet<TaintLabel>), ToolError> {
        self.check(Access::Read, path)?;
        let gate = |p: &str| self.covers(Access::Read, p);
        let (hits, skipped) = self
            .workspace
            .search_gated(path.as_str(), needle, max_results, &gate)
            .map_err(fs_error)?;
        let mut labels = BTreeSet::from([TaintLabel::Workspace]);
        let files: BTreeSet<&str> = hits.iter().map(|h| h.path.as_str()).collect();
        for file in files {
            match self
                .workspace
                .read_gated(file, SEARCH_MAX_FILE_BYTES, &gate)
            {
                Ok(bytes) => {
                    labels.extend(taint.read_labels(LabelRoot::Workspace, file, &bytes)?)
                }
                Err(_) => {
                    labels.insert(TaintLabel::Unknown);
                }
            }
        }
        Ok((hits, skipped, labels))
    }
}

/// The path a read's gate was asked about: where the read really led
/// (symlinks resolved), the key its labels are kept under.
#[derive(Default)]
struct Reached(Mutex<Option<String>>);

impl Reached {
    /// Notes `path` when `allowed`; the gate's answer.
    fn note(&self, allowed: bool, path: &str) -> bool {
        if allowed && let Ok(mut reached) = self.0.lock() {
            *reached = Some(path.to_owned());
        }
        allowed
    }

    fn path(&self, shown: &str) -> Result<String, ToolError> {
        self.0
            .lock()
            .ok()
            .and_then(|mut reached| reached.take())
            .ok_or_else(|| {
                ToolError::Failed(format!(
                    "could not tell which file `{shown}` led to; its content was not returned"
                ))
            })
    }
}

/// A write whose labels are recorded first.
struct Labelled<'a> {
    root: LabelRoot,
    taint: &'a CallTaint,
    labels: &'a BTreeSet<TaintLabel>,
}

impl Labelled<'_> {
    /// Writes `data` to `shown` through a gate that, once `covers` allows
    /// the path really written, records the labels there before anything
    /// is created: a crash leaves a label without a file, never a file
    /// without its label. A label that cannot be recorded refuses the
    /// write.
    fn write(
        &self,
        workspace: &Workspace,
        shown: &str,
        data: &[u8],
        max: u64,
        covers: Gate<'_>,
    ) -> Result<(), ToolError> {
        let failure: Mutex<Option<String>> = Mutex::new(None);
        let gate = |p: &str| {
            if !covers(p) {
                return false;
            }
            match self.taint.record(self.root, p, data, self.labels) {
                Ok(()) => true,
                Err(e) => {
                    if let Ok(mut f) = failure.lock() {
                        *f = Some(e.to_string());
                    }
                    false
                }
            }
        };
        let result = workspace.write_gated(shown, data, max, &gate);
        match failure.lock().ok().and_then(|mut f| f.take()) {
            Some(why) => Err(ToolError::Failed(format!(
                "the labels of `{shown}` could not be recorded ({why}); nothing was written"
            ))),
            None => result.map_err(fs_error),
        }
    }
}

/// Memory notes for the agent and for the user, in separate directories, each
/// reachable only for the scopes and accesses the door approved.
pub struct ScopedMemory {
    pub(crate) agent: Arc<Workspace>,
    pub(crate) user: Arc<Workspace>,
    pub(crate) granted: Vec<(Access, String)>,
    pub(crate) max_bytes: u64,
}

impl ScopedMemory {
    fn root(&self, access: Access, scope: &str) -> Result<&Workspace, ToolError> {
        if !self.granted.iter().any(|(a, s)| *a == access && s == scope) {
            return Err(ToolError::NotGranted(format!(
                "{access:?} of {scope} memory was not approved for this call"
            )));
        }
        match scope {
            "agent" => Ok(&self.agent),
            "user" => Ok(&self.user),
            other => Err(ToolError::InvalidArgs(format!(
                "unknown memory scope `{other}`; use `agent` or `user`"
            ))),
        }
    }
    fn label_root(scope: &str) -> LabelRoot {
        if scope == "user" {
            LabelRoot::UserMemory
        } else {
            LabelRoot::AgentMemory
        }
    }
    /// The note's bytes and their labels (`memory`, plus what a tainted
    /// session stored with them).
    pub fn read(
        &self,
        scope: &str,
        file: &str,
        taint: &CallTaint,
    ) -> Result<(Vec<u8>, BTreeSet<TaintLabel>), ToolError> {
        let root = self.root(Access::Read, scope)?;
        let reached = Reached::default();
        let gate = |p: &str| reached.note(true, p);
        let bytes = root
            .read_gated(file, self.max_bytes, &gate)
            .map_err(fs_error)?;
        let real = reached.path(file)?;
        let labels = taint.read_labels(Self::label_root(scope), &real, &bytes)?;
        Ok((bytes, labels))
    }
    /// Writes the note after recording the call's untrusted labels for it.
    pub fn write(
        &self,
        scope: &str,
        file: &str,
        data: &[u8],
        taint: &CallTaint,
    ) -> Result<(), ToolError> {
        let root = self.root(Access::Write, scope)?;
        let target = Labelled {
            root: Self::label_root(scope),
            taint,
            labels: &taint.written_labels(),
        };
        target.write(root, file, data, self.max_bytes, &|_: &str| true)
    }
    pub fn list(&self, scope: &str) -> Result<Vec<bulwark_sandbox::EntryInfo>, ToolError> {
        self.root(Access::Read, scope)?.list("").map_err(fs_error)
    }
}

/// Runs exactly the argv the door approved, in the workspace, with the
/// minimal environment, inside the session's process sandbox. Sandbox
/// warnings (permissive mode) are logged for the door to audit.
pub struct ScopedProcess {
    pub(crate) argv: Vec<String>,
    pub(crate) cwd: PathBuf,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) timeout: Duration,
    pub(crate) max_output: usize,
    pub(crate) sandbox: ProcessSandbox,
    pub(crate) warnings: Arc<Mutex<Vec<String>>>,
    /// (grant, key, value) granted to the shell's environment.
    pub(crate) secret_env: Vec<(String, String, secrecy::SecretString)>,
    pub(crate) secrets: Arc<bulwark_net::SecretStore>,
    pub(crate) used: Arc<Mutex<Vec<CredentialUse>>>,
    pub(crate) spawn_log: SpawnRecorder,
    /// The session's egress proxy for the shell, when the policy grants
    /// the shell hosts: commands reach them through it, and only them.
    pub(crate) egress: Option<Arc<crate::mcp_hub::ShellEgress>>,
}

/// Writes the `spawn` audit record of a call *before* its child starts, so
/// a process that runs always has a durable trace, even if the runtime
/// dies while it runs. A spawn that cannot be recorded does not happen.
pub(crate) struct SpawnRecorder {
    pub(crate) audit: Arc<dyn AuditSink>,
    /// The call's shared fields (session, agent, user, tool, operation,
    /// argument digest); action, decision, reason and detail are set here.
    pub(crate) template: AuditRecord,
}

impl SpawnRecorder {
    pub(crate) fn record(&self, detail: String) -> Result<(), ToolError> {
        self.write(
            bulwark_audit::Action::Spawn,
            Decision::Allowed,
            bulwark_audit::Reason::Spawn,
            &detail,
        )
        .map_err(|e| {
            ToolError::Failed(format!(
                "the audit log could not record the process start ({e}); it was not started"
            ))
        })
    }

    /// Writes a record of the call (`action`, `decision`, `reason`,
    /// `detail`) durably, before what it is about happens.
    pub(crate) fn side(
        &self,
        action: bulwark_audit::Action,
        decision: Decision,
        reason: bulwark_audit::Reason,
        detail: &str,
    ) -> Result<(), ToolError> {
        let name = action.to_string();
        self.write(action, decision, reason, detail).map_err(|e| {
            ToolError::Failed(format!(
                "the audit log could not record a {name} record ({e}); the call did not go on"
            ))
        })
    }

    fn write(
        &self,
        action: bulwark_audit::Action,
        decision: Decision,
        reason: bulwark_audit::Reason,
        detail: &str,
    ) -> Result<(), bulwark_audit::AuditError> {
        let detail: String = detail.chars().take(1000).collect();
        // The call's identity and shared fields, stamped now.
        let record = AuditRecord::new(
            self.template.identity(),
            bulwark_audit::Event::new(action, decision, reason)
                .tool(self.template.tool.clone())
                .operation(self.template.operation.clone())
                .digest(self.template.args_digest.clone())
                .detail(detail)
                .duration_us(self.template.duration_us),
        );
        // `record` may only queue; `flush` is the durability barrier, so the
        // record is on disk before the child can run.
        self.audit.record(&record).and_then(|()| self.audit.flush())
    }
}

/// The program's file name only: the full argv is in the transcript and
/// its digest in the record, so the audit log names what ran without
/// copying arguments that may hold data.
fn program_name(argv: &[String]) -> String {
    let program = argv.first().map(String::as_str).unwrap_or_default();
    let name = program.rsplit('/').next().unwrap_or(program);
    name.chars().take(64).collect()
}

impl ScopedProcess {
    pub async fn run(&self, argv: &[String]) -> Result<ProcessOutput, ToolError> {
        if argv != self.argv.as_slice() {
            return Err(ToolError::NotGranted(
                "this argv was not approved for this call".into(),
            ));
        }
        let mut out = self.run_confined(argv).await?;
        // Output may print a granted secret (`env`): the model sees names.
        out.stdout = self.secrets.redact(&out.stdout);
        out.stderr = self.secrets.redact(&out.stderr);
        Ok(out)
    }

    async fn run_confined(&self, argv: &[String]) -> Result<ProcessOutput, ToolError> {
        let program = self.secrets.redact(&program_name(argv));
        let (helper, enforcement, limits) = match &self.sandbox {
            ProcessSandbox::Unconfined => {
                self.spawn_log
                    .record(format!("{program}: unconfined (no process sandbox)"))?;
                // Never the workspace: a dotfile the agent wrote there
                // would steer the program. Removed when the call ends.
                let home = bulwark_sandbox::PrivateHome::create()
                    .map_err(|e| ToolError::Failed(format!("cannot create a HOME: {e}")))?;
                let spec = ProcessSpec {
                    argv: argv.to_vec(),
                    cwd: self.cwd.clone(),
                    env: home.apply(&self.env),
                    timeout: self.timeout,
                    max_output: self.max_output,
                };
                return bulwark_sandbox::run_process(&spec)
                    .await
                    .map_err(|e| ToolError::Failed(e.to_string()));
            }
            ProcessSandbox::Confined {
                helper,
                enforcement,
                limits,
            } => (helper, *enforcement, *limits),
        };
        // The sandbox gives the command a private /tmp (its TMPDIR) and an
        // empty HOME of its own: nothing is created in the workspace.
        let mut env = self.env.clone();
        let mut by_grant: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
        for (grant, key, value) in &self.secret_env {
            env.push((
                key.clone(),
                secrecy::ExposeSecret::expose_secret(value).to_string(),
            ));
            by_grant.entry(grant).or_default().push(key.clone());
        }
        if let Ok(mut used) = self.used.lock() {
            for (grant, keys) in by_grant {
                used.push(CredentialUse {
                    grant: Some(grant.to_string()),
                    keys,
                    host: "the shell environment".into(),
                    outcome: bulwark_net::UseOutcome::Injected,
                });
            }
        }
        let mode = match enforcement {
            bulwark_sandbox::Enforcement::Strict => "strict",
            bulwark_sandbox::Enforcement::Permissive => "permissive",
        };
        self.spawn_log.record(format!(
            "{program}: sandboxed ({mode}); {} argument(s)",
            argv.len().saturating_sub(1)
        ))?;
        let egress_proxy = match &self.egress {
            Some(egress) => {
                let held = self.secret_env.iter().map(|(_, k, _)| k.clone()).collect();
                let observer = Arc::new(crate::mcp_hub::EgressAudit {
                    audit: self.spawn_log.audit.clone(),
                    identity: self.spawn_log.template.identity(),
                    domain: "shell".into(),
                });
                Some(
                    egress
                        .socket(held, observer)
                        .await
                        .map_err(|e| ToolError::Sandbox(e.to_string()))?,
                )
            }
            None => None,
        };
        let spec = SandboxSpec {
            argv: argv.to_vec(),
            cwd: self.cwd.clone(),
            workspace: self.cwd.clone(),
            read_write: Vec::new(),
            read_only: Vec::new(),
            env,
            network: false,
            limits,
            enforcement,
            pids_cgroup: None,
            memory_cgroup: None,
            egress_proxy,
        };
        let out = bulwark_sandbox::run_sandboxed(helper, &spec, self.timeout, self.max_output)
            .await
            .map_err(|e| ToolError::Failed(format!("the sandbox could not start: {e}")))?;
        if let Ok(mut w) = self.warnings.lock() {
            w.extend(out.warnings.iter().cloned());
        }
        if out.refused() {
            let why = out
                .warnings
                .first()
                .cloned()
                .unwrap_or_else(|| "the sandbox refused to start".into());
            return Err(ToolError::Sandbox(why));
        }
        Ok(ProcessOutput {
            exit_code: out.exit_code,
            signal: out.signal,
            stdout: out.stdout,
            stderr: out.stderr,
            timed_out: out.timed_out,
            truncated: out.stdout_truncated || out.stderr_truncated,
            duration: out.duration,
        })
    }
}

/// The egress client, limited to the host:port pairs the door approved,
/// acting for one tool domain. Credential uses are logged by name for the
/// door to audit after the call.
pub struct ScopedHttp {
    pub(crate) http: Arc<SafeHttp>,
    pub(crate) hosts: Vec<(String, u16)>,
    pub(crate) call: CallContext,
    pub(crate) used: Arc<Mutex<Vec<CredentialUse>>>,
}

/// Policy refusals by the egress client are denials; timeouts, size caps
/// and transport errors are failures of a permitted request.
fn net_error(err: bulwark_net::NetError) -> ToolError {
    use bulwark_net::NetError as E;
    match err {
        E::InvalidUrl { .. }
        | E::InvalidRule { .. }
        | E::Scheme { .. }
        | E::Userinfo { .. }
        | E::NotAllowed { .. }
        | E::ForbiddenAddress { .. }
        | E::TooManyRedirects { .. }
        | E::Downgrade { .. }
        | E::Header { .. }
        | E::Credential { .. } => ToolError::Egress(err.to_string()),
        E::Exfiltration { ref key, .. } => ToolError::Exfiltration {
            key: key.clone(),
            message: err.to_string(),
        },
        other => ToolError::Failed(other.to_string()),
    }
}

impl ScopedHttp {
    pub async fn get(&self, url: &str) -> Result<bulwark_net::HttpResponse, ToolError> {
        self.get_with_headers(url, Vec::new()).await
    }

    /// GET with tool-supplied headers; a header value may name a credential
    /// as `${KEY}`, which the client substitutes only where a grant allows.
    pub async fn get_with_headers(
        &self,
        url: &str,
        headers: Vec<(String, String)>,
    ) -> Result<bulwark_net::HttpResponse, ToolError> {
        let parsed = self.http.check_url(url).map_err(net_error)?;
        let (host, port) = crate::tools::web::connect_target(&parsed)
            .ok_or_else(|| ToolError::InvalidArgs(format!("`{url}` has no host or no port")))?;
        if !self.hosts.iter().any(|(h, p)| *h == host && *p == port) {
            return Err(ToolError::NotGranted(format!(
                "{host}:{port} was not approved for this call"
            )));
        }
        let mut request = HttpRequest::get(url);
        request.headers = headers;
        let sent = self
            .http
            .send_as(&self.call, request, BodyMode::Prefix)
            .await;
        if let Ok(mut used) = self.used.lock() {
            used.extend(sent.credentials);
        }
        sent.result.map_err(net_error)
    }

    /// `text` with every stored secret value replaced by its key's name:
    /// for content that came back from a server (which may echo the
    /// credential it was sent).
    pub fn redact(&self, text: &str) -> String {
        match self.http.credentials() {
            Some(c) => c.store().redact(text),
            None => text.to_string(),
        }
    }
}
