"""Does it fit?  hloscope's verdict against XLA's, just below and just above each limit:
the last table of benchmarks/target_fidelity.py (its docstring says how), run alone.

    python benchmarks/fit_verdict.py            # the verdict table
    python benchmarks/fit_verdict.py --probe    # find each TPU generation's limit again
"""

from __future__ import annotations

import sys

from target_fidelity import probe, verdicts

if __name__ == "__main__":
    probe() if "--probe" in sys.argv[1:] else verdicts()
