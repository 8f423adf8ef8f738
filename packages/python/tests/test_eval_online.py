"""The online evaluation rules the core holds (fixtures/eval/online.json; the core's tests and
the JavaScript package run the same table): every row through the codec as the package calls
it, the answer and its key order, or OMA's error."""

import json
import os

import pytest

from oma_component.eval._rules import online_step

with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "eval", "online.json"),
          encoding="utf-8") as f:
    TABLE = json.load(f)

CLASSES = {"TypeError": TypeError, "RangeError": ValueError, "Error": ValueError}

ROWS = [(step, row) for step in ("case", "record", "flush") for row in TABLE[step]]


@pytest.mark.parametrize("step,row", ROWS, ids=[f"{s}: {r['name']}" for s, r in ROWS])
def test_online_table(step, row):
    if "error" in row:
        with pytest.raises(CLASSES[row["error"]["name"]]) as raised:
            online_step(step, row["request"])
        assert str(raised.value) == row["error"]["message"]
    else:
        answer = online_step(step, row["request"])
        assert answer == row["expect"]
        assert json.dumps(answer) == json.dumps(row["expect"])  # key order


def test_every_step_has_rows():
    assert all(TABLE[step] for step in ("case", "record", "flush"))
