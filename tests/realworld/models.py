"""A zoo of real models, built from their own libraries with small configs and random weights.

Why: trama's capture is measured against models people actually run, not toy modules written
for the tests. Every entry here builds a model class exactly as its library ships it (torchvision,
transformers, timm, torch.nn), only small (few layers, narrow widths, 32x32 or 64x64 images,
8-token sequences) so that the whole zoo builds in seconds on a laptop and nothing is downloaded:
no pretrained weights, no tokenizer files, no hub access. Weights are random but seeded, so two
builds of one entry are identical.

Each :class:`RealModel` says how to build the model, what to feed it (``example_inputs``: a tuple of
positional arguments or a dict of keyword arguments), the names trama's ``export_model`` should give
its inputs and outputs, and, for sequence models, which axes may vary (``dynamic_axes``, in the
ONNX exporter's spelling ``{input: {axis: name}}``; axes of one name have one size) — a hint for
the torch.export-based capture, checked by the tests: torch.export keeps exactly these axes
symbolic (sizes 2 to ``MAX_DYNAMIC``), and the captured program runs at other sizes.
Models are configured so that ``forward`` returns exactly the tensors named in ``output_names``
(``use_cache=False``, no pooler), so no wrapper hides the library's own module.

torchvision 0.28.0's wheel is a CUDA build whose C extension does not load next to the CPU torch;
:func:`ensure_torchvision_importable` works around that (see its docstring). transformers and timm
import torchvision when it is installed, so every builder goes through :func:`_library`, which
applies the workaround first.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch
from torch import nn

__all__ = ["ZOO", "RealModel", "by_name", "ensure_torchvision_importable"]

Inputs = tuple[torch.Tensor, ...] | dict[str, torch.Tensor]

# The attention of the transformers models: the plain matmul/softmax path. The fused sdpa kernel is
# one aten op torch.export captures as well, but the eager path is the portable spelling a
# model-interchange format is expected to carry, and it stays the same across torch versions.
ATTENTION = "eager"
SEED = 0
BATCH = 2  # not 1: torch.export specializes size-1 dimensions, a batch of 2 stays general
SEQ = 8
VOCAB = 128
MAX_DYNAMIC = 64  # the largest size of a dynamic axis: the position tables of the small configs

# ----------------------------------------------------------------------------------------------
# torchvision next to the CPU torch
# ----------------------------------------------------------------------------------------------

# The op schemas torchvision's Python code registers fake (meta) kernels for at import time
# (torchvision/_meta_registrations.py), which fails when the C extension that defines them did
# not load. ``nms`` as torchvision's C++ sources declare it; ``qnms`` (the quantized variant) with the
# same signature, as its fake kernel and ``torchvision.ops.nms`` call it.
_TORCHVISION_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
# Held for the life of the process: a torch.library.Library removes its definitions when collected.
_torchvision_library: torch.library.Library | None = None


def ensure_torchvision_importable() -> None:
    """Define the two torchvision op schemas that ``import torchvision`` needs, where missing.

    The torchvision 0.28.0 wheel on PyPI is built against CUDA torch; next to torch 2.13.0+cpu
    its ``_C`` extension fails to load, torchvision carries on without its C++ ops, and then
    its ``_meta_registrations`` module calls ``torch.library.register_fake("torchvision::nms")``
    (and ``qnms``) unconditionally, which raises because the ops were never defined, so
    ``import torchvision`` fails, and with it transformers and timm, which import it. Defining the
    schemas (no kernels) lets the import finish; the classification, segmentation and
    transformer models do not use these ops. ``torchvision.ops.nms`` itself still reports the
    missing extension. Idempotent, and a no-op where the extension did load (its schemas exist).
    Must run before the first import of torchvision, transformers or timm.
    """
    global _torchvision_library
    for name, schema in _TORCHVISION_SCHEMAS.items():
        try:
            getattr(torch.ops.torchvision, name)
        except AttributeError:
            if _torchvision_library is None:
                _torchvision_library = torch.library.Library("torchvision", "FRAGMENT")  # type: ignore[no-untyped-call]
            _torchvision_library.define(schema)  # type: ignore[no-untyped-call]


def _library(name: str) -> ModuleType:
    """``import name`` (a dotted module path), after making torchvision importable."""
    ensure_torchvision_importable()
    return importlib.import_module(name)


# ----------------------------------------------------------------------------------------------
# The registry entry
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RealModel:
    """One zoo entry: a real model from ``library``, small, in eval mode, seeded."""

    name: str
    library: str
    build: Callable[[], nn.Module]
    example_inputs: Callable[[], Inputs]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = field(default=None)

    def args_kwargs(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The example inputs as ``(args, kwargs)``, as ``torch.export.export`` takes them."""
        inputs = self.example_inputs()
        if isinstance(inputs, dict):
            return (), dict(inputs)
        return tuple(inputs), {}


def _seeded(factory: Callable[[], Any]) -> Callable[[], nn.Module]:
    """The builder: ``factory`` under a fixed seed, the result in eval mode (random but
    reproducible weights; dropout and batch-norm statistics fixed, as an export sees them).
    The model libraries are untyped, so the factories return ``Any``; this checks the result."""

    def build() -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            module = factory()
        if not isinstance(module, nn.Module):
            raise TypeError(f"{factory.__name__} built {type(module).__name__}, not a torch.nn.Module")
        return module.eval()

    build.__name__ = f"build_{factory.__name__}"
    build.__doc__ = factory.__doc__
    return build


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(SEED)


def _image(size: int, channels: int = 3) -> Callable[[], Inputs]:
    def inputs() -> Inputs:
        return (torch.randn(BATCH, channels, size, size, generator=_generator()),)

    return inputs


def _pixel_values(size: int) -> Callable[[], Inputs]:
    def inputs() -> Inputs:
        return {"pixel_values": torch.randn(BATCH, 3, size, size, generator=_generator())}

    return inputs


def _tokens_and_mask() -> Inputs:
    generator = _generator()
    return {
        "input_ids": torch.randint(3, VOCAB, (BATCH, SEQ), generator=generator),
        "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
    }


def _tokens() -> Inputs:
    return (torch.randint(0, VOCAB, (BATCH, SEQ), generator=_generator()),)


_TOKEN_AXES: Mapping[str, Mapping[int, str]] = {
    "input_ids": {0: "batch", 1: "sequence"},
    "attention_mask": {0: "batch", 1: "sequence"},
}


def _vision(name: str, factory: Callable[[], Any], size: int, library: str) -> RealModel:
    return RealModel(name, library, _seeded(factory), _image(size), ("x",), ("logits",))


# ----------------------------------------------------------------------------------------------
# torchvision
# ----------------------------------------------------------------------------------------------

_CLASSES = 10


def _tv(module: str = "torchvision.models") -> Any:
    return _library(module)


def tv_resnet18() -> Any:
    """The stock resnet18 (11M parameters: the largest of the zoo, kept at its real size)."""
    return _tv().resnet18(weights=None, num_classes=_CLASSES)


def tv_mobilenet_v2() -> Any:
    return _tv().mobilenet_v2(weights=None, num_classes=_CLASSES, width_mult=0.25)


def tv_mobilenet_v3_small() -> Any:
    return _tv().mobilenet_v3_small(weights=None, num_classes=_CLASSES, width_mult=0.25)


def tv_efficientnet_b0() -> Any:
    return _tv().efficientnet_b0(weights=None, num_classes=_CLASSES)


def tv_convnext_tiny() -> Any:
    """ConvNeXt's own class with a two-stage, one-block-each setting (convnext_tiny's blocks)."""
    convnext = _tv("torchvision.models.convnext")
    setting = [convnext.CNBlockConfig(16, 32, 1), convnext.CNBlockConfig(32, None, 1)]
    return convnext.ConvNeXt(setting, num_classes=_CLASSES)


def tv_vit() -> Any:
    """vit_b_16's class, small: 32x32 images in 8x8 patches, 2 layers of width 32."""
    vit = _tv("torchvision.models.vision_transformer")
    return vit.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=_CLASSES
    )


def tv_densenet() -> Any:
    """densenet121's class with 2 layers per dense block and growth rate 8."""
    densenet = _tv("torchvision.models.densenet")
    return densenet.DenseNet(
        growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16, bn_size=2, num_classes=_CLASSES
    )


def tv_shufflenet_v2() -> Any:
    shufflenet = _tv("torchvision.models.shufflenetv2")
    return shufflenet.ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 128], num_classes=_CLASSES)


def tv_regnet_y() -> Any:
    """regnet_y_400mf's design space (squeeze-excitation, group width 8), 4 blocks."""
    regnet = _tv("torchvision.models.regnet")
    params = regnet.BlockParams.from_init_params(depth=4, w_0=16, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
    return regnet.RegNet(params, num_classes=_CLASSES, stem_width=16)


def tv_squeezenet() -> Any:
    return _tv().squeezenet1_1(weights=None, num_classes=_CLASSES)


def tv_googlenet() -> Any:
    return _tv().googlenet(weights=None, num_classes=_CLASSES, aux_logits=False, init_weights=True)


def tv_swin() -> Any:
    """swin_t's class: 2 stages of one block, 4x4 windows, width 16."""
    swin = _tv("torchvision.models.swin_transformer")
    return swin.SwinTransformer(
        patch_size=[4, 4],
        embed_dim=16,
        depths=[1, 1],
        num_heads=[1, 2],
        window_size=[4, 4],
        stochastic_depth_prob=0.0,
        num_classes=_CLASSES,
    )


def tv_maxvit() -> Any:
    """maxvit_t's class at 64x64: 2 stages of one block, partitions of 2x2."""
    maxvit = _tv("torchvision.models.maxvit")
    return maxvit.MaxVit(
        input_size=(64, 64),
        stem_channels=16,
        partition_size=2,
        block_channels=[16, 32],
        block_layers=[1, 1],
        head_dim=8,
        stochastic_depth_prob=0.0,
        num_classes=_CLASSES,
    )


def tv_deeplabv3() -> Any:
    """The stock deeplabv3 on mobilenet_v3_large, 4 classes; returns ``{"out": ...}``."""
    segmentation = _tv("torchvision.models.segmentation")
    return segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=4, aux_loss=False)


def tv_mnasnet() -> Any:
    return _tv().mnasnet0_5(weights=None, num_classes=_CLASSES)


_TORCHVISION = [
    _vision("tv_resnet18", tv_resnet18, 32, "torchvision"),
    _vision("tv_mobilenet_v2", tv_mobilenet_v2, 32, "torchvision"),
    _vision("tv_mobilenet_v3_small", tv_mobilenet_v3_small, 32, "torchvision"),
    _vision("tv_efficientnet_b0", tv_efficientnet_b0, 32, "torchvision"),
    _vision("tv_convnext_tiny", tv_convnext_tiny, 32, "torchvision"),
    _vision("tv_vit", tv_vit, 32, "torchvision"),
    _vision("tv_densenet", tv_densenet, 32, "torchvision"),
    _vision("tv_shufflenet_v2", tv_shufflenet_v2, 32, "torchvision"),
    _vision("tv_regnet_y", tv_regnet_y, 32, "torchvision"),
    _vision("tv_squeezenet1_1", tv_squeezenet, 64, "torchvision"),
    _vision("tv_googlenet", tv_googlenet, 64, "torchvision"),
    _vision("tv_swin", tv_swin, 32, "torchvision"),
    _vision("tv_maxvit", tv_maxvit, 64, "torchvision"),
    _vision("tv_mnasnet", tv_mnasnet, 32, "torchvision"),
    RealModel("tv_deeplabv3", "torchvision", _seeded(tv_deeplabv3), _image(64), ("input",), ("out",)),
]

# ----------------------------------------------------------------------------------------------
# transformers
# ----------------------------------------------------------------------------------------------


def _hf() -> Any:
    return _library("transformers")


# The size every text model shares: 2 layers, width 32, 2 heads, a 128-token vocabulary.
_TEXT = {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}
_DECODER = {**_TEXT, "intermediate_size": 64, "max_position_embeddings": 64, "use_cache": False}


def hf_bert() -> Any:
    hf = _hf()
    config = hf.BertConfig(**_TEXT, intermediate_size=64, max_position_embeddings=64, attn_implementation=ATTENTION)
    return hf.BertModel(config, add_pooling_layer=False)


def hf_bert_classifier() -> Any:
    hf = _hf()
    config = hf.BertConfig(
        **_TEXT, intermediate_size=64, max_position_embeddings=64, num_labels=3, attn_implementation=ATTENTION
    )
    return hf.BertForSequenceClassification(config)


def hf_distilbert() -> Any:
    hf = _hf()
    config = hf.DistilBertConfig(
        vocab_size=VOCAB,
        dim=32,
        n_layers=2,
        n_heads=2,
        hidden_dim=64,
        max_position_embeddings=64,
        attn_implementation=ATTENTION,
    )
    return hf.DistilBertModel(config)


def hf_roberta() -> Any:
    hf = _hf()
    config = hf.RobertaConfig(**_TEXT, intermediate_size=64, max_position_embeddings=66, attn_implementation=ATTENTION)
    return hf.RobertaModel(config, add_pooling_layer=False)


def hf_gpt2() -> Any:
    hf = _hf()
    config = hf.GPT2Config(
        vocab_size=VOCAB,
        n_positions=64,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=VOCAB - 1,  # the default, 50256, lies outside the small vocabulary
        eos_token_id=VOCAB - 1,
        use_cache=False,
        attn_implementation=ATTENTION,
    )
    return hf.GPT2LMHeadModel(config)


def hf_llama() -> Any:
    hf = _hf()
    config = hf.LlamaConfig(**_DECODER, num_key_value_heads=1, attn_implementation=ATTENTION)
    return hf.LlamaForCausalLM(config)


def hf_qwen2() -> Any:
    hf = _hf()
    config = hf.Qwen2Config(**_DECODER, num_key_value_heads=1, attn_implementation=ATTENTION)
    return hf.Qwen2ForCausalLM(config)


def hf_mistral() -> Any:
    hf = _hf()
    config = hf.MistralConfig(**_DECODER, num_key_value_heads=1, sliding_window=4, attn_implementation=ATTENTION)
    return hf.MistralForCausalLM(config)


def hf_t5_encoder() -> Any:
    hf = _hf()
    config = hf.T5Config(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        use_cache=False,
        attn_implementation=ATTENTION,
    )
    return hf.T5EncoderModel(config)


def hf_bart() -> Any:
    hf = _hf()
    config = hf.BartConfig(
        vocab_size=VOCAB,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        use_cache=False,
        attn_implementation=ATTENTION,
    )
    return hf.BartModel(config)


def hf_vit() -> Any:
    hf = _hf()
    config = hf.ViTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        image_size=32,
        patch_size=8,
        attn_implementation=ATTENTION,
    )
    return hf.ViTModel(config, add_pooling_layer=False)


_MEL_BINS, _FRAMES = 16, 32


def hf_whisper_encoder() -> Any:
    hf = _hf()
    whisper = _library("transformers.models.whisper.modeling_whisper")
    config = hf.WhisperConfig(
        num_mel_bins=_MEL_BINS,
        d_model=32,
        encoder_layers=2,
        encoder_attention_heads=2,
        encoder_ffn_dim=64,
        max_source_positions=_FRAMES // 2,
        attn_implementation=ATTENTION,
    )
    return whisper.WhisperEncoder(config)


def _bart_inputs() -> Inputs:
    generator = _generator()
    return {
        "input_ids": torch.randint(3, VOCAB, (BATCH, SEQ), generator=generator),
        "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
        "decoder_input_ids": torch.randint(3, VOCAB, (BATCH, SEQ // 2), generator=generator),
    }


def _mel_inputs() -> Inputs:
    return {"input_features": torch.randn(BATCH, _MEL_BINS, _FRAMES, generator=_generator())}


def _text(name: str, factory: Callable[[], Any], output: str) -> RealModel:
    return RealModel(
        name,
        "transformers",
        _seeded(factory),
        _tokens_and_mask,
        ("input_ids", "attention_mask"),
        (output,),
        _TOKEN_AXES,
    )


_TRANSFORMERS = [
    _text("hf_bert", hf_bert, "last_hidden_state"),
    _text("hf_bert_classifier", hf_bert_classifier, "logits"),
    _text("hf_distilbert", hf_distilbert, "last_hidden_state"),
    _text("hf_roberta", hf_roberta, "last_hidden_state"),
    _text("hf_gpt2", hf_gpt2, "logits"),
    _text("hf_llama", hf_llama, "logits"),
    _text("hf_qwen2", hf_qwen2, "logits"),
    _text("hf_mistral", hf_mistral, "logits"),
    _text("hf_t5_encoder", hf_t5_encoder, "last_hidden_state"),
    RealModel(
        "hf_bart",
        "transformers",
        _seeded(hf_bart),
        _bart_inputs,
        ("input_ids", "attention_mask", "decoder_input_ids"),
        ("last_hidden_state", "encoder_last_hidden_state"),
        {**_TOKEN_AXES, "decoder_input_ids": {0: "batch", 1: "target_sequence"}},
    ),
    RealModel("hf_vit", "transformers", _seeded(hf_vit), _pixel_values(32), ("pixel_values",), ("last_hidden_state",)),
    RealModel(
        "hf_whisper_encoder",
        "transformers",
        _seeded(hf_whisper_encoder),
        _mel_inputs,
        ("input_features",),
        ("last_hidden_state",),
        {"input_features": {0: "batch"}},  # the frame count is fixed by max_source_positions
    ),
]

# ----------------------------------------------------------------------------------------------
# timm
# ----------------------------------------------------------------------------------------------


def _timm(name: str, **overrides: Any) -> Callable[[], Any]:
    def factory() -> Any:
        timm = _library("timm")
        return timm.create_model(name, pretrained=False, num_classes=_CLASSES, **overrides)

    factory.__name__ = name
    return factory


_TIMM = [
    _vision("timm_vit_tiny", _timm("vit_tiny_patch16_224", img_size=32, patch_size=8, depth=2), 32, "timm"),
    _vision("timm_deit_tiny", _timm("deit_tiny_patch16_224", img_size=32, patch_size=8, depth=2), 32, "timm"),
    _vision("timm_convnext_atto", _timm("convnext_atto"), 32, "timm"),
    _vision("timm_resnet10t", _timm("resnet10t"), 32, "timm"),
    _vision("timm_efficientnet_b0", _timm("efficientnet_b0"), 32, "timm"),
    _vision("timm_mobilenetv3_small_050", _timm("mobilenetv3_small_050"), 32, "timm"),
    _vision("timm_regnetx_002", _timm("regnetx_002"), 32, "timm"),
]

# ----------------------------------------------------------------------------------------------
# torch.nn itself
# ----------------------------------------------------------------------------------------------

_WIDTH = 32


class LSTMLanguageModel(nn.Module):
    """The classic word-level language model: embedding, a 2-layer LSTM, a vocabulary projection."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, _WIDTH)
        self.lstm = nn.LSTM(_WIDTH, 2 * _WIDTH, num_layers=2, batch_first=True)
        self.head = nn.Linear(2 * _WIDTH, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.lstm(self.embed(tokens))
        logits: torch.Tensor = self.head(hidden)
        return logits


class GRUTagger(nn.Module):
    """A sequence tagger: embedding, a bidirectional GRU, a per-token classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, _WIDTH)
        self.gru = nn.GRU(_WIDTH, _WIDTH, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * _WIDTH, 5)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.gru(self.embed(tokens))
        tags: torch.Tensor = self.head(hidden)
        return tags


def torch_transformer() -> Any:
    return nn.Transformer(
        d_model=_WIDTH,
        nhead=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=64,
        dropout=0.0,
        batch_first=True,
    )


def torch_transformer_encoder() -> Any:
    layer = nn.TransformerEncoderLayer(_WIDTH, 2, 64, dropout=0.0, batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(_WIDTH), enable_nested_tensor=False)


def torch_transformer_decoder() -> Any:
    layer = nn.TransformerDecoderLayer(_WIDTH, 2, 64, dropout=0.0, batch_first=True)
    return nn.TransformerDecoder(layer, 2)


def _sequences(**lengths: int) -> Callable[[], Inputs]:
    def inputs() -> Inputs:
        generator = _generator()
        return {name: torch.randn(BATCH, n, _WIDTH, generator=generator) for name, n in lengths.items()}

    return inputs


# The recurrent models take any sequence length, but torch.export (2.13, non-strict) cannot keep the
# time axis of nn.LSTM / nn.GRU symbolic ("Constraints violated (sequence)"): only the batch varies.
_RNN_AXES: Mapping[str, Mapping[int, str]] = {"tokens": {0: "batch"}}

_TORCH = [
    RealModel(
        "torch_transformer",
        "torch",
        _seeded(torch_transformer),
        _sequences(src=SEQ, tgt=SEQ // 2),
        ("src", "tgt"),
        ("y",),
        {"src": {0: "batch", 1: "source"}, "tgt": {0: "batch", 1: "target"}},
    ),
    RealModel(
        "torch_transformer_encoder",
        "torch",
        _seeded(torch_transformer_encoder),
        _sequences(src=SEQ),
        ("src",),
        ("y",),
        {"src": {0: "batch", 1: "sequence"}},
    ),
    RealModel(
        "torch_transformer_decoder",
        "torch",
        _seeded(torch_transformer_decoder),
        _sequences(tgt=SEQ // 2, memory=SEQ),
        ("tgt", "memory"),
        ("y",),
        {"tgt": {0: "batch", 1: "target"}, "memory": {0: "batch", 1: "source"}},
    ),
    RealModel(
        "torch_lstm_lm",
        "torch",
        _seeded(LSTMLanguageModel),
        _tokens,
        ("tokens",),
        ("logits",),
        _RNN_AXES,
    ),
    RealModel(
        "torch_gru_tagger",
        "torch",
        _seeded(GRUTagger),
        _tokens,
        ("tokens",),
        ("tags",),
        _RNN_AXES,
    ),
]

ZOO: tuple[RealModel, ...] = (*_TORCHVISION, *_TRANSFORMERS, *_TIMM, *_TORCH)


def by_name(name: str) -> RealModel:
    """The zoo entry called ``name``."""
    for entry in ZOO:
        if entry.name == name:
            return entry
    raise KeyError(f"no zoo model named {name!r}; known: {', '.join(entry.name for entry in ZOO)}")
