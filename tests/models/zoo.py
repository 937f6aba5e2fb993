"""A zoo of PyTorch-built networks, exported to ONNX, to prove the importer and the interpreter on
real architectures (no downloads: every model is built here from a fixed seed).

Models (each in a small variant for the default test run and a full-size one for ``slow`` tests
and benchmarks):

* ``resnet18``, ``resnet50`` — torchvision-style ResNets (BasicBlock / Bottleneck, BN, ReLU,
  MaxPool, global average pool, Gemm);
* ``mobilenetv2`` — inverted residuals, depthwise convolutions, ReLU6 (Clip);
* ``yolo`` — a YOLOv8-style detector: Conv+BN+SiLU, C2f blocks (Split/Concat), SPPF (MaxPool),
  nearest Upsample (Resize), decoupled head, DFL (reshape / softmax / 1x1 conv) and box decoding;
* ``bert`` — a BERT-style encoder: Gather embeddings, LayerNorm, MatMul attention with Softmax,
  Erf-GELU, attention mask applied with Where;
* ``lstm``, ``gru`` — sequence models (2-layer LSTM; bidirectional GRU) with a linear head;
* ``if_model`` — a model with an ``If`` whose branches read outer tensors (built with onnx.helper).

``export(name, variant)`` returns the path of the cached ``.onnx`` file (under
``$LAMINA_TEST_CACHE`` or ``~/.cache/lamina-tests/zoo``; the cache key includes this file's hash and
the torch version) and ``inputs(name, variant)`` deterministic example inputs.

Run ``python tests/models/zoo.py [names...] [--full]`` to print the interpreter-vs-onnxruntime
comparison table.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CACHE_ENV = "LAMINA_TEST_CACHE"


def cache_dir() -> str:
    d = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "lamina-tests", "zoo")
    os.makedirs(d, exist_ok=True)
    return d


# ---- PyTorch model definitions (imported lazily: torch is optional) ---------------------------


def _torch_models() -> dict[str, Callable[..., Any]]:
    import torch
    from torch import nn
    from torch.nn import functional as fn

    def randomize_bn(m: nn.Module) -> None:
        """Non-trivial BatchNorm statistics so that folding/execution bugs show."""
        g = torch.Generator().manual_seed(1)
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                c = mod.num_features
                mod.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
                mod.running_var.copy_(torch.rand(c, generator=g) + 0.5)
                mod.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
                mod.bias.data.copy_(torch.randn(c, generator=g) * 0.1)

    # -- ResNet --
    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, cin: int, c: int, stride: int = 1) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)
            self.down = None
            if stride != 1 or cin != c:
                self.down = nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False), nn.BatchNorm2d(c))

        def forward(self, x: Any) -> Any:
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin: int, c: int, stride: int = 1) -> None:
            super().__init__()
            out = c * 4
            self.conv1 = nn.Conv2d(cin, c, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)
            self.conv3 = nn.Conv2d(c, out, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out)
            self.down = None
            if stride != 1 or cin != out:
                self.down = nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False), nn.BatchNorm2d(out))

        def forward(self, x: Any) -> Any:
            y = torch.relu(self.bn1(self.conv1(x)))
            y = torch.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class ResNet(nn.Module):
        def __init__(self, block: Any, layers: list[int], num_classes: int = 1000) -> None:
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
            )
            blocks: list[nn.Module] = []
            cin = 64
            for i, n in enumerate(layers):
                c = 64 * 2**i
                for j in range(n):
                    blocks.append(block(cin, c, 2 if (j == 0 and i > 0) else 1))
                    cin = c * block.expansion
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(cin, num_classes)

        def forward(self, x: Any) -> Any:
            x = self.blocks(self.stem(x))
            return self.fc(torch.flatten(fn.adaptive_avg_pool2d(x, 1), 1))

    # -- MobileNetV2 --
    def conv_bn(cin: int, cout: int, k: int, s: int, groups: int = 1, act: bool = True) -> nn.Module:
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, k, s, (k - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
        ]
        if act:
            layers.append(nn.ReLU6())
        return nn.Sequential(*layers)

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, t: int) -> None:
            super().__init__()
            hid = cin * t
            layers = [] if t == 1 else [conv_bn(cin, hid, 1, 1)]
            layers += [conv_bn(hid, hid, 3, stride, groups=hid), conv_bn(hid, cout, 1, 1, act=False)]
            self.body = nn.Sequential(*layers)
            self.res = stride == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            return x + self.body(x) if self.res else self.body(x)

    class MobileNetV2(nn.Module):
        cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
               (6, 320, 1, 1)]  # fmt: skip

        def __init__(self, num_classes: int = 1000) -> None:
            super().__init__()
            layers: list[nn.Module] = [conv_bn(3, 32, 3, 2)]
            cin = 32
            for t, c, n, s in self.cfg:
                for i in range(n):
                    layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                    cin = c
            layers.append(conv_bn(cin, 1280, 1, 1))
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

        def forward(self, x: Any) -> Any:
            x = self.features(x)
            return self.classifier(x.mean((2, 3)))

    # -- YOLOv8-style detector --
    class Conv(nn.Module):
        def __init__(self, cin: int, cout: int, k: int = 1, s: int = 1) -> None:
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, k, s, k // 2, bias=False)
            self.bn = nn.BatchNorm2d(cout)
            self.act = nn.SiLU()

        def forward(self, x: Any) -> Any:
            return self.act(self.bn(self.conv(x)))

    class YBottleneck(nn.Module):
        def __init__(self, c: int, shortcut: bool) -> None:
            super().__init__()
            self.cv1 = Conv(c, c, 3)
            self.cv2 = Conv(c, c, 3)
            self.add = shortcut

        def forward(self, x: Any) -> Any:
            y = self.cv2(self.cv1(x))
            return x + y if self.add else y

    class C2f(nn.Module):
        def __init__(self, cin: int, cout: int, n: int = 1, shortcut: bool = True) -> None:
            super().__init__()
            self.c = cout // 2
            self.cv1 = Conv(cin, 2 * self.c, 1)
            self.cv2 = Conv((2 + n) * self.c, cout, 1)
            self.m = nn.ModuleList(YBottleneck(self.c, shortcut) for _ in range(n))

        def forward(self, x: Any) -> Any:
            y = list(self.cv1(x).split((self.c, self.c), 1))
            y.extend(m(y[-1]) for m in self.m)
            return self.cv2(torch.cat(y, 1))

    class SPPF(nn.Module):
        def __init__(self, cin: int, cout: int, k: int = 5) -> None:
            super().__init__()
            c = cin // 2
            self.cv1 = Conv(cin, c, 1)
            self.cv2 = Conv(c * 4, cout, 1)
            self.m = nn.MaxPool2d(k, 1, k // 2)

        def forward(self, x: Any) -> Any:
            y = [self.cv1(x)]
            y.extend(self.m(y[-1]) for _ in range(3))
            return self.cv2(torch.cat(y, 1))

    class Detect(nn.Module):
        def __init__(self, nc: int, ch: tuple[int, ...], strides: tuple[int, ...], reg_max: int = 16) -> None:
            super().__init__()
            self.nc, self.reg_max, self.strides = nc, reg_max, strides
            c2, c3 = max(16, ch[0] // 4, reg_max * 4), max(ch[0], min(nc, 100))
            self.cv2 = nn.ModuleList(
                nn.Sequential(Conv(x, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * reg_max, 1)) for x in ch
            )
            self.cv3 = nn.ModuleList(
                nn.Sequential(Conv(x, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for x in ch
            )
            self.dfl = nn.Conv2d(reg_max, 1, 1, bias=False).requires_grad_(False)
            self.dfl.weight.data[:] = torch.arange(reg_max, dtype=torch.float32).view(1, reg_max, 1, 1)

        def forward(self, feats: list[Any]) -> Any:
            b = feats[0].shape[0]
            outs, anchors, stride_t = [], [], []
            for i, x in enumerate(feats):
                outs.append(
                    torch.cat((self.cv2[i](x), self.cv3[i](x)), 1).view(b, 4 * self.reg_max + self.nc, -1)
                )
                h, w = x.shape[2], x.shape[3]
                sy, sx = torch.meshgrid(torch.arange(h) + 0.5, torch.arange(w) + 0.5, indexing="ij")
                anchors.append(torch.stack((sx, sy), -1).view(-1, 2))
                stride_t.append(torch.full((h * w, 1), float(self.strides[i])))
            y = torch.cat(outs, 2)
            box, cls = y.split((4 * self.reg_max, self.nc), 1)
            a = box.shape[2]
            dist = self.dfl(box.view(b, 4, self.reg_max, a).transpose(2, 1).softmax(1)).view(b, 4, a)
            anc = torch.cat(anchors).transpose(0, 1).unsqueeze(0)
            st = torch.cat(stride_t).transpose(0, 1).unsqueeze(0)
            lt, rb = dist.chunk(2, 1)
            x1y1, x2y2 = anc - lt, anc + rb
            xywh = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * st
            return torch.cat((xywh, cls.sigmoid()), 1)

    class Yolo(nn.Module):
        def __init__(self, w: int = 16, nc: int = 80) -> None:
            super().__init__()
            self.b0 = nn.Sequential(Conv(3, w, 3, 2), Conv(w, 2 * w, 3, 2), C2f(2 * w, 2 * w, 1),
                                    Conv(2 * w, 4 * w, 3, 2), C2f(4 * w, 4 * w, 2))  # fmt: skip
            self.b1 = nn.Sequential(Conv(4 * w, 8 * w, 3, 2), C2f(8 * w, 8 * w, 2))
            self.b2 = nn.Sequential(Conv(8 * w, 16 * w, 3, 2), C2f(16 * w, 16 * w, 1), SPPF(16 * w, 16 * w))
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.n1 = C2f(24 * w, 8 * w, 1, False)
            self.n2 = C2f(12 * w, 4 * w, 1, False)
            self.d1 = Conv(4 * w, 4 * w, 3, 2)
            self.n3 = C2f(12 * w, 8 * w, 1, False)
            self.d2 = Conv(8 * w, 8 * w, 3, 2)
            self.n4 = C2f(24 * w, 16 * w, 1, False)
            self.head = Detect(nc, (4 * w, 8 * w, 16 * w), (8, 16, 32))

        def forward(self, x: Any) -> Any:
            p3 = self.b0(x)
            p4 = self.b1(p3)
            p5 = self.b2(p4)
            t4 = self.n1(torch.cat((self.up(p5), p4), 1))
            o3 = self.n2(torch.cat((self.up(t4), p3), 1))
            o4 = self.n3(torch.cat((self.d1(o3), t4), 1))
            o5 = self.n4(torch.cat((self.d2(o4), p5), 1))
            return self.head([o3, o4, o5])

    # -- BERT-style encoder --
    class BertLayer(nn.Module):
        def __init__(self, h: int, heads: int, ff: int) -> None:
            super().__init__()
            self.heads, self.dh = heads, h // heads
            self.q, self.k, self.v, self.o = (nn.Linear(h, h) for _ in range(4))
            self.ln1 = nn.LayerNorm(h, eps=1e-12)
            self.ff1 = nn.Linear(h, ff)
            self.ff2 = nn.Linear(ff, h)
            self.ln2 = nn.LayerNorm(h, eps=1e-12)
            self.gelu = nn.GELU()  # exact: Erf

        def split(self, x: Any) -> Any:
            b, s, _ = x.shape
            return x.view(b, s, self.heads, self.dh).transpose(1, 2)

        def forward(self, x: Any, mask: Any) -> Any:
            b, s, h = x.shape
            q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
            att = torch.matmul(q, k.transpose(-1, -2)) / (self.dh**0.5)
            att = torch.where(mask, att, torch.tensor(-1e9))
            ctx = torch.matmul(att.softmax(-1), v).transpose(1, 2).reshape(b, s, h)
            x = self.ln1(x + self.o(ctx))
            return self.ln2(x + self.ff2(self.gelu(self.ff1(x))))

    class Bert(nn.Module):
        def __init__(self, vocab: int, h: int, layers: int, heads: int, ff: int, max_pos: int = 512) -> None:
            super().__init__()
            self.word = nn.Embedding(vocab, h)
            self.pos = nn.Embedding(max_pos, h)
            self.typ = nn.Embedding(2, h)
            self.ln = nn.LayerNorm(h, eps=1e-12)
            self.layers = nn.ModuleList(BertLayer(h, heads, ff) for _ in range(layers))
            self.pool = nn.Linear(h, h)

        def forward(self, ids: Any, mask: Any) -> Any:
            s = ids.shape[1]
            pos = torch.arange(s).unsqueeze(0)
            x = self.ln(self.word(ids) + self.pos(pos) + self.typ(torch.zeros_like(ids)))
            m = (mask > 0)[:, None, None, :]
            for layer in self.layers:
                x = layer(x, m)
            return x, torch.tanh(self.pool(x[:, 0]))

    # -- sequence models --
    class LstmModel(nn.Module):
        def __init__(self, f: int, h: int) -> None:
            super().__init__()
            self.rnn = nn.LSTM(f, h, num_layers=2, batch_first=True)
            self.fc = nn.Linear(h, 10)

        def forward(self, x: Any) -> Any:
            y, (hn, _cn) = self.rnn(x)
            return self.fc(y), hn

    class GruModel(nn.Module):
        def __init__(self, f: int, h: int) -> None:
            super().__init__()
            self.rnn = nn.GRU(f, h, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(2 * h, 10)

        def forward(self, x: Any) -> Any:
            y, hn = self.rnn(x)
            return self.fc(y), hn

    return {
        "ResNet": lambda layers, block: ResNet(
            {"basic": BasicBlock, "bottleneck": Bottleneck}[block], layers
        ),
        "MobileNetV2": MobileNetV2,
        "Yolo": Yolo,
        "Bert": Bert,
        "LstmModel": LstmModel,
        "GruModel": GruModel,
        "randomize_bn": randomize_bn,
    }


# ---- the zoo -----------------------------------------------------------------------------------


@dataclass
class Spec:
    """How to build one model: ``make(variant)`` returns (torch module, example inputs as numpy,
    input names, output names); ``opset`` of the export."""

    make: Callable[[str], tuple[Any, list[np.ndarray], list[str], list[str]]]
    opset: int = 17
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _image(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _resnet(layers: list[int], block: str) -> Callable[[str], Any]:
    def make(variant: str) -> Any:
        m = _torch_models()
        net = m["ResNet"](layers, block)
        m["randomize_bn"](net)
        size = 64 if variant == "small" else 224
        return net, [_image((1, 3, size, size))], ["input"], ["logits"]

    return make


def _mobilenet(variant: str) -> Any:
    m = _torch_models()
    net = m["MobileNetV2"]()
    m["randomize_bn"](net)
    size = 64 if variant == "small" else 224
    return net, [_image((1, 3, size, size))], ["input"], ["logits"]


def _yolo(variant: str) -> Any:
    m = _torch_models()
    net = m["Yolo"](8 if variant == "small" else 16)
    m["randomize_bn"](net)
    size = 64 if variant == "small" else 640
    return net, [_image((1, 3, size, size))], ["images"], ["output0"]


def bert_inputs(batch: int, seq: int, vocab: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    mask[:, seq - seq // 4 :] = 0  # padded tail
    return [ids, mask]


def _bert(variant: str) -> Any:
    m = _torch_models()
    if variant == "small":
        net = m["Bert"](vocab=1000, h=64, layers=2, heads=4, ff=256)
        ins = bert_inputs(2, 16, 1000)
    else:  # BERT-base shaped
        net = m["Bert"](vocab=30522, h=768, layers=12, heads=12, ff=3072)
        ins = bert_inputs(1, 128, 30522)
    return net, ins, ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"]


def _lstm(variant: str) -> Any:
    m = _torch_models()
    f, h, t = (16, 32, 12) if variant == "small" else (80, 256, 100)
    return m["LstmModel"](f, h), [_image((2, t, f))], ["x"], ["y", "h_n"]


def _gru(variant: str) -> Any:
    m = _torch_models()
    f, h, t = (16, 32, 12) if variant == "small" else (80, 256, 100)
    return m["GruModel"](f, h), [_image((2, t, f))], ["x"], ["y", "h_n"]


ZOO: dict[str, Spec] = {
    "resnet18": Spec(_resnet([2, 2, 2, 2], "basic")),
    "resnet50": Spec(_resnet([3, 4, 6, 3], "bottleneck")),
    "mobilenetv2": Spec(_mobilenet),
    "yolo": Spec(_yolo),
    "bert": Spec(_bert),
    "lstm": Spec(_lstm),
    "gru": Spec(_gru),
    "if_model": Spec(lambda v: None, opset=17, notes="built with onnx.helper"),
}
TORCH_MODELS = [k for k in ZOO if k != "if_model"]


def _source_hash() -> str:
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()[:10]


def _if_model() -> tuple[Any, list[np.ndarray]]:
    """``y = Relu(If(ReduceSum(x) > 0, then: Conv(x, W) + b, else: Sigmoid(x) * s))``: both branches
    read tensors of the enclosing graph (x, W, b, s)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, 3, 1, 1)).astype(np.float32)
    s = rng.standard_normal((1, 3, 1, 1)).astype(np.float32)
    then_g = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], name="then_conv"),
            helper.make_node("Add", ["c", "b"], ["then_out"], name="then_add"),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, [1, 3, 8, 8])],
    )
    else_g = helper.make_graph(
        [
            helper.make_node("Sigmoid", ["x"], ["sg"], name="else_sigmoid"),
            helper.make_node("Mul", ["sg", "s"], ["else_out"], name="else_mul"),
        ],
        "else",
        [],
        [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, [1, 3, 8, 8])],
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0, name="sum"),
        helper.make_node("Greater", ["total", "zero"], ["cond"], name="positive"),
        helper.make_node("If", ["cond"], ["branch"], then_branch=then_g, else_branch=else_g, name="if"),
        helper.make_node("Relu", ["branch"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "if_model",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])],
        initializer=[
            numpy_helper.from_array(w, "W"),
            numpy_helper.from_array(b, "b"),
            numpy_helper.from_array(s, "s"),
            numpy_helper.from_array(np.zeros((), np.float32), "zero"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    x = np.abs(_image((1, 3, 8, 8), 5))
    return model, [x, -x]


def export(name: str, variant: str = "small", directory: str | None = None) -> str:
    """Build and export model ``name`` (cached); returns the ``.onnx`` path."""
    d = directory or cache_dir()
    if name == "if_model":
        path = os.path.join(d, f"if_model-{_source_hash()}.onnx")
        if not os.path.exists(path):
            import onnx

            onnx.save(_if_model()[0], path + ".tmp")
            os.replace(path + ".tmp", path)
        return path
    import torch

    path = os.path.join(d, f"{name}-{variant}-{_source_hash()}-torch{torch.__version__}.onnx")
    if os.path.exists(path):
        return path
    spec = ZOO[name]
    torch.manual_seed(0)
    with torch.no_grad():
        net, ins, in_names, out_names = spec.make(variant)
        net.eval()
        args = tuple(torch.from_numpy(a) for a in ins)
        tmp = path + f".{os.getpid()}.tmp"
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                net,
                args,
                tmp,
                dynamo=False,
                opset_version=spec.opset,
                input_names=in_names,
                output_names=out_names,
                do_constant_folding=True,
            )
    os.replace(tmp, path)
    return path


def inputs(name: str, variant: str = "small") -> list[list[np.ndarray]]:
    """Example input sets (each a list of arrays in graph input order)."""
    if name == "if_model":
        return [[a] for a in _if_model()[1]]
    if name == "bert":
        return [bert_inputs(2, 16, 1000) if variant == "small" else bert_inputs(1, 128, 30522)]
    if name in ("lstm", "gru"):
        t, f = (12, 16) if variant == "small" else (100, 80)
        return [[_image((2, t, f))]]
    size = {"small": 64}.get(variant, 640 if name == "yolo" else 224)
    return [[_image((1, 3, size, size))]]


# ---- comparison --------------------------------------------------------------------------------


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a64 = np.asarray(a, dtype=np.float64).ravel()
    b64 = np.asarray(b, dtype=np.float64).ravel()
    na, nb = np.linalg.norm(a64), np.linalg.norm(b64)
    if na == 0 and nb == 0:
        return 1.0
    return float(a64 @ b64 / (na * nb)) if na and nb else 0.0


def compare(name: str, variant: str = "small") -> list[dict[str, Any]]:
    """Import, verify, run with the interpreter and with onnxruntime; per output: cosine, max abs err."""
    from lamina.execution import Interpreter
    from lamina.frontends.onnx import import_onnx, load_model
    from lamina.frontends.onnx.testing import run_onnxruntime
    from lamina.ir.context import Context
    from lamina.ir.verifier import verify

    path = export(name, variant)
    model = load_model(path)
    ctx = Context()
    module = import_onnx(path, ctx)
    if not verify(module, ctx):
        raise AssertionError(f"{name}: the imported module does not verify")
    interp = Interpreter(module)
    rows = []
    for k, ins in enumerate(inputs(name, variant)):
        feeds = dict(zip(interp.input_names, ins))
        ref = run_onnxruntime(model, feeds)
        got = interp.run(feeds)
        for out_name, r in ref.items():
            g = got[out_name]
            rows.append(
                {
                    "model": name,
                    "input_set": k,
                    "output": out_name,
                    "shape": tuple(r.shape),
                    "shape_ok": tuple(np.shape(g)) == tuple(r.shape),
                    "cosine": cosine(g, r) if np.shape(g) == r.shape else 0.0,
                    "max_abs_err": float(np.max(np.abs(np.asarray(g, np.float64) - r)))
                    if np.shape(g) == r.shape and r.size
                    else 0.0,
                }
            )
    return rows


def main(argv: list[str]) -> int:
    full = "--full" in argv
    names = [a for a in argv if not a.startswith("-")] or list(ZOO)
    print("| model | variant | output | shape | cosine | max abs err |")
    print("|---|---|---|---|---|---|")
    worst = 1.0
    for n in names:
        for r in compare(n, "full" if full and n != "if_model" else "small"):
            worst = min(worst, r["cosine"])
            print(
                f"| {n} | {'full' if full else 'small'} | {r['output']}[{r['input_set']}] | "
                f"{'x'.join(map(str, r['shape']))} | {r['cosine']:.9f} | {r['max_abs_err']:.3g} |"
            )
    return 0 if worst >= 0.99999 else 1


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    raise SystemExit(main(sys.argv[1:]))
