"""`ptlite bench`: latency, load time and memory of a .ptlite file, optionally beside eager PyTorch and ONNX Runtime.

    result = measure("model.ptlite", lambda specs: random_inputs(specs), Settings(threads=2))
    print(format_report(result))

Device side: NumPy only. PyTorch and ONNX Runtime are imported only in the child processes that `compare` starts,
one runtime per fresh process, one at a time (two runtimes in one process, or running side by side, distort each
other's timings and memory). timing.py times calls, memory.py reads peak memory, blas.py the BLAS in use,
inputs.py makes and hands over inputs, measure.py measures ptlite, runtimes.py compares runtimes, report.py prints.
"""

from .blas import SLOW_BLAS_VARIABLES, blas_libraries
from .inputs import SEED, describe_inputs, load_inputs, load_outputs, random_inputs, save_inputs, save_outputs
from .measure import LOAD_REPEATS, Settings, measure
from .memory import peak_rss_bytes, rss_source
from .report import describe_input, format_report
from .runtimes import child_env, child_main, compare, differing_outputs, failures
from .timing import PairTiming, latency_stats, side_by_side, time_calls, time_pair

__all__ = ["SLOW_BLAS_VARIABLES", "blas_libraries", "SEED", "describe_inputs", "load_inputs", "load_outputs",
           "random_inputs", "save_inputs", "save_outputs", "LOAD_REPEATS", "Settings", "measure", "peak_rss_bytes",
           "rss_source", "describe_input", "format_report", "child_env", "child_main", "compare",
           "differing_outputs", "failures", "PairTiming", "latency_stats", "side_by_side", "time_calls", "time_pair"]
