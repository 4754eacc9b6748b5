"""Pushing tenant data (app.decide.tenant_data): stored whole and recorded, or neither; the
overlay is read with the policy directory under ``tenants/<tenant>/``. The policy engine is
the scripted stand-in (a push never evaluates a policy); the store, log and bundle reader are
real."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.audit.queries import DecisionQuery
from app.decide import tenant_data
from app.decide.events import RequestFacts
from app.errors import DependencyUnavailable, Forbidden
from app.models import Subject
from app.policy.bundle import read_directory
from app.policy.tenant_data import TenantDataStore, overlay_files
from tests.conftest import POLICY_DIR
from tests.support import fakes

OPERATOR = Subject(id="ops-1", tenant="acme", roles=("operator",))
REQUEST = RequestFacts(request_id="r-1", trace_id=None)


@pytest.fixture
def config(tmp_path: Path):
    policies = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, policies)
    return fakes.settings(tmp_path, policy_dir=policies, tenant_data_dir=tmp_path / "td", policy_poll_interval_s=1)


def _records(deps):
    return list(deps.decision_reader.iter_records(DecisionQuery(tenant="acme", event="tenant_data_put")))


def test_a_push_replaces_the_tenants_file_in_the_bundle(deps, config) -> None:
    before = read_directory(config.policy_dir)
    pushed = tenant_data.push(deps, REQUEST, OPERATOR, "acme", {"allowed_domains": ["acme.example"]})
    bundle = read_directory(config.policy_dir, tenant_data_dir=config.tenant_data_dir)
    assert json.loads(bundle.files["tenants/acme/data.json"]) == {"allowed_domains": ["acme.example"]}
    assert bundle.files["tenants/bank-demo/data.json"] == before.files["tenants/bank-demo/data.json"]
    assert pushed.policy_revision == bundle.revision != before.revision
    [record] = _records(deps)
    assert record.policy_revision == pushed.policy_revision and record.decision_id == pushed.decision_id

    again = tenant_data.push(deps, REQUEST, OPERATOR, "acme", {"allowed_domains": ["acme.example", "b.example"]})
    assert again.previous_version == pushed.version and again.policy_revision != pushed.policy_revision


def test_a_push_whose_record_cannot_be_written_keeps_the_previous_data(deps, config) -> None:
    first = tenant_data.push(deps, REQUEST, OPERATOR, "acme", {"features": {"delete_files": False}})
    deps.decision_log.failing = True
    with pytest.raises(DependencyUnavailable):
        tenant_data.push(deps, REQUEST, OPERATOR, "acme", {"features": {"delete_files": True}})
    stored = TenantDataStore(config.tenant_data_dir).read("acme")
    assert stored is not None and json.loads(stored) == {"features": {"delete_files": False}}
    assert read_directory(config.policy_dir, tenant_data_dir=config.tenant_data_dir).revision == first.policy_revision


def test_a_first_push_whose_record_cannot_be_written_leaves_no_file(deps, config) -> None:
    deps.decision_log.failing = True
    with pytest.raises(DependencyUnavailable):
        tenant_data.push(deps, REQUEST, OPERATOR, "acme", {"features": {"delete_files": True}})
    assert overlay_files(config.tenant_data_dir) == {}


def test_an_operator_of_another_tenant_is_refused_without_a_trace(deps) -> None:
    other = Subject(id="ops-2", tenant="bank-demo", roles=("operator",))
    with pytest.raises(Forbidden):
        tenant_data.push(deps, REQUEST, other, "acme", {"allowed_domains": ["x.example"]})
    assert _records(deps) == []


def test_the_overlay_skips_hidden_and_unusable_folders(tmp_path: Path) -> None:
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "data.json").write_text("{}")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "data.json").write_text("{}")
    (tmp_path / "a.b").mkdir()
    (tmp_path / "a.b" / "data.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    assert overlay_files(tmp_path) == {"tenants/acme/data.json": b"{}"}
    assert overlay_files(tmp_path / "missing") == {} and overlay_files(None) == {}
