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


def test_the_charts_count_denials_by_rule_id(make_app):
    client = make_app(console_dev_sign_in=True, console_secure_cookies=False).test_client()
    answers = []
    for path in ("/etc/shadow", "/etc/shadow", "/etc/shadow", "/srv/reports/q1.csv"):
        resp = client.post("/v1/decide", json=decide_body("readFile", {"path": path}), headers=auth("u-1", roles=["support_agent"]))
        assert resp.status_code == 200
        answers.append(resp.get_json())
    assert [a["decision"] for a in answers] == ["deny", "deny", "deny", "allow"]
    rule_ids = sorted(r["id"] for r in answers[0]["matched_rules"] if r["effect"] == "deny")
    assert rule_ids and all(r.startswith("files.") for r in rule_ids)
    _signed_in_auditor(client)
    tops = client.get("/console/audit").text.split('class="bars top-rules"')[1].split("</ol>")[0]
    for rule_id in rule_ids:
        assert f'<span class="label">{rule_id}</span>' in tops  # whole, not cut
    assert tops.count('class="count">3<') == len(rule_ids)


def test_every_console_response_carries_the_security_headers(make_app):
    """Pages, redirects, errors and URLs no view matches (404, 405) alike: a console error page
    framed or sniffed is as useful to an attacker as any other page."""
    client = make_app(console_dev_sign_in=True, console_secure_cookies=False).test_client()
    responses = {
        "sign-in": client.get("/console/sign-in"),
        "redirect": client.get("/console/inbox"),
        "404": client.get("/console/no-such-page"),
        "405": client.delete("/console/sign-in"),
        "403": client.post("/console/sign-in/dev", data={"login_token": "wrong", "subject": "u-a", "tenant": "acme"}),
    }
    assert [response.status_code for response in responses.values()] == [200, 302, 404, 405, 403]
    for name, response in responses.items():
        assert "frame-ancestors 'none'" in response.headers.get("Content-Security-Policy", ""), name
        assert response.headers.get("X-Frame-Options") == "DENY", name
        assert response.headers.get("X-Content-Type-Options") == "nosniff", name
    assert "Content-Security-Policy" not in client.get("/healthz").headers
