"""Embedded CPU workloads (tiny GRPO, tiny MOPD) and their fault catalogue.

Run as subprocesses by the harness, e.g. ``python -m autotest.workloads.grpo --work-dir DIR``.
Modules import torch, transformers and ray lazily, so importing this package is cheap.
"""
