"""``trama view``: one self-contained HTML page to browse a model.

The page's data is checked as Python data (every node, settings, parameter counts, repeated
blocks, types from the facts or from a run), its escaping against text a document may hold,
the command line, and, in headless Chromium where one is installed, what the page shows: the
settings of the node a link selects, the counts, the mark of a repeated block, and that
clicking and searching are wired.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trama
from trama import INPUT, Model, Node, Parameter, Ref, Tensor, ValueFact
from trama.tools import cli
from trama.tools._view import example_inputs, render_html, run_shapes, run_view, view_arguments, view_data

#: Text no page may let through as markup: it closes the data's script element and opens one.
HOSTILE = '</script><script>document.title="pwned"</script><!-- <b>&amp;'
_DATA = re.compile(r'<script type="application/json" id="trama-data">(.*?)</script>', re.S)


def own(node_id: str, *slots: str) -> dict[str, str]:
    return {slot: f"{node_id}.{slot}" for slot in slots}


def small_model() -> Model:
    """``root`` (a Net) holds two Blocks of one structure (Linear 4 -> 4, relu), a call of the
    first, and a ``mul`` by 0.5; the input is ``x: f32[batch, 4]``."""
    rng = np.random.default_rng(0)
    nodes = [
        Node("root", "Graph", {"x": Ref(INPUT, "x")}, ["y"], {}, {"y": Ref("root.scale", "y")}, {"class": "pkg.Net"}),
    ]
    parameters: dict[str, Parameter] = {}
    for k, source in enumerate((Ref(INPUT, "x"), Ref("root.b0", "y"))):
        block = f"root.b{k}"
        nodes += [
            Node(
                block,
                "Graph",
                {"x": source},
                ["y"],
                {},
                {"y": Ref(f"{block}.act", "y")},
                {"class": "pkg.blocks.Block", "note": HOSTILE},
            ),
            Node(
                f"{block}.fc",
                "Linear",
                {"x": Ref(INPUT, "x")},
                ["y"],
                own(f"{block}.fc", "in_features", "out_features", "weight", "bias"),
            ),
            Node(f"{block}.act", "relu", {"x": Ref(f"{block}.fc", "y")}, ["y"]),
        ]
        parameters[f"{block}.fc.in_features"] = Parameter(4)
        parameters[f"{block}.fc.out_features"] = Parameter(4)
        parameters[f"{block}.fc.weight"] = Parameter(
            Tensor.from_array(rng.standard_normal((4, 4)).astype(np.float32)), learnable=True
        )
        parameters[f"{block}.fc.bias"] = Parameter(Tensor.from_array(np.zeros(4, np.float32)), learnable=True)
    nodes += [
        Node("root.again", "Graph", {"x": Ref("root.b1", "y")}, ["y"], calls="root.b0"),
        Node("root.scale", "mul", {"x": Ref("root.again", "y")}, ["y"], own("root.scale", "other")),
    ]
    parameters["root.scale.other"] = Parameter(0.5)
    model = Model(["x"], [Ref("root", "y")], nodes, parameters, input_facts=[ValueFact("float32", ("batch", 4))])
    return trama.loads(trama.dumps(model))  # valid, as read from a file


def data_of(page: str) -> dict[str, Any]:
    (text,) = _DATA.findall(page)
    data: dict[str, Any] = json.loads(text)
    return data


def ids_of(data: dict[str, Any]) -> list[str]:
    ids: list[str] = []
    for item in data["nodes"]:
        ids.append(item["n"] if item["p"] < 0 else f"{ids[item['p']]}.{item['n']}")
    return ids


def node_data(data: dict[str, Any], node_id: str) -> dict[str, Any]:
    item: dict[str, Any] = data["nodes"][ids_of(data).index(node_id)]
    return item


# --- the page and its data -------------------------------------------------------------------


def test_the_page_is_self_contained_and_deterministic() -> None:
    model = small_model()
    page = render_html(model, title="small")
    assert page == render_html(small_model(), title="small")
    assert page.startswith("<!DOCTYPE html>")
    assert "Content-Security-Policy" in page
    assert "default-src 'none'" in page
    for outside in ("<link", " src=", "url(", "@import", "https:"):
        assert outside not in page, outside
    assert re.findall(r"http://[^\"' ]*", page) == ["http://www.w3.org/2000/svg"]  # a namespace, not a fetch
    assert "<title>small</title>" in page


def test_the_data_has_every_node_with_its_settings_counts_and_wiring() -> None:
    model = small_model()
    data = view_data(model, title="small")
    assert ids_of(data) == [node.id for node in model.nodes]
    fc = node_data(data, "root.b0.fc")
    assert fc["o"] == "Linear"
    assert fc["k"] == 0
    settings = {s["s"]: s for s in fc["s"]}
    assert settings["in_features"] == {"s": "in_features", "v": "4"}
    assert settings["weight"] == {"s": "weight", "v": "f32[4, 4]", "t": 1, "L": 1}
    assert fc["w"] == fc["W"] == 20
    assert fc["i"] == [["x", "%x", "f32[batch, 4]", -1]]  # the input's fact, through b0's port
    assert node_data(data, "root.b1.fc")["i"] == [["x", "%x", None, -1]]  # no shape is inferred
    block = node_data(data, "root.b1")
    assert block["c"] == "pkg.blocks.Block"
    assert block["l"] == "Block"
    assert block["k"] == 1
    assert "w" not in block
    assert block["W"] == 20
    assert block["i"] == [["x", "b0", None, ids_of(data).index("root.b0")]]
    assert block["u"] == [["y", "act", None, ids_of(data).index("root.b1.act")]]
    root = node_data(data, "root")
    assert root["W"] == 40  # the call uses b0's entries: counted once
    assert root["i"] == [["x", "%x", "f32[batch, 4]", -1]]
    call = node_data(data, "root.again")
    assert call["k"] == 2
    assert call["t"] == ids_of(data).index("root.b0")
    assert "W" not in call
    assert node_data(data, "root.scale")["s"] == [{"s": "other", "v": "0.5"}]
    (group,) = data["groups"]
    assert group == {"label": "Block", "ids": [ids_of(data).index("root.b0"), ids_of(data).index("root.b1")]}
    assert node_data(data, "root.b0")["g"] == node_data(data, "root.b1")["g"] == 0
    assert data["model"] == {"in": [["x", "f32[batch, 4]"]], "out": [["0", "root", None, 0]]}
    assert data["totals"]["elements"] == 40
    assert data["totals"]["nodes"] == len(model.nodes)
    assert data["signature"] == "model(x: f32[batch, 4]) -> %root"
    assert data["shapes"] is None


def test_text_from_the_document_cannot_become_markup() -> None:
    model = small_model()
    model.metadata["</script>"] = HOSTILE
    model.nodes.append(Node("root.tagged", "pkg.Tag", {}, ["y"], {"label": "tag.label"}, metadata={"class": HOSTILE}))
    model.parameters["tag.label"] = Parameter(HOSTILE + "\ud800\u2028")  # a lone surrogate too
    page = render_html(model, title=HOSTILE + "\udcff")  # a file name's undecodable byte, as Python holds it
    assert HOSTILE not in page
    assert page.count("</script>") == 2  # the data's element and the script's, nothing a document held
    assert page.count("<script") == 2
    page.encode("utf-8")  # no lone surrogate was written
    assert "<title>&lt;/script&gt;&lt;script&gt;" in page
    data = data_of(page)
    assert data["title"] == HOSTILE + "\udcff"
    tagged = node_data(data, "root.tagged")
    assert tagged["c"] == HOSTILE
    (setting,) = tagged["s"]
    assert setting["s"] == "label"
    assert setting["e"] == "tag.label"
    assert setting["v"].startswith('"</script><script>document.title=\\"pwned\\"')  # as JSON writes it
    assert ["note", HOSTILE] in node_data(data, "root.b0")["m"]
    assert ["</script>", HOSTILE] in data["header"]


def test_long_values_are_cut_and_no_tensor_data_is_embedded() -> None:
    model = small_model()
    model.nodes.append(Node("root.long", "pkg.Long", {}, ["y"], {"shape": "long.shape"}))
    model.parameters["long.shape"] = Parameter(list(range(1000)))
    data = view_data(model)
    value = node_data(data, "root.long")["s"][0]["v"]
    assert len(value) == 400
    assert value.endswith("…")
    assert value.startswith("[0, 1, 2")
    page = render_html(model)
    weight = np.asarray(model.parameters["root.b0.fc.weight"].value)
    assert repr(float(weight.flat[0]))[:8] not in page
    assert data["title"] == "trama model"


# --- shapes from a run -----------------------------------------------------------------------


def test_example_inputs_follow_the_facts() -> None:
    model = small_model()
    arrays = example_inputs(model)
    assert arrays["x"].shape == (2, 4)
    assert arrays["x"].dtype == np.float32
    assert (arrays["x"] == 1).all()
    assert example_inputs(model, {"batch": 5})["x"].shape == (5, 4)
    model.symbols = {"batch": trama.SymbolRange(min=3, max=8)}
    assert example_inputs(model)["x"].shape == (3, 4)
    with pytest.raises(trama.TramaError, match="no input has the symbolic size 'seq'"):
        example_inputs(model, {"seq": 3})
    model.input_facts = None
    with pytest.raises(trama.TramaError, match="states no shape for input 'x'"):
        example_inputs(model)


def test_a_run_gives_every_node_its_shapes() -> None:
    model = small_model()
    run = run_shapes(model, example_inputs(model, {"batch": 3}))
    assert run.runtime == "numpy"
    assert run.inputs == {"x": ValueFact("float32", (3, 4))}
    assert set(run.nodes) == {node.id for node in model.nodes}
    for node_id in ("root.b0.fc", "root.b1", "root.again", "root.scale", "root"):
        shapes = run.nodes[node_id]
        assert shapes.inputs == {"x": ValueFact("float32", (3, 4))}, node_id
        assert shapes.outputs == {"y": ValueFact("float32", (3, 4))}, node_id
    data = view_data(model, shapes=run)
    assert node_data(data, "root.b0.fc")["i"] == [["x", "%x", "f32[3, 4]", -1]]
    assert node_data(data, "root.again")["u"] == [["y", None, "f32[3, 4]", -1]]
    assert data["shapes"] == "shapes of one numpy run on inputs x: f32[3, 4]"
    assert data["model"]["in"] == [["x", "f32[3, 4]"]]


# --- the command -----------------------------------------------------------------------------


@pytest.fixture
def view(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str]], int]:
    """``trama view ARGV`` as cli.py registers the command, for the test (the table is restored)."""
    command = cli.Command("view", "write a model as one HTML page to browse", view_arguments, run_view)
    monkeypatch.setitem(cli.COMMANDS, "view", command)
    return lambda argv: cli.main(["view", *argv])


def test_the_command_writes_the_page(
    view: Callable[[list[str]], int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "small.trama.json"
    trama.dump(small_model(), document)
    out = tmp_path / "small.html"
    assert view([str(document), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert data_of(page)["title"] == "small"
    assert data_of(page)["shapes"] is None
    assert capsys.readouterr().out == f"wrote {out} ({len(page.encode()):,} bytes, 9 nodes)\n"
    assert view([str(document), "-o", str(out), "--shapes", "--size", "batch=7", "--title", "T"]) == 0
    data = data_of(out.read_text(encoding="utf-8"))
    assert data["title"] == "T"
    assert data["model"]["in"] == [["x", "f32[7, 4]"]]
    inputs = tmp_path / "x.npy"
    np.save(inputs, np.zeros((6, 4), np.float32))
    assert view([str(document), "-o", str(out), "--shapes", "--input", f"x={inputs}"]) == 0
    assert data_of(out.read_text(encoding="utf-8"))["model"]["in"] == [["x", "f32[6, 4]"]]


@pytest.mark.parametrize(
    ("argv", "status", "message"),
    [
        (["--size", "batch=2"], 2, "take effect with --shapes only"),
        (["--shapes", "--size", "batch"], 2, "--size takes SYMBOL=N"),
        (["--shapes", "--size", "seq=2"], 1, "cannot record shapes: no input has the symbolic size 'seq'"),
        (["--shapes", "--runtime", "nonesuch"], 1, "cannot record shapes: "),
    ],
)
def test_the_command_says_what_is_wrong(
    view: Callable[[list[str]], int],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    status: int,
    message: str,
) -> None:
    document = tmp_path / "small.trama.json"
    trama.dump(small_model(), document)
    out = tmp_path / "small.html"
    assert view([str(document), "-o", str(out), *argv]) == status
    error = capsys.readouterr().err
    assert message in error
    assert len(error.splitlines()) == 1
    assert not out.exists()


def test_a_bad_document_or_destination_is_one_line(
    view: Callable[[list[str]], int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.trama.json"
    bad.write_text('{"format_version": "1.3", "inputs": [], "outputs": [], "nodes": [{}]}')
    assert view([str(bad), "-o", str(tmp_path / "x.html")]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"{bad}: ")
    assert len(error.splitlines()) == 1
    document = tmp_path / "small.trama.json"
    trama.dump(small_model(), document)
    assert view([str(document), "-o", str(tmp_path / "missing" / "x.html")]) == 1
    error = capsys.readouterr().err
    assert "missing" in error
    assert len(error.splitlines()) == 1


def test_the_command_reads_standard_input(
    view: Callable[[list[str]], int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(trama.dumps(small_model()).encode())))
    out = tmp_path / "page.html"
    assert view(["-", "-o", str(out), "-q"]) == 0
    data = data_of(out.read_text(encoding="utf-8"))
    assert data["title"] == "trama model"
    assert len(data["nodes"]) == 9
    assert capsys.readouterr().err == ""


# --- in a browser ----------------------------------------------------------------------------

_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell")


def chromium() -> str:
    """The headless browser to run: ``TRAMA_CHROMIUM``, or the first Chromium on the PATH."""
    named = os.environ.get("TRAMA_CHROMIUM")
    found = named or next((path for name in _BROWSERS if (path := shutil.which(name))), None)
    if not found:
        pytest.skip("no Chromium to run the page in (apt-get install chromium, or set TRAMA_CHROMIUM)")
    return found


def dump_dom(browser: str, page: Path, fragment: str, profile: Path) -> str:
    """The page's DOM after its scripts ran, as headless Chromium serializes it."""
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-extensions",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=3000",
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Element | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element | str] = []

    def text(self) -> str:
        return "".join(child if isinstance(child, str) else child.text() for child in self.children)

    def all(self, tag: str | None = None, *, id: str | None = None, cls: str | None = None) -> list[Element]:
        """The descendants of this tag, id and class (each where given), in document order."""
        found = []
        for child in self.children:
            if isinstance(child, Element):
                if (
                    (tag is None or child.tag == tag)
                    and (id is None or child.attrs.get("id") == id)
                    and (cls is None or cls in child.attrs.get("class", "").split())
                ):
                    found.append(child)
                found += child.all(tag, id=id, cls=cls)
        return found

    def one(self, tag: str | None = None, *, id: str | None = None, cls: str | None = None) -> Element:
        (found,) = self.all(tag, id=id, cls=cls)
        return found


class _Builder(HTMLParser):
    VOID = frozenset({"meta", "input", "br", "img", "link", "hr", "option"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.at = Element("#document", {}, None)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs}, self.at)
        self.at.children.append(element)
        if tag not in self.VOID:
            self.at = element

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.at.children.append(Element(tag, {k: v or "" for k, v in attrs}, self.at))

    def handle_endtag(self, tag: str) -> None:
        at: Element | None = self.at
        while at is not None and at.tag != tag:
            at = at.parent
        if at is not None and at.parent is not None:
            self.at = at.parent

    def handle_data(self, data: str) -> None:
        self.at.children.append(data)


def parse(text: str) -> Element:
    builder = _Builder()
    builder.feed(text)
    return builder.root


def settings_table(detail: Element) -> dict[str, list[str]]:
    """The Settings table of the details pane: slot -> its other cells' text."""
    heads = [h.text() for h in detail.all("h3")]
    assert "Settings" in heads, heads
    table = detail.all("table")[0]
    rows = {}
    for row in table.all("tr")[1:]:
        cells = [cell.text() for cell in row.children if isinstance(cell, Element)]
        rows[cells[0]] = cells[1:]
    return rows


@pytest.fixture(scope="module")
def llama_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The zoo's ``hf_llama`` (two decoder layers, hidden size 32), with the shapes of a run."""
    chromium()  # skip before exporting, where there is no browser
    pytest.importorskip("transformers")
    from realworld.captures import export
    from realworld.models import by_name, ensure_torchvision_importable

    ensure_torchvision_importable()
    entry = by_name("hf_llama")
    model = trama.loads(trama.dumps(export(entry, entry.build())))
    path = tmp_path_factory.mktemp("view") / "hf_llama.html"
    path.write_text(render_html(model, title="hf_llama", shapes=run_shapes(model)), encoding="utf-8")
    return path


MLP = "root.model.layers.0.mlp"


def test_a_link_selects_a_node_and_the_page_shows_it(llama_page: Path, tmp_path: Path) -> None:
    dom = parse(dump_dom(chromium(), llama_page, f"#expand={MLP}&select={MLP}.gate_proj", tmp_path / "profile"))
    detail = dom.one(id="detail")
    assert detail.one("h2").text().startswith("gate_proj")
    settings = settings_table(detail)
    assert settings["in_features"][0] == "32"
    assert settings["out_features"][0] == "64"
    assert settings["weight"] == ["f32[64, 32]", "learnable"]
    text = detail.text()
    assert "2,048 in its subtree" in text
    assert "f32[2, 8, 32]" in text
    assert "f32[2, 8, 64]" in text
    rows = {row.attrs["data-id"]: row for row in dom.one(id="tree").all("div", cls="row") if "data-id" in row.attrs}
    assert "sel" in rows[f"{MLP}.gate_proj"].attrs["class"].split()
    assert f"{MLP}.down_proj" in rows
    assert "root.model.layers.1.mlp" not in rows
    layer = rows["root.model.layers.0"]
    assert [b.text() for b in layer.all("span", cls="badge")] == ["×2"]
    assert "LlamaDecoderLayer" in layer.text()
    numbers = [span.text() for span in rows[f"{MLP}.gate_proj"].all("span", cls="num")]
    assert numbers == ["2K", "2K"]  # own and subtree: 64 x 32
    wiring = detail.one(id="wire").text()
    assert "gate_proj" in wiring
    assert "down_proj" in wiring
    assert "← mul" in wiring
    assert "pwned" not in dom.all("title")[0].text()


def test_clicking_and_searching_are_wired(llama_page: Path, tmp_path: Path) -> None:
    probe = """<script>
(function () {
  const note = (id, text) => {
    const d = document.createElement("div");
    d.id = id;
    d.textContent = text;
    document.body.appendChild(d);
  };
  const row = (id) => document.querySelector('#tree .row[data-id="' + id + '"]');
  row("root.model.layers.0.mlp.up_proj").querySelector(".nm").click();
  note("probe-select", document.querySelector("#detail h2").firstChild.textContent + "|" + location.hash);
  row("root.model.layers.0").querySelector(".tg").click();
  note("probe-collapse", row("root.model.layers.0.mlp") ? "open" : "closed");
  const q = document.getElementById("q");
  q.value = "o_proj";
  q.dispatchEvent(new Event("input"));
  note("probe-search", document.getElementById("count").textContent + "|" +
    Array.from(document.querySelectorAll("#tree .row.hit")).map((r) => r.dataset.id).join(","));
  q.value = "";
  q.dispatchEvent(new Event("input"));
  document.getElementById("expand").click();
  note("probe-expand", String(document.querySelectorAll("#tree .row[data-k]").length));
  document.getElementById("collapse").click();
  note("probe-collapse-all", String(document.querySelectorAll("#tree .row[data-k]").length));
  const wire = document.querySelector("#wire .wr");
  note("probe-wire", wire ? "has rows" : "none");
})();
</script>
</body>"""
    page = llama_page.read_text(encoding="utf-8")
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", probe), encoding="utf-8")
    dom = parse(dump_dom(chromium(), probed, f"#expand={MLP}&select={MLP}.gate_proj", tmp_path / "profile"))
    assert dom.one(id="probe-select").text() == f"up_proj|#select={MLP}.up_proj"
    assert dom.one(id="probe-collapse").text() == "closed"
    count, hits = dom.one(id="probe-search").text().split("|")
    assert count == "2 matches"
    assert hits.split(",") == [f"root.model.layers.{k}.self_attn.o_proj" for k in (0, 1)]
    assert int(dom.one(id="probe-expand").text()) == 1 + 166  # the document's row and every node
    assert int(dom.one(id="probe-collapse-all").text()) == 2  # the document's row and root
    assert dom.one(id="probe-wire").text() == "has rows"


def test_text_from_the_document_is_shown_as_text_in_the_browser(tmp_path: Path) -> None:
    browser = chromium()
    model = small_model()
    page = tmp_path / "hostile.html"
    page.write_text(render_html(model, title=HOSTILE), encoding="utf-8")
    dom = parse(dump_dom(browser, page, "#select=root.b0", tmp_path / "profile"))
    assert dom.all("title")[0].text() == HOSTILE  # not "pwned": no script of the document's ran
    assert dom.one(id="title").text() == HOSTILE
    detail = dom.one(id="detail")
    assert dom.all("b", cls=None) == detail.all("b")  # the only <b> the page makes: the node itself
    assert [b.text() for b in detail.all("b")] == ["root.b0"]
    rows = [[cell.text() for cell in row.children if isinstance(cell, Element)] for row in detail.all("tr")]
    assert ["note", HOSTILE] in rows
    assert "×2 Block" in detail.text()
