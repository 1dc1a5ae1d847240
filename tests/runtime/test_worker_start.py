"""A fresh Ray worker's one-off imports are paid before its first cell, not inside it.

The first ``torch.optim`` optimizer a process builds imports ``torch._dynamo``; without
``one_cell.prepare_worker`` that import lands in the first cell's timed run, whose ``wall_seconds``
the cost tables read. Run in a fresh interpreter (this test session has imported it long ago),
through ``executor._task``, the function every Ray task of the train stage runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from pipeline.config import merge, read_yaml
from tests.conftest import ROOT, TINY

SCRIPT = textwrap.dedent("""
    import json, sys, tempfile
    from pipeline.config import expand, from_mapping
    from pipeline.datasets import load_dataset
    from pipeline.runtime.cells import one_cell
    from pipeline.runtime.backends import executor
    from pipeline.runtime.cells.failures import NO_RETRY

    before = "torch._dynamo" in sys.modules  # importing the executor must not import it
    seen = {}
    real = executor.run_cell

    def timed(*args, **kwargs):  # the cell's timed run: which dynamo modules it imports
        start = {m for m in sys.modules if m.startswith("torch._dynamo")}
        out = real(*args, **kwargs)
        seen["new"] = sorted({m for m in sys.modules if m.startswith("torch._dynamo")} - start)
        return out

    executor.run_cell = timed
    params = json.loads(sys.argv[1])
    cell = expand(from_mapping(params))[0]
    dataset = load_dataset("laplace", 300, 100, 0, {"input_dim": 8})
    outcome = executor._task(cell, dataset, tempfile.mkdtemp() + "/cell", {}, 1, [], [],
                             NO_RETRY)
    print(json.dumps({"before": before, "status": outcome.status, "reason": outcome.reason,
                      "imported_in_cell": seen["new"]}))
""")


def test_the_first_cell_of_a_fresh_worker_imports_nothing_of_torch_dynamo(tmp_path):
    params = merge(read_yaml(ROOT / "params.yaml"), TINY)
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(params)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["before"] is False  # else this test would no longer see the import move
    assert got["status"] == "ok", got["reason"]
    assert got["imported_in_cell"] == []
