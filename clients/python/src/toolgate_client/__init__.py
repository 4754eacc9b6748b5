"""toolgate_client: the Python client of the toolgate policy decision point.

- ``ToolgateClient``: decide, execution reports, approvals, the decision log (``client``);
- ``GuardedTool`` / ``ToolgateClient.guarded``: run a tool only when allowed, once per key
  (``guarded``);
- ``RetryPolicy``: the one retry behaviour of every call (``retry``);
- agent-framework tools whose refusals are tool results (``agent_tools``): LangChain /
  LangGraph (``langchain_tools``, extra ``langchain``) and the OpenAI Agents SDK
  (``openai_agents_tools``, extra ``openai-agents``), imported from their modules;
- the exception tree (``errors``) and the typed answers (``models``).
"""

from toolgate_client.client import DECISION_FILTERS, ToolgateClient
from toolgate_client.errors import (
    ApiError,
    ApprovalNotUsable,
    ApprovalRequired,
    ApprovalTimeout,
    Conflict,
    DependencyUnavailable,
    Forbidden,
    InternalError,
    NotFound,
    RateLimited,
    ReplayedFailure,
    ReportFailed,
    RetryableToolError,
    ToolCallDenied,
    ToolgateClientError,
    TransportError,
    Unauthenticated,
    UnexpectedResponse,
    ValidationFailed,
)
from toolgate_client.guarded import GuardedTool, PendingApproval, ToolCall
from toolgate_client.models import (
    Approval,
    ApprovalAnswer,
    ApprovalInfo,
    ApprovalResult,
    Decision,
    DecisionPage,
    DecisionRecord,
    ExecutionReport,
    IdempotencyInfo,
    ToolDescription,
    ToolRef,
)
from toolgate_client.retry import RetryEvent, RetryPolicy

__all__ = [
    "DECISION_FILTERS",
    "ApiError",
    "Approval",
    "ApprovalAnswer",
    "ApprovalInfo",
    "ApprovalNotUsable",
    "ApprovalRequired",
    "ApprovalResult",
    "ApprovalTimeout",
    "Conflict",
    "Decision",
    "DecisionPage",
    "DecisionRecord",
    "DependencyUnavailable",
    "ExecutionReport",
    "Forbidden",
    "GuardedTool",
    "IdempotencyInfo",
    "InternalError",
    "NotFound",
    "PendingApproval",
    "RateLimited",
    "ReplayedFailure",
    "ReportFailed",
    "RetryEvent",
    "RetryPolicy",
    "RetryableToolError",
    "ToolCall",
    "ToolCallDenied",
    "ToolDescription",
    "ToolRef",
    "ToolgateClient",
    "ToolgateClientError",
    "TransportError",
    "Unauthenticated",
    "UnexpectedResponse",
    "ValidationFailed",
]
