"""The fusion transfer protocol: every candidate's parameters are chosen on some sets and
scored on the others, and the default is the candidate whose *worst* held-out gain is best.

    python bench/fusion.py transfer [--out bench/results/fusion-transfer.json]

Inputs are the run caches of ``bench/fusion.py runs`` (per query: the dense and keyword lists
the search pipeline fuses, top 200 chunks with raw scores; every keyword candidate's cosine;
the corpus's self-calibration). Fusion is the library's own (guaipeca.search.fusion), over the
top 100 of each list (search.candidates), chunks to documents by best chunk, nDCG@10 by
guaipeca.evaluate (pytrec_eval's numbers).

Units scored: SciFact, NFCorpus, squad-pt, and squad-pt's two halves by document (a query
goes with the half holding its relevant documents; the lists are cut to that half's
documents). Folds: leave one set out over the three sets, and each squad-pt half tuned on the
other. In a fold, a candidate's parameters are those whose worst gain over every (tuning set,
model) pair is highest, ties by the mean; gain = nDCG@10 - max(keyword, dense). The held-out
set is then scored with those parameters for every model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from guaipeca.evaluate import ndcg_at_k
from guaipeca.search.calibration import Calibration, calibrated_share
from guaipeca.search.fusion import (
    _normalise,
    dense_weight_for,
    fuse_scores,
)
from guaipeca.text.languages import iso_code

CANDIDATES_DEPTH = 100
SETS = ("scifact", "nfcorpus", "squad-pt")
FOLDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("nfcorpus", "squad-pt"), "scifact"),
    (("scifact", "squad-pt"), "nfcorpus"),
    (("scifact", "nfcorpus"), "squad-pt"),
    (("squad-pt/A",), "squad-pt/B"),
    (("squad-pt/B",), "squad-pt/A"),
)
SHARES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)

Lists = tuple[list[tuple[int, float]], list[tuple[int, float]], list[float]]


@dataclass
class Unit:
    """One scored collection for one model: per query the two lists, documents, qrels."""

    dataset: str
    model: str
    language: str
    lists: dict[str, Lists]
    doc_of: dict[int, str]
    qrels: dict[str, dict[str, int]]
    calibration: dict[float, Calibration]
    memo: dict[Any, float] = field(default_factory=dict)

    def ndcg_of(self, ranked: dict[str, np.ndarray]) -> float:
        """Mean nDCG@10 of per-query chunk keys, best first."""
        return self.ndcg(ranked=ranked)

    def ndcg(self, rank: Callable[[Lists], list[int]] | None = None,
             ranked: dict[str, Any] | None = None) -> float:
        """Mean nDCG@10 of ``rank(lists)`` per query, or of the keys ``ranked`` gives."""
        total = 0.0
        for q, lists in self.lists.items():
            docs: dict[str, None] = {}
            keys = ranked[q].tolist() if ranked is not None else rank(lists)  # type: ignore[misc]
            for p in keys:
                docs.setdefault(self.doc_of[p])
                if len(docs) == 10:
                    break
            total += ndcg_at_k(list(docs), self.qrels[q], 10)
        return total / len(self.lists)


def load_units(cache: Path, load_qrels: Callable[[str], dict[str, dict[str, int]]]) -> list[Unit]:
    """Every run cache as a unit, squad-pt's also as its two halves by document."""
    units: list[Unit] = []
    for path in sorted(cache.glob("runs-*.json")):
        run = json.loads(path.read_text())
        if "calibration" not in run:
            continue
        qrels = load_qrels(run["dataset"])
        unit = _unit(run, qrels)
        units.append(unit)
        if run["dataset"] == "squad-pt":
            units.extend(_half(unit, half) for half in "AB")
    return units


def _unit(run: dict[str, Any], qrels: dict[str, dict[str, int]]) -> Unit:
    doc_of: dict[int, str] = {}
    lists: dict[str, Lists] = {}
    for q, both in run["queries"].items():
        if q not in qrels:
            continue
        for p, d, _ in both["dense"] + both["keyword"]:
            doc_of[int(p)] = d
        lists[q] = (
            [(int(p), float(s)) for p, _, s in both["dense"]],
            [(int(p), float(s)) for p, _, s in both["keyword"]],
            [float(c) for c in both["keyword_cosine"]],
        )
    calibration = {
        c["drop"]: Calibration(c["queries"], c["dense_mrr"], c["keyword_mrr"])
        for c in run["calibration"]
    }
    return Unit(run["dataset"], run["model"], run["language"], lists, doc_of,
                {q: qrels[q] for q in lists}, calibration)


def half_of(doc_id: str) -> str:
    return "AB"[hashlib.sha256(doc_id.encode()).digest()[0] % 2]


def _half(unit: Unit, half: str) -> Unit:
    """The unit cut to the documents of one half (and the queries whose relevant documents
    all lie there)."""
    keep = {p for p, d in unit.doc_of.items() if half_of(d) == half}
    lists: dict[str, Lists] = {}
    for q, (dense, kw, cos) in unit.lists.items():
        if all(half_of(d) == half for d, r in unit.qrels[q].items() if r > 0):
            pairs = [(k, c) for k, c in zip(kw, cos, strict=True) if k[0] in keep]
            lists[q] = ([x for x in dense if x[0] in keep], [k for k, _ in pairs],
                        [c for _, c in pairs])
    return Unit(f"{unit.dataset}/{half}", unit.model, unit.language, lists, unit.doc_of,
                {q: unit.qrels[q] for q in lists}, unit.calibration)


# -- candidates ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    """A fusion family and one point of its parameter grid."""

    family: str
    params: tuple[tuple[str, Any], ...]
    share: Callable[[Unit], float]  # the dense share on this unit

    @property
    def name(self) -> str:
        return self.family + "(" + ", ".join(f"{k}={v}" for k, v in self.params) + ")"

    @property
    def method(self) -> tuple[str, float]:
        p = dict(self.params)
        return p["fusion"], float(p.get("k", 60.0))

    def score(self, unit: Unit) -> float:
        share = self.share(unit)
        key = (*self.method, round(share, 6))
        if key not in unit.memo:
            prepared = prepare(unit, *self.method)
            unit.memo[key] = unit.ndcg_of(prepared.ranked(share))
        return unit.memo[key]


@dataclass
class Prepared:
    """One unit's lists normalised once by one fusion method: per query the candidate keys
    (ascending, so a stable sort breaks ties by key as the library does), each list's
    normalised score (a missing key given the method's missing value) and how many lists
    returned each key. A share then costs one weighted sum and one sort per query."""

    method: str
    per_query: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]

    def ranked(self, share: float) -> dict[str, np.ndarray]:
        out = {}
        for q, (keys, dense, kw, in_dense, in_kw) in self.per_query.items():
            # as the library: a list of weight 0 (or empty) is left out, ids and all
            use_d, use_k = share > 0 and in_dense.any(), share < 1 and in_kw.any()
            if use_d and use_k:
                mixed = share * dense + (1.0 - share) * kw
                keep = np.ones(len(keys), dtype=bool)
            else:
                mixed, keep = (dense, in_dense) if use_d else (kw, in_kw)
            if self.method == "combmnz":
                mixed = (in_dense.astype(float) * use_d + in_kw.astype(float) * use_k) * mixed
            order = np.lexsort((keys[keep], -mixed[keep]))
            out[q] = keys[keep][order]
        return out


def prepare(unit: Unit, method: str, k: float) -> Prepared:
    key = ("prepared", method, k)
    if key in unit.memo:
        return unit.memo[key]
    per_query = {}
    for q, lists in unit.lists.items():
        per_query[q] = _arrays(method, k, lists)
    unit.memo[key] = Prepared(method, per_query)
    return unit.memo[key]


def _arrays(method: str, k: float, lists: Lists) -> tuple[np.ndarray, ...]:
    dense, kw = lists[0][:CANDIDATES_DEPTH], lists[1][:CANDIDATES_DEPTH]
    if method == "rescore":  # the keyword candidates only, their cosine as the dense list
        dense = [(p, c) for (p, _), c in zip(kw, lists[2], strict=False)]
        method = "minmax"
    d, d_missing = _normalise(method, dense, k) if dense else ({}, 0.0)
    b, b_missing = _normalise(method, kw, k) if kw else ({}, 0.0)
    keys = np.array(sorted(d.keys() | b.keys()), dtype=np.int64)
    dv = np.array([d.get(int(i), d_missing) for i in keys])
    bv = np.array([b.get(int(i), b_missing) for i in keys])
    in_dense = np.array([int(i) in d for i in keys], dtype=bool)
    in_kw = np.array([int(i) in b for i in keys], dtype=bool)
    return keys, dv, bv, in_dense, in_kw


def check_against_library(unit: Unit, method: str, k: float, share: float) -> int:
    """Queries whose top 10 differs from the library's own fuse_scores (should be 0)."""
    ranked = prepare(unit, method, k).ranked(share)
    bad = 0
    for q, lists in unit.lists.items():
        dense, kw = lists[0][:CANDIDATES_DEPTH], lists[1][:CANDIDATES_DEPTH]
        if method == "rescore":
            dense = [(p, c) for (p, _), c in zip(kw, lists[2], strict=False)]
        lib = [p for p, _ in fuse_scores("minmax" if method == "rescore" else method,
                                         [(dense, share), (kw, 1.0 - share)], k=k)]
        bad += lib[:10] != ranked[q][:10].tolist()
    return bad


# -- candidates ------------------------------------------------------------------------------
def _language_rule(unit: Unit, languages: Callable[[str], frozenset[str] | None]) -> float:
    return dense_weight_for(1.0, languages(unit.model), iso_code(unit.language))


def candidates(languages: Callable[[str], frozenset[str] | None],
               model_factor: Callable[[str], float]) -> list[Candidate]:
    """Every family's grid. ``fixed``: one dense share for every corpus, times the model's
    fusion weight, zero under the language rule (as the product did); ``calibrated``: the
    share the corpus's own calibration gives, nothing else."""
    out: list[Candidate] = []

    def fixed(share: float) -> Callable[[Unit], float]:
        return lambda u: share * model_factor(u.model) * _language_rule(u, languages)

    def rrf_fixed(share: float) -> Callable[[Unit], float]:
        # as the product: the dense weight scaled by factor and rule, the total kept
        def s(u: Unit) -> float:
            applied = share * model_factor(u.model) * _language_rule(u, languages)
            return applied / (applied + (1 - share))

        return s

    for k in (5.0, 10.0, 20.0, 60.0):
        for share in (0.3, 0.4, 0.5):
            out.append(Candidate("fixed", (("fusion", "rrf"), ("k", k), ("share", share)),
                                 rrf_fixed(share)))
    # A score fusion's own weight for a weak (static) model: the model's fusion weight of
    # 0.1 was fitted under RRF, where a list's scores do not count.
    def scaled(share: float, weak: float) -> Callable[[Unit], float]:
        def s(u: Unit) -> float:
            factor = weak if model_factor(u.model) < 1 else 1.0
            return share * factor * _language_rule(u, languages)

        return s

    for method in ("zscore", "minmax", "dbsf", "combmnz", "rescore"):
        for share in SHARES:
            for weak in (0.0, 0.1, 0.25, 0.5, 1.0):
                out.append(Candidate("fixed", (("fusion", method), ("share", share),
                                               ("weak_model_factor", weak)),
                                     scaled(share, weak)))
    for method, k in (("zscore", 60.0), ("minmax", 60.0), ("dbsf", 60.0), ("rrf", 10.0),
                      ("rrf", 60.0)):
        for drop in (0.0, 0.5):
            for floor in (0.3, 0.5, 0.6, 0.7, 0.8):
                for ceiling in (0.3, 0.4, 0.5, 0.6):
                    out.append(Candidate(
                        "calibrated",
                        (("fusion", method), ("k", k), ("drop", drop), ("floor", floor),
                         ("ceiling", ceiling)),
                        _calibrated(drop, floor, ceiling)))
    return out


def _calibrated(drop: float, floor: float, ceiling: float) -> Callable[[Unit], float]:
    return lambda u: calibrated_share(u.calibration[drop], floor, ceiling)


# -- the protocol ----------------------------------------------------------------------------
def baselines(unit: Unit) -> tuple[float, float]:
    if ("keyword",) not in unit.memo:
        unit.memo[("keyword",)] = unit.ndcg(lambda lists: [p for p, _ in lists[1]])
        unit.memo[("dense",)] = unit.ndcg(lambda lists: [p for p, _ in lists[0]])
    return unit.memo[("keyword",)], unit.memo[("dense",)]


def gain(c: Candidate, unit: Unit) -> float:
    kw, dense = baselines(unit)
    return c.score(unit) - max(kw, dense)


def run_protocol(units: list[Unit], cands: list[Candidate],
                 log: Callable[[str], None]) -> dict[str, Any]:
    by_set: dict[str, list[Unit]] = {}
    for u in units:
        by_set.setdefault(u.dataset, []).append(u)
    folds = [(tune, held) for tune, held in FOLDS
             if held in by_set and all(t in by_set for t in tune)]
    families: dict[str, list[Candidate]] = {}
    for c in cands:
        families.setdefault(_family_key(c), []).append(c)
    report: dict[str, Any] = {}
    for key, grid in families.items():
        held_out: list[dict[str, Any]] = []
        for tune, held in folds:
            tuning = [u for t in tune for u in by_set[t]]
            best = max(grid, key=lambda c: (min(gain(c, u) for u in tuning),
                                            sum(gain(c, u) for u in tuning)))
            for u in by_set[held]:
                held_out.append({"held_out": held, "model": u.model, "tuned_on": list(tune),
                                 "params": dict(best.params), "ndcg@10": round(best.score(u), 4),
                                 "gain": round(gain(best, u), 4)})
        gains = [h["gain"] for h in held_out]
        report[key] = {"worst": min(gains), "mean": round(sum(gains) / len(gains), 4),
                       "held_out": held_out}
        log(f"{key:40s} worst {min(gains):+.4f} mean {sum(gains) / len(gains):+.4f}")
    return report


def default_row(units: list[Unit], languages: Callable[[str], frozenset[str] | None],
                model_factor: Callable[[str], float]) -> dict[str, Any]:
    """The shipped default, ``fusion: auto`` with the default weights (dense 1.0, keyword
    1.5: a 0.4 share): CombMNZ for a model of full fusion weight, weighted RRF (k 10) for a
    weak one, nothing tuned; scored on every held-out set of the folds."""
    rows = []
    for u in units:
        factor = model_factor(u.model)
        applied = 0.4 * factor * _language_rule(u, languages)
        if factor >= 1.0:
            c = Candidate("auto", (("fusion", "combmnz"),), lambda _u, a=applied: a)
        else:
            share = applied / (applied + 0.6)
            c = Candidate("auto", (("fusion", "rrf"), ("k", 10.0)), lambda _u, s=share: s)
        rows.append({"held_out": u.dataset, "model": u.model, "ndcg@10": round(c.score(u), 4),
                     "gain": round(gain(c, u), 4)})
    gains = [r["gain"] for r in rows]
    return {"worst": min(gains), "mean": round(sum(gains) / len(gains), 4), "held_out": rows}


def _family_key(c: Candidate) -> str:
    p = dict(c.params)
    if c.family == "calibrated":
        return f"calibrated {p['fusion']}" + (f" k={p['k']:g}" if p["fusion"] == "rrf" else "")
    return f"fixed {p['fusion']}"


def ranked(report: dict[str, Any]) -> list[str]:
    """Families best first: worst held-out gain, then mean."""
    return sorted(report, key=lambda k: (-report[k]["worst"], -report[k]["mean"]))


def grid_table(units: Iterable[Unit], cands: list[Candidate]) -> list[dict[str, Any]]:
    """Every candidate on every unit (the in-sample view, for the docs' discussion)."""
    rows = []
    for u in units:
        kw, dense = baselines(u)
        rows.append({"set": u.dataset, "model": u.model, "keyword": round(kw, 4),
                     "dense": round(dense, 4),
                     "calibration": {str(d): c.to_dict() for d, c in u.calibration.items()},
                     "best": max(((c.name, round(c.score(u), 4)) for c in cands),
                                 key=lambda t: t[1])})
    return rows
