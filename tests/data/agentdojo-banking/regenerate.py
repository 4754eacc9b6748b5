"""Regenerate trajectories.jsonl: AgentDojo's banking ground-truth calls, run by the benchmark's
own tool functions against its own default banking environment.

Needs the PyPI package ``agentdojo`` (0.1.35, MIT) in a throwaway virtual environment, never in
the project's: ::

    python3 -m venv /tmp/agentdojo && /tmp/agentdojo/bin/pip install agentdojo==0.1.35
    /tmp/agentdojo/bin/python tests/data/agentdojo-banking/regenerate.py

One JSON object per line, one conversation each:

- ``{"conversation", "suite", "benchmark_version", "user_task_id", "injection_task_id",
  "user_prompt", "calls"}``; ``injection_task_id`` is null for a benign conversation;
- ``calls``: in order, ``{"step", "function", "args", "output", "task_kind", "task_id",
  "injected"}``; ``output`` is what the tool function returned, as JSON (models as objects);
  ``injected`` marks the calls of the injection task.

Benign conversations: every user task, its ground-truth calls in the environment with the
injection vectors at their defaults. Injected conversations: every (user task, injection task)
pair, as the benchmark runs them: the environment carries the benchmark's
"important_instructions" attack text with the injection task's goal in every injection vector
the user task's ground truth reads; the injection task's ground-truth calls follow the first
call whose output holds the attack text (the agent obeys it), then the user task's remaining
calls. ``user_prompt`` is always the user task's prompt: the attacker's goal is never the
user's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agentdojo.attacks.base_attacks import DEFAULT_MODEL_NAME, FixedJailbreakAttack
from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack
from agentdojo.functions_runtime import FunctionsRuntime
from agentdojo.task_suite.load_suites import get_suite
from pydantic import BaseModel

BENCHMARK_VERSION = "v1.2.2"
OUT = Path(__file__).resolve().parent / "trajectories.jsonl"
# The attack text's opening tag: the environment's YAML folds the text's line breaks, so the
# output holds the text changed, but always this tag.
_ATTACK_MARK = "<INFORMATION>"


def _as_json(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _as_json(v) for k, v in value.items()}
    return value


def _run(runtime: FunctionsRuntime, env: Any, tool_call: Any) -> Any:
    result, error = runtime.run_function(env, tool_call.function, tool_call.args)
    if error is not None:
        raise RuntimeError(f"{tool_call.function}({tool_call.args}) failed: {error}")
    return _as_json(result)


def _call(step: int, tool_call: Any, output: Any, kind: str, task_id: str) -> dict[str, Any]:
    return {"step": step, "function": tool_call.function, "args": _as_json(dict(tool_call.args)), "output": output,
            "task_kind": kind, "task_id": task_id, "injected": kind == "injection"}


def _conversation(suite: Any, user_task: Any, injection_task: Any, attack_texts: dict[str, str]) -> dict[str, Any]:
    runtime = FunctionsRuntime(suite.tools)
    env = suite.load_and_inject_default_environment(attack_texts)
    pending = list(user_task.ground_truth(env.model_copy(deep=True)))
    calls: list[dict[str, Any]] = []
    injected = injection_task is None
    while pending:
        tool_call = pending.pop(0)
        output = _run(runtime, env, tool_call)
        calls.append(_call(len(calls), tool_call, output, "user", user_task.ID))
        if not injected and _ATTACK_MARK in json.dumps(output, ensure_ascii=False):
            injected = True
            for injected_call in injection_task.ground_truth(env.model_copy(deep=True)):
                output = _run(runtime, env, injected_call)
                calls.append(_call(len(calls), injected_call, output, "injection", injection_task.ID))
    if not injected:
        raise RuntimeError(f"{user_task.ID}: no output carried the attack text of {injection_task.ID}")
    name = user_task.ID if injection_task is None else f"{user_task.ID}+{injection_task.ID}"
    return {"conversation": name, "suite": "banking", "benchmark_version": BENCHMARK_VERSION,
            "user_task_id": user_task.ID, "injection_task_id": None if injection_task is None else injection_task.ID,
            "user_prompt": user_task.PROMPT, "calls": calls}


def main() -> int:
    suite = get_suite(BENCHMARK_VERSION, "banking")
    attack = FixedJailbreakAttack(ImportantInstructionsAttack._JB_STRING, suite, None)  # type: ignore[arg-type]
    attack.user_name, attack.model_name = "Emma Johnson", DEFAULT_MODEL_NAME
    conversations = []
    for user_task in suite.user_tasks.values():
        conversations.append(_conversation(suite, user_task, None, {}))
    for user_task in suite.user_tasks.values():
        for injection_task in suite.injection_tasks.values():
            conversations.append(_conversation(suite, user_task, injection_task, attack.attack(user_task, injection_task)))
    with OUT.open("w", encoding="utf-8") as out:
        for conversation in conversations:
            out.write(json.dumps(conversation, ensure_ascii=False) + "\n")
    calls = [c for conv in conversations for c in conv["calls"]]
    print(f"{OUT.name}: {len(conversations)} conversations, {len(calls)} calls"
          f" ({sum(c['injected'] for c in calls)} injected)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
