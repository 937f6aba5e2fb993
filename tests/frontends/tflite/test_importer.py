"""The TFLite importer: module structure, names and locations, NHWC at the boundaries only, a small
CNN end to end through ``model_transform`` (per-layer comparison with LiteRT), ``lamina.api.load``,
and malformed or unsupported models reported once, without a traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert")

import contextlib

from builder import ModelBuilder
from networks import conv, mobilenet_like, rnd, transformer_block

from lamina.frontends.tflite import TfliteImportError, import_tflite, parse_model
from lamina.frontends.tflite.runtime import run_litert, tflite_layout_view
from lamina.ir.context import Context
from lamina.ir.location import FileLineColLoc, NameLoc


def body_ops(module: object) -> list:
    """The ops of ``@main``'s body, in order."""
    func = module.body.first_op  # type: ignore[attr-defined]
    return list(func.regions[0].blocks[0].ops)


def test_module_names_locations_and_weights() -> None:
    module = import_tflite(mobilenet_like(), Context(handler=None), "net.tflite")
    text = str(module)
    assert '{onnx.name = "image"}' in text and '{onnx.name = "probs"}' in text
    assert "tensor<1x16x16x3xf32>" in text  # the input keeps TFLite's NHWC shape
    for op in body_ops(module)[:-1]:  # all but func.return
        loc = op.location
        assert isinstance(loc, NameLoc), op
        assert loc.child == FileLineColLoc("net.tflite", 0, 0)
    names = {op.location.name for op in body_ops(module)[:-1]}
    assert {"stem_nchw", "dw_nchw", "residual_nchw", "pool", "probs"} <= names
    # float16 weights behind DEQUANTIZE are folded into a float32 weight, no Cast
    assert "top.Cast" not in text and "f16" not in text


def test_matches_litert_and_dumps_in_tflite_layout() -> None:
    from lamina.frontends.model_io import run_top_module

    buf = mobilenet_like()
    x = rnd(1, 16, 16, 3)
    ref = run_litert(buf, {"image": x}, dump_all=True)
    got = tflite_layout_view(
        run_top_module(import_tflite(buf, Context(handler=None), "n.tflite"), {"image": x}, dump_all=True)
    )
    for name in ("stem", "dw", "residual", "pool", "logits", "probs"):
        assert got[name].shape == ref[name].shape, name
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_conv_relu_conv_has_no_permute_between_after_the_pipeline() -> None:
    from lamina.flows.transform import optimize_top

    m = ModelBuilder()
    x = m.input("x", [1, 8, 8, 4])
    a = conv(m, x, 4, 4, 8, "a", act=0)
    r = m.op("RELU", [a], [1, 8, 8, 4], "r")
    m.output(conv(m, r, 4, 4, 8, "b", act=0))
    ctx = Context(handler=None)
    module = import_tflite(m.build(), ctx, "c.tflite")
    optimize_top(module, ctx)
    ops = [
        op.name
        for op in body_ops(module)
        if op.name.startswith("top.") and op.name not in ("top.Weight", "top.None")
    ]
    assert ops == ["top.Input", "top.Permute", "top.Conv", "top.Conv", "top.Permute"] or ops == [
        "top.Input",
        "top.Permute",
        "top.Conv",
        "top.Relu",
        "top.Conv",
        "top.Permute",
    ], ops


def test_model_transform_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lamina.tools import transform

    monkeypatch.chdir(tmp_path)
    Path("net.tflite").write_bytes(mobilenet_like())
    np.savez("in.npz", image=rnd(1, 16, 16, 3))
    rc = transform.main(
        [
            "--model_def",
            "net.tflite",
            "--test_input",
            "in.npz",
            "--mlir",
            "net.mlir",
            "--tolerance",
            "0.999,0.999",
        ]
    )
    out = capsys.readouterr()
    assert rc == 0, out.out + out.err
    top, ref = np.load("net_top_outputs.npz"), np.load("net_ref_outputs.npz")
    assert top["probs"].shape == (1, 5) and top["stem"].shape == (1, 8, 8, 8)
    np.testing.assert_allclose(top["probs"], ref["probs"], rtol=1e-4, atol=1e-6)


def test_api_load(tmp_path: Path) -> None:
    import lamina.api as lm

    p = tmp_path / "net.tflite"
    p.write_bytes(mobilenet_like())
    model = lm.load(str(p))
    x = rnd(1, 16, 16, 3)
    got = model.run({"image": x})
    ref = run_litert(p.read_bytes(), {"image": x})
    np.testing.assert_allclose(got["probs"], ref["probs"], rtol=1e-4, atol=1e-6)
    with pytest.raises(lm.LaminaError, match="static shapes"):
        lm.load(str(p), input_shapes=[[1, 32, 32, 3]])


# ---- bad models ------------------------------------------------------------------------------------


def _one_op(**tweak: int) -> ModelBuilder:
    m = ModelBuilder()
    x = m.input("x", [1, 4])
    m.output(m.op("ADD", [x, m.const("c", rnd(4))], [1, 4], "y"))
    return m


def _bad_buffer() -> bytes:
    m = _one_op()
    m.tensors[1]["buffer"] = 99
    return m.build()


def _bad_tensor() -> bytes:
    m = _one_op()
    m.ops[0] = ("ADD", [0, 42], m.ops[0][2], None, b"")
    return m.build()


def _bad_version() -> bytes:
    m = _one_op()
    m.version = 2
    return m.build()


def _short_buffer() -> bytes:
    m = _one_op()
    m.buffers[1] = m.buffers[1][:8]
    return m.build()


BAD = {
    "not_tflite": (lambda: b"\x00" * 64, "no 'TFL3' file identifier"),
    "empty": (lambda: b"", "no 'TFL3' file identifier"),
    "truncated": (lambda: _one_op().build()[:120], "malformed TFLite flatbuffer"),
    "version": (_bad_version, "schema version 2"),
    "buffer_index": (_bad_buffer, "refers to buffer 99, but the model has 2 buffers"),
    "tensor_index": (_bad_tensor, "refers to tensor 42"),
    "buffer_size": (_short_buffer, "holds 8 bytes, 16 expected"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_model_is_one_clear_error(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lamina.tools import transform

    make, msg = BAD[case]
    with pytest.raises(TfliteImportError, match=msg.replace("(", r"\(")):
        parse_model(make(), "bad.tflite")
    monkeypatch.chdir(tmp_path)
    Path("bad.tflite").write_bytes(make())
    assert transform.main(["--model_def", "bad.tflite", "--mlir", "bad.mlir"]) == 1
    err = capsys.readouterr().err
    assert "bad.tflite" in err and "Traceback" not in err


def test_bytes_flipped_never_crash() -> None:
    """Random corruption of a valid model: parsed or refused with TfliteImportError, nothing else."""
    good = mobilenet_like()
    rng = np.random.default_rng(7)
    for _ in range(200):
        b = bytearray(good)
        for i in rng.integers(8, len(b), size=4):
            b[i] = int(rng.integers(0, 256))
        with contextlib.suppress(TfliteImportError):
            import_tflite(bytes(b), Context(handler=None), "fuzz.tflite")


def test_unsupported_ops_are_listed_once_with_their_tensors() -> None:
    m = ModelBuilder()
    x = m.input("x", [1, 4])
    a = m.op("HASHTABLE_LOOKUP", [x], [1, 4], "a")
    b = m.op("MyCustomOp", [a], [1, 4], "b")
    c = m.op("MyCustomOp", [b], [1, 4], "c")
    m.output(m.op("RELU", [c], [1, 4], "d"))
    with pytest.raises(TfliteImportError) as e:
        import_tflite(m.build(), Context(handler=None), "u.tflite")
    msg = str(e.value)
    assert msg.startswith("2 unsupported TFLite op(s) in 'u.tflite'")
    assert "HASHTABLE_LOOKUP: a (from x)" in msg and "custom MyCustomOp: b (from a); c (from b)" in msg
    assert e.value.unsupported.keys() == {"HASHTABLE_LOOKUP", "custom MyCustomOp"}


def test_float16_input_is_refused_clearly() -> None:
    m = ModelBuilder()
    x = m.input("x", [1, 4], np.float16)
    m.output(m.op("RELU", [x], [1, 4], "y", out_dtype=np.float16))
    with pytest.raises(TfliteImportError, match="input 'x' is float16; Lamina imports float32, integer"):
        import_tflite(m.build(), Context(handler=None), "h.tflite")


def _while_model(body_op: str = "MUL") -> ModelBuilder:
    """``x = x * 2`` (or another body op) while ``i < 3``, ``i += 1``: WHILE calling subgraph 1
    (cond) and 2 (body); outputs the final ``i`` and ``x``."""
    m = ModelBuilder()
    x = m.input("x", [1, 4])
    i0 = m.const("i0", np.array(0, np.int32))
    cond = m.subgraph("cond")
    ci, cx = cond.input("i", [], np.int32), cond.input("x", [1, 4])
    del cx
    cond.output(
        cond.op("LESS", [ci, cond.const("three", np.array(3, np.int32))], [], "more", out_dtype=np.bool_)
    )
    body = m.subgraph("body")
    bi, bx = body.input("i", [], np.int32), body.input("x", [1, 4])
    i1 = body.op("ADD", [bi, body.const("one", np.array(1, np.int32))], [], "i_next", out_dtype=np.int32)
    x1 = body.op(body_op, [bx, body.const("two", np.array(2.0, np.float32))], [1, 4], "x_next")
    body.output(i1, x1)
    outs = [m.tensor("i_out", [], np.int32), m.tensor("y", [1, 4])]
    opts = ("WhileOptions", {"CondSubgraphIndex": 1, "BodySubgraphIndex": 2})
    m.ops.append(("WHILE", [i0, x], outs, opts, b""))
    m.output(*outs)
    return m


def test_while_is_a_loop_region_matching_litert() -> None:
    """WHILE: top.Loop whose body region holds the body subgraph then the cond subgraph (the first
    cond runs before the loop); the subgraphs' tensors are named '<subgraph>/<tensor>'."""
    buf = _while_model().build()
    x = rnd(1, 4)
    ref = run_litert(buf, {"x": x})
    np.testing.assert_allclose(ref["y"], x * 8)  # three iterations
    model = parse_model(buf, "w.tflite")
    assert model.subgraph_names == ["main", "cond", "body"]
    assert [op.calls for op in model.operators] == [[1, 2]]
    assert [t.name for t in model.subgraphs[2].tensors][:2] == ["body/i", "body/x"]
    from lamina.frontends.model_io import run_top_module

    module = import_tflite(buf, Context(handler=None), "w.tflite")
    text = str(module)
    assert "top.Loop" in text
    got = run_top_module(module, {"x": x})
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-6)
    assert int(got["i_out"]) == int(ref["i_out"]) == 3


def test_if_is_an_if_region_matching_litert() -> None:
    m = ModelBuilder()
    c = m.input("c", [], np.bool_)
    x = m.input("x", [1, 4])
    then = m.subgraph("then")
    tx = then.input("x", [1, 4])
    then.output(then.op("MUL", [tx, then.const("k", np.array(3.0, np.float32))], [1, 4], "tripled"))
    other = m.subgraph("else")
    ex = other.input("x", [1, 4])
    other.output(other.op("TANH", [ex], [1, 4], "squashed"))
    y = m.tensor("y", [1, 4])
    m.ops.append(("IF", [c, x], [y], ("IfOptions", {"ThenSubgraphIndex": 1, "ElseSubgraphIndex": 2}), b""))
    m.output(y)
    buf = m.build()
    from lamina.frontends.model_io import run_top_module

    module = import_tflite(buf, Context(handler=None), "if.tflite")
    assert "top.If" in str(module)
    xv = rnd(1, 4)
    for cond in (True, False):
        feeds = {"c": np.array(cond), "x": xv}
        ref = run_litert(buf, feeds)["y"]
        np.testing.assert_allclose(run_top_module(module, feeds)["y"], ref, rtol=1e-6)


def test_other_subgraph_calls_and_recursion_are_refused_clearly() -> None:
    """CALL_ONCE is not imported (reported once, naming the subgraph it calls); a subgraph calling
    itself is refused."""
    m = ModelBuilder()
    x = m.input("x", [1, 4])
    init = m.subgraph("init")
    init.output(init.op("RELU", [init.input("z", [1, 4])], [1, 4], "r"))
    m.ops.append(("CALL_ONCE", [], [], ("CallOnceOptions", {"InitSubgraphIndex": 1}), b""))
    m.output(m.op("RELU", [x], [1, 4], "y"))
    with pytest.raises(TfliteImportError) as e:
        import_tflite(m.build(), Context(handler=None), "c.tflite")
    msg = str(e.value)
    assert "CALL_ONCE: - (from -) calling subgraph 1 'init'" in msg
    assert "Lamina imports subgraph 0, the model's main subgraph, and the subgraphs WHILE and IF call" in msg
    with pytest.raises(TfliteImportError, match="subgraph 2 calls itself"):
        import_tflite(_recursive_while().build(), Context(handler=None), "r.tflite")


def _recursive_while() -> ModelBuilder:
    """A WHILE whose body contains the same WHILE (subgraph 2 calling itself)."""
    m = _while_model()
    body = m.subgraphs[1]
    ri, rx = body.tensor("inner_i", [], np.int32), body.tensor("inner_x", [1, 4])
    opts = ("WhileOptions", {"CondSubgraphIndex": 1, "BodySubgraphIndex": 2})
    body.ops.append(("WHILE", [body.outputs[0], body.outputs[1]], [ri, rx], opts, b""))
    body.outputs = [ri, rx]
    return m


def test_call_of_a_missing_subgraph_is_one_clear_error() -> None:
    m = _while_model()
    m.ops[0] = (*m.ops[0][:3], ("WhileOptions", {"CondSubgraphIndex": 1, "BodySubgraphIndex": 7}), b"")
    with pytest.raises(
        TfliteImportError, match=r"operator 0 \(WHILE\) calls subgraph 7, but the model has 3"
    ):
        parse_model(m.build(), "w.tflite")


def test_bad_sparse_metadata_is_one_clear_error() -> None:
    m = ModelBuilder()
    x = m.input("x", [1, 8])
    w = np.eye(4, 8, dtype=np.float32)
    sw = m.sparse_const("w_sparse", w)
    dims = m.tensors[sw]["sparsity"][2]
    dims[1] = (1, 8, dims[1][2], [99] * len(dims[1][3]))  # column indices outside the tensor
    wd = m.op("DENSIFY", [sw], [4, 8], "w")
    m.output(m.op("FULLY_CONNECTED", [x, wd, -1], [1, 4], "y"))
    with pytest.raises(TfliteImportError, match="DENSIFY 'w': sparse tensor 'w_sparse': sparse indices"):
        import_tflite(m.build(), Context(handler=None), "s.tflite")


def test_transformer_block_matches_litert_layer_by_layer() -> None:
    from lamina.frontends.model_io import run_top_module

    buf = transformer_block()
    x = rnd(1, 6, 16)
    ref = run_litert(buf, {"tokens": x}, dump_all=True)
    got = run_top_module(import_tflite(buf, Context(handler=None), "t.tflite"), {"tokens": x}, dump_all=True)
    common = [k for k in ref if k in got]
    assert {"scores", "attn", "ctx", "res1", "gelu", "out"} <= set(common)
    for k in common:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_model_transform_feeds_images_in_nhwc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An image test input of a TFLite model is laid out NHWC by default (``--channel_format``)."""
    from PIL import Image

    from lamina.tools import transform

    monkeypatch.chdir(tmp_path)
    Path("net.tflite").write_bytes(mobilenet_like())
    Image.fromarray(np.random.default_rng(3).integers(0, 255, (20, 24, 3), dtype=np.uint8)).save("img.png")
    argv = ["--model_def", "net.tflite", "--test_input", "img.png", "--resize_dims", "16,16"]
    rc = transform.main(
        [*argv, "--mean", "127.5,127.5,127.5", "--scale", "0.0078,0.0078,0.0078", "--mlir", "net.mlir"]
    )
    out = capsys.readouterr()
    assert rc == 0, out.out + out.err
    assert np.load("net_in_f32.npz")["image"].shape == (1, 16, 16, 3)


def test_repeated_and_empty_tensor_names_are_made_unique() -> None:
    m = ModelBuilder()
    x = m.input("t", [1, 4])
    a = m.op("RELU", [x], [1, 4], "t")
    m.output(m.op("TANH", [a], [1, 4], ""))
    model = parse_model(m.build(), "n.tflite")
    assert [t.name for t in model.tensors] == ["t", "t_1", "tensor_2"]
    from lamina.frontends.model_io import run_top_module

    buf = m.build()
    x = rnd(1, 4)
    ref = run_litert(buf, {"t": x}, dump_all=True)
    got = run_top_module(import_tflite(buf, Context(handler=None), "n.tflite"), {"t": x}, dump_all=True)
    assert set(ref) == {"t_1", "tensor_2"}
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-6)


def test_litert_errors_are_tool_errors() -> None:
    from lamina.support.errors import ToolError

    with pytest.raises(ToolError, match="no value for input 'image'"):
        run_litert(mobilenet_like(), {}, source="net.tflite")
    with pytest.raises(ToolError, match=r"LiteRT cannot load 'junk\.tflite'"):
        run_litert(b"\0" * 64, {}, source="junk.tflite")


def test_mutated_models_through_the_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Corrupted float and full-integer models through model_transform (importer, LiteRT, the derived
    table) and model_runner: success, or exit 1 with one message; never exit 3 or a traceback, never
    a changed input."""
    from networks import mobilenet_v2_int8

    from lamina.tools import runner, transform

    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(23)
    np.savez("f.npz", image=rnd(1, 16, 16, 3))
    np.savez("q.npz", image=rng.integers(-128, 128, (1, 32, 32, 3)).astype(np.int8))
    for good, feeds in ((mobilenet_like(), "f.npz"), (mobilenet_v2_int8("int8")[0], "q.npz")):
        for k in range(12):
            b = bytearray(good)
            for i in rng.integers(8, len(b), size=3):
                b[i] = int(rng.integers(0, 256))
            Path("m.tflite").write_bytes(bytes(b))
            argv = [
                "--model_def",
                "m.tflite",
                "--test_input",
                feeds,
                "--mlir",
                f"o{k}.mlir",
                "--tolerance",
                "0,0",
            ]
            with np.errstate(all="ignore"):
                rcs = [
                    transform.main(argv),
                    runner.main(["--input", feeds, "--model", "m.tflite", "--output", f"r{k}.npz"]),
                ]
            err = capsys.readouterr().err
            assert set(rcs) <= {0, 1}, err
            assert "Traceback" not in err and "internal error" not in err, err
            assert Path("m.tflite").read_bytes() == bytes(b)


def test_model_transform_of_a_while_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The loop region survives the written .mlir (printed, re-read, interpreted) and the outputs
    match LiteRT's."""
    from lamina.tools import transform

    monkeypatch.chdir(tmp_path)
    Path("w.tflite").write_bytes(_while_model().build())
    np.savez("in.npz", x=rnd(1, 4))
    rc = transform.main(["--model_def", "w.tflite", "--test_input", "in.npz", "--mlir", "w.mlir"])
    out = capsys.readouterr()
    assert rc == 0, out.out + out.err
    assert '"top.Loop"' in Path("w.mlir").read_text()
    top, ref = np.load("w_top_outputs.npz"), np.load("w_ref_outputs.npz")
    np.testing.assert_allclose(top["y"], ref["y"], rtol=1e-6)


def test_model_runner_runs_a_tflite_on_litert_or_lamina(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """model_runner on a float .tflite: LiteRT by default, Lamina's import with --engine lamina;
    the dumps are keyed by TFLite name in TFLite's layout and agree."""
    from lamina.tools import runner

    monkeypatch.chdir(tmp_path)
    Path("net.tflite").write_bytes(mobilenet_like())
    np.savez("in.npz", image=rnd(1, 16, 16, 3))
    for extra, out in (([], "r.npz"), (["--engine", "litert"], "r2.npz"), (["--engine", "lamina"], "l.npz")):
        argv = ["--input", "in.npz", "--model", "net.tflite", "--output", out, "--dump_all_tensors"]
        assert runner.main(argv + extra) == 0
    r, r2, lam = np.load("r.npz"), np.load("r2.npz"), np.load("l.npz")
    assert set(r.files) == set(r2.files)
    common = set(r.files) & set(lam.files)  # (LiteRT also dumps the dequantized fp16 weight dw_w)
    assert {"stem", "dw", "residual", "pool", "logits", "probs"} <= common
    for k in common:
        assert lam[k].shape == r[k].shape, k
        np.testing.assert_allclose(lam[k], r[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_output_names_pick_tflite_tensors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--output_names (and load's output_names) make TFLite tensors the outputs, in TFLite's layout;
    an unknown name is one error listing some of the model's tensors."""
    import lamina.api as lm
    from lamina.tools import transform

    monkeypatch.chdir(tmp_path)
    Path("net.tflite").write_bytes(mobilenet_like())
    np.savez("in.npz", image=rnd(1, 16, 16, 3))
    argv = [
        "--model_def",
        "net.tflite",
        "--test_input",
        "in.npz",
        "--mlir",
        "n.mlir",
        "--output_names",
        "dw,logits",
    ]
    assert transform.main(argv) == 0, capsys.readouterr().err
    model = lm.load("n.mlir")
    assert model.output_names == ["dw", "logits"]
    got = lm.load("net.tflite", output_names=["dw"]).run(np.load("in.npz"))
    ref = run_litert(Path("net.tflite").read_bytes(), dict(np.load("in.npz")), dump_all=True)
    np.testing.assert_allclose(got["dw"], ref["dw"], rtol=1e-4, atol=1e-5)
    assert transform.main([*argv[:-1], "nosuch", "--mlir", "x.mlir"]) == 1
    err = capsys.readouterr().err
    assert "--output_names 'nosuch': no such tensor in the model (its tensors: 'image'" in err
