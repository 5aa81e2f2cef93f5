//! The three ways a call's approval question reaches (or cannot reach) a
//! person: a server-initiated elicitation (2025-11-25), an MRTR input
//! request answered on the call's retry (2026-07-28), or nobody.

use std::time::Duration;

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputResponses,
};
use rmcp::{Peer, RoleServer, ServiceError};
use tokio::sync::{mpsc, oneshot};

use super::{ApprovalQuestion, ApprovalReply, Approvals};

/// The key of the one input request a parked call carries.
pub(crate) const APPROVAL_KEY: &str = "approval";
/// The boolean field of the approval form.
pub(crate) const APPROVE_FIELD: &str = "approve";
/// The most of a question shown (the tool name, why, the arguments): a
/// client's own arguments are echoed back, never more than this.
const MAX_MESSAGE_CHARS: usize = 2000;

/// The form a person answers: a yes/no with the call described.
pub(crate) fn approval_params(question: &ApprovalQuestion) -> ElicitRequestParams {
    let mut message = format!(
        "Bulwark asks for approval to run tool `{}`.\nWhy: {}\nArguments: {}",
        question.tool, question.why, question.args_preview
    );
    if message.chars().count() > MAX_MESSAGE_CHARS {
        message = message.chars().take(MAX_MESSAGE_CHARS).collect::<String>() + "…";
    }
    let schema = ElicitationSchema::builder()
        .required_bool_with(APPROVE_FIELD, |b| {
            b.title("Approve")
                .description("Run this call once (true), or refuse it (false)")
        })
        .build()
        // The schema is fixed; building it cannot fail, but a library
        // does not panic: an empty form still asks yes/no by its action.
        .unwrap_or_else(|_| ElicitationSchema::new(Default::default()));
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    }
}

/// A person's answer: only an accepted form saying `approve: true` runs
/// the call; decline, cancel, false, or anything malformed refuses it.
pub(crate) fn reply_of(result: &ElicitResult) -> ApprovalReply {
    let approved = result.action == ElicitationAction::Accept
        && result
            .content
            .as_ref()
            .and_then(|c| c.get(APPROVE_FIELD))
            .and_then(serde_json::Value::as_bool)
            == Some(true);
    if approved {
        ApprovalReply::Approve
    } else {
        ApprovalReply::Deny
    }
}

/// The MRTR input requests for `question`.
pub(crate) fn input_requests(question: &ApprovalQuestion) -> InputRequests {
    let mut requests = InputRequests::new();
    requests.insert(
        APPROVAL_KEY.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(approval_params(question))),
    );
    requests
}

/// The answer a retry carries; a retry without one (or with one that does
/// not parse) is a denial.
pub(crate) fn reply_of_responses(responses: Option<&InputResponses>) -> ApprovalReply {
    responses
        .and_then(|r| r.get(APPROVAL_KEY))
        .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok())
        .map_or(ApprovalReply::Deny, |r| reply_of(&r))
}

/// A client that declared no form elicitation: nobody can be asked.
pub(crate) struct NoApprovals;

#[async_trait::async_trait]
impl Approvals for NoApprovals {
    async fn ask(&self, _question: ApprovalQuestion) -> ApprovalReply {
        ApprovalReply::Unavailable
    }
}

/// A 2025-11-25 client that declared elicitation: asked with a
/// server-initiated `elicitation/create`, within the approval timeout.
pub(crate) struct ElicitApprovals {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) timeout: Duration,
}

#[async_trait::async_trait]
impl Approvals for ElicitApprovals {
    async fn ask(&self, question: ApprovalQuestion) -> ApprovalReply {
        match self
            .peer
            .create_elicitation_with_timeout(approval_params(&question), Some(self.timeout))
            .await
        {
            Ok(result) => reply_of(&result),
            // Nobody answered in time: a denial, as at a terminal.
            Err(ServiceError::Timeout { .. }) => ApprovalReply::Deny,
            Err(err) => {
                tracing::warn!("the MCP client could not be asked for approval: {err}");
                ApprovalReply::Unavailable
            }
        }
    }
}

/// A question a running call put, with where its answer goes.
pub(crate) type Asked = (ApprovalQuestion, oneshot::Sender<ApprovalReply>);

/// A 2026-07-28 client: the question goes to the `tools/call` handler,
/// which parks the call and answers `input_required`; the answer comes
/// back with the retry. No answer within the timeout (the retry never
/// came, the parked call was dropped) is a denial.
pub(crate) struct MrtrApprovals {
    pub(crate) questions: mpsc::Sender<Asked>,
    pub(crate) timeout: Duration,
}

#[async_trait::async_trait]
impl Approvals for MrtrApprovals {
    async fn ask(&self, question: ApprovalQuestion) -> ApprovalReply {
        let (answer, reply) = oneshot::channel();
        if self.questions.send((question, answer)).await.is_err() {
            return ApprovalReply::Unavailable;
        }
        match tokio::time::timeout(self.timeout, reply).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) | Err(_) => ApprovalReply::Deny,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "[a-z]{0,8}".prop_map(serde_json::Value::from),
            prop::sample::select(vec!["accept", "decline", "cancel", "approve", "true"])
                .prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map(
                    prop::sample::select(vec!["action", "content", "approve", "x"])
                        .prop_map(str::to_owned),
                    inner,
                    0..4
                )
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn is_exact_yes(v: &serde_json::Value) -> bool {
        v.get("action").and_then(|a| a.as_str()) == Some("accept")
            && v.get("content")
                .and_then(|c| c.get(APPROVE_FIELD))
                .and_then(|a| a.as_bool())
                == Some(true)
    }

    proptest! {
        /// Whatever a client sends back, only an accepted form saying
        /// `approve: true` approves.
        #[test]
        fn only_an_explicit_yes_approves(value in json_value()) {
            let mut responses = InputResponses::new();
            responses.insert(APPROVAL_KEY.into(), value.clone());
            let reply = reply_of_responses(Some(&responses));
            prop_assert_ne!(reply, ApprovalReply::Unavailable);
            if reply == ApprovalReply::Approve {
                prop_assert!(is_exact_yes(&value), "{value}");
            }
        }
    }

    #[test]
    fn a_missing_answer_or_wrong_key_denies() {
        assert_eq!(reply_of_responses(None), ApprovalReply::Deny);
        let mut responses = InputResponses::new();
        responses.insert(
            "other".into(),
            serde_json::json!({"action": "accept", "content": {"approve": true}}),
        );
        assert_eq!(reply_of_responses(Some(&responses)), ApprovalReply::Deny);
        responses.insert(
            APPROVAL_KEY.into(),
            serde_json::json!({"action": "accept", "content": {"approve": true}}),
        );
        assert_eq!(reply_of_responses(Some(&responses)), ApprovalReply::Approve);
    }

    #[test]
    fn the_form_is_bounded_and_says_what_and_why() {
        let params = approval_params(&ApprovalQuestion {
            tool: "shell_exec".into(),
            why: "policy".into(),
            args_preview: "x".repeat(100_000),
        });
        let ElicitRequestParams::FormElicitationParams { message, .. } = params else {
            panic!("a form")
        };
        assert!(message.contains("shell_exec") && message.contains("Why: policy"));
        assert!(message.chars().count() <= MAX_MESSAGE_CHARS + 1);
    }
}
