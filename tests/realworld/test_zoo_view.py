"""``trama view`` renders every zoo model: one self-contained page whose embedded data has every
node of the document, with no tensor data, modest in size, the same bytes every time.

The page's data is checked here (its script is exercised in ``tests/test_view.py``, in a
headless browser); each model's capture is the shared ``zoo_capture`` fixture, so this costs
no export of its own.
"""

from __future__ import annotations

import json
import re

from realworld.captures import ZooCapture
from trama.tools._view import render_html

#: The largest page a zoo model may give: its data is structure, never tensors.
MAX_BYTES = 2_000_000

_DATA = re.compile(r'<script type="application/json" id="trama-data">(.*?)</script>', re.S)


def test_every_zoo_model_renders_with_every_node(zoo_capture: ZooCapture) -> None:
    document = zoo_capture.document
    if document is None:
        return  # a refused model: test_zoo_capture checks its reason
    page = render_html(document, title=zoo_capture.entry.name)
    assert page == render_html(document, title=zoo_capture.entry.name), "the page is not deterministic"
    assert len(page.encode("utf-8")) < MAX_BYTES
    (text,) = _DATA.findall(page)
    data = json.loads(text)
    nodes = data["nodes"]
    assert len(nodes) == len(document.nodes)
    ids: list[str] = []
    for item in nodes:
        ids.append(item["n"] if item["p"] < 0 else f"{ids[item['p']]}.{item['n']}")
    assert ids == [node.id for node in document.nodes]
    assert [item["o"] for item in nodes] == [node.op for node in document.nodes]
    assert data["totals"]["nodes"] == len(document.nodes)
    top = sum(item.get("W", 0) for item in nodes if item["p"] < 0)
    assert top <= data["totals"]["elements"]
    assert '"data"' not in text  # no tensor's bytes
