"""Flag parsing and image preprocessing (resize, letterbox, crop, mean/scale, layouts)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lamina.frontends.model_io import load_npz, save_npz
from lamina.frontends.preprocess import (
    PreprocessConfig,
    parse_floats,
    parse_shapes,
    preprocess_image,
    read_image,
    resize_bilinear,
)
from lamina.support.errors import ToolError


def test_parse_shapes() -> None:
    assert parse_shapes("[[1,3,224,224],[1,10]]") == [[1, 3, 224, 224], [1, 10]]
    assert parse_shapes("[1,3,8,8]") == [[1, 3, 8, 8]]
    for bad, msg in (
        ("[[1,3", "cannot parse"),
        ("[['a']]", "not a list of integer lists"),
        ("[[1,0]]", "must be positive"),
        ("7", "not a list"),
    ):
        with pytest.raises(ToolError, match=msg):
            parse_shapes(bad)
    assert parse_floats("[0.5, 1,2]", "--mean") == [0.5, 1.0, 2.0]
    assert parse_floats(None, "--mean") is None


def test_resize_bilinear_half_pixel() -> None:
    img = np.array([[0.0, 1.0]], np.float32)[:, :, None]  # 1x2
    out = resize_bilinear(img, 1, 4)[0, :, 0]
    np.testing.assert_allclose(out, [0.0, 0.25, 0.75, 1.0])  # as OpenCV INTER_LINEAR
    down = resize_bilinear(np.arange(16, dtype=np.float32).reshape(4, 4, 1), 2, 2)[:, :, 0]
    np.testing.assert_allclose(down, [[2.5, 4.5], [10.5, 12.5]])


def test_center_crop_after_resize() -> None:
    img = np.arange(36, dtype=np.uint8).reshape(6, 6, 1)
    cfg = PreprocessConfig(pixel_format="gray", resize_dims=[6, 6])
    x = preprocess_image(img, cfg, [1, 1, 4, 4])
    np.testing.assert_array_equal(x[0, 0], img[1:5, 1:5, 0])
    with pytest.raises(ToolError, match="smaller than the input"):
        preprocess_image(img, PreprocessConfig(resize_dims=[2, 2]), [1, 1, 4, 4])
    with pytest.raises(ToolError, match="--mean has 2 values but the input has 1 channels"):
        preprocess_image(img, PreprocessConfig(mean=[1, 2]), [1, 1, 6, 6])
    with pytest.raises(ToolError, match="4-D input"):
        preprocess_image(img, PreprocessConfig(), [1, 36])


def test_read_image_pixel_formats(tmp_path: Path) -> None:
    Image = pytest.importorskip("PIL.Image")
    rgb = np.zeros((2, 2, 3), np.uint8)
    rgb[..., 0] = 255
    Image.fromarray(rgb).save(tmp_path / "red.png")
    assert read_image(str(tmp_path / "red.png"), "rgb")[0, 0].tolist() == [255, 0, 0]
    assert read_image(str(tmp_path / "red.png"), "bgr")[0, 0].tolist() == [0, 0, 255]
    assert read_image(str(tmp_path / "red.png"), "gray").shape == (2, 2, 1)
    (tmp_path / "bad.jpg").write_bytes(b"nope")
    with pytest.raises(ToolError, match="not a readable image"):
        read_image(str(tmp_path / "bad.jpg"), "rgb")


def test_save_npz_any_key_and_atomic(tmp_path: Path) -> None:
    arrays = {"file": np.ones(2), "/conv1/Conv_output_0": np.zeros((1, 2), np.float16), "a:0": np.arange(3)}
    save_npz(str(tmp_path / "t.npz"), arrays)
    back = load_npz(str(tmp_path / "t.npz"))
    assert list(back) == list(arrays)
    assert back["/conv1/Conv_output_0"].dtype == np.float16
    with pytest.raises(ToolError, match="does not exist"):
        save_npz(str(tmp_path / "nodir" / "t.npz"), arrays)
    assert [p.name for p in tmp_path.iterdir()] == ["t.npz"]
