"""Judge: read metric logs into traces, check them against the baseline, triage, build the verdict once."""
