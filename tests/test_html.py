"""The HTML report (``rewrite --html``, ``explain --html``) as a person sees
it: written by the CLI for the small BERT, GPT-2 and LLaMA of
examples/models.py, opened in headless Chromium (the Debian package; the
DOM after the page's script ran, and a screenshot), the matched nodes
checked on the rendered page and in the picture's pixels.

Graphviz's ``dot`` and Chromium are installed by ``make apt-deps``; without
them these tests skip, except under ``PYPM_REQUIRE_TOOLS=1`` (``make
test-python``, hence CI), where a missing tool fails them.
"""
import html as htmllib
import html.parser as htmllib_parser
import json
import os
import re
import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import models  # noqa: E402 -- examples/, on sys.path from conftest
import pictures  # noqa: E402

from pypm_verified import cli  # noqa: E402
from pypm_verified.torch import html as pmhtml  # noqa: E402

REQUIRE = bool(os.environ.get("PYPM_REQUIRE_TOOLS"))


def _need(tool: str, found) -> None:
    if found:
        return
    msg = (f"{tool} is not installed (`make apt-deps` installs it: Debian packages graphviz "
           "and chromium)")
    if REQUIRE:
        pytest.fail(f"PYPM_REQUIRE_TOOLS is set but {msg}")
    pytest.skip(msg)


@pytest.fixture(scope="module")
def dot():
    _need("Graphviz's dot", shutil.which("dot"))
    return pmhtml.find_dot()


@pytest.fixture(scope="module")
def browser():
    _need("chromium", pictures.chromium())
    return pictures.chromium()


@pytest.fixture(scope="module")
def pt2(tmp_path_factory):
    d = tmp_path_factory.mktemp("html_models")
    cache = {}

    def get(name: str, layers=None) -> str:
        key = (name, layers)
        if key not in cache:
            path = str(d / f"{name}{layers or ''}.pt2")
            torch.export.save(models.export(name, "small", layers), path)
            cache[key] = path
        return cache[key]
    return get


def page_data(path: str) -> dict:
    text = open(path, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="pm-data">(.*?)</script>', text, re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))


def classes_by_id(dom: str) -> dict:
    """id -> class list of the SVG node groups in a serialized DOM."""
    out = {}
    for m in re.finditer(r'<g id="([^"]+)" class="([^"]+)"', dom):
        out[htmllib.unescape(m.group(1))] = m.group(2).split()
    return out


def fill_pixels(png: str, hex_color: str, tol: float = 3 / 255) -> int:
    """Pixels of ``png`` within ``tol`` of ``hex_color``."""
    mpimg = pytest.importorskip("matplotlib.image")  # the [bench] extra, in make venv
    import numpy as np
    img = mpimg.imread(png)[..., :3]
    want = np.array([int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    return int((np.abs(img - want).max(axis=-1) <= tol).sum())


def check_png(png: str, fills) -> None:
    mpimg = pytest.importorskip("matplotlib.image")
    img = mpimg.imread(png)[..., :3]
    assert img.shape[0] >= 500 and img.shape[1] >= 800
    assert img.std() > 0.05, "the screenshot is (nearly) blank"
    for f in fills:  # the matched nodes are on screen in their rule's fill
        assert fill_pixels(png, f) > 300, f"no pixel of the highlight colour {f}"


# (model, fired rules, a declined rule) at --target cuda
CASES = [("bert", {"sdpa"}, "linear_act"),
         ("gpt2", {"sdpa", "gelu_tanh"}, None),
         ("llama", {"sdpa", "rms_norm"}, "linear_act")]


@pytest.mark.parametrize("name,fired_rules,declined_rule", CASES, ids=[c[0] for c in CASES])
def test_rewrite_report_renders_in_chromium(name, fired_rules, declined_rule, pt2, dot,
                                            browser, tmp_path, capsys):
    page = str(tmp_path / f"{name}.html")
    rc = cli.main(["rewrite", pt2(name), "--target", "cuda", "--dry-run", "--no-check", "-q",
                   "--html", page])
    out = capsys.readouterr().out
    assert rc == cli.EXIT_OK, out
    assert f"wrote the HTML report {page}" in out
    text = open(page, encoding="utf-8").read()
    assert "http://" not in text.replace("http://www.w3.org/", "") and "https://" not in text
    data = page_data(page)
    events = data["events"]
    fired = [e for e in events if e["status"] == "fired"]
    assert {e["rule"] for e in fired} == fired_rules
    declined = [e for e in events if e["status"] == "declined"]
    if declined_rule:
        assert any(d[0] == declined_rule for e in declined for d in e["declines"])

    dom = pictures.dump_dom(page)
    assert 'data-ready="1"' in dom, "the page's script did not finish"
    counts = json.loads(htmllib.unescape(re.search(r'data-highlighted="([^"]*)"', dom).group(1)))
    cls = classes_by_id(dom)
    # every node of every fired match is highlighted before, its replacement after
    for e in fired:
        for n in e["cover"]:
            if n in data["nodes"]["before"]:
                assert "fired" in cls[f"before_{n}"], (n, e)
        built = [c for c in e["created"] if c in data["nodes"]["after"]]
        for c in built:
            assert "created" in cls[f"after_{c}"], (c, e)
    for e in declined:
        assert {"declined", "fired"} & set(cls[f"before_{e['root']}"]), e
    assert counts["fired"] >= sum(len(e["cover"]) for e in fired) // 2 > 0
    assert counts["created"] > 0 and counts["declined"] >= (1 if declined_rule else 0)
    # hovering shows the details: the page opened on a fired match, pinned
    assert 'class="node fx fired' in dom and "fired: rule <b>" in dom

    # a link to a node opens the page on it, with its details: a node a rule built
    e = next(e for e in fired if any(c in data["nodes"]["after"] for c in e["created"]))
    c = next(c for c in e["created"] if c in data["nodes"]["after"])
    dom = pictures.dump_dom(page, f"after_{c}")
    panel = dom[dom.index('<div id="details">'):]
    assert panel.startswith(f'<div id="details"><h3>{c}</h3>') and "after graph" in panel
    assert f"fired: rule <b>{e['rule']}</b> built " in panel

    png = pictures.screenshot(page, str(tmp_path / f"{name}.png"))
    focus_rule = next(e["rule"] for e in fired if e["root"] == data["focus"]["name"])
    check_png(png, [data["colors"][focus_rule][1]])


def test_large_model_collapses_layers(pt2, dot, browser, tmp_path, capsys):
    """LLaMA at 4 layers, 1 drawn: the other layers are one box each
    (saying what matched in them)."""
    page = str(tmp_path / "llama4.html")
    rc = cli.main(["rewrite", pt2("llama", 4), "--target", "cuda", "--dry-run", "--no-check",
                   "-q", "--html", page, "--html-layers", "1"])
    assert rc == cli.EXIT_OK, capsys.readouterr()
    data = page_data(page)
    st = data["stats"]["before"]
    assert st["collapsed_layers"] == 3 and st["expanded_layers"] == 1
    assert st["drawn"] < st["nodes"] / 2
    boxes = {k: v for k, v in data["nodes"]["before"].items() if v["op"] == "collapsed"}
    assert len(boxes) == st["collapsed_layers"]
    assert all(b["events"] for b in boxes.values())  # each holds its layer's matches
    dom = pictures.dump_dom(page)
    cls = classes_by_id(dom)
    assert sum("collapsed" in c for k, c in cls.items() if k.startswith("before_")) \
        == len(boxes)
    assert 'data-ready="1"' in dom


def test_explain_report_marks_near_misses(dot, browser, tmp_path, capsys):
    """``explain --html``: where each near miss started and where it failed."""
    class M(torch.nn.Module):
        def forward(self, q, k, v):
            s = torch.matmul(q, k.transpose(-2, -1))
            return torch.matmul(torch.softmax(s, dim=2) * 2.0, v)  # scaled after the softmax
    x = torch.randn(1, 2, 4, 8)
    path = str(tmp_path / "att.pt2")
    torch.export.save(torch.export.export(M(), (x, x, x)), path)
    page = str(tmp_path / "explain.html")
    rc = cli.main(["explain", path, "--pattern", "Attention", "--rules", "attention",
                   "--html", page])
    out = capsys.readouterr().out
    assert rc == cli.EXIT_OK, out
    data = page_data(page)
    near = [e for e in data["events"] if e["status"] == "near" and e["root"] == "matmul_1"]
    assert near and "expected operator Softmax or operator SafeSoftmax" in near[0]["message"]
    dom = pictures.dump_dom(page)
    assert 'data-ready="1"' in dom
    cls = classes_by_id(dom)
    assert "near" in cls["model_matmul_1"]
    # it failed at the multiplication where the softmax should be
    assert near[0]["at"] == "mul" and "near-at" in cls["model_mul"]
    assert "matmul_1" in near[0]["cover"] and "softmax" not in near[0]["cover"]
    assert "near miss from <b>" in dom  # the details panel opened on it
    png = pictures.screenshot(page, str(tmp_path / "explain.png"))
    check_png(png, [])


def test_html_fails_early_without_dot(tmp_path, monkeypatch, capsys):
    """No ``dot``: exit 2 with the reason, before the model is even read."""
    model = tmp_path / "m.pt2"
    model.write_bytes(b"not a model")  # never loaded: the check comes first
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    rc = cli.main(["rewrite", str(model), "--html", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_INPUT
    assert "Graphviz's `dot` is not on PATH" in err and "apt-get install graphviz" in err
    assert "not a zip" not in err
    rc = cli.main(["explain", str(model), "--pattern", "Attention", "--html",
                   str(tmp_path / "r.html")])
    assert rc == cli.EXIT_INPUT and "dot" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_html_path_mistakes(tmp_path, capsys):
    model = tmp_path / "m.pt2"
    model.write_bytes(b"not a model")
    cases = [
        (["--html", str(tmp_path)], "is a directory"),
        (["--html", str(tmp_path / "no" / "r.html")], "does not exist"),
        (["--html", str(tmp_path / "r.json"), "--report", str(tmp_path / "r.json")],
         "is also the --report"),
        (["--html", str(model)], "is also the input MODEL"),
        (["--html-layers", "2"], "--html-layers: only with --html"),
        (["--html", str(tmp_path / "r.html"), "--html-layers", "0"], "0 is too few"),
    ]
    for extra, msg in cases:
        rc = cli.main(["rewrite", str(model), "--dry-run", *extra])
        err = capsys.readouterr().err
        assert rc == cli.EXIT_INPUT and msg in err, (extra, err)


def test_write_is_atomic(pt2, dot, tmp_path, monkeypatch, capsys):
    """A failure while writing leaves no file and no temporary behind."""
    page = tmp_path / "r.html"

    def boom(*a, **k):
        raise RuntimeError("dot failed (1): simulated")
    monkeypatch.setattr(pmhtml, "draw", boom)
    rc = cli.main(["rewrite", pt2("bert"), "--target", "cuda", "--dry-run", "--no-check", "-q",
                   "--html", str(page)])
    assert rc == cli.EXIT_INPUT and "cannot draw it" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


# ------------------------------------------------ user strings in the page

# a pattern / rule name, reason and path with markup in it: shown as text,
# escaped exactly once; "&amp;" must stay the five characters it is, and
# "<!--<script>" in the page's data must not swallow the page's script
NASTY = 'P<script>alert("x&amp;y")</script><!--<script>\'q\''


class _Text(htmllib_parser.HTMLParser):
    """The text of each element (by tag and class), the attributes of
    ``data-focus`` items and the start tags seen, of a page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.text, self.focus, self.tags = [], {}, [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if "data-focus" in a:
            self.focus.append(a["data-focus"])
        if tag not in ("meta", "br", "path", "polygon", "ellipse", "polyline"):
            self.stack.append((tag, a.get("class") or ""))

    def handle_endtag(self, tag):
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag:
                break

    def handle_data(self, data):
        if self.stack and self.stack[-1][0] != "script":
            tag, cls = self.stack[-1]
            self.text.setdefault(tag, []).append(data)
            if cls:
                self.text.setdefault("." + cls, []).append(data)


def _parse(text: str) -> _Text:
    p = _Text()
    p.feed(text)
    p.close()
    return p


@pytest.fixture(scope="module")
def small_ep():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x + 1)
    return torch.export.export(M(), (torch.randn(2, 3),))


def _check_page(page: str, browser) -> _Text:
    """What every page must satisfy with ``NASTY`` in it."""
    text = open(page, encoding="utf-8").read()
    p = _parse(text)
    assert p.tags.count("script") == 2  # the data and the page's script, no other
    assert "<script>alert" not in text and "<!--<script>" not in text
    assert "&amp;amp;" in text and "&amp;amp;amp;" not in text  # escaped once
    dom = pictures.dump_dom(page)
    assert 'data-ready="1"' in dom, "the page's script did not run"
    return p


def test_user_strings_escaped_once_in_explain_page(small_ep, dot, browser, tmp_path):
    ev = pmhtml.MatchEvent(NASTY, "relu", ["relu", "add"], "matched", ["r" + NASTY],
                           {"x" + NASTY: "add"})
    miss = pmhtml.MatchEvent(NASTY, "add", ["add"], "near", ["r" + NASTY])
    miss.message, miss.at = "first line\nwhy: " + NASTY, "add"
    html, _ = pmhtml.explain_page(small_ep, NASTY, [ev], [miss], title="explain " + NASTY,
                                  info={"model": "/m/" + NASTY + ".pt2"}, dot=dot)
    page = tmp_path / "explain.html"
    page.write_text(html, encoding="utf-8")
    p = _check_page(str(page), browser)
    assert p.text["title"][0] == p.text["h1"][0] == "explain " + NASTY  # then the SVG's titles
    assert p.text[".dim"][0] == f"1 match(es) · 1 near miss(es) shown · model /m/{NASTY}.pt2"
    assert NASTY in p.text["b"]  # the legend, and the near miss's list
    assert p.text[".reason"] == ["why: " + NASTY] and p.focus == ["model_add"]
    assert f"{NASTY} on the model's graph" in "".join(p.text["h2"])
    data = page_data(str(page))  # the script's data: the strings as they are
    assert [e["pattern"] for e in data["events"]] == [NASTY, NASTY]
    assert data["events"][1]["message"] == miss.message
    assert data["events"][0]["bindings"] == {"x" + NASTY: "add"}
    assert list(data["colors"]) == [NASTY]


def test_user_strings_escaped_once_in_rewrite_page(small_ep, dot, browser, tmp_path):
    from pypm_verified.rewriting.report import RewriteReport
    rule = "r" + NASTY
    report = RewriteReport(matches={NASTY: 1}, rules={NASTY: [rule]},
                           declines={NASTY: {rule: {"declined: " + NASTY: 1}}},
                           engine="verified", target="cpu", nodes_before=2, nodes_after=2)
    rec = pmhtml.Recorder()
    ev = pmhtml.MatchEvent(NASTY, "relu", ["relu", "add"], "matched", [rule])
    ev.declined([(rule, "declined: " + NASTY)])
    rec.events.append(ev)
    html, _ = pmhtml.rewrite_page(small_ep, small_ep, report, rec, title="rewrite " + NASTY,
                                  info={"output": "/out/" + NASTY}, dot=dot)
    page = tmp_path / "rewrite.html"
    page.write_text(html, encoding="utf-8")
    p = _check_page(str(page), browser)
    assert p.text["title"][0] == p.text["h1"][0] == "rewrite " + NASTY
    assert p.text[".dim"][0] == ("nodes 2 → 2 · 0 rewrite(s) in 0 pass(es) · engine verified · "
                                 f"target cpu · output /out/{NASTY}")
    assert NASTY in p.text["b"] and rule in p.text["b"]  # the table, the legend
    assert rule in p.text["td"] and "declined: " + NASTY in p.text["td"]  # the rule's row
    assert p.text[".reason"] == ["declined: " + NASTY]
    assert f"({NASTY}): fired 0" in p.text[".dim"]
    data = page_data(str(page))
    assert data["events"][0]["declines"] == [[rule, "declined: " + NASTY]]
    assert data["focus"]["name"] == "relu"


def test_templates_are_package_data():
    """The page's templates are read from the installed package, and
    pyproject.toml's package-data ships each of them in the wheel."""
    import fnmatch
    import importlib.resources
    import tomllib
    here = importlib.resources.files("pypm_verified.torch") / "templates"
    names = sorted(f.name for f in here.iterdir() if f.is_file())
    assert names == ["explain.html.j2", "report.css", "report.html.j2", "report.js",
                     "rewrite.html.j2"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        globs = tomllib.load(f)["tool"]["setuptools"]["package-data"]["pypm_verified"]
    for n in names:
        assert any(fnmatch.fnmatch(f"torch/templates/{n}", g) for g in globs), n
    env = pmhtml._templates()
    assert isinstance(env.loader, pmhtml.jinja2.PackageLoader) and env.autoescape is True
