"""bge-small's fusion and language rule, chosen by the transfer protocol (bench/transfer.py).

    python bench/fusion.py runs --dataset D --model bge-small --seed-from VECTORS   # each set
    python bench/bge_fusion.py [--models bge-small] [--out bench/results/fusion-transfer-bge.json]

The units are the run caches of the models named (SciFact, NFCorpus, squad-pt and squad-pt's
halves); the folds, candidates and gains are transfer.py's. Each family is tuned on some sets
and scored on the held-out one, twice: with the language rule (bge-small declares English, so
its dense list weighs nothing on squad-pt) and without it (its list fused on Portuguese
too). The shipped default (``fusion: auto``, untuned) is scored on every unit both ways. The
rule is kept when its worst held-out gain is at least the worst without it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fusion
import quality
import transfer

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="bge-small")
    ap.add_argument("--out", default=str(REPO / "bench/results/fusion-transfer-bge.json"))
    args = ap.parse_args()
    wanted = set(args.models.split(","))
    units = [u for u in transfer.load_units(quality.CACHE,
                                            lambda n: quality.load_qrels(quality.DATA / n))
             if u.model in wanted]
    print(f"{len(units)} units: {sorted({(u.dataset, u.model) for u in units})}", file=sys.stderr)

    def no_rule(model: str) -> frozenset[str] | None:
        return None if model.startswith("bge-small") else fusion.model_languages_of(model)

    result: dict[str, Any] = {
        "command": "python bench/bge_fusion.py " + " ".join(sys.argv[1:]),
        "machine": quality.machine(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "folds": [{"tuned_on": list(t), "held_out": h} for t, h in transfer.FOLDS],
    }
    for label, languages in (("language rule", fusion.model_languages_of),
                             ("no language rule", no_rule)):
        cands = transfer.candidates(languages, fusion.model_fusion_weight_of)
        report = transfer.run_protocol(units, cands, lambda m: print(m, file=sys.stderr))
        report["auto (the default, untuned)"] = transfer.default_row(
            units, languages, fusion.model_fusion_weight_of)
        order = transfer.ranked(report)
        result[label] = {
            "ranking": [{"family": k, "worst": report[k]["worst"], "mean": report[k]["mean"]}
                        for k in order],
            "families": report,
        }
        auto = report["auto (the default, untuned)"]
        print(f"{label}: best {order[0]} worst {report[order[0]]['worst']:+.4f}; auto worst "
              f"{auto['worst']:+.4f} mean {auto['mean']:+.4f}", file=sys.stderr)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
