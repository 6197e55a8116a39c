"""Generate the bundled suite `data/rubric-mix-lite/`: pick, number, split and write the tasks.

Five domains, 64 tasks each, about 20% held out as `test`. The templates (`suitegen/domains.py`) fill
hand-checked content tables (`suitegen/content/*.yaml`); this module draws `PER_DOMAIN` tasks per domain
round-robin over templates, holds `TEST_PER_DOMAIN` of them out, validates every task as a
`harness.types.Task` and writes `train.jsonl`, `test.jsonl` and `README.md`.

Regenerate with ``python -m suitegen.generate --out data/rubric-mix-lite`` (or ``harnessrl data generate``);
the output is byte-identical for the same content and code (fixed seed, no set iteration, sorted ids).
"""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path

from harness.atomic import atomic_write_text
from harness.types import Task
from suitegen.domains import GENERATORS
from suitegen.readme import render_readme

SEED = 20261129
PER_DOMAIN = 64
TEST_PER_DOMAIN = 13  # 65 of 320 held out (~20%)
SUITE_NAME = "rubric-mix-lite"
DOMAIN_PREFIX = {"medical": "med", "science": "sci", "writing": "wri", "roleplay": "rp", "instruction_following": "if"}


def _select(pool: list[dict], k: int, rng: random.Random) -> list[dict]:
    """Pick `k` tasks round-robin over templates (keeps every template represented), deterministically."""
    groups: dict[str, list[dict]] = {}
    for t in pool:
        groups.setdefault(t["meta"]["template"].split("+")[0], []).append(t)
    for name in sorted(groups):
        rng.shuffle(groups[name])
    picked: list[dict] = []
    names = sorted(groups)
    while len(picked) < k:
        progressed = False
        for name in names:
            if groups[name] and len(picked) < k:
                picked.append(groups[name].pop())
                progressed = True
        if not progressed:
            raise ValueError(f"template bank too small: {len(pool)} candidates for {k} tasks")
    return picked


def build_tasks(seed: int = SEED) -> list[Task]:
    """All suite tasks, validated, sorted by id."""
    tasks: list[Task] = []
    for domain, gen in GENERATORS.items():
        rng = random.Random(f"{seed}:{domain}")
        chosen = _select(gen(rng), PER_DOMAIN, rng)
        test_idx = set(rng.sample(range(PER_DOMAIN), TEST_PER_DOMAIN))
        for i, spec in enumerate(chosen):
            tid = f"{DOMAIN_PREFIX[domain]}-{i + 1:04d}"
            crits = [dict(c, id=f"c{j + 1}") for j, c in enumerate(spec["criteria"])]
            audits = [dict(c, id=f"a{j + 1}") for j, c in enumerate(spec["audit"])]
            tasks.append(
                Task.model_validate(
                    {
                        "id": tid,
                        "domain": domain,
                        "split": "test" if i in test_idx else "train",
                        "prompt": spec["prompt"],
                        "criteria": crits,
                        "audit_criteria": audits,
                        "reference_answer": spec["reference"],
                        "meta": spec["meta"],
                    }
                )
            )
    return sorted(tasks, key=lambda t: t.id)


def _line(t: Task) -> str:
    return json.dumps(t.model_dump(mode="json", exclude_none=True), ensure_ascii=False, separators=(",", ":"))


def _write(path: Path, text: str) -> None:
    atomic_write_text(path, text)
    os.chmod(path, 0o644)  # the temp file is created 0600; the suite is committed, readable data


def write_suite(out: str | Path, seed: int = SEED) -> list[Path]:
    """Generate the suite into `out` (train.jsonl, test.jsonl, README.md); returns the written paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tasks = build_tasks(seed)
    paths = []
    for split in ("train", "test"):
        p = out / f"{split}.jsonl"
        _write(p, "".join(_line(t) + "\n" for t in tasks if t.split == split))
        paths.append(p)
    p = out / "README.md"
    _write(p, render_readme(tasks, SUITE_NAME))
    paths.append(p)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m suitegen.generate", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=f"data/{SUITE_NAME}", help="output folder (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=SEED, help="generator seed (default: %(default)s)")
    args = ap.parse_args(argv)
    for p in write_suite(args.out, args.seed):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
