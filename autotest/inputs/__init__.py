"""Inputs: case files, baselines and their validating reader and writer."""
