"""The agent-framework adapters of ``toolgate_client`` against a live gateway, with the real
packages: LangChain tools in LangGraph's ``ToolNode`` (and a compiled graph with a checkpointer
for the interrupt), and OpenAI Agents SDK function tools run by the SDK's ``Runner``. A deny or
a pending approval is the tool's result (or LangGraph's interrupt), never an exception that ends
the run; an approved call runs once. The only stand-in is the Agents SDK's language model
(``ScriptedModel``, the SDK's ``Model`` interface answering from a script): no model runs here."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from agents import Agent, ModelSettings, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from toolgate_client import ToolCallDenied
from toolgate_client.langchain_tools import guard_langchain_tool
from toolgate_client.openai_agents_tools import guard_function_tool

PAYMENT = {"amount": 1500, "currency": "EUR", "recipient": "acct_42"}


def langchain_tools(runs: list[str]) -> tuple[Any, Any]:
    @tool("processPayment")
    def process_payment(amount: float, currency: str, recipient: str) -> dict[str, Any]:
        """Pay an amount to a recipient."""
        runs.append("processPayment")
        return {"payment": f"pm-{len(runs)}", "amount": amount}

    @tool("createTicket")
    def create_ticket(title: str, description: str, priority: str, clientMutationId: str) -> dict[str, Any]:
        """Open a support ticket."""
        runs.append("createTicket")
        return {"id": f"T-{len(runs)}", "title": title, "status": "open", "priority": priority}

    return process_payment, create_ticket


def tool_call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call-{uuid.uuid4().hex[:12]}", "type": "tool_call"}


def tool_graph(tools: list[Any], checkpointer: Any = None) -> Any:
    """A LangGraph graph of one ``ToolNode`` (the node an agent's tool calls go through)."""
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=checkpointer)


def run_tools(graph: Any, calls: list[dict[str, Any]]) -> list[Any]:
    """The tool messages the graph answers ``calls`` with."""
    return graph.invoke({"messages": [AIMessage(content="", tool_calls=calls)]})["messages"][1:]


def test_without_the_adapter_a_denial_ends_the_langgraph_run(client_for) -> None:
    """Why the adapter exists: a plain ``guarded`` tool raises, and ToolNode lets it escape."""
    pay = client_for("agent").guarded(lambda payment: payment, tool="processPayment")

    @tool("processPayment")
    def naive(amount: float, currency: str, recipient: str) -> Any:
        """Pay."""
        return pay({"amount": amount, "currency": currency, "recipient": recipient}, idempotency_key=f"k-{uuid.uuid4()}")

    with pytest.raises(ToolCallDenied):
        run_tools(tool_graph([naive]), [tool_call("processPayment", PAYMENT)])


def test_langgraph_tool_node_turns_a_deny_into_a_tool_message_and_runs_an_allowed_call_once(client_for) -> None:
    runs: list[str] = []
    process_payment, create_ticket = langchain_tools(runs)
    client = client_for("agent")
    graph = tool_graph([guard_langchain_tool(client, process_payment),
                        guard_langchain_tool(client, create_ticket, key_field="clientMutationId")])
    ticket = {"title": " Printer ", "description": "Jammed.", "priority": "high", "clientMutationId": str(uuid.uuid4())}
    out = run_tools(graph, [tool_call("processPayment", PAYMENT), tool_call("createTicket", ticket)])
    assert out[0].content == "toolgate denied this call: role support_agent may not use tool processPayment"
    assert json.loads(out[1].content)["title"] == "Printer"  # the contract's normalized input
    [again] = run_tools(graph, [tool_call("createTicket", ticket)])  # a new step, the same key field: replayed
    assert json.loads(again.content) == json.loads(out[1].content)
    assert runs == ["createTicket"]


def test_a_pending_approval_is_a_tool_result_and_the_call_runs_once_approved(client_for) -> None:
    runs: list[str] = []
    process_payment, _ = langchain_tools(runs)
    guarded = guard_langchain_tool(client_for("admin"), process_payment)
    graph = tool_graph([guarded])
    call = tool_call("processPayment", PAYMENT)
    [waiting] = run_tools(graph, [call])
    assert waiting.content.startswith("this call waits for a person's approval: payment over 1000 needs approval (approval ap_")
    approval_id = waiting.content.rsplit("approval ", 1)[1].rstrip(")")
    client_for("approver").answer_approval(approval_id, approved=True, reason="known recipient")
    [paid] = run_tools(graph, [call])
    [again] = run_tools(graph, [call])
    assert json.loads(paid.content) == json.loads(again.content) == {"payment": "pm-1", "amount": 1500}
    assert runs == ["processPayment"]


def test_interrupt_pauses_the_graph_at_a_pending_approval_and_resumes_into_one_run(client_for) -> None:
    runs: list[str] = []
    process_payment, _ = langchain_tools(runs)
    guarded = guard_langchain_tool(client_for("admin"), process_payment, interrupt=True, approval_wait_s=5)
    graph = tool_graph([guarded], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    paused = graph.invoke({"messages": [AIMessage(content="", tool_calls=[tool_call("processPayment", PAYMENT)])]}, config)
    [pause] = paused["__interrupt__"]
    assert pause.value["reason"] == "payment over 1000 needs approval" and runs == []
    client_for("approver").answer_approval(pause.value["approval_id"], approved=True, reason="ok")
    resumed = graph.invoke(Command(resume="approved"), config)
    assert json.loads(resumed["messages"][-1].content) == {"payment": "pm-1", "amount": 1500}
    assert runs == ["processPayment"]


class ScriptedModel(Model):
    """The Agents SDK's ``Model`` answering each turn from ``script``: a tool call, or text."""

    def __init__(self, script: list[tuple[str, dict[str, Any]] | str]) -> None:
        self.script = list(script)

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, **_: Any) -> ModelResponse:
        step = self.script.pop(0)
        if isinstance(step, str):
            item: Any = ResponseOutputMessage(
                id="msg-1", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text=step, annotations=[])])
        else:
            name, arguments = step
            item = ResponseFunctionToolCall(type="function_call", name=name, arguments=json.dumps(arguments),
                                            call_id=f"call-{uuid.uuid4().hex[:12]}", id="fc-1")
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        """``Model`` declares it abstract; ``Runner.run`` never streams, so a call here is a
        test defect, reported as such."""
        raise AssertionError("Runner.run streamed: these tests script get_response only")


def agents_tools(runs: list[str]) -> Any:
    @function_tool(name_override="processPayment")
    def process_payment(amount: float, currency: str, recipient: str) -> dict[str, Any]:
        """Pay an amount to a recipient."""
        runs.append("processPayment")
        return {"payment": f"pm-{len(runs)}", "amount": amount}

    return process_payment


def run_agent(agent: Any) -> Any:
    """One run of ``agent`` (no trace export: nothing leaves this machine)."""
    return asyncio.run(Runner.run(agent, "pay invoice 2291", run_config=RunConfig(tracing_disabled=True)))


def tool_outputs(result: Any) -> list[Any]:
    return [item.output for item in result.new_items if item.type == "tool_call_output_item"]


def test_openai_agents_runner_gets_a_denial_as_the_tool_output_and_goes_on(client_for) -> None:
    runs: list[str] = []
    model = ScriptedModel([("processPayment", PAYMENT), "I may not pay that."])
    agent = Agent(name="payer", model=model, model_settings=ModelSettings(),
                  tools=[guard_function_tool(client_for("agent"), agents_tools(runs))])
    result = run_agent(agent)
    assert tool_outputs(result) == ["toolgate denied this call: role support_agent may not use tool processPayment"]
    assert result.final_output == "I may not pay that." and runs == []


def test_openai_agents_runner_waits_for_approval_then_pays_once(client_for) -> None:
    runs: list[str] = []
    invoice = uuid.uuid4().hex  # the app's own key: the model's tool call ids change from run to run
    guarded = guard_function_tool(client_for("admin"), agents_tools(runs),
                                  idempotency_key=lambda _call_id, payment: f"invoice-{invoice}-{payment['recipient']}")
    first = Agent(name="payer", model=ScriptedModel([("processPayment", PAYMENT), "waiting"]), tools=[guarded])
    waiting = run_agent(first)
    [text] = tool_outputs(waiting)
    assert text.startswith("this call waits for a person's approval: payment over 1000 needs approval") and runs == []
    client_for("approver").answer_approval(text.rsplit("approval ", 1)[1].rstrip(")"), approved=True, reason="ok")
    again = Agent(name="payer", model=ScriptedModel([("processPayment", PAYMENT), ("processPayment", PAYMENT), "paid"]),
                  tools=[guarded])
    paid = run_agent(again)
    outputs = tool_outputs(paid)
    assert outputs == [{"payment": "pm-1", "amount": 1500}, {"amount": 1500, "payment": "pm-1"}]  # ran, then replayed
    assert runs == ["processPayment"]
