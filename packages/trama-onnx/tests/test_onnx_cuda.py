"""The ``"onnxruntime:cuda"`` runtime, where the installed onnxruntime has CUDA (onnxruntime-gpu).

Marked ``gpu`` and skipped where onnxruntime offers no ``CUDAExecutionProvider``; where it is
missing, asking for the runtime is a clear error naming what is available. Results are compared
with the CPU run of the same document, within what cuBLAS's other summation order (and TF32 for
float32 matrix products, on by default on Ampere and later) allows: a wrong weight or a lost
input gives differences of order 0.1 to 1, far outside it.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import trama
from trama import INPUT, Model, Node, Parameter, Ref, Tensor, ValueFact

HAS_CUDA = "CUDAExecutionProvider" in onnxruntime.get_available_providers()


def _mlp() -> Model:
    rng = np.random.default_rng(3)
    table = {
        "root.fc.in_features": Parameter(16),
        "root.fc.out_features": Parameter(8),
        "root.fc.weight": Parameter(Tensor.from_array(rng.standard_normal((8, 16)).astype(np.float32)), True),
        "root.fc.bias": Parameter(Tensor.from_array(rng.standard_normal(8).astype(np.float32)), True),
    }
    nodes = [
        Node("root", "Sequential", {"x": Ref(INPUT, "x")}, ["y"], output_bindings={"y": Ref("root.act", "y")}),
        Node("root.fc", "Linear", {"x": Ref(INPUT, "x")}, ["y"], {k.rpartition(".")[2]: k for k in table}),
        Node("root.act", "GELU", {"x": Ref("root.fc", "y")}, ["y"]),
    ]
    return Model(["x"], [Ref("root", "y")], nodes, table, input_facts=[ValueFact("float32", ("batch", 16))])


@pytest.mark.skipif(HAS_CUDA, reason="onnxruntime has CUDA here: the runtime is available")
def test_without_cuda_the_runtime_is_listed_unavailable_and_asking_for_it_says_so() -> None:
    listed = {info.name: info for info in trama.runtimes()}
    assert listed["onnxruntime:cuda"].available is False
    with pytest.raises(trama.RuntimeNotFoundError, match="'onnxruntime:cuda' is not available on this machine"):
        trama.runtime_for_name("onnxruntime:cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs onnxruntime with the CUDA execution provider (onnxruntime-gpu)")
def test_a_document_runs_on_cuda_as_on_the_cpu() -> None:
    model = _mlp()
    on_cuda = trama.runtime_for_name("onnxruntime:cuda").prepare(model)
    on_cpu = trama.runtime_for_name("onnxruntime").prepare(model)
    for batch in (1, 7):
        x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
        (expected,) = on_cpu.run([x])
        (got,) = on_cuda.run([x])
        np.testing.assert_allclose(got, expected, rtol=2e-3, atol=2e-3)
