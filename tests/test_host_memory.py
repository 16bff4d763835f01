"""The first Session keeps freed host memory in the process (dataflow/runtime/host_memory.py):
a step's arrays reuse the previous step's pages instead of page-faulting new ones."""
import json
import os
import platform
import subprocess
import sys


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# Eight 460 KB arrays (the digits MLP's activations) allocated and freed per "step".
_CHILD = """
import json, resource, sys
import numpy as np
import dataflow as df
from dataflow.runtime import host_memory
config = df.ConfigProto(retain_host_memory=sys.argv[1] == "on")
df.Session(graph=df.Graph(), config=config)

def step():
    arrays = [np.ones((1797, 64), np.float32) for _ in range(8)]
    del arrays

step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    step()
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50
print(json.dumps({"retained": host_memory.retained(), "faults": faults}))
"""


def _child(mode, **env):
    out = subprocess.run([sys.executable, "-c", _CHILD, mode], cwd=REPO, check=True,
                         capture_output=True, text=True, env={**os.environ, **env})
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_session_keeps_freed_memory_and_steps_stop_page_faulting():
    on, off = _child("on"), _child("off")
    assert not off["retained"]
    # Elsewhere than glibc the setting does not exist and nothing changes.
    assert on["retained"] == GLIBC
    if GLIBC:
        # 8 x 460 KB written per step is 900 pages: with glibc's defaults most of them
        # fault again every step; with the memory kept, almost none do.
        assert off["faults"] > 200, off
        assert on["faults"] < 20, on


def test_environment_variable_switches_it_off():
    assert not _child("on", DATAFLOW_RETAIN_HOST_MEMORY="0")["retained"]


def test_retain_freed_memory_is_idempotent_and_reports_its_state():
    from dataflow.runtime import host_memory
    first = host_memory.retain_freed_memory()
    assert host_memory.retain_freed_memory() == first == host_memory.retained()
    assert first == (GLIBC and os.environ.get("DATAFLOW_RETAIN_HOST_MEMORY", "1") != "0")
