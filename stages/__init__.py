"""One thin module per DVC stage: parse params, call pipeline, write outputs.

Started as ``python -m stages.<name>`` on Linux, a stage runs in a warm interpreter whose
libraries are already imported, when one is up (pipeline/runtime/warm.py; ``CBENCH_WARM=off``
runs it cold): its exit status is this process's.
"""

from pipeline.runtime import warm as _warm

_warm.hand_off()
