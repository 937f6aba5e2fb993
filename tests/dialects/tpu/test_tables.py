"""Calibration tables and qtables: TPU-MLIR's format, round trips, located errors, atomic writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lamina.dialects.tpu.tables import (
    CalibrationTable,
    CalibrationTableError,
    TensorStats,
    read_calibration_table,
    read_qtable,
    write_qtable,
)

# A table as TPU-MLIR's run_calibration writes it (after tuning), with the optional blocks its
# import-calibration-table pass reads.
TPU_MLIR_TABLE = """\
# genetated time: 2024-03-12 10:31:05.412345
# histogram number: 2048
# sample number: 100
# tune number: 5
###
# op_name    threshold    min    max
input 2.6400001 -2.1179039 2.6400001
/conv1/Conv_output_0 9.1234567 -12.0000000 11.5000000
/relu/Relu_output_0 6.5000000 0.0000000 11.5000000
/fc/Gemm_output_0 14.2500000 -9.1250000 15.0000000

#int4_th
/conv1/Conv_output_0 3.0000000 -3.4285714 3.0000000
#asym_op
/act/Gelu_output_0
#weight_scale
/conv1/Conv_output_0_weight 3 0.01 0.02 0.03
"""


def test_reads_tpu_mlir_table(tmp_path: Path) -> None:
    p = tmp_path / "resnet18_cali_table"
    p.write_text(TPU_MLIR_TABLE)
    t = read_calibration_table(str(p))
    assert list(t.thresholds) == ["input", "/conv1/Conv_output_0", "/relu/Relu_output_0", "/fc/Gemm_output_0"]
    assert t["/conv1/Conv_output_0"] == TensorStats(9.1234567, -12.0, 11.5)
    assert t.histogram_bin_num == 2048 and t.sample_num == 100 and t.tune_num == 5
    assert t.generated_time == "2024-03-12 10:31:05.412345"
    assert t.int4_thresholds["/conv1/Conv_output_0"].min == pytest.approx(-3.4285714)
    assert t.asym_ops == ["/act/Gelu_output_0"]
    assert t.weight_scales == {"/conv1/Conv_output_0_weight": [0.01, 0.02, 0.03]}
    assert "input" in t and len(t) == 4 and t.get("nope") is None


def test_round_trip(tmp_path: Path) -> None:
    t = CalibrationTable.parse(TPU_MLIR_TABLE, "x")
    out = tmp_path / "out_table"
    t.write(str(out))
    u = read_calibration_table(str(out))
    assert u.thresholds.keys() == t.thresholds.keys()
    for k in t.thresholds:
        for a, b in zip(vars(u[k]).values(), vars(t[k]).values()):
            assert a == pytest.approx(b, abs=1e-7)
    assert u.int4_thresholds.keys() == t.int4_thresholds.keys()
    assert u.asym_ops == t.asym_ops and u.weight_scales == t.weight_scales
    assert (u.histogram_bin_num, u.sample_num, u.tune_num) == (2048, 100, 5)
    text = out.read_text()
    assert text.startswith("# genetated time: ")
    assert "\n###\n# op_name    threshold    min    max\n" in text
    assert "\n/conv1/Conv_output_0 9.1234567 -12.0000000 11.5000000\n" in text
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # a normal file, not mkstemp's 0600


def test_channel_thresholds_round_trip_as_comments(tmp_path: Path) -> None:
    t = CalibrationTable.parse(TPU_MLIR_TABLE, "x")
    t.channel_thresholds["/conv1/Conv_output_0"] = (2, [0.5, 120.25, 1.0])
    out = tmp_path / "t"
    t.write(str(out))
    text = out.read_text()
    # every extension line is a comment to TPU-MLIR's reader
    assert "\n#channel_th /conv1/Conv_output_0 2 0.5000000 120.2500000 1.0000000\n" in text
    u = read_calibration_table(str(out))
    assert u.channel_thresholds == {"/conv1/Conv_output_0": (2, [0.5, 120.25, 1.0])}
    assert u.thresholds.keys() == t.thresholds.keys() and u.asym_ops == t.asym_ops


def test_crlf_and_blank_lines(tmp_path: Path) -> None:
    p = tmp_path / "t"
    p.write_bytes(b"# sample number: 3\r\n###\r\n\r\na 1.0 -1.0 1.0\r\n")
    t = read_calibration_table(str(p))
    assert t["a"] == TensorStats(1.0, -1.0, 1.0) and t.sample_num == 3


@pytest.mark.parametrize(
    ("body", "line", "msg"),
    [
        ("###\na 1.0 -1.0\n", 2, "4 fields"),
        ("###\na 1.0 -1.0 1.0\nb x -1.0 1.0\n", 3, "expected a number for threshold, got 'x'"),
        ("###\na -1.0 -1.0 1.0\n", 2, "negative"),
        ("###\na 1.0 2.0 1.0\n", 2, "greater than max"),
        ("###\na 1.0 -1.0 1.0\na 1.0 -1.0 1.0\n", 3, "duplicate entry for 'a'"),
        ("###\na nan -1.0 1.0\n", 2, "NaN"),
        ("###\na 0 -1.0 1.0\n", 2, "threshold of 'a' must be a finite number > 0, got 0"),
        ("###\na inf -1.0 1.0\n", 2, "threshold of 'a' must be a finite number > 0, got inf"),
        ("###\na -inf -1.0 1.0\n", 2, "threshold of 'a' is negative (-inf)"),
        ("###\na 1.0 -inf 1.0\n", 2, "min of 'a' must be finite, got -inf"),
        ("###\na 1.0 -1.0 1e999\n", 2, "max of 'a' must be finite, got 1e999"),
        ("#weight_scale\nw 3 0.1 0.2\n", 2, "declares 3 scale(s) but has 2"),
        ("#weight_scale\nw x 0.1\n", 2, "scale count"),
        ("#asym_op\na b\n", 2, "one op name per line"),
        ("###\n#channel_th a 2\n", 2, "at least one threshold"),
        ("###\n#channel_th a x 1.0\n", 2, "integer axis"),
        ("###\n#channel_th a 1 1.0 -2.0\n", 2, "finite and >= 0"),
        ("###\n#channel_th a 1 1.0\n#channel_th a 1 1.0\n", 3, "duplicate #channel_th"),
    ],
)
def test_located_errors(tmp_path: Path, body: str, line: int, msg: str) -> None:
    p = tmp_path / "bad_table"
    p.write_text(body)
    with pytest.raises(CalibrationTableError) as e:
        read_calibration_table(str(p))
    assert str(e.value).startswith(f"{p}:{line}: error: ")
    assert msg in str(e.value)
    assert e.value.line == line


def test_missing_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(CalibrationTableError, match="cannot read"):
        read_calibration_table(str(tmp_path / "none"))
    p = tmp_path / "bin"
    p.write_bytes(b"###\n\xff\xfe\n")
    with pytest.raises(CalibrationTableError, match=r":2: error: invalid UTF-8"):
        read_calibration_table(str(p))


def test_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "table"
    out.write_text("old contents\n")
    t = CalibrationTable(thresholds={"a": TensorStats(1.0, -1.0, 1.0)})

    def boom(*a: object, **k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        t.write(str(out))
    assert out.read_text() == "old contents\n"
    assert sorted(os.listdir(tmp_path)) == ["table"]  # no temporary left behind


QTABLE = """\
# genetated time: 2024-03-12 10:31:05
# sample number: 10
# chip: bm1684x  mix_mode: F16
###
# op_name   quantize_mode
/conv1/Conv_output_0 F16
/fc/Gemm_output_0 F32
/x BF16
"""


def test_qtable_read_write(tmp_path: Path) -> None:
    p = tmp_path / "qtable"
    p.write_text(QTABLE)
    q = read_qtable(str(p))
    assert q == {"/conv1/Conv_output_0": "F16", "/fc/Gemm_output_0": "F32", "/x": "BF16"}
    out = tmp_path / "q2"
    write_qtable(str(out), q, comments=["chip: cpu"])
    assert read_qtable(str(out)) == q
    assert "# op_name   quantize_mode\n/conv1/Conv_output_0 F16\n" in out.read_text()
    with pytest.raises(ValueError, match="unknown quantize mode"):
        write_qtable(str(tmp_path / "q3"), {"a": "F64"})
    assert not (tmp_path / "q3").exists()


@pytest.mark.parametrize(
    ("body", "line", "msg"),
    [
        ("a F16\nb\n", 2, "2 fields"),
        ("# c\na F64\n", 2, "unknown quantize mode 'F64'"),
        ("a F16\na F32\n", 2, "two modes"),
    ],
)
def test_qtable_errors(tmp_path: Path, body: str, line: int, msg: str) -> None:
    p = tmp_path / "qt"
    p.write_text(body)
    with pytest.raises(CalibrationTableError) as e:
        read_qtable(str(p))
    assert str(e.value).startswith(f"{p}:{line}: error: ") and msg in str(e.value)
