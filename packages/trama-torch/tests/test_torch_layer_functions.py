"""The layer_functions ops in trama-torch: models that call ``F.linear``, ``F.conv2d``,
``F.batch_norm``, ``F.layer_norm``, ``torch.addmm``… with their own parameters are captured into
the function ops (weights as ports fed by ``constant`` nodes), import back into modules that call
the very same torch functions (outputs ``torch.equal`` to the model's), and run on every runtime
within 1e-5. The modules ``Conv3d``, ``ConvTranspose1d`` and ``BatchNorm3d`` are leaves both ways.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trama
from trama import ExportError

RUNTIMES = ("numpy", "torch:cpu", "jax:cpu")

#: torch warns that it copies the input for an even kernel with padding "same"; that is its business.
SAME_PADDING_COPIES = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")


class Calls(nn.Module):
    """A module whose ``forward`` is ``function(self, x)``: the layer functions called with the
    module's own parameters and buffers, as timm's and transformers' layers do."""

    def __init__(self, function: Callable[[Any, torch.Tensor], torch.Tensor], **tensors: torch.Tensor) -> None:
        super().__init__()
        self.function = function
        for name, value in tensors.items():
            if value.is_floating_point() and not name.startswith("running"):
                self.register_parameter(name, nn.Parameter(value))
            else:
                self.register_buffer(name, value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(self, x)


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


#: name -> (module, example input, the catalog op the document must hold)
MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[], torch.Tensor], str]] = {
    "linear": (
        lambda: Calls(lambda m, x: F.linear(x, m.w, m.b), w=randn(3, 4), b=randn(3)),
        lambda: randn(2, 5, 4),
        "linear",
    ),
    "linear_no_bias": (lambda: Calls(lambda m, x: F.linear(x, m.w), w=randn(3, 4)), lambda: randn(4), "linear"),
    "gpt2_conv1d": (
        lambda: Calls(
            lambda m, x: torch.addmm(m.b, x.view(-1, x.size(-1)), m.w).view(2, 3, 5), w=randn(4, 5), b=randn(5)
        ),
        lambda: randn(2, 3, 4),
        "addmm",
    ),
    "addmm_scaled": (
        lambda: Calls(lambda m, x: torch.addmm(m.b, x, m.w, beta=0.5, alpha=2), w=randn(4, 5), b=randn(3, 1)),
        lambda: randn(3, 4),
        "addmm",
    ),
    "bilinear": (
        lambda: Calls(lambda m, x: F.bilinear(x, x[..., :2], m.w, m.b), w=randn(3, 4, 2), b=randn(3)),
        lambda: randn(2, 4),
        "bilinear",
    ),
    "conv1d": (
        lambda: Calls(lambda m, x: F.conv1d(x, m.w, None, 2, 1), w=randn(4, 3, 3)),
        lambda: randn(2, 3, 9),
        "conv1d",
    ),
    "conv2d": (
        lambda: Calls(
            lambda m, x: F.conv2d(x, m.w, m.b, padding=1, groups=2, dilation=(1, 2)), w=randn(4, 1, 3, 3), b=randn(4)
        ),
        lambda: randn(1, 2, 6, 7),
        "conv2d",
    ),
    "conv2d_same": (
        lambda: Calls(lambda m, x: F.conv2d(x, m.w, padding="same"), w=randn(2, 2, 2, 3)),
        lambda: randn(1, 2, 5, 5),
        "conv2d",
    ),
    "conv3d": (
        lambda: Calls(lambda m, x: F.conv3d(x, m.w, m.b, stride=(1, 2, 1)), w=randn(2, 3, 2, 2, 1), b=randn(2)),
        lambda: randn(1, 3, 3, 5, 2),
        "conv3d",
    ),
    "conv_transpose1d": (
        lambda: Calls(
            lambda m, x: F.conv_transpose1d(x, m.w, m.b, stride=2, output_padding=1), w=randn(3, 2, 3), b=randn(2)
        ),
        lambda: randn(2, 3, 4),
        "conv_transpose1d",
    ),
    "conv_transpose2d": (
        lambda: Calls(lambda m, x: F.conv_transpose2d(x, m.w, None, 2, 1, 1, 2), w=randn(4, 1, 3, 3)),
        lambda: randn(1, 4, 3, 3),
        "conv_transpose2d",
    ),
    "convolution": (  # aten.convolution, the op under torch's conv functions, called directly
        lambda: Calls(
            lambda m, x: torch.convolution(x, m.w, m.b, [1, 2], [1, 0], [1, 1], False, [0, 0], 1),
            w=randn(3, 2, 2, 2),
            b=randn(3),
        ),
        lambda: randn(1, 2, 4, 5),
        "conv2d",
    ),
    "convolution_transposed": (
        lambda: Calls(lambda m, x: torch.convolution(x, m.w, None, [2], [1], [1], True, [1], 1), w=randn(2, 3, 3)),
        lambda: randn(1, 2, 4),
        "conv_transpose1d",
    ),
    "batch_norm_eval": (
        lambda: Calls(
            lambda m, x: F.batch_norm(x, m.running_mean, m.running_var, m.w, m.b, False, 0.1, 1e-3),
            running_mean=randn(3),
            running_var=torch.rand(3) + 0.5,
            w=randn(3),
            b=randn(3),
        ),
        lambda: randn(2, 3, 4, 4),
        "batch_norm",
    ),
    "batch_norm_batch_statistics": (
        lambda: Calls(lambda m, x: F.batch_norm(x, None, None, m.w, None, True), w=randn(3)),
        lambda: randn(2, 3, 5),
        "batch_norm",
    ),
    "layer_norm_channels_first": (  # ConvNeXt's LayerNorm2d: permute, layer norm, permute back
        lambda: Calls(
            lambda m, x: F.layer_norm(x.permute(0, 2, 3, 1), (3,), m.w, m.b, 1e-6).permute(0, 3, 1, 2),
            w=randn(3),
            b=randn(3),
        ),
        lambda: randn(2, 3, 4, 4),
        "layer_norm",
    ),
    "group_norm": (
        lambda: Calls(lambda m, x: F.group_norm(x, 2, m.w, m.b, 1e-5), w=randn(4), b=randn(4)),
        lambda: randn(2, 4, 3),
        "group_norm",
    ),
    "rms_norm": (lambda: Calls(lambda m, x: F.rms_norm(x, (5,), m.w), w=randn(5)), lambda: randn(2, 3, 5), "rms_norm"),
    "embedding": (
        lambda: Calls(lambda m, x: F.embedding(x, m.w, padding_idx=-1), w=randn(6, 3)),
        lambda: torch.tensor([[0, 5, 2], [1, 1, 4]]),
        "embedding",
    ),
}


@SAME_PADDING_COPIES
@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_model_calling_the_function_exports_imports_and_runs_everywhere(name: str) -> None:
    build, example, op = MODELS[name]
    torch.manual_seed(0)
    model = build().eval()
    x = example()
    document = trama.loads(trama.dumps(trama.export_model(model, inputs=["x"], outputs=["y"], example_inputs=(x,))))
    ops = [node.op for node in document.nodes]
    assert op in ops, ops
    assert "constant" in ops  # the weights: constant nodes wired to the op's ports
    with torch.no_grad():
        want = model(x)
        back = trama.import_model(document, registry=trama.registry("torch"))
        got = back(x)
    assert got.dtype == want.dtype
    assert torch.equal(got, want)  # the same torch function with the same arguments
    for runtime in RUNTIMES:
        result = trama.runtime_for_name(runtime).prepare(document).run([x.numpy()])[0]
        value = result.detach().cpu().numpy() if isinstance(result, torch.Tensor) else np.asarray(result)
        np.testing.assert_allclose(value, want.numpy(), rtol=1e-5, atol=1e-5, err_msg=runtime)


def test_the_ports_are_wired_from_constants_and_an_absent_bias_stays_unconnected() -> None:
    model = Calls(lambda m, x: F.linear(x, m.w), w=randn(3, 4)).eval()
    document = trama.export_model(model, inputs=["x"], outputs=["y"], example_inputs=(randn(2, 4),))
    linear = next(node for node in document.nodes if node.op == "linear")
    assert set(linear.inputs) == {"x", "weight"}
    source = next(node for node in document.nodes if node.id == linear.inputs["weight"].node)
    assert source.op == "constant"


@pytest.mark.parametrize(
    ("module", "x"),
    [
        (
            lambda: nn.Conv3d(2, 4, (2, 3, 1), stride=(1, 2, 1), padding=1, groups=2, padding_mode="reflect"),
            randn(1, 2, 3, 5, 2),
        ),
        (lambda: nn.ConvTranspose1d(2, 3, 3, stride=2, padding=1, output_padding=1), randn(2, 2, 4)),
        (lambda: nn.BatchNorm3d(3), randn(2, 3, 2, 3, 2)),
    ],
    ids=["Conv3d", "ConvTranspose1d", "BatchNorm3d"],
)
def test_the_module_variants_are_leaves_both_ways(module: Callable[[], nn.Module], x: torch.Tensor) -> None:
    torch.manual_seed(0)
    layer = module().eval()
    if isinstance(layer, nn.BatchNorm3d):
        statistics = {"running_mean": torch.randn(3), "running_var": torch.rand(3) + 0.5}
        layer.load_state_dict(statistics, strict=False)
    wrapper = nn.Sequential(layer).eval()
    document = trama.loads(trama.dumps(trama.export_model(wrapper, inputs=["x"], outputs=["y"], example_inputs=(x,))))
    leaf = next(node for node in document.nodes if node.op == type(layer).__name__)
    assert leaf.parameters  # the weights are slots of a module op
    with torch.no_grad():
        want = wrapper(x)
        back = trama.import_model(document, registry=trama.registry("torch"))
        assert any(isinstance(part, type(layer)) for part in back.modules())  # a subclass where torch errs
        assert torch.equal(back(x), want)
    for runtime in RUNTIMES:
        result = trama.runtime_for_name(runtime).prepare(document).run([x.numpy()])[0]
        value = result.detach().cpu().numpy() if isinstance(result, torch.Tensor) else np.asarray(result)
        np.testing.assert_allclose(value, want.numpy(), rtol=1e-5, atol=1e-5, err_msg=runtime)


def test_batch_norm_that_would_update_its_running_statistics_is_refused() -> None:
    model = Calls(
        lambda m, x: F.batch_norm(x, m.running_mean, m.running_var, training=True),
        running_mean=torch.zeros(3),
        running_var=torch.ones(3),
    )
    with pytest.raises(ExportError, match="updates the running statistics in place"):
        trama.export_model(model, inputs=["x"], outputs=["y"], example_inputs=(randn(2, 3),))


def test_a_transposed_convolution_over_three_dimensions_is_missing_by_name() -> None:
    model = Calls(lambda m, x: F.conv_transpose3d(x, m.w), w=randn(2, 2, 1, 1, 1)).eval()
    with pytest.raises(ExportError, match="conv_transpose3d"):
        trama.export_model(model, inputs=["x"], outputs=["y"], example_inputs=(randn(1, 2, 2, 2, 2),))


def test_the_imported_function_module_calls_the_torch_function_with_the_documents_settings() -> None:
    """A document written by hand (no capture): ``conv2d`` with its weight from a ``constant``."""
    weight = np.arange(8, dtype=np.float32).reshape(2, 1, 2, 2) / 8
    nodes = [
        trama.Node("w", "constant", {}, ["y"], {"value": "w.value"}),
        trama.Node(
            "op",
            "conv2d",
            {"x": trama.Ref(trama.INPUT, "x"), "weight": trama.Ref("w", "y")},
            ["y"],
            {"groups": "op.groups"},
        ),
    ]
    table = {
        "w.value": trama.Parameter(trama.Tensor.from_array(weight), learnable=True),
        "op.groups": trama.Parameter(2),
    }
    document = trama.Model(["x"], [trama.Ref("op", "y")], nodes, table)
    x = randn(1, 2, 3, 3)
    got = trama.runtime_for_name("torch:cpu").prepare(document).run([x])[0]
    assert torch.equal(got, F.conv2d(x, torch.from_numpy(weight), groups=2))


# --- weight_norm ----------------------------------------------------------------------------------


def _weight_normed(layer: nn.Module, dim: int | None) -> nn.Module:
    return nn.Sequential(torch.nn.utils.parametrizations.weight_norm(layer, dim=dim)).eval()


@pytest.mark.parametrize(
    ("build", "x"),
    [
        (lambda: _weight_normed(nn.Conv1d(2, 3, 3, padding=1), 2), lambda: randn(2, 2, 6)),  # Wav2Vec2's dim
        (lambda: _weight_normed(nn.Linear(4, 3), 0), lambda: randn(2, 4)),
        (lambda: _weight_normed(nn.Linear(4, 3), None), lambda: randn(2, 4)),  # None: dim −1, the whole tensor
    ],
    ids=["Conv1d-dim2", "Linear-dim0", "Linear-whole"],
)
def test_a_weight_norm_parametrization_exports_imports_and_runs_everywhere(
    build: Callable[[], nn.Module], x: Callable[[], torch.Tensor]
) -> None:
    """The parametrization's ``torch._weight_norm`` becomes a ``weight_norm`` node fed by the two
    parameters it holds, ``original0`` (g) and ``original1`` (v), which keep their names."""
    torch.manual_seed(0)
    model, example = build(), x()
    document = trama.loads(
        trama.dumps(trama.export_model(model, inputs=["x"], outputs=["y"], example_inputs=(example,)))
    )
    node = next(node for node in document.nodes if node.op == "weight_norm")
    assert set(node.inputs) == {"v", "g"}
    nodes = {each.id: each for each in document.nodes}
    for port, original in (("g", "original0"), ("v", "original1")):
        ref, scope = node.inputs[port], node.parent
        while ref.node == trama.INPUT:  # up through the ports of the modules that hand it down
            assert scope is not None
            ref, scope = nodes[scope].inputs[ref.output], nodes[scope].parent
        assert nodes[ref.node].op == "constant"
        assert ref.node.endswith(f"parametrizations.weight.{original}")  # with the module that holds it
    with torch.no_grad():
        want = model(example)
        back = trama.import_model(document, registry=trama.registry("torch"))
        assert torch.equal(back(example), want)  # torch._weight_norm with the same arguments
    for runtime in RUNTIMES:
        result = trama.runtime_for_name(runtime).prepare(document).run([example.numpy()])[0]
        value = result.detach().cpu().numpy() if isinstance(result, torch.Tensor) else np.asarray(result)
        np.testing.assert_allclose(value, want.numpy(), rtol=1e-5, atol=1e-5, err_msg=runtime)


def test_a_weight_norm_parametrization_keeps_its_state_dict_keys() -> None:
    """The originals are the ParametrizationList's state, handed to its _WeightNorm module: their
    constants stay with the list, so the keys are parametrizations.weight.original0/1."""
    model = _weight_normed(nn.Conv1d(2, 3, 3), 2)
    document = trama.export_model(model, inputs=["x"], outputs=["y"], example_inputs=(randn(1, 2, 5),))
    back = trama.import_model(document, registry=trama.registry("torch"))
    assert set(back.state_dict()) == set(model.state_dict())


def _weight_norm_document(v: np.ndarray, g: np.ndarray, dim: int) -> trama.Model:
    """``weight_norm`` of the model inputs ``v`` and ``g``, written by hand."""
    ports = {"v": trama.Ref(trama.INPUT, "v"), "g": trama.Ref(trama.INPUT, "g")}
    node = trama.Node("op", "weight_norm", ports, ["y"], {"dim": "op.dim"})
    return trama.Model(["v", "g"], [trama.Ref("op", "y")], [node], {"op.dim": trama.Parameter(dim)})


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2])
def test_the_imported_weight_norm_is_torchs_own(dim: int) -> None:
    v = randn(3, 4, 5)
    g = randn(()) if dim == -1 else torch.randn([size if d == dim % 3 else 1 for d, size in enumerate(v.shape)])
    runnable = trama.runtime_for_name("torch:cpu").prepare(_weight_norm_document(v.numpy(), g.numpy(), dim))
    assert torch.equal(runnable.run([v, g])[0], torch._weight_norm(v, g, dim))


@pytest.mark.parametrize(
    ("v", "g", "message"),
    [
        ((0, 3), (0, 1), "empty along dim = 0"),  # torch itself would stop the process (SIGFPE)
        ((3, 4), (4, 1, 1), r"g has shape \[4, 1, 1\], expected \[3, 1\]"),  # torch would read g flat
    ],
)
def test_the_torch_weight_norm_refuses_what_torch_would_crash_on_or_misread(
    v: tuple[int, ...], g: tuple[int, ...], message: str
) -> None:
    document = _weight_norm_document(np.ones(v, np.float32), np.ones(g, np.float32), 0)
    runnable = trama.runtime_for_name("torch:cpu").prepare(document)
    with pytest.raises(trama.TramaError, match=message):
        runnable.run([torch.ones(v), torch.ones(g)])
