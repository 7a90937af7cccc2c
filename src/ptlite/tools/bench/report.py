"""The report `ptlite bench` prints: one measurement, and the comparison table."""

from __future__ import annotations

from typing import Any

from ptlite.ir.memory_plan import MemoryPlanSummary

RUNTIME_TITLES = {"ptlite": "ptlite", "pytorch": "PyTorch", "onnxruntime": "ONNX Runtime"}


def _mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.1f} MiB"


def _file_size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 1024:.1f} KB"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}" if value < 10 else f"{value:.2f}" if value < 100 else f"{value:.1f}"


def describe_input(item: dict[str, Any]) -> str:
    """One input as the reports show it: 'x float32[1, 3, 224, 224]', or 'n = 3'."""
    if "shape" in item:
        return f"{item['name']} {item['dtype']}[{', '.join(str(d) for d in item['shape'])}]"
    return f"{item['name']} = {item['value']!r}"


def _backends_line(counts: dict[str, int] | None) -> str:
    """Which backends ran forward's operator nodes, and how many each."""
    if not counts:
        return "n/a"
    return ", ".join(f"{name} ({n} node{'s' if n != 1 else ''})" for name, n in counts.items())


def _blas_line(result: dict[str, Any]) -> str:
    if result.get("blas") is None:
        text = result.get("blas_note") or "unknown"
    elif not result["blas"]:
        text = "none found by threadpoolctl"
    else:
        text = "; ".join(f"{b['library']} {b['version']}, kernel {b['kernel']}, {b['threads']} thread(s)"
                         for b in result["blas"])
    slow = result.get("slow_blas_variables") or {}
    if slow:
        settings = ", ".join(f"{k}={v}" for k, v in slow.items())
        text += f" (note: {settings} is set and may select a slow kernel; --compare measures without it)"
    return text


def format_report(result: dict[str, Any]) -> str:
    """The human-readable report of a `measure` or `compare` result."""
    rss = result["rss_bytes"]
    load = result["load_ms"]
    lat = result["latency_ms"]
    where = "; ptlite measured in a fresh process" if result.get("compare") else ""
    lines = [
        f"model:    {result['model']} ({_file_size(result['file_bytes'])})",
        f"inputs:   {', '.join(describe_input(i) for i in result['inputs']) or 'none'}"
        + (f" ({result['input_source']})" if result.get("input_source") else ""),
        f"threads:  {result['threads']}{where}",
        f"backends: {_backends_line(result.get('backends'))}",
        f"BLAS:     {_blas_line(result)}",
        f"load:     first {_ms(load['first'])} ms (includes importing the kernels it needs), "
        f"median of {load['repeats']} more {_ms(load['median'])} ms",
        f"latency:  {result['runs']} run(s) after {result['warmup']} warm-up: min {_ms(lat['min'])} ms, "
        f"median {_ms(lat['median'])} ms, p90 {_ms(lat['p90'])} ms, mean {_ms(lat['mean'])} ms",
    ]
    if rss["peak"] is None:
        lines.append("memory:   peak RSS n/a (neither /proc/self/status nor getrusage is available here)")
    else:
        lines.append(f"memory:   peak RSS {_mib(rss['before_load'])} before load, {_mib(rss['after_load'])} after "
                     f"load, {_mib(rss['peak'])} after the runs (+{_mib(rss['peak'] - rss['before_load'])} for "
                     "the model and its runs)")
    if result.get("memory_plan"):
        lines.append(f"          memory plan: {MemoryPlanSummary(**result['memory_plan']).describe()}")
    if result.get("profile"):
        lines += ["", result["profile"]["text"]]
    if result.get("compare"):
        lines += ["", *_comparison_lines(result)]
    return "\n".join(lines)


def _title(name: str, r: dict[str, Any]) -> str:
    version = f" {r['version']}" if r.get("version") else ""
    return RUNTIME_TITLES[name] + version + (" eager" if name == "pytorch" else "")


def _comparison_lines(result: dict[str, Any]) -> list[str]:
    compare = result["compare"]
    rows = [(_title(name, r), r) for name, r in [("ptlite", result), *compare["runtimes"].items()]]
    width = max(len(title) for title, _ in rows)
    lines = [f"comparison with {compare['entry']}: same inputs, {result['threads']} thread(s), each runtime alone "
             f"in a fresh process, {' and '.join(compare['unset_variables'])} unset",
             f"  {'runtime':<{width}}  {'load ms':>8}  {'min ms':>8}  {'median ms':>9}  {'p90 ms':>8}  "
             f"{'peak RSS':>10}  ptlite/other (median)"]
    for title, r in rows:
        if "error" in r:
            fix = f": {r['install']}" if "install" in r else ""
            lines.append(f"  {title:<{width}}  {r['error']}{fix}")
            continue
        load = r["load_ms"]["first"] if isinstance(r.get("load_ms"), dict) else r.get("load_ms")
        lat = r["latency_ms"]
        ratio = f"{r['ratio']['median']:.2f}x" if "ratio" in r else ""
        lines.append(f"  {title:<{width}}  {_ms(load):>8}  {_ms(lat['min']):>8}  {_ms(lat['median']):>9}  "
                     f"{_ms(lat['p90']):>8}  {_mib(r['rss_bytes']['peak']):>10}  {ratio}".rstrip())
    lines.append("  ratio = ptlite / other: above 1, ptlite is slower. load: ptlite.load; ONNX Runtime's session; "
                 "PyTorch's model is built in Python (not timed)")
    checks = [(_title(name, r), r) for name, r in compare["runtimes"].items()
              if "outputs_check" in r or "outputs_error" in r]
    if checks:
        lines.append("outputs, ptlite against each (the last call's; within 1e-4 x max |other|, as ptlite compare):")
        for title, r in checks:
            check = r.get("outputs_check")
            if check is None:
                text = f"not checked: {r['outputs_error']}"
            elif check["match"]:
                text = f"{check['summary']} (largest relative difference {check['largest_relative']:.1e})"
            else:
                text = f"DIFFER: {check['summary']}"
            lines.append(f"  {title:<{width}}  {text}")
    return lines
