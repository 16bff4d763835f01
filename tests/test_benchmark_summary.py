"""``python -m benchmarks`` prints one table of every headline workload with its baseline:
its code path, at the tiny scale (the figures themselves mean nothing there)."""
from benchmarks.__main__ import GROUPS, format_table, main, measure


def test_every_group_yields_rows_with_positive_figures():
    rows = measure("tiny")
    assert {r.group for r in rows} == set(GROUPS)
    workloads = {r.workload for r in rows}
    for name in ("scalar loop", "cond in while", "RNN loop", "RNN forward + backward",
                 "digits MLP Adam step"):
        assert name in workloads, name
    assert all(r.ours > 0 and r.baseline > 0 and r.speedup > 0 for r in rows)
    table = format_table(rows).splitlines()
    assert len(table) == 2 + len(rows)
    assert all(line.count("|") == 8 for line in table)


def test_throughput_rows_invert_the_ratio():
    from benchmarks.__main__ import Row
    slower = Row("g", "w", "ms", 2.0, "NumPy", 1.0)
    faster = Row("g", "w", "GB/s", 2.0, "NumPy", 1.0, higher_is_better=True)
    assert slower.speedup == 0.5 and faster.speedup == 2.0


def test_command_line_prints_one_table(capsys):
    main(["--scale", "tiny", "--only", "executor,partitions"])
    out = capsys.readouterr().out
    assert out.count("| group | workload |") == 1
    assert "scalar loop" in out and "loop over 2 devices" in out
