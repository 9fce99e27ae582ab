"""A zoo of real models, built from their own libraries with small configs and random weights.

Why: trama's capture is measured against models people actually run, not toy modules written
for the tests. Every entry here builds a model class exactly as its library ships it (torchvision,
transformers, timm, diffusers, torch.nn), only small (few layers, narrow widths, 32x32 or 64x64 images,
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
(``use_cache=False``, no pooler where the class allows it, else the pooler is a named output), so
no wrapper hides the library's own module.

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


def _video(frames: int, size: int) -> Callable[[], Inputs]:
    def inputs() -> Inputs:
        return (torch.randn(BATCH, 3, frames, size, size, generator=_generator()),)

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


def tv_alexnet() -> Any:
    """The stock alexnet (57M parameters, nearly all in its classifier). At 64x64 its features end
    at 1x1, which its adaptive pooling spreads to 6x6: a pooling that upsamples."""
    return _tv().alexnet(weights=None, num_classes=_CLASSES)


def tv_resnext() -> Any:
    """resnext50_32x4d's class (bottleneck blocks, 32 groups of width 4), one block per stage."""
    resnet = _tv("torchvision.models.resnet")
    return resnet.ResNet(resnet.Bottleneck, [1, 1, 1, 1], num_classes=_CLASSES, groups=32, width_per_group=4)


def tv_inception_v3() -> Any:
    """The stock inception_v3 (22M parameters) at 75x75, the smallest input its stem takes."""
    return _tv().inception_v3(weights=None, num_classes=_CLASSES, aux_logits=False, init_weights=True)


def tv_efficientnet_v2() -> Any:
    """efficientnet_v2_s's class: two fused-MBConv stages then one MBConv stage, narrow."""
    efficientnet = _tv("torchvision.models.efficientnet")
    setting = [
        efficientnet.FusedMBConvConfig(1, 3, 1, 16, 16, 1),
        efficientnet.FusedMBConvConfig(4, 3, 2, 16, 24, 1),
        efficientnet.MBConvConfig(4, 3, 2, 24, 32, 1),
    ]
    return efficientnet.EfficientNet(setting, dropout=0.2, last_channel=64, num_classes=_CLASSES)


def tv_swin_v2() -> Any:
    """swin_v2_t's class (cosine attention, log-spaced relative-position MLP, v2 patch merging),
    at the size of ``tv_swin``."""
    swin = _tv("torchvision.models.swin_transformer")
    return swin.SwinTransformer(
        patch_size=[4, 4],
        embed_dim=16,
        depths=[1, 1],
        num_heads=[1, 2],
        window_size=[4, 4],
        stochastic_depth_prob=0.0,
        num_classes=_CLASSES,
        block=swin.SwinTransformerBlockV2,
        downsample_layer=swin.PatchMergingV2,
    )


def tv_r3d() -> Any:
    """r3d_18's class (3-D convolutions over clips of frames), one block per stage."""
    video = _tv("torchvision.models.video.resnet")
    return video.VideoResNet(
        video.BasicBlock, [video.Conv3DSimple] * 4, [1, 1, 1, 1], video.BasicStem, num_classes=_CLASSES
    )


def tv_lraspp() -> Any:
    """The stock lraspp on mobilenet_v3_large, 4 classes; returns ``{"out": ...}``."""
    segmentation = _tv("torchvision.models.segmentation")
    return segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=4)


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
    _vision("tv_alexnet", tv_alexnet, 64, "torchvision"),
    _vision("tv_resnext", tv_resnext, 32, "torchvision"),
    _vision("tv_inception_v3", tv_inception_v3, 75, "torchvision"),
    _vision("tv_efficientnet_v2", tv_efficientnet_v2, 32, "torchvision"),
    _vision("tv_swin_v2", tv_swin_v2, 32, "torchvision"),
    RealModel("tv_r3d", "torchvision", _seeded(tv_r3d), _video(4, 32), ("x",), ("logits",)),
    RealModel("tv_lraspp", "torchvision", _seeded(tv_lraspp), _image(64), ("input",), ("out",)),
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


#: The encoder-decoder settings of BART and its kin: one layer each side, width 32.
_SEQ2SEQ = {
    "vocab_size": VOCAB,
    "d_model": 32,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "max_position_embeddings": 64,
    "use_cache": False,
    "attn_implementation": ATTENTION,
}


def hf_bart() -> Any:
    """BART: learned positions, post-layer-norm; its ``shared`` embedding is also both sides'
    ``embed_tokens`` (one tied weight under three keys)."""
    hf = _hf()
    return hf.BartModel(hf.BartConfig(**_SEQ2SEQ))


def hf_marian() -> Any:
    """Marian (the OPUS-MT translation models): sinusoidal positions, scaled embeddings, its
    ``shared`` embedding tied to both sides' ``embed_tokens``. Its default padding token is the
    last of a 58101-token vocabulary, so the small vocabulary brings its own."""
    hf = _hf()
    return hf.MarianModel(hf.MarianConfig(**_SEQ2SEQ, pad_token_id=1, decoder_start_token_id=1))


def hf_pegasus() -> Any:
    """Pegasus: pre-layer-norm with a final norm on each side, sinusoidal positions, ``shared``
    tied to both sides' ``embed_tokens``."""
    hf = _hf()
    return hf.PegasusModel(hf.PegasusConfig(**_SEQ2SEQ))


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


def hf_albert() -> Any:
    """ALBERT: factorised embeddings (width 16 projected to 32), one layer's weights shared by both."""
    hf = _hf()
    config = hf.AlbertConfig(
        **_TEXT, embedding_size=16, intermediate_size=64, max_position_embeddings=64, attn_implementation=ATTENTION
    )
    return hf.AlbertModel(config, add_pooling_layer=False)


def hf_deberta_v2() -> Any:
    """DeBERTa-v2: disentangled attention over log-bucketed relative positions (both directions)."""
    hf = _hf()
    config = hf.DebertaV2Config(
        **_TEXT,
        intermediate_size=64,
        max_position_embeddings=64,
        relative_attention=True,
        position_buckets=16,
        max_relative_positions=-1,
        pos_att_type=["p2c", "c2p"],
        attn_implementation=ATTENTION,
    )
    return hf.DebertaV2Model(config)


def hf_mpnet() -> Any:
    """MPNet: a BERT with T5-style relative-position buckets (32, which its attention assumes)."""
    hf = _hf()
    config = hf.MPNetConfig(**_TEXT, intermediate_size=64, max_position_embeddings=66, attn_implementation=ATTENTION)
    return hf.MPNetModel(config, add_pooling_layer=False)


def hf_mobilebert() -> Any:
    """MobileBERT: bottleneck layers, stacked feed-forwards, ``NoNorm`` (an elementwise affine)."""
    hf = _hf()
    config = hf.MobileBertConfig(
        **_TEXT,
        intermediate_size=32,
        embedding_size=16,
        intra_bottleneck_size=16,
        true_hidden_size=16,
        num_feedforward_networks=2,
        max_position_embeddings=64,
        attn_implementation=ATTENTION,
    )
    return hf.MobileBertModel(config, add_pooling_layer=False)


def hf_gpt_neo() -> Any:
    """GPT-Neo: a global then a local (sliding window of 4) attention layer."""
    hf = _hf()
    config = hf.GPTNeoConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        attention_types=[[["global", "local"], 1]],
        window_size=4,
        intermediate_size=64,
        # Not 64: its causal-mask buffer is that long, and slicing it at a sequence of exactly its
        # length makes torch.export guard ``sequence != 64``, inside the dynamic range.
        max_position_embeddings=2 * MAX_DYNAMIC,
        bos_token_id=VOCAB - 1,  # the default, 50256, lies outside the small vocabulary
        eos_token_id=VOCAB - 1,
        use_cache=False,
        attn_implementation=ATTENTION,
    )
    return hf.GPTNeoForCausalLM(config)


def hf_opt() -> Any:
    """OPT: learned positions offset by 2 and counted from the attention mask."""
    hf = _hf()
    config = hf.OPTConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        ffn_dim=64,
        word_embed_proj_dim=32,
        max_position_embeddings=64,
        use_cache=False,
        attn_implementation=ATTENTION,
    )
    return hf.OPTForCausalLM(config)


def hf_bloom() -> Any:
    """BLOOM: ALiBi position biases (no position embeddings), an embedding layer norm."""
    hf = _hf()
    config = hf.BloomConfig(
        vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=2, use_cache=False, attn_implementation=ATTENTION
    )
    return hf.BloomForCausalLM(config)


def hf_falcon() -> Any:
    """Falcon: rotary positions, multi-query attention, attention and MLP in parallel."""
    hf = _hf()
    config = hf.FalconConfig(**_DECODER, attn_implementation=ATTENTION)
    return hf.FalconForCausalLM(config)


def hf_phi() -> Any:
    """Phi: rotary positions on half of each head, attention and MLP in parallel, one layer norm."""
    hf = _hf()
    config = hf.PhiConfig(**_DECODER, partial_rotary_factor=0.5, attn_implementation=ATTENTION)
    return hf.PhiForCausalLM(config)


def hf_gemma() -> Any:
    """Gemma: RMSNorm with a ``1 + weight`` scale, tanh-approximated GELU gating, scaled embeddings."""
    hf = _hf()
    config = hf.GemmaConfig(**_DECODER, num_key_value_heads=1, head_dim=16, attn_implementation=ATTENTION)
    return hf.GemmaForCausalLM(config)


def hf_phi3() -> Any:
    """Phi-3: fused gate-and-up projection split by ``chunk``, fused qkv projection, rotary positions."""
    hf = _hf()
    config = hf.Phi3Config(**_DECODER, num_key_value_heads=1, pad_token_id=0, attn_implementation=ATTENTION)
    return hf.Phi3ForCausalLM(config)


# Grouped-query decoders: 4 query heads sharing 2 key/value heads.
_GROUPED = {**_DECODER, "num_attention_heads": 4, "num_key_value_heads": 2}


def hf_gptj() -> Any:
    """GPT-J: interleaved rotary positions (``repeat_interleave`` of sin and cos) on part of each
    head, attention and MLP in parallel."""
    hf = _hf()
    config = hf.GPTJConfig(
        vocab_size=VOCAB,
        n_positions=64,
        n_embd=32,
        n_layer=2,
        n_head=4,
        rotary_dim=4,
        bos_token_id=VOCAB - 1,  # the default, 50256, lies outside the small vocabulary
        eos_token_id=VOCAB - 1,
        use_cache=False,
        attn_implementation=ATTENTION,
    )
    return hf.GPTJModel(config)


def hf_codegen() -> Any:
    """CodeGen: GPT-J's interleaved rotary positions, with a fused qkv projection split in groups."""
    hf = _hf()
    config = hf.CodeGenConfig(
        vocab_size=VOCAB,
        n_positions=64,
        n_ctx=64,
        n_embd=32,
        n_layer=2,
        n_head=4,
        rotary_dim=4,
        bos_token_id=VOCAB - 1,  # the default, 50256, lies outside the small vocabulary
        eos_token_id=VOCAB - 1,
        use_cache=False,
        attn_implementation=ATTENTION,
    )
    return hf.CodeGenModel(config)


def hf_cohere() -> Any:
    """Cohere: rotary frequencies interleaved (``torch.repeat_interleave(freqs, 2, dim=-1)``),
    a bias-free LayerNorm, attention and MLP in parallel."""
    hf = _hf()
    config = hf.CohereConfig(
        **_GROUPED,
        bos_token_id=1,
        eos_token_id=VOCAB - 1,  # the default, 255001, lies outside the small vocabulary
        attn_implementation=ATTENTION,
    )
    return hf.CohereModel(config)


# Mixture-of-experts models route each token with ``topk``. transformers' default experts
# implementation ("grouped_mm") sorts the routed tokens by expert (aten.sort) and multiplies
# groups whose sizes are known at run time only (torch.histc, then the custom op
# transformers::grouped_mm_fallback on the CPU); "eager" loops over the experts that received a
# token (``nonzero``), a branch on values torch.export cannot capture. "batched_mm" gathers each
# token's experts' weights and multiplies them batched: static shapes, catalog ops.
_EXPERTS = "batched_mm"


def hf_mixtral() -> Any:
    """Mixtral: a top-2 router over 4 experts in every layer (``MixtralTopKRouter``)."""
    hf = _hf()
    config = hf.MixtralConfig(
        **_GROUPED,
        num_local_experts=4,
        num_experts_per_tok=2,
        attn_implementation=ATTENTION,
        experts_implementation=_EXPERTS,
    )
    return hf.MixtralModel(config)


def hf_qwen2_moe() -> Any:
    """Qwen2-MoE: a top-2 router over 4 experts next to a gated shared expert."""
    hf = _hf()
    config = hf.Qwen2MoeConfig(
        **_GROUPED,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=64,
        attn_implementation=ATTENTION,
        experts_implementation=_EXPERTS,
    )
    return hf.Qwen2MoeModel(config)


def hf_funnel() -> Any:
    """Funnel Transformer: pooled blocks, and a decoder that upsamples them back
    (``torch.repeat_interleave`` along the sequence)."""
    hf = _hf()
    config = hf.FunnelConfig(
        vocab_size=VOCAB,
        d_model=32,
        n_head=4,
        d_head=8,
        d_inner=64,
        block_sizes=[1, 1],
        attn_implementation=ATTENTION,
    )
    return hf.FunnelModel(config)


# The size every vision transformer shares: 32x32 images in 8x8 patches, 2 layers of width 32.
_PATCHES = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 32, "patch_size": 8}


def hf_beit() -> Any:
    """BEiT: a relative-position bias table per layer, layer scale; no pooler."""
    hf = _hf()
    config = hf.BeitConfig(
        **_PATCHES, intermediate_size=64, use_relative_position_bias=True, attn_implementation=ATTENTION
    )
    return hf.BeitModel(config, add_pooling_layer=False)


def hf_dinov2() -> Any:
    """DINOv2: interpolated position embeddings, layer scale; its pooler is the final CLS token."""
    hf = _hf()
    config = hf.Dinov2Config(**_PATCHES, mlp_ratio=2, attn_implementation=ATTENTION)
    return hf.Dinov2Model(config)


def hf_clip_vision() -> Any:
    """CLIP's image tower: class embedding, pre-layer-norm, quick GELU; its pooler is the CLS token."""
    hf = _hf()
    config = hf.CLIPVisionConfig(**_PATCHES, intermediate_size=64, attn_implementation=ATTENTION)
    return hf.CLIPVisionModel(config)


def hf_segformer() -> Any:
    """SegFormer: 2 stages of efficient (spatially reduced) attention and an all-MLP decoder, 4
    classes; its logits are at a quarter of the input's resolution."""
    hf = _hf()
    config = hf.SegformerConfig(
        num_encoder_blocks=2,
        depths=[1, 1],
        sr_ratios=[2, 1],
        hidden_sizes=[16, 32],
        num_attention_heads=[1, 2],
        patch_sizes=[7, 3],
        strides=[4, 2],
        mlp_ratios=[2, 2],
        decoder_hidden_size=32,
        num_labels=4,
    )
    return hf.SegformerForSemanticSegmentation(config)


_SAMPLES = 400  # raw audio: the feature encoder's strides 5 and 2 leave 39 frames


def hf_wav2vec2() -> Any:
    """wav2vec 2.0 on raw audio: a 2-layer convolutional feature encoder (group norm), a
    weight-normed convolutional position embedding, 2 transformer layers."""
    hf = _hf()
    config = hf.Wav2Vec2Config(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        conv_dim=(16, 16),
        conv_stride=(5, 2),
        conv_kernel=(10, 3),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        attn_implementation=ATTENTION,
    )
    return hf.Wav2Vec2Model(config)


def _bart_inputs() -> Inputs:
    generator = _generator()
    return {
        "input_ids": torch.randint(3, VOCAB, (BATCH, SEQ), generator=generator),
        "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
        "decoder_input_ids": torch.randint(3, VOCAB, (BATCH, SEQ // 2), generator=generator),
    }


def _mel_inputs() -> Inputs:
    return {"input_features": torch.randn(BATCH, _MEL_BINS, _FRAMES, generator=_generator())}


def _audio_inputs() -> Inputs:
    return {"input_values": torch.randn(BATCH, _SAMPLES, generator=_generator())}


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


def _seq2seq(name: str, factory: Callable[[], Any]) -> RealModel:
    """A transformers encoder-decoder: source tokens and mask, target tokens in; the decoder's
    and the encoder's last hidden states out."""
    return RealModel(
        name,
        "transformers",
        _seeded(factory),
        _bart_inputs,
        ("input_ids", "attention_mask", "decoder_input_ids"),
        ("last_hidden_state", "encoder_last_hidden_state"),
        {**_TOKEN_AXES, "decoder_input_ids": {0: "batch", 1: "target_sequence"}},
    )


def _pixels(name: str, factory: Callable[[], Any], size: int, *outputs: str) -> RealModel:
    """A transformers image model: ``pixel_values`` in, ``outputs`` (its ``ModelOutput`` keys) out."""
    return RealModel(name, "transformers", _seeded(factory), _pixel_values(size), ("pixel_values",), outputs)


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
    _seq2seq("hf_bart", hf_bart),
    _seq2seq("hf_marian", hf_marian),
    _seq2seq("hf_pegasus", hf_pegasus),
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
    _text("hf_albert", hf_albert, "last_hidden_state"),
    _text("hf_deberta_v2", hf_deberta_v2, "last_hidden_state"),
    _text("hf_mpnet", hf_mpnet, "last_hidden_state"),
    RealModel(
        "hf_mobilebert",
        "transformers",
        _seeded(hf_mobilebert),
        _tokens_and_mask,
        ("input_ids", "attention_mask"),
        ("last_hidden_state",),
        # Only the batch: its trigram embedding pads ``embeddings[:, 1:]``, one token long at a
        # sequence of 2, so torch.export guards ``sequence != 2`` (a size-1 specialisation).
        {"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}},
    ),
    _text("hf_gpt_neo", hf_gpt_neo, "logits"),
    _text("hf_opt", hf_opt, "logits"),
    _text("hf_bloom", hf_bloom, "logits"),
    _text("hf_falcon", hf_falcon, "logits"),
    _text("hf_phi", hf_phi, "logits"),
    _text("hf_gemma", hf_gemma, "logits"),
    _text("hf_phi3", hf_phi3, "logits"),
    _text("hf_gptj", hf_gptj, "last_hidden_state"),
    _text("hf_codegen", hf_codegen, "last_hidden_state"),
    _text("hf_cohere", hf_cohere, "last_hidden_state"),
    _text("hf_mixtral", hf_mixtral, "last_hidden_state"),
    _text("hf_qwen2_moe", hf_qwen2_moe, "last_hidden_state"),
    RealModel(
        "hf_funnel",
        "transformers",
        _seeded(hf_funnel),
        _tokens_and_mask,
        ("input_ids", "attention_mask"),
        ("last_hidden_state",),
        # Only the batch: its relative positions are built from ``list(range(seq_len))``
        # (modeling_funnel.py, get_position_embeds), a Python list the length fixes.
        {"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}},
    ),
    _pixels("hf_beit", hf_beit, 32, "last_hidden_state"),
    _pixels("hf_dinov2", hf_dinov2, 32, "last_hidden_state", "pooler_output"),
    _pixels("hf_clip_vision", hf_clip_vision, 32, "last_hidden_state", "pooler_output"),
    _pixels("hf_segformer", hf_segformer, 64, "logits"),
    RealModel(
        "hf_wav2vec2",
        "transformers",
        _seeded(hf_wav2vec2),
        _audio_inputs,
        ("input_values",),
        ("last_hidden_state", "extract_features"),
        {"input_values": {0: "batch"}},  # the sample count: see _SAMPLES
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


def timm_mixer() -> Any:
    """mixer_s16_224's class (token- and channel-mixing MLPs), 2 blocks of width 32. Its registered
    variants fix ``patch_size``, ``num_blocks`` and ``embed_dim``, so the class is built directly."""
    mixer = _library("timm.models.mlp_mixer")
    return mixer.MlpMixer(num_classes=_CLASSES, img_size=32, patch_size=8, num_blocks=2, embed_dim=32)


def timm_poolformer() -> Any:
    """poolformer_s12's settings (pooling token mixer, GroupNorm1) on timm's MetaFormer class, 2
    stages of one block. The registered variant fixes ``depths`` and ``dims``."""
    metaformer = _library("timm.models.metaformer")
    return metaformer.MetaFormer(
        num_classes=_CLASSES,
        depths=(1, 1),
        dims=(16, 32),
        token_mixers=metaformer.Pooling,
        norm_layers=metaformer.GroupNorm1,
        downsample_norm=None,
        mlp_bias=True,
        use_mlp_head=False,
    )


def timm_res2net() -> Any:
    """res2net50_14w_8s's blocks (each splits its channels into 8 groups of convolutions that
    feed one another: the ``convs`` and ``bns`` lists are called in turn), narrow, 2 blocks in
    the first stage and one in each other. timm's ResNet takes the shrinking settings."""
    return _timm("res2net50_14w_8s", layers=[2, 1, 1, 1], channels=(16, 32, 64, 128), stem_width=16)()


_TIMM_SWIN = {"img_size": 32, "window_size": 4, "embed_dim": 16, "depths": (1, 1), "num_heads": (1, 2)}
_TIMM_VIT = {"img_size": 32, "patch_size": 8, "depth": 2, "embed_dim": 32, "num_heads": 2}


_TIMM = [
    _vision("timm_vit_tiny", _timm("vit_tiny_patch16_224", img_size=32, patch_size=8, depth=2), 32, "timm"),
    _vision("timm_deit_tiny", _timm("deit_tiny_patch16_224", img_size=32, patch_size=8, depth=2), 32, "timm"),
    _vision("timm_convnext_atto", _timm("convnext_atto"), 32, "timm"),
    _vision("timm_resnet10t", _timm("resnet10t"), 32, "timm"),
    _vision("timm_efficientnet_b0", _timm("efficientnet_b0"), 32, "timm"),
    _vision("timm_mobilenetv3_small_050", _timm("mobilenetv3_small_050"), 32, "timm"),
    _vision("timm_regnetx_002", _timm("regnetx_002"), 32, "timm"),
    _vision("timm_swin", _timm("swin_tiny_patch4_window7_224", **_TIMM_SWIN), 32, "timm"),
    _vision("timm_eva02", _timm("eva02_tiny_patch14_224", **_TIMM_VIT), 32, "timm"),
    _vision("timm_levit", _timm("levit_128s", img_size=64), 64, "timm"),
    _vision("timm_ghostnet_050", _timm("ghostnet_050"), 32, "timm"),
    _vision("timm_mixer", timm_mixer, 32, "timm"),
    _vision("timm_poolformer", timm_poolformer, 32, "timm"),
    _vision("timm_res2net", timm_res2net, 32, "timm"),
    _vision("timm_pvt_v2", _timm("pvt_v2_b0"), 64, "timm"),
]

# ----------------------------------------------------------------------------------------------
# diffusers
# ----------------------------------------------------------------------------------------------

_LATENT = 16  # the images of the diffusion models: 16x16, two resolutions


def diffusers_unet() -> Any:
    """The denoising U-Net of DDPM (``UNet2DModel``): a timestep embedding, two resolutions of
    one ResNet block each, self-attention at the lower one; its middle block calls its
    ``attentions`` and ``resnets`` lists in turn (``resnets[0]``, then ``attentions[i]`` and
    ``resnets[i + 1]``)."""
    diffusers = _library("diffusers")
    return diffusers.UNet2DModel(
        sample_size=_LATENT,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(8, 16),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=4,
        attention_head_dim=4,
    )


def diffusers_vae() -> Any:
    """The variational autoencoder of Stable Diffusion (``AutoencoderKL``), two resolutions of one
    block, 4 latent channels; ``forward`` encodes, takes the posterior's mode and decodes."""
    diffusers = _library("diffusers")
    return diffusers.AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        block_out_channels=(8, 16),
        layers_per_block=1,
        latent_channels=4,
        norm_num_groups=4,
        sample_size=_LATENT,
    )


def _noisy_sample() -> Inputs:
    generator = _generator()
    return {
        "sample": torch.randn(BATCH, 3, _LATENT, _LATENT, generator=generator),
        "timestep": torch.randint(0, 1000, (BATCH,), generator=generator),
    }


def _sample() -> Inputs:
    return {"sample": torch.randn(BATCH, 3, _LATENT, _LATENT, generator=_generator())}


_DIFFUSERS = [
    RealModel(
        "diffusers_unet", "diffusers", _seeded(diffusers_unet), _noisy_sample, ("sample", "timestep"), ("sample",)
    ),
    RealModel("diffusers_vae", "diffusers", _seeded(diffusers_vae), _sample, ("sample",), ("sample",)),
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


class UNetDenoiser(nn.Module):
    """A small U-Net: a conv encoder, a transposed-conv and nearest-upsampling decoder with skip
    connections, and a pixel-shuffle head at twice the input's resolution (super-resolution)."""

    def __init__(self) -> None:
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.enc2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.bottom = nn.Sequential(nn.AvgPool2d(2), nn.Conv2d(16, 16, 3, padding=1), nn.LeakyReLU(0.1))
        self.up2 = nn.Upsample(scale_factor=2, mode="nearest")
        self.up1 = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv2d(16, 12, 3, padding=1), nn.PixelShuffle(2), nn.Sigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip1 = self.enc1(x)
        skip2 = self.enc2(skip1)
        middle = self.up2(self.bottom(skip2)) + skip2
        image: torch.Tensor = self.dec(torch.cat([self.up1(middle), skip1], dim=1))
        return image


class KeywordSpotter(nn.Module):
    """A 1-D CNN on raw audio (keyword spotting): strided and dilated convolutions with batch
    norm, max pooling, global average pooling over time, a linear classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, 9, stride=4),
            nn.BatchNorm1d(16),
            nn.GELU(),
            nn.MaxPool1d(2),
            nn.Conv1d(16, 32, 3, padding=2, dilation=2, groups=4),
            nn.BatchNorm1d(32),
            nn.ReLU(),
            nn.AdaptiveAvgPool1d(1),
        )
        self.head = nn.Linear(32, 5)

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.head(self.features(waveform).flatten(1))
        return logits


def _waveform() -> Inputs:
    return (torch.randn(BATCH, 1, _SAMPLES, generator=_generator()),)


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
    RealModel("torch_unet", "torch", _seeded(UNetDenoiser), _image(32), ("x",), ("image",)),
    RealModel("torch_keyword_spotter", "torch", _seeded(KeywordSpotter), _waveform, ("waveform",), ("logits",)),
]

ZOO: tuple[RealModel, ...] = (*_TORCHVISION, *_TRANSFORMERS, *_TIMM, *_DIFFUSERS, *_TORCH)


def by_name(name: str) -> RealModel:
    """The zoo entry called ``name``."""
    for entry in ZOO:
        if entry.name == name:
            return entry
    raise KeyError(f"no zoo model named {name!r}; known: {', '.join(entry.name for entry in ZOO)}")


def exported(name: str) -> Any:
    """The zoo model ``name`` exported by trama with its example inputs (a ``trama.Model``).
    Raises ``ImportError`` when the library that ships it is not installed."""
    import trama

    entry = by_name(name)
    module = entry.build()
    args, kwargs = entry.args_kwargs()
    return trama.export_model(
        module, inputs=list(entry.input_names), outputs=list(entry.output_names), example_inputs=kwargs or args
    )
