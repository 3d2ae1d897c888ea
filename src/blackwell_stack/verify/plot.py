"""The bench plot: throughput and latency against concurrency, as one PNG.

matplotlib is an optional extra (`plot`), imported only here and only when a
plot is asked for, with the Agg backend so that no display is needed.
"""

from __future__ import annotations

from pathlib import Path

from blackwell_stack.errors import StackError
from blackwell_stack.fileio import atomic_file


def _series(levels: list[dict], metric: str, field: str) -> list[float | None]:
    return [(lv.get(metric) or {}).get(field) for lv in levels]


def require_matplotlib() -> None:
    """Fail now, not after a sweep, when --plot cannot be drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot
    except ImportError:
        raise StackError("the bench plot needs matplotlib",
                         "pip install 'blackwell-stack[plot]' (or matplotlib), or drop --plot") from None


def write_plot(path: str | Path, result: dict) -> None:
    require_matplotlib()
    import matplotlib.pyplot as plt

    levels = result["levels"]
    conc = [lv["concurrency"] for lv in levels]
    fig, (ax_tp, ax_lat) = plt.subplots(1, 2, figsize=(12, 4.8), constrained_layout=True)

    ax_tp.plot(conc, [lv["output_tok_s"] for lv in levels], "o-", label="aggregate output tok/s")
    ax_tp.plot(conc, _series(levels, "decode_tok_s", "p50"), "s--", label="per-request decode tok/s (p50)")
    for row in result.get("baseline", {}).get("comparison", []):
        if row["metric"] in ("output_tok_s", "decode_tok_s.p50"):
            ax_tp.axhline(row["baseline"], color="grey", linestyle=":", linewidth=1)
            ax_tp.annotate(f"baseline {row['name']}: {row['baseline']:g}", (conc[0], row["baseline"]),
                           textcoords="offset points", xytext=(2, 3), fontsize=7, color="grey")
    ax_tp.grid(True, alpha=0.3)

    for metric, label, marker, color in (("ttft_s", "TTFT", "o", "tab:blue"), ("itl_s", "ITL", "s", "tab:red")):
        for field, dash in (("p50", "-"), ("p99", "--")):
            values = [v * 1000 if v is not None else None for v in _series(levels, metric, field)]
            ax_lat.plot(conc, values, marker + dash, color=color, label=f"{label} {field}")
    ax_lat.set_yscale("log")
    ax_lat.grid(True, alpha=0.3, which="both")

    for ax, ylabel, title in ((ax_tp, "tokens / s", "Throughput"), (ax_lat, "milliseconds", "Latency")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(conc, [str(c) for c in conc])
        ax.set_xlabel("concurrent requests")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=8)

    fig.suptitle(f"{result['model']} at {result['url']}  ({result['config']['input_len']} in / {result['config']['output_len']} out)", fontsize=9)
    with atomic_file(path) as out:
        fig.savefig(out, format="png", dpi=120)
    plt.close(fig)
