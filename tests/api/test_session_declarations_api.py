"""A policy revision whose family reads a session member that its ``session_reads`` does not
declare (activated without ``toolgate policy check``): the gateway has not verified the
declarations, so it builds the whole session and the rule over that member decides
(``app.session.declarations``). Before, the member was left out and the deny never fired."""

from __future__ import annotations

import shutil
import uuid

from tests.conftest import POLICY_DIR
from tests.support.calls import auth, decide_body
from tests.unit.test_session_declarations import FILES, UNDECLARED_READ


def test_a_deny_over_an_undeclared_session_member_still_fires(make_app, tmp_path):
    policy = tmp_path / "policy"
    shutil.copytree(POLICY_DIR, policy)
    files = policy / FILES
    files.write_text(files.read_text() + UNDECLARED_READ)
    client = make_app(policy_dir=policy).test_client()
    headers = auth("u-1", "acme", ["support_agent"])
    context = {"conversation_id": f"c-{uuid.uuid4().hex[:12]}"}
    first = client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a.csv"}, context=context), headers=headers)
    again = client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a.csv"}, context=context), headers=headers)
    assert first.get_json()["decision"] == "allow"
    assert again.get_json()["decision"] == "deny"
    assert again.get_json()["reasons"] == ["a file is read once per conversation"]
