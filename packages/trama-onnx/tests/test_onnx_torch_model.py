"""A real small CNN, exported from torch with a symbolic batch: a ResNet-style network (stem,
max pool, two stages of basic blocks with batch norms and residual adds, one downsampling,
adaptive average pool, flatten, linear) lowers to ONNX with its blocks as functions and runs on
onnxruntime at two batch sizes as eager torch computes it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from torch import nn

import trama
from trama_onnx import lower


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class SmallResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(BasicBlock(16, 16), BasicBlock(16, 16))
        self.layer2 = nn.Sequential(BasicBlock(16, 32, 2), BasicBlock(32, 32))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


@pytest.fixture(scope="module")
def network() -> SmallResNet:
    torch.manual_seed(0)
    net = SmallResNet()
    for module in net.modules():  # statistics that are not the identity
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.2, 0.2)
    return net.eval()


@pytest.fixture(scope="module")
def document(network: SmallResNet) -> trama.Model:
    x = torch.randn(2, 3, 64, 64)
    return trama.export_model(
        network, inputs=["x"], outputs=["y"], example_inputs=(x,), dynamic_shapes={"x": {0: "batch"}}
    )


def test_it_lowers_with_its_blocks_as_functions(document: trama.Model) -> None:
    proto = lower(document)
    onnx.checker.check_model(proto, full_check=True)
    functions = {function.name: function for function in proto.functions}
    assert "SmallResNet" in functions
    assert "BasicBlock" in functions
    stages = [function for function in proto.functions if [n.name for n in function.node] == ["0", "1"]]
    assert [{node.op_type for node in stage.node} for stage in stages].count({"BasicBlock"}) == 1  # layer1
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


@pytest.mark.parametrize("functions", [True, False])
def test_it_runs_as_eager_torch_at_two_batch_sizes(
    network: SmallResNet, document: trama.Model, functions: bool
) -> None:
    from trama_onnx import OnnxRuntime

    runnable = OnnxRuntime(functions=functions).prepare(document)
    for batch in (1, 5):
        x = torch.randn(batch, 3, 64, 64)
        with torch.no_grad():
            expected = network(x).numpy()
        (got,) = runnable.run([x])
        assert got.shape == (batch, 10)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_its_profile_has_a_row_per_node(document: trama.Model) -> None:
    x = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)
    profile = trama.runtime_for_name("onnxruntime").prepare(document).profile_json([x])
    rows = {row["id"]: row for row in profile["nodes"]}
    assert set(rows) == {node.id for node in document.nodes}
    convolutions = [row for row in profile["nodes"] if row["op"] == "Conv2d"]
    assert convolutions
    assert all(row["macs"] for row in convolutions)
    # onnxruntime fuses each convolution with its batch norm: the kernel's time is one of theirs
    for block in ("root.layer1.0", "root.layer1.1", "root.layer2.1"):
        assert rows[f"{block}.conv1"]["seconds"] + rows[f"{block}.bn1"]["seconds"] > 0
    assert rows["root"]["seconds"] > 0
    assert profile["total"]["macs_complete"] is False  # no rule for pools and norms
