"""Calibration: N runs of a case into a candidate baseline with provenance; review and promote."""
