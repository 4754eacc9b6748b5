"""The console's auditor view checks the chains as ``toolgate audit verify`` does: against the
signed checkpoints, so a truncated tail shows even when the head row was rewound to match
(the hash chain alone cannot see it). Real app, SQLite log, checkpoint file."""

from __future__ import annotations

from tests.support.calls import auth, decide_body
from tests.unit.test_audit_checkpoints import truncate


def _signed_in_auditor(client) -> None:
    page = client.get("/console/sign-in").text
    token = page.split('name="login_token" value="')[1].split('"')[0]
    ok = client.post("/console/sign-in/dev", data={"login_token": token, "subject": "u-a", "tenant": "acme", "roles": "auditor"})
    assert ok.status_code == 302


def test_a_truncated_tail_shows_as_broken_on_the_audit_page(make_app, tmp_path):
    dsn = str(tmp_path / "decisions.sqlite")
    app = make_app(audit_dsn=dsn, console_dev_sign_in=True, console_secure_cookies=False)
    client = app.test_client()
    for _ in range(4):
        resp = client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/reports/q1.csv"}),
                           headers=auth("u-1", roles=["support_agent"]))
        assert resp.status_code == 200
    app.extensions["toolgate"].decision_log.flush()  # sign the heads now, not at the interval
    _signed_in_auditor(client)
    intact = client.get("/console/audit").text
    assert 'class="chain ok" data-tenant="acme"' in intact and "signed checkpoint statement(s)" in intact
    truncate(dsn, "acme", keep=2)
    broken = client.get("/console/audit").text
    assert 'class="chain broken" data-tenant="acme"' in broken and "records missing" in broken
