"""Ordinary torch models, exported with no change to their classes and no registry, read back
from JSON and imported with the torch registry: real torch classes, the original ``state_dict``
keys, tied parameters tied again, and exactly the original outputs (float32, eval mode)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from export_support import assert_same_outputs, assert_same_state_keys, round_trip
from torch import fx, nn

import trama


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def test_mlp_comes_back_as_a_sequential_of_linears() -> None:
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).eval()
    trip = round_trip(model, ["x"], ["y"])
    assert type(trip.module) is nn.Sequential
    assert [type(child) for child in trip.module] == [nn.Linear, nn.ReLU, nn.Linear]
    assert trip.ids() == ["root", "root.0", "root.1", "root.2"]
    assert_same_state_keys(model, trip.module)
    assert_same_outputs(model, trip.module, torch.randn(5, 6))


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 4, 3)
        )
        self.classifier = nn.Linear(4 * 2 * 2, 5)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(F.relu(self.features(image)), 1))


def _trained_statistics(model: nn.Module, batch: torch.Tensor) -> None:
    """Give BatchNorm running statistics other than their initial zeros and ones."""
    model.train()
    with torch.no_grad():
        model(batch)
    model.eval()


def test_cnn_with_batchnorm_pooling_and_flatten() -> None:
    model = SmallCNN()
    _trained_statistics(model, torch.randn(4, 3, 8, 8))
    trip = round_trip(model, ["image"], ["logits"])
    back = trip.module
    assert isinstance(back, fx.GraphModule)
    assert type(back.features[1]) is nn.BatchNorm2d
    assert type(back.classifier) is nn.Linear
    assert torch.equal(back.features[1].running_mean, model.features[1].running_mean)
    assert [trip.node(i).op for i in ("root.relu", "root.flatten")] == ["relu", "flatten"]
    assert_same_state_keys(model, back)
    assert_same_outputs(model, back, torch.randn(2, 3, 8, 8))


class Residual(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.body(x))


def test_residual_network_of_custom_blocks() -> None:
    model = nn.Sequential(nn.Linear(4, 8), Residual(8), Residual(8), nn.Linear(8, 2)).eval()
    trip = round_trip(model, ["x"], ["y"])
    back = trip.module
    assert type(back) is nn.Sequential
    assert isinstance(back[1], fx.GraphModule)
    assert type(back[1].body) is nn.Sequential
    assert trip.node("root.1").op == "Graph"
    assert trip.node("root.1").metadata == {"class": f"{__name__}.Residual"}
    assert {"root.1.body", "root.1.add", "root.1.relu", "root.2.body.2"} <= set(trip.ids())
    assert_same_state_keys(model, back)
    assert_same_outputs(model, back, torch.randn(3, 4))


class TextEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(16, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)))


def test_transformer_encoder_inside_a_custom_model() -> None:
    model = TextEncoder().eval()
    trip = round_trip(model, ["tokens"], ["y"])
    back = trip.module
    assert type(back.encoder) is nn.TransformerEncoder
    # trama_torch's TransformerEncoderLayer subclass only fixes float padding masks in forward
    assert all(isinstance(layer, nn.TransformerEncoderLayer) for layer in back.encoder.layers)
    assert trip.node("root.encoder").op == "TransformerEncoder"
    assert [i for i in trip.ids() if i.startswith("root.encoder.")] == [
        "root.encoder.layers_0",
        "root.encoder.layers_1",
    ]
    assert "encoder.layers.1.self_attn.in_proj_weight" in back.state_dict()
    assert back.encoder.layers[0].linear1.weight is not back.encoder.layers[1].linear1.weight
    assert_same_state_keys(model, back)
    assert_same_outputs(model, back, torch.randint(0, 20, (2, 7)))


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(30, 8)
        self.gru = nn.GRU(8, 12, batch_first=True)
        self.tags = nn.Linear(12, 5)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(self.embed(tokens))
        return self.tags(out)


def test_gru_tagger_reads_the_named_output_of_the_recurrent_layer() -> None:
    model = Tagger().eval()
    trip = round_trip(model, ["tokens"], ["tags"])
    assert type(trip.module.gru) is nn.GRU
    assert trip.node("root.tags").inputs == {"x": trama.Ref("root.gru", "y")}
    assert not any(node.op in ("getitem", "tuple_get") for node in trip.document.nodes)
    assert_same_state_keys(model, trip.module)
    assert_same_outputs(model, trip.module, torch.randint(0, 30, (2, 6)))


class TiedLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(25, 10)
        self.mix = nn.Linear(10, 10)
        self.head = nn.Linear(10, 25, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.mix(self.embed(tokens))))


def test_tied_embedding_language_model_stays_tied() -> None:
    model = TiedLM().eval()
    trip = round_trip(model, ["tokens"], ["logits"])
    back = trip.module
    assert trip.node("root.head").parameters["weight"] == trip.node("root.embed").parameters["weight"]
    assert back.head.weight is back.embed.weight
    assert_same_state_keys(model, back)
    assert_same_outputs(model, back, torch.randint(0, 25, (3, 4)))


class Twice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Linear(6, 6)
        self.out = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.block(torch.relu(self.block(x))))


def test_a_module_called_twice_is_one_node_and_a_call() -> None:
    model = Twice().eval()
    trip = round_trip(model, ["x"], ["y"])
    calls = [node for node in trip.document.nodes if node.calls is not None]
    assert [(node.id, node.calls) for node in calls] == [("root.block_1", "root.block")]
    assert calls[0].parameters == {}
    back = trip.module
    assert [name for name, _ in back.named_children()].count("block") == 1
    assert "block_1" not in dict(back.named_children())
    assert_same_state_keys(model, back)
    assert_same_outputs(model, back, torch.randn(4, 6))


def test_a_sequential_holding_one_module_twice_calls_it_again() -> None:
    """named_children() lists a repeated module once; the Sequential still runs it twice."""
    shared = nn.Linear(4, 4)
    model = nn.Sequential(shared, nn.ReLU(), shared).eval()
    trip = round_trip(model, ["x"], ["y"])
    assert [(node.id, node.calls) for node in trip.document.nodes] == [
        ("root", None),
        ("root.0", None),
        ("root.1", None),
        ("root.2", "root.0"),
    ]
    assert trip.module[0] is trip.module[2]
    assert_same_outputs(model, trip.module, torch.randn(3, 4))


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Linear(5, 8)
        self.classify = nn.Linear(8, 3)
        self.regress = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.gelu(self.trunk(x))
        return self.classify(h), self.regress(h)


def test_two_headed_model_returns_a_tuple() -> None:
    model = TwoHeads().eval()
    trip = round_trip(model, ["x"], ["label", "score"])
    assert trip.document.outputs == [trama.Ref("root", "label"), trama.Ref("root", "score")]
    assert trip.node("root").output_bindings == {
        "label": trama.Ref("root.classify", "y"),
        "score": trama.Ref("root.regress", "y"),
    }
    assert_same_state_keys(model, trip.module)
    assert_same_outputs(model, trip.module, torch.randn(4, 5))


class Fusion(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.image = nn.Linear(6, 4)
        self.text = nn.Linear(3, 4)
        self.out = nn.Linear(8, 2)

    def forward(self, pixels: torch.Tensor, words: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        joined = torch.cat([self.image(pixels), self.text(words) * weight], dim=-1)
        return self.out(joined)


def test_several_inputs() -> None:
    model = Fusion().eval()
    trip = round_trip(model, ["pixels", "words", "weight"], ["y"])
    assert list(trip.node("root").inputs) == ["pixels", "words", "weight"]
    assert trip.node("root.cat").op == "concat"
    assert [type(trip.module.image), type(trip.module.text)] == [nn.Linear, nn.Linear]
    assert_same_state_keys(model, trip.module)
    assert_same_outputs(model, trip.module, torch.randn(2, 6), torch.randn(2, 3), torch.randn(2, 1))


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(6, 6) for _ in range(3)])
        self.norm = nn.LayerNorm(6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + torch.relu(layer(x))
        return self.norm(x)


def test_module_list_loop_becomes_a_container_node() -> None:
    model = Stack().eval()
    trip = round_trip(model, ["x"], ["y"])
    layers = trip.node("root.layers")
    assert layers.op == "Graph"
    assert [i for i in trip.ids() if i.startswith("root.layers.")][:3] == [
        "root.layers.0",
        "root.layers.relu",
        "root.layers.add",
    ]
    back = trip.module
    assert [type(back.layers.get_submodule(str(index))) for index in range(3)] == [nn.Linear] * 3
    assert type(back.norm) is nn.LayerNorm
    assert_same_state_keys(model, back)
    assert_same_outputs(model, back, torch.randn(4, 6))


class Heads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Linear(4, 6)
        self.heads = nn.ModuleDict({"cls": nn.Linear(6, 3), "box": nn.Linear(6, 4)})

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.trunk(x)
        return {name: head(h) for name, head in self.heads.items()}


def test_module_dict_and_a_dict_result() -> None:
    model = Heads().eval()
    trip = round_trip(model, ["x"], ["cls", "box"])
    assert {"root.heads", "root.heads.cls", "root.heads.box"} <= set(trip.ids())
    assert_same_state_keys(model, trip.module)
    x = torch.randn(2, 4)
    expected = model(x)
    cls, box = trip.module(x)
    assert torch.equal(cls, expected["cls"])
    assert torch.equal(box, expected["box"])


class LastStep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(4, 6, batch_first=True)
        self.head = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, (_, c) = self.rnn(x)
        return self.head(out[:, -1] + c[0])


def test_slicing_in_forward_and_lstm_states() -> None:
    model = LastStep().eval()
    trip = round_trip(model, ["x"], ["y"])
    slicing = next(node for node in trip.document.nodes if node.op == "getitem")
    assert trip.document.parameters[slicing.parameters["index"]].value == [[None, None, None], -1]
    assert_same_state_keys(model, trip.module)
    assert_same_outputs(model, trip.module, torch.randn(3, 5, 4))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_models_keep_their_dtype(dtype: torch.dtype) -> None:
    model = Residual(8).to(dtype).eval()
    trip = round_trip(model, ["x"], ["y"])
    weight = trip.document.parameters[trip.node("root.body.0").parameters["weight"]].value
    assert isinstance(weight, trama.Tensor)
    assert weight.dtype == str(dtype).removeprefix("torch.")
    assert all(tensor.dtype == dtype for tensor in trip.module.state_dict().values())
    assert_same_outputs(model, trip.module, torch.randn(3, 8, dtype=dtype))


class GainModule(nn.Module):
    """A library author's own op: it exports itself (``to_node``) as ``testlib.Gain``."""

    def __init__(self, gain: float) -> None:
        super().__init__()
        self.gain = gain

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gain

    def to_node(self, ctx: trama.ExportContext) -> trama.NodeFragment:
        return trama.NodeFragment("testlib.Gain", outputs=["y"], parameters={"gain": self.gain})

    @classmethod
    def from_node(
        cls, node: trama.Node, *, children: dict[str, object], parameters: dict[str, trama.Parameter]
    ) -> GainModule:
        value = parameters["gain"].value
        assert isinstance(value, float)
        return cls(value)


class WithOwnOp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.gain = GainModule(2.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.gain(self.fc(x)))


def test_an_exportable_op_inside_a_traced_model_keeps_its_own_node() -> None:
    model = WithOwnOp().eval()
    exported = trama.export_model(model, inputs=["x"], outputs=["y"])
    document = trama.loads(trama.dumps(exported))
    gain = next(node for node in document.nodes if node.id == "root.gain")
    assert gain.op == "testlib.Gain"
    assert gain.inputs == {"x": trama.Ref("root.fc", "y")}
    gain_spec = trama.OpSpec(
        "testlib.Gain", inputs=("x",), outputs=("y",), parameters=(trama.ParameterSchema("gain"),), factory=GainModule
    )
    registry = trama.OpRegistry([*trama.registry("torch"), gain_spec], framework="torch")
    back = trama.import_model(document, registry=registry)
    assert type(back.gain) is GainModule
    assert_same_outputs(model, back, torch.randn(2, 3))
