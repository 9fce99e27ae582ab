"""trama-jax: trama documents as pure, jit-compiled JAX functions.

* ``trama.import_model(doc, registry=trama.registry("jax"))`` gives a :class:`JaxModule`: its
  ``params`` are a pytree keyed by the document's entry names, ``apply(params, *inputs)`` is a
  pure function that ``jax.jit`` and ``jax.grad`` accept, and ``to_model()`` /
  ``trama.export_model`` give the document back with the current values.
* :func:`build` turns a whole document into a :class:`JaxProgram` (the model's inputs to its
  outputs), which is what the runtimes compile.
* ``trama.runtime_for_name("jax:cpu")`` (and ``jax:gpu``, ``jax:tpu``, ``jax:metal``) runs a
  document as one compiled program, with placement on devices and streaming states.

Plugin discovery imports :mod:`trama_jax.plugin`, and so this package, whether or not anybody
uses JAX: the names below are imported on first use, so that ``import trama_jax`` alone does not
import JAX.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trama.extension import lazy_exports

if TYPE_CHECKING:
    from trama_jax.kernel import JaxKernel
    from trama_jax.model import JaxComposite, JaxLeaf, JaxModule, JaxProgram, build, build_composite
    from trama_jax.runnable import JaxRunnable
    from trama_jax.runtime import JaxRuntime

__all__ = [
    "JaxComposite",
    "JaxKernel",
    "JaxLeaf",
    "JaxModule",
    "JaxProgram",
    "JaxRunnable",
    "JaxRuntime",
    "build",
    "build_composite",
]

#: Where each public name lives.
_HOMES = {
    "JaxKernel": "kernel",
    "JaxComposite": "model",
    "JaxLeaf": "model",
    "JaxModule": "model",
    "JaxProgram": "model",
    "build": "model",
    "build_composite": "model",
    "JaxRunnable": "runnable",
    "JaxRuntime": "runtime",
}


__getattr__ = lazy_exports(__name__, _HOMES)
