"""Time the full probe suite at one revision (the backend as it is).

    python scripts/bench_probes.py [--device cuda --dtype bfloat16] [--repeat 3]

The first pass on a GPU includes FlashInfer's JIT unless its cache is warm; the figure compared
with the target is the best warm pass. Targets: under 10 s on the CPU machine, under 5 s on the
H200 with a warm JIT cache.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

_t0 = time.perf_counter()
import torch  # noqa: E402

IMPORT_S = time.perf_counter() - _t0
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probes import ProbeContext, all_probes, run_probe, summarize  # noqa: E402
from tracker.core.verdicts import Outcome  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = {"cpu": 10.0, "cuda": 5.0}


def suite_pass(ctx: ProbeContext) -> tuple[float, dict[str, Outcome]]:
    start = time.perf_counter()
    verdicts = {p.name: summarize(run_probe(p, ctx)).outcome for p in all_probes()}
    if ctx.device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start, verdicts


@click.command()
@click.option("--device", default="cpu", show_default=True)
@click.option("--dtype", default="float32", show_default=True)
@click.option("--repeat", default=3, show_default=True)
def main(device: str, dtype: str, repeat: int) -> None:
    ctx = ProbeContext(root=ROOT, device=device, dtype=dtype)
    passes = [suite_pass(ctx) for _ in range(repeat)]
    verdicts = passes[-1][1]
    cases = sum(len(p.cases) for p in all_probes())
    target = TARGET_S["cuda" if device.startswith("cuda") else "cpu"]
    best = min(s for s, _ in passes[1:] or passes)
    print(f"device={device} dtype={dtype} probes={len(verdicts)} cases={cases} torch_import_s={IMPORT_S:.2f}")
    print("verdicts: " + ", ".join(f"{k}={v.value}" for k, v in verdicts.items()))
    print("passes_s: " + ", ".join(f"{s:.2f}" for s, _ in passes) + "  (first may include JIT)")
    status = "OK" if best < target else "OVER TARGET"
    print(f"probe suite at one revision: {best:.2f} s warm (target < {target:.0f} s) {status}")


if __name__ == "__main__":
    main()
