"""Every zoo model lowered to ONNX by trama-onnx: checked, named, and run by onnxruntime.

For each zoo capture (the document the other zoo tests share), ``trama_onnx.lower`` gives an
ONNX model that passes ``onnx.checker``'s full check (``lower`` runs it), whose nodes are named by
trama node ids and whose composites are ONNX local functions, and the ``"onnxruntime"`` runtime
runs the document within 1e-4 of eager torch's largest magnitude, as the capture test asks of the
other runtimes. :data:`realworld.onnx_status.NOT_LOWERED` lists, strictly, the models that do not
lower yet and the op each lacks. Other sizes are run in ``test_zoo_dynamic.py``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import torch

import trama
from realworld.captures import ZooCapture
from realworld.onnx_status import NOT_LOWERED

trama_onnx = pytest.importorskip("trama_onnx")


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, (tuple, list)):
        return [item for part in value for item in _tensors(part)]
    if isinstance(value, dict):
        return [item for part in value.values() for item in _tensors(part)]
    return [value]


def test_lowers_to_checked_onnx_and_runs_in_onnxruntime(zoo_capture: ZooCapture) -> None:
    entry, model, document = zoo_capture.entry, zoo_capture.model, zoo_capture.document
    assert document is not None, zoo_capture.error
    missing = NOT_LOWERED.get(entry.name)
    if missing is not None:
        with pytest.raises(trama.TramaError) as caught:
            trama_onnx.lower(document)
        assert re.search(missing, str(caught.value)), str(caught.value)
        return
    proto = trama_onnx.lower(document)  # onnx.checker's full check included
    ids = {node.id for node in document.nodes}
    outside = [node.name for node in proto.graph.node if node.name.split("#")[0] not in ids]
    assert outside == [], "the main graph's nodes are named by trama node ids (a second ONNX node of one: id#k)"
    if any(node.output_bindings is not None for node in document.nodes if node.parent is not None):
        assert proto.functions, "composites below the root are ONNX functions"
    if entry.name == "hf_llama":  # what Netron or Model Explorer shows: the decoder layers as calls
        functions = {function.name: function for function in proto.functions}
        layers = [node for node in functions["ModuleList"].node if node.domain == "trama.fn"]
        assert [(node.name, node.op_type) for node in layers] == [
            ("0", "LlamaDecoderLayer"),
            ("1", "LlamaDecoderLayer"),
        ]
        inside = {node.name for node in functions["LlamaDecoderLayer"].node}
        assert {"input_layernorm", "self_attn", "post_attention_layernorm", "mlp"} <= inside
    args, kwargs = entry.args_kwargs()
    inputs = [kwargs[name] for name in entry.input_names] if kwargs else list(args)
    with torch.no_grad():
        expected = _tensors(model(*args, **kwargs))
    outputs = trama.runtime_for_name("onnxruntime").prepare(document).run([value.numpy() for value in inputs])
    assert len(outputs) == len(expected)
    for have, want in zip(outputs, expected, strict=True):
        have_array = np.asarray(have)
        assert have_array.shape == tuple(want.shape)
        scale = max(1.0, float(want.abs().max()))
        difference = float(np.max(np.abs(have_array.astype(np.float64) - want.double().numpy()))) if want.numel() else 0
        assert difference <= 1e-4 * scale, f"{difference:.3g} (scale {scale:.3g})"
