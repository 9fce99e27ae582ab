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
from test_onnx_runtime import mlp

import trama

HAS_CUDA = "CUDAExecutionProvider" in onnxruntime.get_available_providers()


@pytest.mark.skipif(HAS_CUDA, reason="onnxruntime has CUDA here: the runtime is available")
def test_without_cuda_the_runtime_is_listed_unavailable_and_asking_for_it_says_so() -> None:
    listed = {info.name: info for info in trama.runtimes()}
    assert listed["onnxruntime:cuda"].available is False
    with pytest.raises(trama.RuntimeNotFoundError, match="'onnxruntime:cuda' is not available on this machine"):
        trama.runtime_for_name("onnxruntime:cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs onnxruntime with the CUDA execution provider (onnxruntime-gpu)")
def test_a_document_runs_on_cuda_as_on_the_cpu() -> None:
    model = mlp()  # test_onnx_runtime's: a Linear and a ReLU, batch symbolic
    on_cuda = trama.runtime_for_name("onnxruntime:cuda").prepare(model)
    on_cpu = trama.runtime_for_name("onnxruntime").prepare(model)
    for batch in (1, 7):
        x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
        (expected,) = on_cpu.run([x])
        (got,) = on_cuda.run([x])
        np.testing.assert_allclose(got, expected, rtol=2e-3, atol=2e-3)
