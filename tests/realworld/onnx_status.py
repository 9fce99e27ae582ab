"""Which zoo models trama-onnx cannot lower yet, and the op each one lacks.

Strict, like the zoo's other lists: a model listed here must fail to lower naming that op, and a
model that starts lowering fails its test until it is removed (``test_zoo_onnx.py``,
``test_zoo_dynamic.py``).
"""

from __future__ import annotations

#: Zoo model -> a regular expression its LoweringError must match (the op it lacks).
NOT_LOWERED: dict[str, str] = {}
