"""The profitability table's loader, its override for calibration, and the
model-level calibration: what bench/calibrate_cpu.py writes."""
import copy
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from pypm_verified.torch import profitability as P  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _shipped():
    return json.loads(P.TABLE_PATH.read_text())


# -- loader ---------------------------------------------------------------------


def test_load_table_reads_the_shipped_file():
    assert P.load_table(P.TABLE_PATH) == _shipped() == P.table(reload=True)


@pytest.mark.parametrize("edit, msg", [
    (lambda d: d.pop("table"), 'expected an object with a "table" object'),
    (lambda d: d.update(min_ratio=0), '"min_ratio" must be a positive number, got 0'),
    (lambda d: d["table"].update(flash={}), "unknown rule 'flash'"),
    (lambda d: d["table"]["gelu"].update(tpu=d["table"]["gelu"]["cpu"]),
     "gelu: unknown target 'tpu'"),
    (lambda d: d["table"]["gelu"]["cpu"].update(size="seq"), "gelu/cpu: \"size\" must be 'numel'"),
    (lambda d: d["table"]["attention"]["cpu"]["thresholds"]["float32"].update(sliding=1),
     "attention/cpu/float32: unknown variant 'sliding'"),
    (lambda d: d["table"]["attention"]["cpu"]["thresholds"]["float32"].update(mask=0),
     "attention/cpu/float32/mask: threshold must be an integer >= 1 or null, got 0"),
    (lambda d: d["table"]["attention"]["cpu"]["thresholds"]["float32"].update(mask="512"),
     "attention/cpu/float32/mask: threshold must be an integer >= 1 or null, got '512'"),
    (lambda d: d["table"]["rms_norm"]["cpu"].update(thresholds=[]),
     'rms_norm/cpu: "thresholds" must be an object of dtypes'),
])
def test_a_malformed_table_is_refused_naming_the_problem(tmp_path, edit, msg):
    data = _shipped()
    edit(data)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as e:
        P.load_table(path)
    assert str(path) in str(e.value) and msg in str(e.value)


def test_unreadable_or_non_json_table(tmp_path):
    with pytest.raises(ValueError, match="cannot read it"):
        P.load_table(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        P.load_table(tmp_path / "x.json")


# -- use_table: what the calibration toggles -----------------------------------------------


def test_use_table_overrides_records_and_restores():
    data = _shipped()
    data["table"]["attention"]["cpu"]["thresholds"]["float32"]["mask"] = 7
    ask = lambda s: P.profitable("attention", "cpu", dtype=torch.float32,  # noqa: E731
                                 variant="mask", seq=s)
    shipped = P.table()["table"]["attention"]["cpu"]["thresholds"]["float32"]["mask"]
    seen = []
    with P.use_table(data, seen):
        assert ask(7) and not ask(6)
        inner = copy.deepcopy(data)
        inner["table"]["attention"]["cpu"]["thresholds"]["float32"]["mask"] = None
        with P.use_table(inner):
            assert not ask(10 ** 6)
        assert ask(7)
    assert seen == [("attention", "cpu", "float32", "mask", {"seq": s}) for s in (7, 6, 10 ** 6, 7)]
    assert P.table()["table"]["attention"]["cpu"]["thresholds"]["float32"]["mask"] == shipped
    bad = copy.deepcopy(data)
    bad["table"]["attention"]["cpu"]["thresholds"]["float32"]["mask"] = -1
    with pytest.raises(ValueError, match="threshold must be an integer"):
        with P.use_table(bad):
            pass
    assert P.table() is P.table(reload=False)  # nothing left in place


# -- calibration ---------------------------------------------------------------------------


def _row(rule, variant, key, size, ratio):
    return {"rule": rule, "dtype": "float32", "variant": variant, "sizes": {key: size},
            "ratio": ratio}


def test_model_thresholds_decline_only_what_both_estimates_call_slower():
    assert P.MODEL_MIN_RATIO == 0.98
    rows = [dict(_row("attention", "mask", "seq", 128, 0.9), ratio_min=1.04),  # disagree: pays
            _row("attention", "mask", "seq", 512, 1.2),
            dict(_row("rms_norm", "default", "numel", 10, 0.97), ratio_min=0.96),  # both slower
            dict(_row("rms_norm", "default", "numel", 100, 0.99), ratio_min=0.9),  # within noise
            _row("rms_norm", "default", "numel", 1000, 1.1)]
    assert P.model_thresholds(rows) == {"attention": {"float32": {"mask": 128}},
                                        "rms_norm": {"float32": {"default": 100}}}
    # the kernel-level derivation asks both to clear the margin
    assert P.thresholds_from_rows(rows, 1.0) == {"attention": {"float32": {"mask": 512}},
                                                 "rms_norm": {"float32": {"default": 1000}}}


def test_write_calibration_then_kernel_table_keeps_calibrated_values(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(P.TABLE_PATH.read_text())
    rows = [_row("attention", "mask", "seq", 128, 0.95), _row("attention", "mask", "seq", 128, 1.02),
            _row("attention", "mask", "seq", 512, 1.3),
            _row("rms_norm", "default", "numel", 98304, 1.01),
            _row("linear_act", "silu", "tokens", 128, 0.9),
            _row("linear_act", "silu", "tokens", 4096, 1.2)]
    meta = {"results": "bench/results/calibrate_cpu.json", "when": "now", "threads": [1, 2],
            "loadavg": [3.0, 4.0], "models": ["bert"]}
    try:
        P.write_calibration(rows, meta, path=path)
        data = P.load_table(path)
        att = data["table"]["attention"]["cpu"]
        # one of the rows at 128 did not pay: the threshold is the next measured size
        assert att["thresholds"]["float32"]["mask"] == 512
        assert att["calibrated"] == {"float32": ["mask"]} and att["provenance"] == meta
        assert att["results"] == meta["results"]
        assert att["kernel_results"] == "bench/results/kernels_1thread.json"
        old = _shipped()["table"]
        # the variants no row measured keep their kernel-level thresholds
        assert att["thresholds"]["float32"]["causal"] == \
            old["attention"]["cpu"]["thresholds"]["float32"]["causal"]
        assert att["thresholds"]["bfloat16"] == old["attention"]["cpu"]["thresholds"]["bfloat16"]
        la = data["table"]["linear_act"]["cpu"]["thresholds"]["float32"]
        assert la["silu"] == 4096
        assert la["gelu"] == old["linear_act"]["cpu"]["thresholds"]["float32"]["gelu"]
        assert data["table"]["rms_norm"]["cpu"]["thresholds"]["float32"]["default"] == 98304
        assert data["table"]["attention"]["cuda"] == old["attention"]["cuda"]
        # a later kernel-level --write-table keeps the calibrated variants
        krows = [{"rule": "attention", "dtype": "float32", "variant": v,
                  "sizes": {"seq": 64}, "ratio": 2.0} for v in ("mask", "causal")]
        kmeta = {"device": "cpu", "machine": "m", "threads": 1, "torch": "t", "when": "w",
                 "results": "bench/results/kernels_new.json"}
        P.write_table(krows, kmeta, path=path)
        att = P.load_table(path)["table"]["attention"]["cpu"]
        assert att["thresholds"]["float32"] == {"mask": 512, "causal": 64}
        assert att["calibrated"] == {"float32": ["mask"]}
        assert att["kernel_results"] == "bench/results/kernels_new.json"
        assert att["results"] == meta["results"]
    finally:
        P.table(reload=True)


def test_shipped_cpu_table_is_what_the_committed_calibration_gives():
    """Every calibrated cpu threshold is exactly what write_calibration derives
    from the results file the entry names; the entry records its provenance."""
    tab = P.table()
    n = 0
    for rule, per_target in tab["table"].items():
        e = per_target["cpu"]
        if not e.get("calibrated"):
            continue
        data = json.loads((ROOT / e["results"]).read_text())
        assert data["benchmark"] == "calibrate_cpu" and not data["quick"]
        derived = P.model_thresholds(data["rows"])[rule]
        prov = e["provenance"]
        assert prov["threads"] == data["threads"] and prov["when"] == data["env"]["when"]
        assert len(prov["loadavg"]) == 2
        for dt, variants in e["calibrated"].items():
            for v in variants:
                assert e["thresholds"][dt][v] == derived[dt][v], (rule, dt, v)
                n += 1
    assert n >= 3  # attention mask, linear_act gelu and silu, rms_norm at least


def test_calibrated_rows_are_ratios_of_real_timings():
    """The committed calibration's rows hold the paired timings they were
    derived from: ratio is the geometric mean over the thread counts of each
    thread count's median paired ratio, and those agree with the medians'
    order of magnitude."""
    data = json.loads((ROOT / "bench/results/calibrate_cpu.json").read_text())
    import math
    for r in data["rows"]:
        per = r["threads"]
        assert sorted(map(int, per)) == sorted(data["threads"])
        g = math.exp(sum(math.log(p["ratio"]) for p in per.values()) / len(per))
        assert r["ratio"] == pytest.approx(g)
        g = math.exp(sum(math.log(p["ratio_of_mins"]) for p in per.values()) / len(per))
        assert r["ratio_min"] == pytest.approx(g)
        for p in per.values():
            assert p["q1"] <= p["ratio"] <= p["q3"] and p["reps"] >= data["min_repeats"]
            assert 0.5 < p["without_ms"] / p["all_ms"] / p["ratio"] < 2


def test_guards_read_the_match_sizes_from_the_table_in_use(lib):
    """A rewrite under use_table: the attention guard reads the key length
    (16 in the small BERT), fires where the table's threshold admits it and
    declines where it does not -- calibrate_cpu.py's with/without programs."""
    import sys
    sys.path.insert(0, str(ROOT))
    from examples import models
    from pypm_verified.torch.loader import load_model
    from pypm_verified.torch.pipeline import rewrite_program
    m, inputs = models.build("bert", "small")
    prog = load_model(m, inputs)
    data = _shipped()
    th = data["table"]["attention"]["cpu"]["thresholds"]["float32"]
    fired = {}
    for t in (16, 17):
        th["mask"] = t
        seen = []
        with P.use_table(copy.deepcopy(data), seen):
            r = rewrite_program(prog, target="cpu", check=True, n_random=0)
        fired[t] = r.report.firings.get("sdpa", 0)
        assert ("attention", "cpu", "float32", "mask", {"seq": 16}) in seen
        assert r.numerics.ok
    assert fired == {16: models.layers("small"), 17: 0}
