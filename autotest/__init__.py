"""rl-autotest: accuracy-regression harness for LLM RL training."""

__version__ = "0.1.0"
