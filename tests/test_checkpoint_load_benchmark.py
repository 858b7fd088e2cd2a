"""Smoke test of benchmarks/checkpoint_load.py at a toy size (no timing asserted)."""
from __future__ import annotations

from benchmarks import checkpoint_load as bench


def test_measure_gives_one_row_per_count_with_a_ratio(capsys) -> None:
    rows = bench.measure([3, 7], reps=1)
    assert [r["arrays"] for r in rows] == ["3", "7"]
    assert all(float(r["ratio"]) > 0 and float(r["tr.load ms"]) > 0 for r in rows)
    assert bench.main(["--counts", "5", "--reps", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| arrays |") and out[2].startswith("| 5 |")
