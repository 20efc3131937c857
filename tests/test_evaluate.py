"""BEIR evaluation: metrics checked against pytrec_eval, the BEIR loader on real SciFact, a
small end-to-end run and the ``guaipeca eval`` command."""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guaipeca import Index
from guaipeca.cli import EXIT_OK, EXIT_USAGE, EXIT_USER, main
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import GuaipecaError, InvalidArgumentError
from guaipeca.evaluate import (
    BeirSet,
    beir_document,
    evaluate_index,
    evaluate_query,
    evaluate_run,
    index_beir,
    load_beir,
    mrr_at_k,
    ndcg_at_k,
    ranked,
    recall_at_k,
)
from support import shared_data

pytrec_eval = pytest.importorskip("pytrec_eval")

METRICS = {"nDCG@10": "ndcg_cut_10", "Recall@100": "recall_100", "MRR@10": "recip_rank"}


def scifact() -> Path:
    """tests/data's SciFact sample (the full set is bench/'s)."""
    return shared_data("beir", "scifact")


# -- metrics against pytrec_eval -------------------------------------------------------
def pytrec_per_query(
    run: Mapping[str, Sequence[tuple[str, float]]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, float]]:
    """pytrec_eval's nDCG@10, Recall@100 and MRR@10 (recip_rank of the run cut at 10 by our
    ranking) for every query with a relevant judgment; 0 when the run lacks the query."""
    counted = {q: dict(j) for q, j in qrels.items() if any(r > 0 for r in j.values())}
    full = {q: {d: float(s) for d, s in run[q]} for q in counted if run.get(q)}
    cut = {q: {d: full[q][d] for d in ranked(run[q])[:10]} for q in full}
    deep = pytrec_eval.RelevanceEvaluator(counted, {"ndcg_cut_10", "recall_100"}).evaluate(full)
    top = pytrec_eval.RelevanceEvaluator(counted, {"recip_rank"}).evaluate(cut)
    zero = {"ndcg_cut_10": 0.0, "recall_100": 0.0, "recip_rank": 0.0}
    return {
        q: {
            ours: {**zero, **deep.get(q, {}), **top.get(q, {})}[theirs]
            for ours, theirs in METRICS.items()
        }
        for q in counted
    }


def assert_matches_pytrec(
    run: Mapping[str, Sequence[tuple[str, float]]], qrels: Mapping[str, Mapping[str, int]]
) -> None:
    expected = pytrec_per_query(run, qrels)
    for qid, values in expected.items():
        ours = evaluate_query(run.get(qid, ()), qrels[qid])
        for metric, value in values.items():
            assert ours[metric] == pytest.approx(value, abs=1e-9), (qid, metric)
    means = evaluate_run(run, qrels)
    for metric in METRICS:
        mean = sum(v[metric] for v in expected.values()) / len(expected) if expected else 0.0
        assert means[metric] == pytest.approx(mean, abs=1e-9), metric


def random_case(
    rng: random.Random, *, ties: bool
) -> tuple[dict[str, list[tuple[str, float]]], dict[str, dict[str, int]]]:
    """Many queries; graded 0/1/2 judgments (some queries all 0); qrels queries missing from
    the run, run queries missing from the qrels, empty runs, runs longer than 100."""
    docs = [f"d{i:03d}" for i in range(220)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[tuple[str, float]]] = {}
    for q in range(120):
        qid = f"q{q}"
        if q % 11 != 0:
            judged = rng.sample(docs, rng.randint(1, 40))
            qrels[qid] = {d: rng.choice((0, 0, 1, 1, 2)) for d in judged}
            if q % 7 == 0:
                qrels[qid] = dict.fromkeys(judged, 0)
        if q % 13 == 0:
            continue  # no run for this query
        retrieved = rng.sample(docs, rng.choice((0, 1, 5, 30, 99, 100, 101, 150, 220)))
        if ties:
            scores = [float(rng.randint(0, 8)) for _ in retrieved]
        else:
            scores = [
                float(s) + rng.random() / 2 for s in rng.sample(range(10_000), len(retrieved))
            ]
        entries = list(zip(retrieved, scores, strict=True))
        rng.shuffle(entries)
        run[qid] = entries
    return run, qrels


@pytest.mark.parametrize("seed", range(5))
def test_metrics_equal_pytrec_eval_on_random_runs_without_ties(seed: int) -> None:
    run, qrels = random_case(random.Random(seed), ties=False)
    assert_matches_pytrec(run, qrels)


@pytest.mark.parametrize("seed", range(3))
def test_with_ties_in_doc_id_descending_order_we_equal_pytrec_eval(seed: int) -> None:
    # pytrec_eval (trec_eval) breaks score ties by doc id, descending; our rule keeps the
    # run's order, so a run already listed that way must give identical numbers.
    run, qrels = random_case(random.Random(100 + seed), ties=True)
    trec_order = {
        q: sorted(entries, key=lambda e: (e[1], e[0]), reverse=True) for q, entries in run.items()
    }
    assert_matches_pytrec(trec_order, qrels)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([f"q{i}" for i in range(6)]),
        st.dictionaries(st.sampled_from([f"d{i}" for i in range(25)]), st.sampled_from((0, 1, 2))),
        max_size=6,
    ),
    st.dictionaries(
        st.sampled_from([f"q{i}" for i in range(6)]),
        st.permutations([f"d{i}" for i in range(25)]).flatmap(
            lambda ids: st.integers(0, 25).map(lambda n: ids[:n])
        ),
        max_size=6,
    ),
)
def test_metrics_equal_pytrec_eval_property(
    qrels: dict[str, dict[str, int]], orders: dict[str, list[str]]
) -> None:
    run = {q: [(d, float(len(ids) - i)) for i, d in enumerate(ids)] for q, ids in orders.items()}
    assert_matches_pytrec(run, qrels)


def test_our_tie_rule_keeps_the_run_order_and_differs_from_trec_evals() -> None:
    results = [("a", 1.0), ("b", 2.0), ("c", 1.0), ("b", 0.5)]
    assert ranked(results) == ["b", "a", "c"]  # score desc, ties as listed, b once
    judged = {"c": 1}
    assert evaluate_query(results, judged)["MRR@10"] == pytest.approx(1 / 3)
    # trec_eval puts c (id descending) before a: rank 2.
    theirs = pytrec_eval.RelevanceEvaluator({"q": judged}, {"recip_rank"}).evaluate(
        {"q": {"a": 1.0, "b": 2.0, "c": 1.0}}
    )
    assert theirs["q"]["recip_rank"] == pytest.approx(1 / 2)


def test_gain_is_the_judgment_not_exponential() -> None:
    # rel 2 at rank 2, rel 1 at rank 1: DCG = 1 + 2/log2(3); ideal = 2 + 1/log2(3).
    value = ndcg_at_k(["x", "y"], {"x": 1, "y": 2}, 10)
    assert value == pytest.approx((1 + 2 / 1.584962500721156) / (2 + 1 / 1.584962500721156))
    assert ndcg_at_k(["x"], {"x": -1, "y": 1}, 10) == 0.0  # negative judgments give no gain
    assert ndcg_at_k(["x"], {"x": 0}, 10) == 0.0
    assert recall_at_k(["a", "b", "c"], {"c": 1, "z": 2}, 2) == 0.0
    assert recall_at_k(["a", "b", "c"], {"c": 1, "z": 2}, 3) == 0.5
    assert mrr_at_k(["a", "b", "c"], {"c": 2}, 2) == 0.0
    assert mrr_at_k(["a", "b", "c"], {"c": 2}, 3) == pytest.approx(1 / 3)


def test_mean_counts_only_queries_with_a_relevant_document() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    run = {"q1": [("a", 1.0)], "q3": [("c", 1.0)], "q9": [("a", 1.0)]}
    assert evaluate_run(run, qrels) == {"nDCG@10": 0.5, "Recall@100": 0.5, "MRR@10": 0.5}
    assert evaluate_run({}, {}) == {"nDCG@10": 0.0, "Recall@100": 0.0, "MRR@10": 0.0}


# -- loading BEIR ----------------------------------------------------------------------
def write_beir(folder: Path, *, qrels: str | None = None) -> Path:
    (folder / "qrels").mkdir(parents=True)
    docs = [
        {"_id": "alpaca", "title": "Alpacas", "text": "Alpacas graze on grass and hay."},
        {"_id": "tea", "title": "", "text": "Green tea is steeped at 80 degrees."},
        {"_id": "lava", "title": "Volcanoes", "text": "Lava flows from an erupting volcano."},
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = [
        {"_id": "1", "text": "what do alpacas graze on"},
        {"_id": "2", "text": "green tea degrees"},
        {"_id": "3", "text": "unjudged query"},
    ]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    default = "query-id\tcorpus-id\tscore\n1\talpaca\t1\n2\ttea\t2\n2\tlava\t0\n"
    (folder / "qrels" / "test.tsv").write_text(default if qrels is None else qrels)
    return folder


def test_load_beir_reads_scifact() -> None:
    beir = load_beir(scifact())
    assert len(beir.corpus) == 2605
    assert len(beir.queries) == len(beir.qrels) == 20
    assert sum(len(j) for j in beir.qrels.values()) == 22
    assert all(r == 1 for j in beir.qrels.values() for r in j.values())
    assert set(beir.queries) == set(beir.qrels)
    title, text = beir.corpus["4983"]
    assert title and text
    limited = load_beir(scifact(), limit_queries=5)
    assert list(limited.queries) == list(beir.queries)[:5] and len(limited.qrels) == 5


def test_load_beir_small_folder(tmp_path: Path) -> None:
    beir = load_beir(write_beir(tmp_path / "set"))
    assert beir.corpus["tea"] == ("", "Green tea is steeped at 80 degrees.")
    assert beir.queries == {"1": "what do alpacas graze on", "2": "green tea degrees"}
    assert beir.qrels == {"1": {"alpaca": 1}, "2": {"tea": 2, "lava": 0}}


def test_load_beir_limits_keep_the_judged_documents(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "set")
    quick = load_beir(folder, limit_queries=1, limit_docs=1)
    assert list(quick.queries) == ["1"] and list(quick.corpus) == ["alpaca"]
    two = load_beir(folder, limit_docs=2)  # both queries' judged documents stay: 3 of 3
    assert list(two.corpus) == ["alpaca", "tea", "lava"]
    assert list(load_beir(folder, limit_queries=1, limit_docs=2).corpus) == ["alpaca", "tea"]
    for bad in (0, True):
        with pytest.raises(InvalidArgumentError, match="limit_docs must be a positive integer"):
            load_beir(folder, limit_docs=bad)


def test_load_beir_reads_gzipped_corpus(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "set")
    raw = (folder / "corpus.jsonl").read_bytes()
    (folder / "corpus.jsonl").unlink()
    (folder / "corpus.jsonl.gz").write_bytes(gzip.compress(raw))
    assert len(load_beir(folder).corpus) == 3


def test_load_beir_errors_name_the_missing_file_or_bad_line(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="nowhere is not a folder"):
        load_beir(tmp_path / "nowhere")
    folder = write_beir(
        tmp_path / "bad", qrels="query-id\tcorpus-id\tscore\n1\talpaca\t1\n2\ttea\n"
    )
    with pytest.raises(InvalidArgumentError, match=r"test\.tsv line 3: expected"):
        load_beir(folder)
    folder = write_beir(tmp_path / "grade", qrels="query-id\tcorpus-id\tscore\n1\talpaca\thigh\n")
    with pytest.raises(GuaipecaError, match="line 2"):
        load_beir(folder)
    with pytest.raises(InvalidArgumentError, match=r"dev\.tsv is missing \(splits here: test\)"):
        load_beir(folder, split="dev")
    ok = write_beir(tmp_path / "ok")
    (ok / "corpus.jsonl").write_text('{"_id": "a", "text": "x"}\n{"_id": "b", "text": \n')
    with pytest.raises(InvalidArgumentError, match=r"corpus\.jsonl line 2: not JSON"):
        load_beir(ok)
    (ok / "corpus.jsonl").unlink()
    with pytest.raises(InvalidArgumentError, match=r"no corpus\.jsonl or corpus\.jsonl\.gz"):
        load_beir(ok)
    (ok / "queries.jsonl").write_text('{"_id": "1", "text": "only one"}\n')
    with pytest.raises(InvalidArgumentError, match="has no query '2'"):
        load_beir(ok)


# -- against an index ------------------------------------------------------------------
def test_index_beir_writes_the_title_as_a_heading(tmp_path: Path) -> None:
    assert beir_document("A  title\n", "Body.") == "# A title\n\nBody."
    assert beir_document("", "Body.") == "Body."
    beir = load_beir(write_beir(tmp_path / "set"))
    with Index(embedder=HashingEmbedder(64)) as index:
        report = index_beir(index, beir, batch=2)
        assert report.added == 3
        assert index.get_document("alpaca").text.startswith("# Alpacas\n\nAlpacas graze")
        assert index.get_document("tea").text == "Green tea is steeped at 80 degrees."


def test_a_document_split_into_chunks_is_ranked_once(tmp_path: Path) -> None:
    long_text = "\n\n".join(f"Paragraph {i} about alpaca fleece and wool. " * 30 for i in range(8))
    beir = BeirSet(
        folder=tmp_path,
        split="test",
        corpus={"long": ("Alpaca wool", long_text), "other": ("Tea", "Green tea.")},
        queries={"q": "alpaca wool"},
        qrels={"q": {"long": 1}},
    )
    with Index(embedder=HashingEmbedder(64)) as index:
        index_beir(index, beir)
        assert index.stats().chunks > 3
        result = evaluate_index(index, beir, mode="keyword", top_k=5)
    assert [d for d, _ in result.run["q"]] == ["long"]
    assert result.metrics == {"nDCG@10": 1.0, "Recall@100": 1.0, "MRR@10": 1.0}


def test_evaluate_index_on_scifact_sample() -> None:
    full = load_beir(scifact(), limit_queries=20)
    wanted = {d for judged in full.qrels.values() for d in judged}
    ids = list(wanted) + [d for d in full.corpus if d not in wanted][: 200 - len(wanted)]
    beir = dataclasses.replace(full, corpus={d: full.corpus[d] for d in ids})
    with Index(embedder=HashingEmbedder(64)) as index:
        index_beir(index, beir)
        result = evaluate_index(index, beir, mode="keyword")
    assert result.documents == 200 and result.queries == 20
    assert 0.0 < result.metrics["nDCG@10"] <= 1.0
    assert 0.0 < result.metrics["MRR@10"] <= 1.0
    assert result.metrics["Recall@100"] >= result.metrics["nDCG@10"] * 0.5
    assert all(len({d for d, _ in docs}) == len(docs) <= 100 for docs in result.run.values())
    assert 0.0 < result.query_p50_ms <= result.query_p95_ms
    assert evaluate_run(result.run, beir.qrels) == result.metrics
    with pytest.raises(InvalidArgumentError):
        evaluate_index(index, beir, top_k=0)


# -- the command -----------------------------------------------------------------------
def test_eval_command_prints_the_three_metrics(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = write_beir(tmp_path / "set")
    code = main(["eval", str(folder), "--mode", "keyword"])
    out = capsys.readouterr().out
    assert code == EXIT_OK, out
    pattern = (
        r"nDCG@10 1\.0000  Recall@100 1\.0000  MRR@10 1\.0000  "
        r"\(2 queries, 3 docs, index \d+\.\d s, query p50 \d+\.\d ms\)"
    )
    assert re.fullmatch(pattern, out.strip()), out

    code = main(["eval", str(folder), "--mode", "keyword", "--json", "--limit-queries", "1"])
    data = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK
    assert data["nDCG@10"] == data["Recall@100"] == data["MRR@10"] == 1.0
    assert data["queries"] == 1 and data["documents"] == 3 and data["mode"] == "keyword"
    assert data["index_seconds"] >= 0 and data["query_p95_ms"] >= data["query_p50_ms"] > 0
    # an ISO code names the language as well as the Snowball name does
    code = main(["eval", str(folder), "--mode", "keyword", "--json", "--language", "pt-BR"])
    data = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK and data["language"] == "portuguese"


def test_eval_command_quick_look_and_progress_off_a_terminal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = write_beir(tmp_path / "set")
    code = main(["eval", str(folder), "--mode", "keyword", "--max-docs", "1", "--max-queries", "1"])
    captured = capsys.readouterr()
    assert code == EXIT_OK
    assert "(1 query, 1 doc, index" in captured.out
    # Not a terminal: plain lines (the last one of each phase at least), no bar.
    lines = captured.err.splitlines()
    # (guaipeca.progress: counts, rate, and how long each phase took)
    done = r"1/1 {} \(100%\), [\d.,]+ {}/s, done in \d+ s"
    assert any(
        re.fullmatch("eval: indexing: " + done.format("documents", "documents"), x) for x in lines
    ), lines
    assert any(
        re.fullmatch("eval: searching: " + done.format("queries", "queries"), x) for x in lines
    ), lines


def test_eval_command_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["eval", str(tmp_path / "missing")]) == EXIT_USER
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "missing is not a folder" in err
    assert len(err.strip().splitlines()) == 1
    folder = write_beir(tmp_path / "set")
    assert main(["eval", str(folder), "--split", "dev"]) == EXIT_USER
    assert "dev.tsv is missing" in capsys.readouterr().err
    assert main(["eval", str(folder), "--mode", "fuzzy"]) == EXIT_USAGE
    assert main(["eval", str(folder), "--language", "klingon"]) == EXIT_USAGE
    assert "--language" in capsys.readouterr().err


def test_eval_command_scores_several_modes_on_one_index(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = write_beir(tmp_path / "set")
    code = main(["eval", str(folder), "--mode", "all", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK
    assert [r["mode"] for r in rows] == ["hybrid", "keyword", "dense"]
    assert len({r["index_seconds"] for r in rows}) == 1  # indexed once
    single = {}
    for mode in ("hybrid", "keyword", "dense"):
        assert main(["eval", str(folder), "--mode", mode, "--json"]) == EXIT_OK
        single[mode] = json.loads(capsys.readouterr().out)
    for row in rows:
        for metric in ("nDCG@10", "Recall@100", "MRR@10"):
            assert row[metric] == single[row["mode"]][metric]
    code = main(["eval", str(folder), "--mode", "keyword, dense"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == EXIT_OK and [x.split()[0] for x in lines] == ["keyword", "dense"]
    assert main(["eval", str(folder), "--mode", "keyword,fuzzy"]) == EXIT_USAGE
    assert "--mode" in capsys.readouterr().err


def test_eval_command_vector_cache_gives_the_same_scores(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = write_beir(tmp_path / "set")
    cache = tmp_path / "vectors"
    args = ["eval", str(folder), "--mode", "dense", "--json", "--vector-cache", str(cache)]
    assert main(args) == EXIT_OK
    first = json.loads(capsys.readouterr().out)
    files = sorted(p.name for p in cache.iterdir())
    assert len(files) == 2 and files[0].endswith(".keys.json") and files[1].endswith(".npy")
    assert main(args) == EXIT_OK
    second = json.loads(capsys.readouterr().out)
    assert first["vector_cache"]["embedded"] > 0 == second["vector_cache"]["embedded"]
    assert second["vector_cache"]["found"] == first["vector_cache"]["embedded"]
    assert {k: first[k] for k in ("nDCG@10", "Recall@100", "MRR@10")} == {
        k: second[k] for k in ("nDCG@10", "Recall@100", "MRR@10")
    }
    (cache / files[0]).write_text("[")
    assert main(args) == EXIT_USER
    err = capsys.readouterr().err
    assert "vector cache" in err and len(err.strip().splitlines()) == 1
