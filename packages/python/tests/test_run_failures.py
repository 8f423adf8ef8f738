"""OMA's ``classifyRunFailure`` in the Python package (how the evaluation runner describes a
scorer's or target's failure): every error of the shared table (``fixtures/run-failures.json``,
also run by the JavaScript package's ``classifyRunFailure``) gets exactly OMA's status and
``errorInfo``."""

import asyncio
import json
import os

from oma_component._errors import error_from_info
from oma_component.eval._values import classify_run_failure, error_info

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")

with open(os.path.join(FIXTURES, "run-failures.json"), encoding="utf-8") as f:
    TABLE = json.load(f)

#: The table's attribute names in Python's spelling.
ATTRIBUTES = {"code": "code", "status": "status", "statusCode": "status_code", "httpStatus": "http_status"}


def error_of(row):
    """The exception a row describes (see the table's ``contract``)."""
    if "oma" in row:
        return error_from_info({"name": row["oma"], "code": row["code"], "message": row["message"],
                                "retryable": row["retryable"]})
    if row.get("cancellation"):
        return asyncio.CancelledError(row["message"])
    error = type(row.get("name", "Error"), (Exception,), {})(row["message"])
    for key, attribute in ATTRIBUTES.items():
        if key in row:
            setattr(error, attribute, row[key])
    if "cause" in row:
        error.__cause__ = error_of(row["cause"])
    return error


def options_of(row):
    names = {"kind": "kind", "provider": "provider", "attempt": "attempt", "statusCode": "status_code"}
    return {names[key]: value for key, value in row.get("options", {}).items()}


def test_every_error_of_the_shared_table_is_classified_as_oma_does():
    assert len(TABLE["cases"]) >= 20
    for row in TABLE["cases"]:
        expect = json.loads(json.dumps(row["expect"]))
        if "pythonName" in row:
            expect["errorInfo"]["name"] = row["pythonName"]
        got = classify_run_failure(error_of(row["error"]), **options_of(row))
        assert got == expect, row["name"]
        if not row.get("options") or set(row["options"]) == {"kind"}:
            assert error_info(error_of(row["error"]), row.get("options", {}).get("kind")) == expect["errorInfo"]
