"""Exporting ordinary torch.nn models: which node each module becomes, how a traced forward is
wired, containers, calls, eval semantics, and the errors for what cannot be captured."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from export_support import assert_same_outputs, round_trip
from torch import fx, nn

import trama


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def export(module: nn.Module, inputs: list[str], outputs: list[str]) -> trama.Model:
    return trama.export_model(module, inputs=inputs, outputs=outputs)


def nodes(model: trama.Model) -> dict[str, trama.Node]:
    return {node.id: node for node in model.nodes}


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.fc2 = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x))) * scale


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x, scale=3.0))


def test_node_ids_follow_module_names_and_functions_follow_fx_names() -> None:
    found = nodes(export(Outer().eval(), ["x"], ["y"]))
    assert list(found) == [
        "root",
        "root.encoder",
        "root.encoder.fc1",
        "root.encoder.relu",
        "root.encoder.fc2",
        "root.encoder.mul",
        "root.head",
    ]
    assert [found[i].op for i in found] == ["Graph", "Graph", "Linear", "relu", "Linear", "mul", "Linear"]
    assert found["root.encoder"].inputs == {"x": trama.Ref("%input", "x")}
    assert found["root.head"].inputs == {"x": trama.Ref("root.encoder", "y")}
    assert found["root"].output_bindings == {"y": trama.Ref("root.head", "y")}
    assert found["root"].metadata == {"class": f"{__name__}.Outer"}


def test_a_constant_argument_at_the_call_is_traced_in() -> None:
    model = export(Outer().eval(), ["x"], ["y"])
    mul = nodes(model)["root.encoder.mul"]
    assert model.parameters[mul.parameters["other"]].value == 3.0


def test_model_inputs_bind_to_forward_by_position_when_names_differ() -> None:
    model = Outer().eval()
    document = export(model, ["features"], ["y"])
    assert nodes(document)["root.encoder"].inputs == {"x": trama.Ref("%input", "features")}
    assert_same_outputs(model, round_trip(model, ["features"], ["y"]).module, torch.randn(2, 4))


def test_a_forward_argument_with_a_default_that_is_not_given_keeps_its_default() -> None:
    model = export(Encoder().eval(), ["x"], ["y"])
    assert model.parameters[nodes(model)["root.mul"].parameters["other"]].value == 1.0


def test_a_required_forward_argument_without_an_input_is_an_error() -> None:
    class TwoInputs(nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a + b

    with pytest.raises(trama.ExportError, match=r"needs the argument 'b'"):
        export(TwoInputs(), ["a"], ["y"])


def test_values_passed_through_star_args_are_an_error() -> None:
    class Variadic(nn.Module):
        def forward(self, *xs: torch.Tensor) -> torch.Tensor:
            return xs[0]

    class Caller(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = Variadic()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x, x)

    with pytest.raises(trama.ExportError, match=r"'root.inner' .*Variadic.*\*xs"):
        export(Caller(), ["x"], ["y"])


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.scale = nn.Parameter(torch.full((3,), 0.5))
        self.register_buffer("shift", torch.arange(3.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x) * self.scale + self.shift + torch.tensor([1.0, 0.0, -1.0])
        return y @ self.fc.weight


def test_parameters_read_in_forward_are_constants_sharing_their_entries() -> None:
    module = Scaled().eval()
    document = export(module, ["x"], ["y"])
    found = nodes(document)
    constants = sorted(node_id for node_id, node in found.items() if node.op == "constant")
    assert constants[0].startswith("root._tensor_constant")  # built in forward, named by fx
    assert constants[1:] == ["root.fc_weight", "root.scale", "root.shift"]
    assert document.parameters[found["root.scale"].parameters["value"]].learnable is True
    assert document.parameters[found["root.shift"].parameters["value"]].learnable is False
    assert found["root.fc_weight"].parameters["value"] == found["root.fc"].parameters["weight"]
    assert not hasattr(module, "_tensor_constant0")  # tracing left the module as it was
    back = round_trip(module, ["x"], ["y"]).module
    assert back.fc_weight is back.fc.weight
    assert_same_outputs(module, back, torch.randn(2, 3))


def test_in_place_operations_keep_their_effect() -> None:
    class InPlace(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.act = nn.ReLU(inplace=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.fc(x)
            y.mul_(2.0)
            F.relu(y, inplace=True)
            z = self.fc(x)
            self.act(z)
            return y - z

    module = InPlace().eval()
    document = export(module, ["x"], ["y"])
    assert {"mul", "relu", "ReLU", "sub"} <= {node.op for node in document.nodes}
    assert_same_outputs(module, round_trip(module, ["x"], ["y"]).module, torch.randn(3, 4))


def test_augmented_assignment_changes_every_name_of_the_tensor() -> None:
    class Aliased(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.fc(x)
            z = y
            z += 1.0
            return y * 2.0

    module = Aliased().eval()
    assert_same_outputs(module, round_trip(module, ["x"], ["y"]).module, torch.randn(2, 3))


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.drop(self.fc(x))
        return y * 10.0 if self.training else y


def test_a_model_in_training_mode_is_exported_with_eval_semantics_and_left_training() -> None:
    module = Branchy().train()
    document = export(module, ["x"], ["y"])
    assert module.training
    assert module.drop.training
    assert "mul" not in {node.op for node in document.nodes}  # the eval branch was traced
    back = trama.import_model(document, registry=trama.registry("torch"))
    assert_same_outputs(module.eval(), back, torch.randn(2, 4))


def test_a_module_called_with_other_constants_is_a_node_of_its_own_sharing_parameters() -> None:
    class Attend(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(4, 2, batch_first=True)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            quick, _ = self.attn(x, x, x, need_weights=False)
            full, weights = self.attn(x, x, x)
            return quick + full, weights

    module = Attend().eval()
    found = nodes(export(module, ["x"], ["y", "weights"]))
    assert found["root.attn_1"].op == "MultiheadAttention"
    assert found["root.attn_1"].calls is None
    assert found["root.attn_1"].parameters["in_proj_weight"] == found["root.attn"].parameters["in_proj_weight"]
    assert_same_outputs(module, round_trip(module, ["x"], ["y", "weights"]).module, torch.randn(2, 3, 4))


def test_a_module_held_by_two_parents_is_called_from_the_second() -> None:
    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            linear = nn.Linear(3, 3)
            self.a = nn.Sequential(linear, nn.ReLU())
            self.b = nn.Sequential(nn.Tanh(), linear)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.a(x) + self.b(x)

    module = Shared().eval()
    trip = round_trip(module, ["x"], ["y"])
    assert trip.node("root.b.1").calls == "root.a.0"
    assert trip.module.b[1] is trip.module.a[0]
    assert_same_outputs(module, trip.module, torch.randn(2, 3))


def test_a_call_through_a_called_module_is_a_call_under_its_flattened_name() -> None:
    class Reach(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = Encoder()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.encoder(x) + self.encoder.fc1(x)

    module = Reach().eval()
    trip = round_trip(module, ["x"], ["y"])
    assert trip.node("root.encoder_fc1").calls == "root.encoder.fc1"
    assert_same_outputs(module, trip.module, torch.randn(2, 4))


def test_module_list_items_called_with_functions_between_them_form_one_container() -> None:
    class Loop(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(3)])
            self.out = nn.Linear(3, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            first = x
            for layer in self.layers[:2]:
                x = torch.tanh(layer(x)) + first
            return self.out(x) + self.layers[2](first).sum(-1, keepdim=True)

    module = Loop().eval()
    trip = round_trip(module, ["x"], ["y"])
    container = trip.node("root.layers")
    assert container.op == "Graph"
    inside = [node.id for node in trip.document.nodes if node.parent == "root.layers"]
    assert inside[:4] == ["root.layers.0", "root.layers.tanh", "root.layers.add", "root.layers.1"]
    assert "root.layers.2" in inside
    assert trip.node("root.out").parent == "root"
    assert {"layers.0.weight", "layers.2.bias"} <= set(trip.module.state_dict())
    assert_same_outputs(module, trip.module, torch.randn(4, 3))


def test_interleaved_module_lists_are_flattened_into_the_calling_scope() -> None:
    class Interleaved(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])
            self.ff = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])
            self.norm = nn.LayerNorm(2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for attn, ff in zip(self.attn, self.ff, strict=True):
                x = ff(attn(x))
            return self.norm(x)

    module = Interleaved().eval()
    trip = round_trip(module, ["x"], ["y"])
    assert trip.ids() == ["root", "root.attn_0", "root.ff_0", "root.attn_1", "root.ff_1", "root.norm"]
    assert set(trip.module.state_dict()) == {
        key.replace("attn.", "attn_").replace("ff.", "ff_") for key in module.state_dict()
    }
    assert_same_outputs(module, trip.module, torch.randn(3, 2))


def test_a_repeated_call_after_another_container_flattens_only_what_it_must() -> None:
    class Stages(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stages = nn.ModuleDict(
                {"a": nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 3)]), "b": nn.ModuleList([nn.Linear(3, 3)])}
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for stage in self.stages.values():
                for layer in stage:
                    x = torch.relu(layer(x))
            return self.stages["a"][0](x)

    module = Stages().eval()
    trip = round_trip(module, ["x"], ["y"])
    assert trip.node("root.stages").op == "Graph"
    assert trip.node("root.stages.a_0_1").calls == "root.stages.a_0"
    assert "stages.b_0.weight" in trip.module.state_dict()
    assert_same_outputs(module, trip.module, torch.randn(2, 3))


def test_a_sequential_whose_children_are_not_a_chain_of_x_is_traced() -> None:
    layer = nn.TransformerEncoderLayer(4, 2, 8, batch_first=True)
    module = nn.Sequential(nn.Linear(4, 4), layer).eval()
    trip = round_trip(module, ["x"], ["y"])
    assert trip.node("root").op == "Graph"
    assert trip.node("root.1").inputs == {"src": trama.Ref("root.0", "y")}
    assert_same_outputs(module, trip.module, torch.randn(2, 3, 4))


def test_a_sliced_sequential_called_in_forward_is_traced_through() -> None:
    class Prefix(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.body[:2](x)

    module = Prefix().eval()
    trip = round_trip(module, ["x"], ["y"])
    ids = [node.id for node in trip.document.nodes]
    assert ids[:4] == ["root", "root.body", "root.body.0", "root.body.1"]
    # body.2, never called, keeps its tensors (issue 23): the state_dict comes back whole
    assert ids[4:] == ["root.body.2", "root.body.2.weight", "root.body.2.bias"]
    assert set(trip.module.state_dict()) == set(module.state_dict())
    assert_same_outputs(module, trip.module, torch.randn(2, 3))


def test_an_exportable_op_gets_its_ports_from_forward_parameter_names() -> None:
    class Own(nn.Module):
        def forward(self, signal: torch.Tensor) -> torch.Tensor:
            return signal

        def to_node(self, ctx: trama.ExportContext) -> trama.NodeFragment:
            return trama.NodeFragment("testlib.Own", outputs=["y"])

    class Host(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.own = Own()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.own(x))

    found = nodes(export(Host(), ["x"], ["y"]))
    assert found["root.own"].inputs == {"signal": trama.Ref("%input", "x")}
    assert found["root.relu"].inputs == {"x": trama.Ref("root.own", "y")}


def test_exporting_twice_gives_the_same_document() -> None:
    module = Outer().eval()
    assert trama.dumps(export(module, ["x"], ["y"])) == trama.dumps(export(module, ["x"], ["y"]))


# -- what cannot be captured ----------------------------------------------------------------


class DataDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return self.fc(x)
        return x


class Spectrum(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.fft(x).real


class Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(2, 2), DataDependent())
        self.spectrum = Spectrum()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.spectrum(x)


def test_data_dependent_control_flow_names_the_module_and_chains_fx_error() -> None:
    module = nn.Sequential(nn.Linear(2, 2), DataDependent())
    with pytest.raises(trama.ExportError) as caught:
        export(module, ["x"], ["y"])
    message = str(caught.value)
    assert "'root.1'" in message
    assert f"{__name__}.DataDependent" in message
    assert "control flow" in message
    assert "to_node" in message
    assert caught.value.node_id == "root.1"
    assert isinstance(caught.value.__cause__, fx.proxy.TraceError)


def test_a_module_calling_a_function_outside_the_catalog_names_the_module() -> None:
    with pytest.raises(trama.ExportError) as caught:
        export(Holder(), ["x"], ["y"])
    message = str(caught.value)
    assert f"'root.spectrum' ({__name__}.Spectrum)" in message
    assert "fft" in message
    assert "to_node" in message
    assert caught.value.node_id == "root.spectrum"


def test_an_unsupported_function_in_the_root_names_the_root() -> None:
    class Sizes(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.view(x.size(0), -1)

    with pytest.raises(trama.ExportError, match=rf"'root' \({__name__}.*Sizes\).*size"):
        export(Sizes(), ["x"], ["y"])


def test_a_traced_module_with_forward_hooks_is_an_error() -> None:
    module = Encoder()
    module.register_forward_hook(lambda *_: None)
    with pytest.raises(trama.ExportError, match=r"'root' .*Encoder.*forward hooks"):
        export(module, ["x"], ["y"])


def test_returning_a_non_tensor_is_an_error() -> None:
    class Counts(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
            return x, 3

    with pytest.raises(trama.ExportError, match=r"returns 3"):
        export(Counts(), ["x"], ["y", "n"])


def test_asking_for_a_wrong_number_of_outputs_is_an_error() -> None:
    with pytest.raises(trama.ExportError, match=r"returns 1 tensor\(s\), but the outputs \['a', 'b'\]"):
        export(Encoder(), ["x"], ["a", "b"])


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


def test_the_document_names_torch_and_imports_back_with_torch_without_a_registry(tmp_path: object) -> None:
    """``metadata.framework`` records torch and its version, so ``trama.import_model(doc)`` with no
    registry gives torch modules (before, the document named no framework and numpy was used)."""
    import pathlib

    model = Residual().eval()
    doc = export(model, ["x"], ["y"])
    assert doc.metadata["framework"] == {"name": "torch", "version": torch.__version__}
    path = pathlib.Path(str(tmp_path)) / "residual.trama.json"
    trama.dump(doc, path)
    back = trama.import_model(trama.load(path))
    assert isinstance(back, nn.Module)
    assert isinstance(back.body, nn.Sequential)
    assert isinstance(back.body[0], nn.Linear)
    x = torch.randn(3, 4)
    with torch.no_grad():
        assert torch.equal(back(x), model(x))


def test_metadata_given_by_the_caller_overrides_the_recorded_framework() -> None:
    doc = trama.export_model(
        Residual(), inputs=["x"], outputs=["y"], metadata={"framework": {"name": "numpy", "version": "2"}}
    )
    assert doc.metadata["framework"] == {"name": "numpy", "version": "2"}


class SlicedLayers(nn.Module):
    """A ``ModuleList`` sliced in ``forward``: ``layers.0`` is never called."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.register_buffer("unused", torch.arange(3.0))
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[1:]:
            x = torch.relu(layer(x))
        return self.head(x)


@pytest.mark.parametrize("captured", [False, True], ids=["fx", "capture"])
def test_a_sliced_module_list_keeps_its_class_and_every_tensor(captured: bool) -> None:
    """Issue 23: the fx path dropped ``layers.0`` with its parameters (a strict
    ``load_state_dict`` of the original then failed) and wrote the list as a class-less scope."""
    torch.manual_seed(0)
    model = SlicedLayers().eval()
    x = torch.randn(2, 4)
    doc = trama.export_model(model, inputs=["x"], outputs=["y"], example_inputs=(x,) if captured else None)
    classes = {node.id: (node.metadata or {}).get("class") for node in doc.nodes}
    assert classes["root.layers"] == "torch.nn.modules.container.ModuleList"
    assert classes["root.layers.0"] == "torch.nn.modules.linear.Linear"
    back = trama.import_model(trama.loads(trama.dumps(doc)), registry=trama.registry("torch"))
    assert set(back.state_dict()) == set(model.state_dict())
    back.load_state_dict(model.state_dict(), strict=True)
    assert type(back.get_submodule("layers")).__name__ == "ModuleList"
    with torch.no_grad():
        assert torch.equal(back(x), model(x))
