"""ONNX Runtime back end for mean-pooling sentence-transformers models (fp32 or dynamic int8).

sentence-transformers' own ``backend="onnx"`` needs optimum, whose current release pins
transformers below 4.58 and would downgrade the project's transformers; so the model is
exported locally once with ``torch.onnx.export`` (needs the ``onnx`` package), optionally
quantised with onnxruntime's dynamic int8 quantiser, and run here with the model's own
fast tokenizer. Nothing is downloaded. The exported files are cached under ``cache_dir``.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from clustering.errors import ModelError


class OnnxEncoder:
    def __init__(self, session, tokenizer, dimension: int):
        self.session = session
        self.tokenizer = tokenizer
        self.dimension = dimension
        self._inputs = {i.name for i in session.get_inputs()}

    @classmethod
    def load(
        cls,
        model_dir: str,
        quantized: bool = False,
        cache_dir: str | Path | None = None,
        max_seq_length: int = 128,
        threads: int | None = None,
    ) -> OnnxEncoder:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        root = Path(model_dir)
        _check_mean_pooling(root)
        onnx_path = _exported(root, quantized, cache_dir)
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        tokenizer.no_padding()  # the file pads to a fixed length; batches pad to their longest text instead
        tokenizer.enable_truncation(max_seq_length)
        dimension = json.loads((root / "config.json").read_text())["hidden_size"]
        return cls(session, tokenizer, dimension)

    def get_embedding_dimension(self) -> int:
        return self.dimension

    def encode(
        self, texts: Sequence[str], batch_size: int = 128, normalize_embeddings: bool = True, **_ignored
    ) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        # length-sorted batches waste no compute on padding
        order = np.argsort([len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            encodings = self.tokenizer.encode_batch([texts[i] for i in rows])
            width = max(len(e.ids) for e in encodings)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for j, e in enumerate(encodings):
                ids[j, : len(e.ids)] = e.ids
                mask[j, : len(e.ids)] = e.attention_mask
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
            pooled = (hidden * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            out[rows] = pooled
        if normalize_embeddings:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out


def _check_mean_pooling(root: Path) -> None:
    if not root.is_dir():
        raise ModelError(
            f"the onnx back ends need a local model directory, got {str(root)!r}; "
            "save the model with SentenceTransformer.save() and point clustering.model at it"
        )
    pooling = root / "1_Pooling" / "config.json"
    if not pooling.is_file() or not json.loads(pooling.read_text()).get("pooling_mode_mean_tokens"):
        raise ModelError(
            f"the onnx back ends support mean-pooling models only; {root} is not one. "
            "Use clustering backend 'torch' for this model"
        )


def _exported(root: Path, quantized: bool, cache_dir: str | Path | None) -> Path:
    shipped = root / "onnx" / ("model_qint8_avx2.onnx" if quantized else "model.onnx")
    if shipped.is_file():
        return shipped
    tag = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    target = Path(cache_dir or Path(tempfile.gettempdir()) / "claimwatch-onnx") / tag
    target.mkdir(parents=True, exist_ok=True)
    fp32 = target / "model.onnx"
    if not fp32.is_file():
        _export(root, fp32)
    if not quantized:
        return fp32
    int8 = target / "model_qint8.onnx"
    if not int8.is_file():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        partial = target / "model_qint8.partial.onnx"
        quantize_dynamic(str(fp32), str(partial), weight_type=QuantType.QInt8, per_channel=True)
        partial.replace(int8)
    return int8


def _export(root: Path, target: Path) -> None:
    try:
        import onnx  # noqa: F401  torch's exporter needs it
    except ImportError:
        raise ModelError(
            "exporting the model to ONNX needs the onnx package: pip install onnx, or use clustering backend 'torch'"
        ) from None
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(root), local_files_only=True).eval()

    class Hidden(torch.nn.Module):  # keyword call: positional arguments differ across transformers versions
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    sample = torch.ones((2, 8), dtype=torch.long)
    axes = {name: {0: "batch", 1: "tokens"} for name in ("input_ids", "attention_mask", "token_type_ids", "hidden")}
    partial = target.with_suffix(".partial.onnx")
    torch.onnx.export(
        Hidden(model),
        (sample, sample, torch.zeros_like(sample)),
        str(partial),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["hidden"],
        dynamic_axes=axes,
        opset_version=17,
        dynamo=False,
    )
    partial.replace(target)
