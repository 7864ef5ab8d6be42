"""Property-based run of schemathesis against /openapi.json (generated from the models,
api.openapi): whatever a client sends, the API never answers 500 and its answers match
the document. Every route is run; the dataset routes on a real dataset."""

from __future__ import annotations

import uuid

import pytest
import schemathesis  # a dev dependency (.ci/run installs it): missing, the module fails, not skips
from engine_support import open_engine
from gridagg_api import create_app
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from gridagg.model.schema import Dataset

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
TOKEN = "w-secret"


@pytest.fixture(scope="module")
def served(settings, services, tmp_path_factory):
    """(app, dataset name)."""
    engine = open_engine(settings, "embedded", tmp_path_factory.mktemp("api-schema"))
    name = "t_apis_" + uuid.uuid4().hex[:8]
    engine.create_dataset(Dataset.from_json({"name": name, "dimensions": [
        {"name": "time", "type": "time", "min": "2012-01-01T00:00:00Z", "max": "2012-12-31T00:00:00Z"},
        {"name": "lon", "scale": 1, "min": -10, "max": 10}, {"name": "lat", "scale": 1, "min": 40, "max": 60}],
        "measures": [{"name": "temperature", "scale": 1}], "grid": {"n_size": 500, "n_threshold": 1000}}))
    engine.insert(name, [{"time": f"2012-0{m}-1{d}T00:00:00Z", "lon": d - 5, "lat": 45 + m, "temperature": m * d}
                         for m in range(1, 10) for d in range(10)])
    yield create_app(settings.with_(write_token=TOKEN), engine=engine, max_query_ms=1000, max_points=500), name
    engine.drop_dataset(name)


def test_no_server_errors_and_schema_conformance(served):
    app, dataset = served
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    failures = []
    operations = [operation.ok() for operation in schema.get_all_operations()]
    documented = {(op.method.upper(), op.path) for op in operations}
    routed = {(m, rule.rule.replace("<name>", "{name}")) for rule in app.url_map.iter_rules()
              for m in rule.methods - {"HEAD", "OPTIONS"} if rule.endpoint != "static"}
    assert documented == routed - {("GET", "/openapi.json")}  # schemathesis leaves out the document itself
    # Keep the run small: the machine is shared. Generated dataset names would only ever
    # meet 404s (tests/test_api_errors.py has those): the dataset routes get the real one.
    # Rows go in with the write token; creating datasets is refused (401).
    for op in operations:

        @hsettings(max_examples=25, deadline=None, database=None,
                   suppress_health_check=list(HealthCheck))
        @given(case=op.as_strategy())
        def run(case):
            if case.path.startswith("/v1/datasets/{name}"):
                case.path_parameters["name"] = dataset
            if case.path.endswith("/rows"):
                case.headers = {**(case.headers or {}), "Authorization": f"Bearer {TOKEN}"}
            response = case.call()
            assert response.status_code < 500, (case.method, case.path, case.body, response.text)
            # No 500s, and answers match the document (statuses, content types, bodies).
            # Semantic 400s for schema-valid input (e.g. an unknown dimension) are expected.
            case.validate_response(response, checks=CHECKS)

        try:
            run()
        except AssertionError as exc:
            failures.append(str(exc)[:2000])
        except Exception as exc:  # schemathesis reports schema violations as its own failures
            failures.append(f"{type(exc).__name__}: {str(exc)[:2000]}")
    assert not failures, "\n\n".join(failures)
