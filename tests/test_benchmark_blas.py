"""The benchmarks name the BLAS kernels they ran and can run the NumPy-BLAS columns without
``OPENBLAS_CORETYPE`` (``--blas-coretype``), without changing this process's environment."""
import os
import subprocess
import sys

import pytest

from benchmarks import blas_config, compare

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_native_worker_environment_drops_only_the_coretype():
    base = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512", "PATH": "/bin"}
    assert blas_config.worker_env(base, "native") == {"OPENBLAS_L2_SIZE": "512",
                                                      "PATH": "/bin"}
    assert blas_config.worker_env(base, "env") == base
    assert base["OPENBLAS_CORETYPE"] == "Haswell"    # the caller's mapping is untouched
    assert blas_config.configurations("both") == ("env", "native")
    with pytest.raises(ValueError, match="blas-coretype"):
        blas_config.configurations("SkylakeX")


def test_label_names_numpys_library_first_and_the_variable():
    libs = [("openblas", "0.3.31", "SkylakeX", 2), ("openblas", "0.3.30", "SkylakeX", 2)]
    assert blas_config.describe(libs, None) == \
        "openblas 0.3.31 SkylakeX x2 (detected); also loaded: openblas 0.3.30 SkylakeX x2"
    assert blas_config.describe(libs[:1], "Haswell") == \
        "openblas 0.3.31 SkylakeX x2 (OPENBLAS_CORETYPE=Haswell)"


def test_label_of_this_process_is_threadpoolctls_view_of_numpys_blas():
    from threadpoolctl import threadpool_info
    import numpy as np  # noqa: F401
    numpys = [i for i in threadpool_info()
              if i.get("user_api") == "blas" and "numpy" in i.get("filepath", "")]
    label = blas_config.blas_label()
    if numpys:
        assert label.startswith(f"{numpys[0]['internal_api']} {numpys[0]['version']} "
                                f"{numpys[0]['architecture']} x{numpys[0]['num_threads']}")
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    assert (f"(OPENBLAS_CORETYPE={coretype})" if coretype else "(detected)") in label


def test_loops_runs_a_native_configuration_in_a_child_process():
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.loops", "--quick", "--only", "scalar",
         "--repeats", "1", "--blas-coretype", "both"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=True).stdout
    labels = [line for line in out.splitlines() if line.startswith("BLAS: ")]
    assert len(labels) == 2 and out.count("| scalar while |") == 2
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    assert labels[0].endswith(f"(OPENBLAS_CORETYPE={coretype})" if coretype else "(detected)")
    assert labels[1].endswith("(detected)")
    assert os.environ.get("OPENBLAS_CORETYPE") == coretype


def test_compare_measures_the_numpy_blas_columns_in_both_configurations(monkeypatch):
    monkeypatch.setenv("COMPARE_WORKLOADS", "chain")
    text = compare.frameworks_section(1, True, False, isolated=True, blas="both")
    tables = text.split("BLAS configuration `native`")
    assert len(tables) == 2 and "BLAS configuration `env`" in tables[0]
    for table in tables:
        rows = [line for line in table.splitlines() if line.startswith("| ")]
        kernels = next(r for r in rows if r.startswith("| GEMM; BLAS kernels loaded |"))
        assert kernels.count("NumPy's BLAS; ") == 2
        assert any(r.startswith("| chain | ") for r in rows)
    assert "(detected)" in tables[1].split("| chain |")[0]
    with pytest.raises(SystemExit, match="needs --isolated"):
        compare.frameworks_section(1, True, False, isolated=False, blas="native")
